"""nfsrpc.py: ONC RPC record framing and NFSv3 call/reply offsets shared by
the test proxies (wccproxy.py, hostile_proxy.py)."""
import struct

NFS_PROG, NFS_V3 = 100003, 3


def pad4(n):
    return (n + 3) & ~3


def recv_exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError
        b += c
    return b


def recv_record(s):
    data = b""
    while True:
        (h,) = struct.unpack(">I", recv_exact(s, 4))
        data += recv_exact(s, h & 0x7FFFFFFF)
        if h & 0x80000000:
            return data


def send_record(s, data):
    s.sendall(struct.pack(">I", 0x80000000 | len(data)) + data)


def call_args(rec):
    """(prog, vers, proc, offset of the arguments) of an RPC call."""
    prog, vers, proc = struct.unpack_from(">III", rec, 12)
    (clen,) = struct.unpack_from(">I", rec, 28)
    off = 32 + pad4(clen)
    (vlen,) = struct.unpack_from(">I", rec, off + 4)
    return prog, vers, proc, off + 8 + pad4(vlen)


def reply_results(rec):
    """Offset of the results of an accepted, successful RPC reply, or None."""
    mtype, rstat = struct.unpack_from(">II", rec, 4)
    if mtype != 1 or rstat != 0:
        return None
    (vlen,) = struct.unpack_from(">I", rec, 16)
    off = 20 + pad4(vlen)
    (astat,) = struct.unpack_from(">I", rec, off)
    return off + 4 if astat == 0 else None
