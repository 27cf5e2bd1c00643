# lock_torture.py: many lock owners on a few files through two mounts of
# one origin (test 107), checked as they go and at the end.
#
#   lock_torture.py run STATE SEED SECS WORKERS MNT_A MNT_B
#   lock_torture.py final STATE SECS MNT...
#   lock_torture.py reopen PATH N ofd|flock
#
# run: WORKERS processes, each on one mount (A and B in turn) and of one
# kind (fcntl/POSIX locks, OFD locks on two open file descriptions per
# file, flock on two open file descriptions per file), lock and unlock
# random byte ranges of the files t0..t2 (bytes 0-63 and "to the end"),
# without waiting or waiting (F_SETLKW / flock without LOCK_NB) with a
# timeout (SIGALRM: EINTR), close their files and exit while holding
# locks; the driver kills one with SIGKILL every 0.2-1 s and starts
# another. Every owner (a process for POSIX, an open file description for
# OFD and flock) is one lock owner at the origin: all of them conflict.
#
# What each owner believes it holds is kept in a table (STATE/table.json,
# under a local fcntl lock on STATE/table.lock), never more than it holds:
# a range is taken out of the table before it is unlocked, locked again
# (a conversion) or closed, before its process is killed, and put in only
# after the lock call succeeded. So two owners whose beliefs conflict held
# conflicting locks at once ("conflict"), checked as each lock is put in;
# and a checker process, with the table locked, asks F_GETLK through a
# random mount for a random believed byte: "unlocked" there means a lock
# its owner believes it holds was lost ("lost"), a write lock over a
# believed read lock is a conflict too.
#
# final: every one of SECS seconds at most, a new process on each MNT asks
# a write lock of every whole file without waiting (and lets it go): all
# must succeed, i.e. nothing is left at the origin once every owner is
# gone (the releases of closes are asynchronous: it retries).
#
# Prints the seed, counters and every violation; exit 0 only with no
# violation and enough of each kind of event.
import errno
import fcntl
import json
import os
import random
import signal
import struct
import sys
import time

F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW = 36, 37, 38
NFILES = 3
SPAN = 64                       # bytes 0..63; index 64: offsets >= 64
KINDS = ("posix", "ofd", "flock")
SLOTS = 2                       # open files per file and worker


class Timeout(Exception):
    pass


def on_alarm(sig, frame):
    raise Timeout()


def fl(t, start, length):
    # struct flock: short l_type, l_whence; off_t l_start, l_len; pid_t
    # l_pid (0: OFD needs it).
    return struct.pack("hhqqi4x", t, os.SEEK_SET, start, length, 0)


class Table:
    def __init__(self, state):
        self.path = os.path.join(state, "table.json")
        self.lockfd = os.open(os.path.join(state, "table.lock"),
                              os.O_RDWR | os.O_CREAT, 0o644)
        self.t = None

    def __enter__(self):
        # Per process (fcntl): a process killed holding it lets it go.
        fcntl.lockf(self.lockfd, fcntl.LOCK_EX)
        with open(self.path) as f:
            self.t = json.load(f)
        return self.t

    def __exit__(self, *exc):
        tmp = self.path + ".%d" % os.getpid()
        with open(tmp, "w") as f:
            json.dump(self.t, f)
        os.rename(tmp, self.path)
        fcntl.lockf(self.lockfd, fcntl.LOCK_UN)
        return False


def bump(t, key, n=1):
    t["stats"][key] = t["stats"].get(key, 0) + n


def span_of(start, length):
    """Byte indexes 0..64 a lock [start, start+length) (0: to the end)
    covers."""
    if length == 0:
        return range(start, SPAN + 1)
    return range(start, min(start + length, SPAN))


def set_belief(t, owner, fno, idx, c):
    own = t["own"].setdefault(owner, {})
    s = list(own.get(str(fno), "." * (SPAN + 1)))
    for i in idx:
        s[i] = c
    own[str(fno)] = "".join(s)


