#!/usr/bin/env python3
"""hostile_proxy.py LISTEN_PORT UPSTREAM_PORT [options]: an NFSv3 TCP proxy
on 127.0.0.1 to the origin at 127.0.0.1:UPSTREAM_PORT that rewrites chosen
replies as a broken or hostile origin (or anyone spoofing its replies)
would send them. Calls pass unchanged; so does every reply not chosen.

  --names         READDIR/READDIRPLUS: an entry the origin names
                  hostile_slash, hostile_empty, hostile_dot, hostile_dotdot
                  or hostile_long is renamed "a/b", "", ".", ".." or 256
                  'L's (other names pass).
  --readlink      READLINK: a target "hostile_len_N" becomes N 'x's.
  --fsinfo N      FSINFO: rtmax, rtpref, wtmax, wtpref and dtpref become N.
  --size ID=SIZE  any fattr3 of file id ID (the origin's inode number)
                  says size SIZE (repeatable).
  --size-file F   as --size, one ID=SIZE a line, read from F whenever F
                  changes (absent or empty: none), so a test can start
                  lying about a file the client already knows.
  --count-file F  F holds "PROC count" lines of the calls forwarded,
                  rewritten after each reply.
  --stale-file F  while F exists, replies to GETATTR, LOOKUP, ACCESS,
                  READLINK, READ, READDIR and READDIRPLUS say
                  NFS3ERR_STALE (an origin failing over, or an export
                  whose file system is not mounted yet), except a GETATTR
                  of a file id that F lists (one a line: e.g. the root's,
                  for an origin that lost a file system below the root).
  --hold-file F   while F exists, the reply to a SETATTR that sets a size
                  (a truncate the origin has made) is held until F is
                  removed; F.held is created when one is held. Other
                  replies pass meanwhile.
  --slow-connect MS  FSINFO replies (a client's mount asks it once per
                  connection) are sent MS ms late: an origin far away for
                  the set-up of a connection only. Other replies pass
                  meanwhile.
Prints "ready" once listening.
"""
import argparse
import os
import socket
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nfsrpc import (NFS_PROG, NFS_V3, pad4, recv_record,  # noqa: E402
                    send_record, call_args, reply_results)

PROCS = {0: "NULL", 1: "GETATTR", 2: "SETATTR", 3: "LOOKUP", 4: "ACCESS",
         5: "READLINK", 6: "READ", 7: "WRITE", 8: "CREATE", 9: "MKDIR",
         10: "SYMLINK", 11: "MKNOD", 12: "REMOVE", 13: "RMDIR",
         14: "RENAME", 15: "LINK", 16: "READDIR", 17: "READDIRPLUS",
         18: "FSSTAT", 19: "FSINFO", 20: "PATHCONF", 21: "COMMIT"}
HOSTILE_NAMES = {b"hostile_slash": b"a/b", b"hostile_empty": b"",
                 b"hostile_dot": b".", b"hostile_dotdot": b"..",
                 b"hostile_long": b"L" * 256}
FATTR3 = 84
NFS3ERR_STALE = 70
# Procedures --stale-file fails, and the bytes of their failure results
# after the status (GETATTR: none; the others: a post_op_attr saying no).
STALE_BODY = {1: b"", 3: b"\0" * 4, 4: b"\0" * 4, 5: b"\0" * 4,
              6: b"\0" * 4, 16: b"\0" * 4, 17: b"\0" * 4}

args = None
counts = {}
count_lock = threading.Lock()


def u32(rec, off):
    return struct.unpack_from(">I", rec, off)[0]


def xdr_opaque(data):
    return struct.pack(">I", len(data)) + data + b"\0" * (pad4(len(data)) - len(data))


def skip_post_op_attr(rec, pos):
    return pos + 4 + (FATTR3 if u32(rec, pos) else 0)


def rewrite_readdir(rec, off, plus):
    if u32(rec, off) != 0:
        return rec
    pos = skip_post_op_attr(rec, off + 4) + 8  # dir attributes, cookieverf
    out = bytearray(rec[:pos])
    while u32(rec, pos):
        start = pos
        pos += 4 + 8  # value_follows, fileid
        nlen = u32(rec, pos)
        name = rec[pos + 4:pos + 4 + nlen]
        name_end = pos + 4 + pad4(nlen)
        pos = name_end + 8  # cookie
        if plus:
            pos = skip_post_op_attr(rec, pos)
            pos += 4 + (4 + pad4(u32(rec, pos + 4)) if u32(rec, pos) else 0)
        new = HOSTILE_NAMES.get(bytes(name))
        if new is None:
            out += rec[start:pos]
        else:
            out += rec[start:start + 12] + xdr_opaque(new) + rec[name_end:pos]
    out += rec[pos:]
    return bytes(out)


def rewrite_readlink(rec, off):
    if u32(rec, off) != 0:
        return rec
    pos = skip_post_op_attr(rec, off + 4)
    tlen = u32(rec, pos)
    target = rec[pos + 4:pos + 4 + tlen]
    if not target.startswith(b"hostile_len_"):
        return rec
    n = int(target[len(b"hostile_len_"):])
    return rec[:pos] + xdr_opaque(b"x" * n) + rec[pos + 4 + pad4(tlen):]


def rewrite_fsinfo(rec, off, n):
    if u32(rec, off) != 0:
        return rec
    pos = skip_post_op_attr(rec, off + 4)
    b = bytearray(rec)
    for i in (0, 1, 3, 4, 6):  # rtmax rtpref (rtmult) wtmax wtpref (wtmult) dtpref
        struct.pack_into(">I", b, pos + 4 * i, n)
    return bytes(b)


size_file_state = [None, []]  # (mtime_ns, size) of F, its pairs


