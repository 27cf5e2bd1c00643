# held_writer.py PATH GO N WANT: write N random bytes to PATH (created,
# truncated) without syncing, keep them in WANT, print "wrote", hold the
# file open until the file GO exists, then fsync and close it: prints "ok",
# or "errno E" for the error either gave (what a writer across a takeover
# or a crash is told). Tests 96 and 98.
import os
import sys
import time

path, go, n, want = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
data = os.urandom(n)
with open(want, "wb") as f:
    f.write(data)
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, data)
print("wrote", flush=True)
while not os.path.exists(go):
    time.sleep(0.05)
try:
    os.fsync(fd)
    os.close(fd)
    print("ok", flush=True)
except OSError as e:
    print("errno", e.errno, flush=True)