def conflicts(t, owner, fno, idx, c):
    out = []
    for other, files in t["own"].items():
        if other == owner:
            continue
        s = files.get(str(fno))
        if not s:
            continue
        for i in idx:
            if s[i] == "w" or (s[i] == "r" and c == "w"):
                out.append("%s holds %s at byte %d of t%d" %
                           (other, s[i], i, fno))
                break
    return out


class Worker:
    def __init__(self, state, seed, wid, kind, mnt, gw):
        self.table = Table(state)
        self.rng = random.Random("%s-%d" % (seed, wid))
        self.wid, self.kind, self.mnt, self.gw = wid, kind, mnt, gw
        self.fds = {}           # (file, slot) -> fd
        # What it did, a line an event (STATE/wN.log: read after a
        # violation).
        self.log = open(os.path.join(state, "w%d.log" % wid), "a",
                        buffering=1)

    def note(self, what):
        self.log.write("%.6f %d %s\n" % (time.monotonic(), os.getpid(), what))

    def owner(self, fno, slot):
        if self.kind == "posix":
            return "w%d.posix.%s" % (self.wid, self.gw)
        return "w%d.%s%d.%s" % (self.wid, self.kind, slot, self.gw)

    def fd(self, fno, slot):
        if (fno, slot) not in self.fds:
            self.fds[(fno, slot)] = os.open(
                os.path.join(self.mnt, "t%d" % fno), os.O_RDWR)
        return self.fds[(fno, slot)]

    def call(self, fd, op, typ, start, length, wait):
        if self.kind == "flock":
            how = {"r": fcntl.LOCK_SH, "w": fcntl.LOCK_EX,
                   "u": fcntl.LOCK_UN}[op if op == "u" else typ]
            fcntl.flock(fd, how | (0 if wait or op == "u" else
                                   fcntl.LOCK_NB))
            return
        t = {"r": fcntl.F_RDLCK, "w": fcntl.F_WRLCK}.get(typ, fcntl.F_UNLCK)
        if op == "u":
            t = fcntl.F_UNLCK
        if self.kind == "ofd":
            cmd = F_OFD_SETLKW if wait else F_OFD_SETLK
        else:
            cmd = fcntl.F_SETLKW if wait else fcntl.F_SETLK
        fcntl.fcntl(fd, cmd, fl(t, start, length))

    def forget_all(self, t):
        for key in list(t["own"]):
            if key.startswith("w%d." % self.wid):
                del t["own"][key]

    def step(self):
        rng = self.rng
        fno = rng.randrange(NFILES)
        slot = rng.randrange(SLOTS)
        owner = self.owner(fno, slot)
        r = rng.random()
        if self.kind == "flock":
            start, length = 0, 0
        else:
            start = rng.randrange(SPAN)
            length = 0 if rng.random() < 0.15 else \
                rng.randint(1, min(24, SPAN - start))
        idx = span_of(start, length)
        if r < 0.012:
            # Exit holding what it holds: the closes let it go.
            with self.table as t:
                self.forget_all(t)
                bump(t, "exits")
            self.note("exit")
            os._exit(0)
        if r < 0.08:
            if (fno, slot) not in self.fds:
                return
            with self.table as t:
                # POSIX: any close of the file lets go all the
                # process's locks on it (its one owner); OFD, flock: the
                # last close of the open file description.
                set_belief(t, owner, fno, range(SPAN + 1), ".")
                bump(t, "closes")
            os.close(self.fds.pop((fno, slot)))
            self.note("%s close t%d" % (owner, fno))
            return
        if r < 0.14 and (fno, slot) in self.fds:
            # Closed and opened again at once, then locked (below): the
            # closed file's release may still be on its way (the kernel
            # sends RELEASE without waiting for it).
            with self.table as t:
                set_belief(t, owner, fno, range(SPAN + 1), ".")
                bump(t, "reopens")
            os.close(self.fds.pop((fno, slot)))
            self.note("%s reopen t%d" % (owner, fno))
            r = 0.5
        fd = self.fd(fno, slot)
        if r < 0.33:
            with self.table as t:
                set_belief(t, owner, fno, idx, ".")
                bump(t, "unlocks")
            self.note("%s unlock t%d [%d,+%d)" % (owner, fno, start, length))
            try:
                self.call(fd, "u", None, start, length, False)
            except OSError as e:
                with self.table as t:
                    t["viol"].append("%s: unlock t%d [%d,+%d): %s" % (
                        owner, fno, start, length,
                        errno.errorcode.get(e.errno, e.errno)))
            return
        typ = "w" if rng.random() < 0.5 else "r"
        wait = rng.random() < 0.35
        tmo = rng.uniform(0.05, 0.6)
        with self.table as t:
            # A conversion may let go of the old lock first (flock does):
            # not believed held while it is asked.
            set_belief(t, owner, fno, idx, ".")
        got, err = None, None
        try:
            if wait:
                signal.setitimer(signal.ITIMER_REAL, tmo)
            try:
                self.call(fd, "l", typ, start, length, wait)
                got = True
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except Timeout:
            if got is None:
                got, err = False, "timeout"
        except OSError as e:
            got, err = False, errno.errorcode.get(e.errno, str(e.errno))
        self.note("%s %s %s t%d [%d,+%d): %s" % (
            owner, "wait" if wait else "lock", typ, fno, start, length,
            "granted" if got else err))
        with self.table as t:
            if got:
                bump(t, "granted_wait" if wait else "granted")
                for c in conflicts(t, owner, fno, idx, typ):
                    t["viol"].append("%.6f " % time.monotonic() +
                        "conflict: %s granted %s t%d [%d,+%d) while %s" %
                        (owner, typ, fno, start, length, c))
                set_belief(t, owner, fno, idx, typ)
            elif err in ("EAGAIN", "EACCES", "EWOULDBLOCK"):
                bump(t, "denied")
            elif err in ("timeout", "EINTR"):
                bump(t, "interrupted")
            else:
                t["viol"].append("%s: lock %s t%d [%d,+%d)%s: %s" % (
                    owner, typ, fno, start, length,
                    " waiting" if wait else "", err))

    def run(self):
        signal.signal(signal.SIGALRM, on_alarm)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        while True:
            self.step()
            time.sleep(self.rng.uniform(0, 0.02))


