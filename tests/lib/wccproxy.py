#!/usr/bin/env python3
"""wccproxy.py LISTEN_PORT UPSTREAM_PORT [ADDR]: an NFSv3 TCP proxy on ADDR
(127.0.0.1) to the origin at ADDR:UPSTREAM_PORT that makes the origin behind it send pre-operation attributes (wcc_data
"before") in its WRITE replies, as FreeBSD's nfsd does and neither
nfs-ganesha 4.3 nor knfsd does.

Before it forwards a WRITE it asks the origin for the file's attributes
(GETATTR, on a connection of its own) and puts their size, mtime and ctime
into the reply as the pre-op attributes, if the reply carries none. That is
what the origin would say if nothing else reaches the file between the two
calls, which a test that changes the file before it writes arranges.
Everything else passes unchanged. Prints "ready" once listening.
"""
import os
import socket
import struct
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nfsrpc import (NFS_PROG, NFS_V3, pad4, recv_record,  # noqa: E402
                    send_record, call_args, reply_results)

PROC_GETATTR, PROC_WRITE = 1, 7


class Getattr:
    """GETATTRs of our own, as root (AUTH_SYS), on one connection."""

    def __init__(self, addr, port):
        self.s = socket.create_connection((addr, port))
        self.xid = int.from_bytes(os.urandom(4), "big")

    def wcc_attr(self, fh):
        self.xid = (self.xid + 1) & 0xFFFFFFFF
        cred = struct.pack(">IIIII", 0, 0, 0, 0, 0)  # stamp, "", uid, gid, no groups
        rec = struct.pack(">IIIIII", self.xid, 0, 2, NFS_PROG, NFS_V3, PROC_GETATTR)
        rec += struct.pack(">II", 1, len(cred)) + cred + struct.pack(">II", 0, 0)
        rec += struct.pack(">I", len(fh)) + fh + b"\0" * (pad4(len(fh)) - len(fh))
        send_record(self.s, rec)
        rep = recv_record(self.s)
        off = reply_results(rep)
        if off is None or struct.unpack_from(">I", rep, off)[0] != 0:
            return None
        fattr = rep[off + 4:off + 4 + 84]
        return fattr[20:28] + fattr[68:84]  # size, mtime, ctime


def serve(client, addr, upstream_port):
    up = socket.create_connection((addr, upstream_port))
    ga = Getattr(addr, upstream_port)
    pre = {}
    lock = threading.Lock()

    def calls():
        try:
            while True:
                rec = recv_record(client)
                prog, vers, proc, off = call_args(rec)
                if (prog, vers, proc) == (NFS_PROG, NFS_V3, PROC_WRITE):
                    (fl,) = struct.unpack_from(">I", rec, off)
                    w = ga.wcc_attr(rec[off + 4:off + 4 + fl])
                    if w:
                        with lock:
                            pre[rec[:4]] = w
                send_record(up, rec)
        except (EOFError, OSError):
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
                w = pre.pop(rec[:4], None)
            off = reply_results(rec) if w else None
            # WRITE3res: status, then wcc_data: pre_op_attr first.
            if off is not None and struct.unpack_from(">I", rec, off + 4)[0] == 0:
                rec = rec[:off + 4] + struct.pack(">I", 1) + w + rec[off + 8:]
            send_record(client, rec)
    except (EOFError, OSError):
        pass
    client.close()


def main():
    lport, uport = int(sys.argv[1]), int(sys.argv[2])
    addr = sys.argv[3] if len(sys.argv) > 3 else "127.0.0.1"
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, lport))
    ls.listen(16)
    print("ready", flush=True)
    while True:
        c, _ = ls.accept()
        threading.Thread(target=serve, args=(c, addr, uport), daemon=True).start()


if __name__ == "__main__":
    main()
