"""fsx.py - random operations on a few files, done alike on a native
directory and on a mount, every answer and every byte compared (in the way
of fsx, the file system exerciser of xfstests).

usage: fsx.py NATIVE_DIR MOUNT_DIR [--ops N] [--seed S] [--files K]

Each of K files is open for reading and writing in both directories, and
N operations drawn at random (seeded: a run is repeatable) go to one file
in both: pwrite, pread, an O_APPEND write, ftruncate and truncate(2) by its
name, writes and reads through a shared mmap, fallocate (allocation past the
end, hole punching, zeroing a range), copy_file_range within the file,
fsync, fdatasync, an fsync of the directory (a mount commits), close and
open again (with O_TRUNC too), a write through another open file of it and
through a duplicate closed at once, a rename away and back with the
descriptor open, and stat.
What each answers (a value, or the errno) must be the same, and so must
what the file holds whenever it is read. On a difference it prints the
operations that led to it and exits 1; else 0, leaving the files for the
caller to compare again (after a remount). FSX_EVERY=1 compares the bytes
after every operation (slower; where a difference starts).
"""
import argparse
import ctypes
import errno
import mmap
import os
import random
import sys

LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
LIBC.copy_file_range.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int64), ctypes.c_int,
                                 ctypes.POINTER(ctypes.c_int64), ctypes.c_size_t,
                                 ctypes.c_uint]
LIBC.copy_file_range.restype = ctypes.c_ssize_t
FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, FALLOC_FL_ZERO_RANGE = 1, 2, 16
MAXSIZE = 384 * 1024  # what most offsets and sizes stay below
BIGSIZE = 3 * 1024 * 1024  # what some reach


def fallocate(fd, mode, off, length):
    if LIBC.fallocate(fd, mode, off, length) < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def copy_range(fd, src, dst, length):
    a, b = ctypes.c_int64(src), ctypes.c_int64(dst)
    n = LIBC.copy_file_range(fd, ctypes.byref(a), fd, ctypes.byref(b), length, 0)
    if n < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return n


def answer(f):
    try:
        return ('ok', f())
    except OSError as e:
        return ('err', errno.errorcode.get(e.errno, e.errno))


class Side:
    """One directory's files and their descriptors."""

    def __init__(self, top, names):
        self.top = top
        self.fds = {}
        for n in names:
            self.fds[n] = os.open(self.path(n), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)

    def path(self, n):
        return os.path.join(self.top, n)

    def size(self, n):
        return os.lseek(self.fds[n], 0, os.SEEK_END)

    def held(self, n):
        """What @n holds, read through its own descriptor."""
        return os.pread(self.fds[n], self.size(n) + 1, 0)

    def content(self, n):
        """What @n holds, read through an open of its own."""
        with open(self.path(n), 'rb') as f:
            return f.read()

    def close(self):
        for fd in self.fds.values():
            os.close(fd)


def mapped(fd, off, length, data):
    """Through a shared mapping of @fd's pages over [@off, @off+@length):
    write @data at @off (then msync), or (@data None) read."""
    size = os.lseek(fd, 0, os.SEEK_END)
    if size == 0 or off >= size:
        return 'beyond'
    length = min(length, size - off)
    start = off - off % mmap.PAGESIZE
    m = mmap.mmap(fd, off + length - start, mmap.MAP_SHARED,
                  mmap.PROT_READ | mmap.PROT_WRITE, offset=start)
    try:
        if data is None:
            return m[off - start:off - start + length]
        m[off - start:off - start + length] = data[:length]
        m.flush()
        return length
    finally:
        m.close()


