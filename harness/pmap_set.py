# pmap_set.py PROG VERS PROTO PORT: register PROG VERS on PROTO (6 tcp, 17
# udp) at PORT with the rpcbind of this host (portmap v2 UNSET, then SET,
# over UDP from the loopback), as a server does at start. Prints SET's
# answer (1: done).
import os
import socket
import struct
import sys

prog, vers, prot, port = (int(x) for x in sys.argv[1:5])


def call(proc, args):
    xid = int.from_bytes(os.urandom(4), "big")
    # CALL, RPC v2, PMAP_PROG 100000 v2, proc; AUTH_NONE cred and verf
    msg = struct.pack(">IIIIIIIIII", xid, 0, 2, 100000, 2, proc, 0, 0, 0, 0)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.settimeout(3)
    s.sendto(msg + args, ("127.0.0.1", 111))
    return struct.unpack(">I", s.recv(512)[-4:])[0]


args = struct.pack(">IIII", prog, vers, prot, port)
call(2, args)
print(call(1, args))
