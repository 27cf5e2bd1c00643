# locker.py KIND TYPE START LEN PATH [PATH2]: one lock through a mount, as
# a user takes it (test 53). KIND: posix (fcntl F_SETLK), ofd (F_OFD_SETLK),
# flock (whole file; START and LEN ignored); TYPE: r or w; LEN 0: to the
# end. Modes, from the environment variable MODE:
#   try    take it without waiting: prints "ok" or the errno's name
#   hold   take it without waiting, print "locked" (or the errno's name and
#          exit 1), then hold it until killed; SIGUSR1 unlocks it (prints
#          "unlocked") and it goes on sleeping
#   wait   print "waiting", take it waiting (F_SETLKW, flock without
#          LOCK_NB), print "got" (or the errno's name) and hold it as hold
#   getlk  F_GETLK (F_OFD_GETLK for ofd) of the range: prints "unlocked",
#          or "r|w START LEN" of the conflicting lock
#   two    ofd only: the range locked through PATH, then tried through a
#          second open of PATH in the same process: prints that result
import errno
import fcntl
import os
import signal
import struct
import sys

F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW = 36, 37, 38

kind, typ, start, length, path = sys.argv[1:6]
start, length = int(start), int(length)
mode = os.environ.get("MODE", "try")
ltype = fcntl.F_RDLCK if typ == "r" else fcntl.F_WRLCK


def flock_struct(t):
    # struct flock: short l_type, short l_whence, off_t l_start, off_t
    # l_len, pid_t l_pid (x86_64: 32 bytes with padding); OFD needs
    # l_pid 0.
    return struct.pack("hhqqi4x", t, os.SEEK_SET, start, length, 0)


def take(fd, wait):
    if kind == "flock":
        op = fcntl.LOCK_SH if typ == "r" else fcntl.LOCK_EX
        fcntl.flock(fd, op if wait else op | fcntl.LOCK_NB)
    elif kind == "ofd":
        fcntl.fcntl(fd, F_OFD_SETLKW if wait else F_OFD_SETLK,
                    flock_struct(ltype))
    else:
        fcntl.lockf(fd, (fcntl.LOCK_SH if typ == "r" else fcntl.LOCK_EX) |
                    (0 if wait else fcntl.LOCK_NB), length, start)


def name(e):
    return errno.errorcode.get(e.errno, str(e.errno))


fd = os.open(path, os.O_RDWR)
if mode == "getlk":
    cmd = F_OFD_GETLK if kind == "ofd" else fcntl.F_GETLK
    r = fcntl.fcntl(fd, cmd, flock_struct(ltype))
    t, _, s, n, _ = struct.unpack("hhqqi4x", r)
    if t == fcntl.F_UNLCK:
        print("unlocked")
    else:
        print("%s %d %d" % ("r" if t == fcntl.F_RDLCK else "w", s, n))
    sys.exit(0)
if mode == "two":
    take(fd, False)
    fd2 = os.open(path, os.O_RDWR)
    try:
        fcntl.fcntl(fd2, F_OFD_SETLK, flock_struct(ltype))
        print("ok")
    except OSError as e:
        print(name(e))
    sys.exit(0)
if mode == "wait":
    print("waiting", flush=True)
try:
    take(fd, mode == "wait")
except OSError as e:
    print(name(e), flush=True)
    sys.exit(1 if mode != "try" else 0)
if mode == "try":
    print("ok")
    sys.exit(0)


def unlock(sig, frame):
    if kind == "flock":
        fcntl.flock(fd, fcntl.LOCK_UN)
    elif kind == "ofd":
        fcntl.fcntl(fd, F_OFD_SETLK, flock_struct(fcntl.F_UNLCK))
    else:
        fcntl.lockf(fd, fcntl.LOCK_UN, length, start)
    print("unlocked", flush=True)


signal.signal(signal.SIGUSR1, unlock)
print("locked" if mode == "hold" else "got", flush=True)
while True:
    signal.pause()
