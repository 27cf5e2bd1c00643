#!/usr/bin/env python3
"""dir_cookies.py DIR CHUNK: list DIR as knfsd lists a directory for an
NFS client's READDIRs: each chunk of CHUNK entries from a new open, which
seeks to the cookie (telldir) the last chunk ended at, then closes. Prints
the names (one a line, "." and ".." left out) and, on stderr, how many
opens it took."""
import ctypes
import ctypes.util
import os
import sys


class Dirent(ctypes.Structure):
    _fields_ = [("d_ino", ctypes.c_uint64), ("d_off", ctypes.c_int64),
                ("d_reclen", ctypes.c_ushort), ("d_type", ctypes.c_ubyte),
                ("d_name", ctypes.c_char * 256)]


def main():
    path, chunk = sys.argv[1].encode(), int(sys.argv[2])
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.opendir.restype = ctypes.c_void_p
    libc.opendir.argtypes = [ctypes.c_char_p]
    libc.readdir.restype = ctypes.POINTER(Dirent)
    libc.readdir.argtypes = [ctypes.c_void_p]
    libc.telldir.restype = ctypes.c_long
    libc.telldir.argtypes = [ctypes.c_void_p]
    libc.seekdir.argtypes = [ctypes.c_void_p, ctypes.c_long]
    libc.closedir.argtypes = [ctypes.c_void_p]
    cookie, opens, out, done = 0, 0, [], False
    while not done:
        d = libc.opendir(path)
        if not d:
            e = ctypes.get_errno()
            sys.exit("opendir: %s" % os.strerror(e))
        opens += 1
        if cookie:
            libc.seekdir(d, cookie)
        for _ in range(chunk):
            ctypes.set_errno(0)
            ent = libc.readdir(d)
            if not ent:
                if ctypes.get_errno():
                    sys.exit("readdir: %s" % os.strerror(ctypes.get_errno()))
                done = True
                break
            name = ent.contents.d_name.decode("utf-8", "surrogateescape")
            if name not in (".", ".."):
                out.append(name)
        cookie = libc.telldir(d)
        libc.closedir(d)
    sys.stdout.write("".join(n + "\n" for n in out))
    print("opens %d" % opens, file=sys.stderr)


main()
