# statd_mon.py MON_NAME MY_NAME: ask this host's rpc.statd (SM_MON over
# UDP from the loopback) to monitor MON_NAME for the NLM of MY_NAME
# (program 100021 v4, its SM_NOTIFY callback 16), as nfs-ganesha does
# at a client's first lock. Prints 0 when statd took it.
import os
import socket
import struct
import subprocess
import sys


def xstr(s):
    b = s.encode()
    return struct.pack(">I", len(b)) + b + b"\0" * (-len(b) % 4)


port = None
for line in subprocess.run(["rpcinfo", "-p", "127.0.0.1"], capture_output=True,
                           text=True).stdout.splitlines():
    f = line.split()
    if len(f) >= 4 and f[0] == "100024" and f[2] == "udp":
        port = int(f[3])
if port is None:
    sys.exit(1)
xid = int.from_bytes(os.urandom(4), "big")
# CALL, RPC v2, SM_PROG 100024 v1, SM_MON (2); AUTH_NONE cred and verf
msg = struct.pack(">IIIIIIIIII", xid, 0, 2, 100024, 1, 2, 0, 0, 0, 0)
msg += xstr(sys.argv[1]) + xstr(sys.argv[2]) + struct.pack(">III", 100021, 4, 16)
msg += b"\0" * 16
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 0))
s.settimeout(3)
s.sendto(msg, ("127.0.0.1", port))
r = s.recv(512)
print(struct.unpack(">I", r[-8:-4])[0])