def draw_op(rng, name, size):
    """One operation on @name of @size bytes: (text, f(side) -> answer)."""
    big = rng.random() < 0.05
    top = BIGSIZE if big else MAXSIZE
    off = rng.randrange(0, max(1, min(top, size + 65536)))
    length = rng.choice([1, 7, 512, 4096, 4097, rng.randrange(1, 65536)])
    data = rng.randbytes(length)
    k = rng.random()
    if k < 0.22:
        return ('pwrite %d+%d' % (off, length), lambda s: os.pwrite(s.fds[name], data, off))
    if k < 0.36:
        return ('pread %d+%d' % (off, length), lambda s: os.pread(s.fds[name], length, off))
    if k < 0.40:
        def append(s):
            fd = os.open(s.path(name), os.O_WRONLY | os.O_APPEND)
            try:
                return os.write(fd, data)
            finally:
                os.close(fd)
        return ('append %d' % length, append)
    if k < 0.47:
        to = rng.randrange(0, top)
        return ('ftruncate %d' % to, lambda s: os.ftruncate(s.fds[name], to))
    if k < 0.50:
        to = rng.randrange(0, top)
        return ('truncate %d' % to, lambda s: os.truncate(s.path(name), to))
    if k < 0.57:
        return ('mapwrite %d+%d' % (off, length),
                lambda s: mapped(s.fds[name], off, length, data))
    if k < 0.61:
        return ('mapread %d+%d' % (off, length),
                lambda s: mapped(s.fds[name], off, length, None))
    if k < 0.64:
        return ('fallocate %d+%d' % (off, length),
                lambda s: fallocate(s.fds[name], 0, off, length))
    if k < 0.67:
        return ('fallocate keep %d+%d' % (off, length),
                lambda s: fallocate(s.fds[name], FALLOC_FL_KEEP_SIZE, off, length))
    if k < 0.71:
        return ('punch %d+%d' % (off, length),
                lambda s: fallocate(s.fds[name], FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                                    off, length))
    if k < 0.75:
        return ('zero %d+%d' % (off, length),
                lambda s: fallocate(s.fds[name], FALLOC_FL_ZERO_RANGE, off, length))
    if k < 0.79:
        src = rng.randrange(0, max(1, size))
        # ranges of one file that overlap: EINVAL on both
        return ('copy_file_range %d->%d+%d' % (src, off, length),
                lambda s: copy_range(s.fds[name], src, off, length))
    if k < 0.81:
        return ('fsync', lambda s: os.fsync(s.fds[name]))
    if k < 0.82:
        return ('fdatasync', lambda s: os.fdatasync(s.fds[name]))
    if k < 0.84:
        def syncdir(s):
            d = os.open(s.top, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(d)
            finally:
                os.close(d)
        return ('fsync of the directory', syncdir)
    if k < 0.88:
        def reopen(s):
            os.close(s.fds[name])
            held = s.content(name)  # closed: what every reader sees
            s.fds[name] = os.open(s.path(name), os.O_RDWR)
            return held, os.lseek(s.fds[name], 0, os.SEEK_END)
        return ('close and open', reopen)
    if k < 0.89:
        def reopen_trunc(s):
            os.close(s.fds[name])
            s.fds[name] = os.open(s.path(name), os.O_RDWR | os.O_TRUNC)
            return s.size(name)
        return ('close and open with O_TRUNC', reopen_trunc)
    if k < 0.90:
        def second(s):  # another open file of it, written, read through the first
            fd = os.open(s.path(name), os.O_RDWR)
            try:
                n = os.pwrite(fd, data, off)
            finally:
                os.close(fd)
            return n, os.pread(s.fds[name], length, off)
        return ('second descriptor pwrite %d+%d' % (off, length), second)
    if k < 0.91:
        def dup(s):  # a duplicate written and closed, the file written on after
            fd = os.dup(s.fds[name])
            n = os.pwrite(fd, data, off)
            os.close(fd)
            return n, os.pwrite(s.fds[name], data[:7], off + length)
        return ('dup pwrite %d+%d, close, pwrite' % (off, length), dup)
    if k < 0.93:
        def away_and_back(s):
            os.rename(s.path(name), s.path(name + '.away'))
            os.pwrite(s.fds[name], data, off)  # written while it has another name
            os.rename(s.path(name + '.away'), s.path(name))
            return s.size(name)
        return ('rename away, pwrite %d+%d, back' % (off, length), away_and_back)
    def stat(s):
        a, b = os.fstat(s.fds[name]), os.stat(s.path(name))
        return (a.st_ino == b.st_ino, oct(b.st_mode), s.size(name))
    return ('stat', stat)


def main():
    ap = argparse.ArgumentParser(usage=__doc__)
    ap.add_argument('native')
    ap.add_argument('mount')
    ap.add_argument('--ops', type=int, default=2000)
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--files', type=int, default=3)
    a = ap.parse_args()
    ops, seed, nfiles = a.ops, a.seed, a.files
    rng = random.Random(seed)
    every = os.environ.get('FSX_EVERY') == '1'  # compare after every operation
    names = ['fsx%d.bin' % i for i in range(nfiles)]
    native, mount = Side(a.native, names), Side(a.mount, names)
    log = []
    for i in range(ops):
        name = rng.choice(names)
        text, f = draw_op(rng, name, native.size(name))
        log.append('%5d %s: %s' % (i, name, text))
        a, b = answer(lambda: f(native)), answer(lambda: f(mount))
        bad = None
        if a != b:
            bad = 'answered %r, native %r' % (str(b)[:200], str(a)[:200])
        elif every or i % 25 == 0 or text.startswith(('rename', 'fsync', 'second', 'dup')):
            x, y = native.held(name), mount.held(name)
            if x != y:
                at = next((j for j in range(min(len(x), len(y))) if x[j] != y[j]),
                          min(len(x), len(y)))
                bad = 'holds %d bytes, native %d, first difference at %d' % (
                    len(y), len(x), at)
        if bad:
            print('fsx.py: seed %d: after these operations the mount %s (sizes: %d, native %d):'
                  % (seed, bad, mount.size(name), native.size(name)))
            print('\n'.join(log[-25:]))
            sys.exit(1)
    native.close()
    mount.close()
    for n in names:
        if native.content(n) != mount.content(n):
            print('fsx.py: seed %d: %s differs once closed' % (seed, n))
            sys.exit(1)
    print('ok: %d operations on %d files, seed %d, the mount as the native directory'
          % (ops, nfiles, seed))


main()