def believed(t, fno, i):
    return ", ".join("%s %s" % (o, files[str(fno)][i])
                     for o, files in t["own"].items()
                     if files.get(str(fno), ".")[i:i + 1] not in ("", "."))


def checker(state, seed, mnts):
    table = Table(state)
    rng = random.Random("%s-checker" % seed)
    fds = {}
    stop = []
    signal.signal(signal.SIGTERM, lambda s, f: stop.append(1))
    while not stop:
        time.sleep(0.03)
        with table as t:
            held = [(o, int(f), i, c) for o, files in t["own"].items()
                    for f, s in files.items() for i, c in enumerate(s)
                    if c != "."]
            if not held:
                continue
            owner, fno, i, c = rng.choice(held)
            m = rng.randrange(len(mnts))
            if (m, fno) not in fds:
                fds[(m, fno)] = os.open(
                    os.path.join(mnts[m], "t%d" % fno), os.O_RDONLY)
            off = i if i < SPAN else SPAN + rng.randrange(4096)
            # Only "is it held": whether the holder F_GETLK names is the
            # believer itself is not told (l_pid is 0 through the
            # gateway), and an owner that changes the type of part of
            # its lock may still hold the old type there at the origin
            # (nfs-ganesha 4.3 keeps a write lock an owner downgrades in
            # part: doc/locks.md).
            for want in (fcntl.F_WRLCK,):
                try:
                    res = fcntl.fcntl(fds[(m, fno)], fcntl.F_GETLK,
                                      fl(want, off, 1))
                except OSError as e:
                    t["viol"].append("checker: F_GETLK t%d %d: %s" % (
                        fno, off, errno.errorcode.get(e.errno, e.errno)))
                    break
                got = struct.unpack("hhqqi4x", res)[0]
                bump(t, "checks")
                if want == fcntl.F_WRLCK and got == fcntl.F_UNLCK:
                    t["viol"].append("%.6f " % time.monotonic() +
                        "lost: %s believes it holds %s at byte %d of t%d, "
                        "F_GETLK through mount %d says unlocked; believed "
                        "there: %s" % (owner, c, off, fno, m,
                                       believed(t, fno, i)))
    sys.exit(0)


