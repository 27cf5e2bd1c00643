"""foreign_write.py GW_PATH ORIGIN_PATH: the sequence that the WRITE
pre-op attributes (wcc) must catch (tests 47 and vm/50). Open the file
read-write through the gateway and read it (kernel pages and disk cache
hold it), change [1 MiB, +64 KiB) directly in the origin's directory,
write [3 MiB, +64 KiB) through the open file, fsync, close."""
import os
import sys

gw, origin = sys.argv[1], sys.argv[2]
f = open(gw, "r+b", buffering=0)
f.read()
with open(origin, "r+b") as o:
    o.seek(1 << 20)
    o.write(os.urandom(65536))
f.seek(3 << 20)
f.write(os.urandom(65536))
os.fsync(f.fileno())
f.close()
