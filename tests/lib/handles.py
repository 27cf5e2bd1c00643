#!/usr/bin/env python3
"""handles.py: file handles through a mount, as a re-exporting NFS server
takes and decodes them.

  handles.py take LIST OUT MNT   name_to_handle_at of every path of LIST
                                 (relative to MNT) into OUT, one
                                 "PATH TYPE:HEX" line each
  handles.py check OUT MNT DATA  open_by_handle_at of each (on MNT, which
                                 may be another mount than the one they
                                 were taken on) and its bytes compared with
                                 DATA's: one line per handle that does not
                                 open or reads other bytes, "ok N" at the end
"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
class FH(ctypes.Structure):
    _fields_ = [("bytes", ctypes.c_uint), ("type", ctypes.c_int), ("h", ctypes.c_ubyte * 128)]
def take(path):
    fh, mid = FH(), ctypes.c_int()
    fh.bytes = 128
    if libc.name_to_handle_at(-100, path.encode(), ctypes.byref(fh), ctypes.byref(mid), 0):
        raise OSError(ctypes.get_errno(), path)
    return "%d:%s" % (fh.type, bytes(fh.h[:fh.bytes]).hex())
def open_fh(mfd, s):
    t, h = s.split(":")
    b = bytes.fromhex(h)
    fh = FH()
    fh.bytes, fh.type = len(b), int(t)
    ctypes.memmove(fh.h, b, len(b))
    fd = libc.open_by_handle_at(mfd, ctypes.byref(fh), os.O_RDONLY)
    if fd < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return fd
if sys.argv[1] == "take":
    mnt = sys.argv[4]
    with open(sys.argv[2]) as f, open(sys.argv[3], "w") as out:
        for rel in f.read().split():
            out.write("%s %s\n" % (rel, take(os.path.join(mnt, rel))))
else:
    out, mnt, data = sys.argv[2:5]
    mfd = os.open(mnt, os.O_RDONLY | os.O_DIRECTORY)
    n = 0
    for line in open(out):
        rel, h = line.split()
        try:
            fd = open_fh(mfd, h)
            got = os.read(fd, 1 << 20)
            os.close(fd)
        except OSError as e:
            print("%s: the handle taken before: %s" % (rel, e.strerror))
            continue
        if got != open(os.path.join(data, rel), "rb").read():
            print("%s: the handle reads other bytes than the origin's" % rel)
            continue
        n += 1
    print("ok %d" % n)