def sizes():
    if not args.size_file:
        return args.size
    try:
        st = os.stat(args.size_file)
        key = (st.st_mtime_ns, st.st_size)
        if key != size_file_state[0]:
            with open(args.size_file) as f:
                pairs = [size_arg(x) for x in f.read().split()]
            size_file_state[:] = [key, pairs]
    except (OSError, ValueError):
        size_file_state[:] = [None, []]
    return args.size + size_file_state[1]


def rewrite_sizes(rec, off, pairs):
    b = None
    for fid, size in pairs:
        key = struct.pack(">Q", fid)
        i = rec.find(key, off + 52)
        while i >= 0:
            a = i - 52  # the fattr3 it would be the fileid of
            if 1 <= u32(rec, a) <= 7 and u32(rec, a + 4) < 0o10000:
                if b is None:
                    b = bytearray(rec)
                struct.pack_into(">Q", b, a + 20, size)
            i = rec.find(key, i + 1)
    return bytes(b) if b is not None else rec


def stale_spared():
    """None while the origin tells the truth, else the file ids spared."""
    try:
        with open(args.stale_file) as f:
            return {int(x) for x in f.read().split()}
    except (OSError, ValueError):
        return None


def rewrite_stale(proc, rec, off):
    spared = stale_spared()
    if spared is None or proc not in STALE_BODY:
        return rec
    # A GETATTR that succeeded: its fattr3's fileid at +52.
    if proc == 1 and u32(rec, off) == 0 and \
            struct.unpack_from(">Q", rec, off + 4 + 52)[0] in spared:
        return rec
    return rec[:off] + struct.pack(">I", NFS3ERR_STALE) + STALE_BODY[proc]


def rewrite(proc, rec):
    off = reply_results(rec)
    if off is None:
        return rec
    if args.stale_file:
        new = rewrite_stale(proc, rec, off)
        if new is not rec:
            return new
    if args.names and proc in (16, 17):
        rec = rewrite_readdir(rec, off, proc == 17)
    elif args.readlink and proc == 5:
        rec = rewrite_readlink(rec, off)
    elif args.fsinfo is not None and proc == 19:
        rec = rewrite_fsinfo(rec, off, args.fsinfo)
    pairs = sizes()
    if pairs:
        rec = rewrite_sizes(rec, off, pairs)
    return rec


def count(proc):
    with count_lock:
        name = PROCS.get(proc, str(proc))
        counts[name] = counts.get(name, 0) + 1
        tmp = args.count_file + ".tmp"
        with open(tmp, "w") as f:
            for k in sorted(counts):
                f.write("%s %d\n" % (k, counts[k]))
        os.replace(tmp, args.count_file)


def sets_size(rec):
    """A SETATTR call sets the size: its sattr3 after the file handle
    (mode, uid, gid: set_it and value each; then size's set_it)."""
    _, _, _, off = call_args(rec)
    fhlen = u32(rec, off)
    pos = off + 4 + pad4(fhlen)
    for _ in range(3):
        pos += 8 if u32(rec, pos) else 4
    return u32(rec, pos) == 1


def hold(client, rec, send_lock):
    """Send rec once args.hold_file is gone."""
    open(args.hold_file + ".held", "w").close()
    while os.path.exists(args.hold_file):
        time.sleep(0.02)
    with send_lock:
        send_record(client, rec)


def late(client, rec, send_lock, ms):
    """Send rec ms milliseconds from now."""
    time.sleep(ms / 1000.0)
    with send_lock:
        send_record(client, rec)


def serve(client):
    up = socket.create_connection(("127.0.0.1", args.upstream))
    procs = {}
    lock = threading.Lock()
    send_lock = threading.Lock()

    def calls():
        try:
            while True:
                rec = recv_record(client)
                prog, vers, proc, _ = call_args(rec)
                if (prog, vers) == (NFS_PROG, NFS_V3):
                    if proc == 2 and args.hold_file and sets_size(rec):
                        proc = "held"
                    with lock:
                        procs[rec[:4]] = proc
                send_record(up, rec)
        except (EOFError, OSError, struct.error):
            pass
        for s in (up, client):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    threading.Thread(target=calls, daemon=True).start()
    try:
        while True:
            rec = recv_record(up)
            with lock:
                proc = procs.pop(rec[:4], None)
            if proc == "held":
                proc = 2
                if os.path.exists(args.hold_file):
                    threading.Thread(target=hold, daemon=True,
                                     args=(client, rec, send_lock)).start()
                    continue
            if proc is not None:
                rec = rewrite(proc, rec)
                if args.count_file:
                    count(proc)
                if proc == 19 and args.slow_connect:
                    threading.Thread(target=late, daemon=True,
                                     args=(client, rec, send_lock,
                                           args.slow_connect)).start()
                    continue
            with send_lock:
                send_record(client, rec)
    except (EOFError, OSError):
        pass
    client.close()


def size_arg(s):
    fid, size = s.split("=")
    return int(fid), int(size)


def main():
    global args
    p = argparse.ArgumentParser()
    p.add_argument("listen", type=int)
    p.add_argument("upstream", type=int)
    p.add_argument("--names", action="store_true")
    p.add_argument("--readlink", action="store_true")
    p.add_argument("--fsinfo", type=int)
    p.add_argument("--size", type=size_arg, action="append", default=[])
    p.add_argument("--size-file")
    p.add_argument("--count-file")
    p.add_argument("--stale-file")
    p.add_argument("--hold-file")
    p.add_argument("--slow-connect", type=int)
    args = p.parse_args()
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", args.listen))
    ls.listen(16)
    print("ready", flush=True)
    while True:
        c, _ = ls.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()


if __name__ == "__main__":
    main()