def spawn(fn, *args):
    pid = os.fork()
    if pid == 0:
        # The child never returns into the parent's code.
        try:
            fn(*args)
        except SystemExit as e:
            os._exit(e.code if isinstance(e.code, int) else 0)
        except BaseException as e:
            sys.stderr.write("lock_torture child: %r\n" % (e,))
            os._exit(3)
        os._exit(0)
    return pid


def run(state, seed, secs, nworkers, mnt_a, mnt_b):
    print("lock torture: seed %s, %d workers, %g s" % (seed, nworkers, secs),
          flush=True)
    with open(os.path.join(state, "table.json"), "w") as f:
        json.dump({"own": {}, "viol": [], "stats": {}}, f)
    table = Table(state)
    rng = random.Random(seed)
    mnts = [(mnt_a, "A"), (mnt_b, "B")]
    slots = {}                  # pid -> slot
    nextwid = [0]

    def start(slot):
        wid = nextwid[0]
        nextwid[0] += 1
        kind = KINDS[slot % len(KINDS)]
        mnt, gw = mnts[(slot // len(KINDS)) % 2]
        w = Worker(state, seed, wid, kind, mnt, gw)
        pid = spawn(w.run)
        slots[pid] = (slot, wid)

    def forget(t, wid):
        for key in list(t["own"]):
            if key.startswith("w%d." % wid):
                del t["own"][key]

    for s in range(nworkers):
        start(s)
    chk = spawn(checker, state, seed, [mnt_a, mnt_b])
    end = time.monotonic() + secs
    kills = 0
    while time.monotonic() < end:
        time.sleep(rng.uniform(0.2, 1.0))
        # Workers that ended (exits): replaced.
        while True:
            pid, st = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            if pid == chk:
                print("checker ended early: status %d" % st, flush=True)
                with table as t:
                    t["viol"].append("the checker died")
                chk = None
                continue
            slot, wid = slots.pop(pid)
            if os.WIFEXITED(st) and os.WEXITSTATUS(st) != 0:
                with table as t:
                    t["viol"].append("worker w%d exited %d" %
                                     (wid, os.WEXITSTATUS(st)))
            start(slot)
        # One holder (or waiter) killed with SIGKILL, its beliefs gone
        # first (the table locked: it cannot put one in meanwhile).
        pid = rng.choice(sorted(slots))
        with table as t:
            forget(t, slots[pid][1])
            os.kill(pid, signal.SIGKILL)
            with open(os.path.join(state, "w%d.log" % slots[pid][1]),
                      "a") as f:
                f.write("%.6f killed\n" % time.monotonic())
            bump(t, "kills")
        kills += 1
        os.waitpid(pid, 0)
        start(slots.pop(pid)[0])
    # The end: every worker killed (beliefs first), then the checker.
    with table as t:
        for pid, (slot, wid) in slots.items():
            forget(t, wid)
            os.kill(pid, signal.SIGKILL)
    for pid in slots:
        os.waitpid(pid, 0)
    if chk:
        os.kill(chk, signal.SIGTERM)
        os.waitpid(chk, 0)
    with table as t:
        st, viol = t["stats"], t["viol"]
    print("lock torture: " + ", ".join("%s %d" % kv for kv in sorted(
        st.items())) + ", workers %d" % nextwid[0], flush=True)
    for v in viol[:40]:
        print("VIOLATION: " + v, flush=True)
    if len(viol) > 40:
        print("... %d violations in all" % len(viol))
    if viol:
        # The named workers' last events before the first violation.
        import re
        when = float(viol[0].split()[0]) if re.match(r"[0-9.]+ ", viol[0]) \
            else float("inf")
        for wid in sorted(set(int(x) for x in re.findall(r"\bw(\d+)\.",
                                                          viol[0]))):
            with open(os.path.join(state, "w%d.log" % wid)) as f:
                lines = [ln for ln in f if float(ln.split()[0]) <= when]
            for ln in lines[-12:]:
                print("  w%d: %s" % (wid, ln.rstrip()))
    # (a loaded machine, and ThreadSanitizer, make a run slow: these are
    # a third of what a quiet ASan run does)
    enough = {"granted": 60, "granted_wait": 20, "denied": 50,
              "interrupted": 20, "unlocks": 50, "closes": 10, "kills": 5,
              "checks": 30}
    short = ["%s %d < %d" % (k, st.get(k, 0), n) for k, n in enough.items()
             if st.get(k, 0) < n]
    if short:
        print("too little happened: " + ", ".join(short), flush=True)
    return 1 if viol or short else 0


def try_whole(path, kind):
    """In a new process: a write lock of the whole file without waiting
    (let go at once): 0 if taken."""
    pid = os.fork()
    if pid == 0:
        try:
            fd = os.open(path, os.O_RDWR)
            if kind == "flock":
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            else:
                fcntl.fcntl(fd, F_OFD_SETLK if kind == "ofd"
                            else fcntl.F_SETLK, fl(fcntl.F_WRLCK, 0, 0))
            os._exit(0)
        except OSError as e:
            os._exit(10 + e.errno if e.errno < 100 else 9)
    return os.WEXITSTATUS(os.waitpid(pid, 0)[1])


def final(state, secs, mnts):
    t0 = time.monotonic()
    left = [(m, f, k) for m in mnts for f in range(NFILES)
            for k in ("posix", "ofd", "flock")]
    first = True
    while True:
        left = [(m, f, k) for m, f, k in left
                if try_whole(os.path.join(m, "t%d" % f), k) != 0]
        if first and left:
            print("final: at first refused: " + ", ".join(
                "%s/t%d %s" % lf for lf in left), flush=True)
        first = False
        if not left or time.monotonic() - t0 > secs:
            break
        time.sleep(0.1)
    for m, f, k in left:
        print("LEFT AT THE ORIGIN: %s/t%d: a whole-file %s write lock "
              "still refused after %g s" % (m, f, k, secs), flush=True)
    if not left:
        print("final: every file free through %d mounts after %.1f s" %
              (len(mnts), time.monotonic() - t0), flush=True)
    return 1 if left else 0


def reopen(path, n, kind):
    """n times: a lock (kind ofd or flock) of all of path taken, the
    file closed, opened again at once and the lock asked for again
    without waiting, while another process keeps writing to the file
    (so that the gateway's release of the closed file commits, slowly
    with CACHEGW_INJECT_COMMIT_DELAY): the refusals."""
    wp = os.fork()
    if wp == 0:
        fd = os.open(path, os.O_RDWR)
        i = 0
        while True:
            os.pwrite(fd, b"w" * 512, 8192 + (i % 64) * 512)
            i += 1
            time.sleep(0.01)

    def take(fd):
        if kind == "flock":
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        else:
            fcntl.fcntl(fd, F_OFD_SETLK, fl(fcntl.F_WRLCK, 0, 0))
    refused = 0
    try:
        for _ in range(n):
            fd = os.open(path, os.O_RDWR)
            take(fd)
            os.close(fd)
            fd = os.open(path, os.O_RDWR)
            try:
                take(fd)
            except BlockingIOError:
                refused += 1
            os.close(fd)
    finally:
        os.kill(wp, signal.SIGKILL)
        os.waitpid(wp, 0)
    print("%s: refused %d of %d right after the last close" %
          (kind, refused, n), flush=True)
    return 1 if refused else 0


if __name__ == "__main__":
    if sys.argv[1] == "reopen":
        sys.exit(reopen(sys.argv[2], int(sys.argv[3]), sys.argv[4]))
    if sys.argv[1] == "run":
        sys.exit(run(sys.argv[2], sys.argv[3], float(sys.argv[4]),
                     int(sys.argv[5]), sys.argv[6], sys.argv[7]))
    sys.exit(final(sys.argv[2], float(sys.argv[3]), sys.argv[4:]))
