"""names.py - random operations on names, done alike on a native directory
and on a mount's tree/, every answer and the whole tree compared (in the
way of fsstress; fsx.py does the same for the bytes of a few files).

usage: names.py NATIVE_DIR MOUNT_DIR [--ops N] [--seed S] [--shrink SECONDS]
       names.py NATIVE_DIR MOUNT_DIR --replay FILE
       names.py --compare NATIVE_DIR OTHER_DIR

Both directories start empty; the operations run in a directory "run" of
each. N operations drawn at random (seeded: a run is repeatable) go to
both, on a few names that collide often (a dotfile and a name with a
space among them) in directories two deep: create (O_EXCL
too), write with O_TRUNC or O_APPEND, truncate, unlink, mkdir, rmdir,
rename (RENAME_NOREPLACE too) of files, directories, links and FIFOs onto
each other and into themselves, link, symlink (dangling ones, chains),
mkfifo, chmod, descriptors held open across all of that (written, read and
fstat'ed after their names went), and an fsync of a directory or sync
(a mount commits). What each call answers (a value, or the errno) must be
the same; every few operations, so must the whole tree: each name's type,
permission bits, size, bytes, link target and link count, and which names
are one inode. On a difference it prints it, then the fewest of the
operations before it found to show it still (each try in new directories
beside "run", for SECONDS at most), as JSON lines, and exits 1; --replay
runs such a list again, each answer shown and the trees compared after
each. --compare compares two trees alone (after a remount, or what zr
export dir wrote): exit 0 when they are the same.
"""
import argparse
import ctypes
import errno
import hashlib
import json
import os
import random
import stat
import sys
import time

LIBC = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_NOREPLACE = -100, 1
NAMES = ['a', 'b', 'c', '.h', 'x y']
TARGETS = ['a', 'b', 'a/b', '.h', 'x y', 'gone', 'b/../a']
MODES = [0o644, 0o600, 0o755, 0o700, 0o444, 0o4755, 0o2750, 0o1777]
HELD = 4  # descriptors held open at most
CHECKED = ('rename', 'link', 'rmdir', 'sync', 'fsync')  # the tree compared after each


def renameat2(a, b, flags):
    if LIBC.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), flags) < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def answer(f):
    try:
        return ('ok', f())
    except OSError as e:
        return ('err', errno.errorcode.get(e.errno, e.errno))
    except IndexError:  # a held descriptor a shorter replay never opened
        return ('none',)


def content(p):
    fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
    try:
        out = []
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                return b''.join(out)
            out.append(b)
    finally:
        os.close(fd)


class Bytes(bytes):
    """A file's bytes, shown by their hash."""

    def __repr__(self):
        return hashlib.sha256(self).hexdigest()[:16]


def tree(top):
    """Every name below @top: {path: (what it is, ...)}, and the names
    that are one inode, as sets of paths."""
    out, inos = {}, {}
    stack = ['']
    while stack:
        d = stack.pop()
        for e in os.scandir(os.path.join(top, d) if d else top):
            p = os.path.join(d, e.name) if d else e.name
            s = e.stat(follow_symlinks=False)
            m = s.st_mode
            if stat.S_ISDIR(m):
                out[p] = ('dir', oct(stat.S_IMODE(m)), s.st_nlink)
                stack.append(p)
                continue
            if stat.S_ISREG(m):
                what = ('file', s.st_size, Bytes(content(e.path)))
            elif stat.S_ISLNK(m):
                what = ('symlink', os.readlink(e.path))
            elif stat.S_ISFIFO(m):
                what = ('fifo',)
            else:
                what = ('other', stat.S_IFMT(m))
            mode = oct(stat.S_IMODE(m)) if not stat.S_ISLNK(m) else ''
            out[p] = what + (mode, s.st_nlink)
            inos.setdefault(s.st_ino, set()).add(p)
    return out, sorted(sorted(v) for v in inos.values() if len(v) > 1)


def where(x, y):
    """Where two files' bytes differ, if both are files."""
    if not (x and y and x[0] == y[0] == 'file'):
        return ''
    at = [i for i in range(min(len(x[2]), len(y[2]))) if x[2][i] != y[2][i]]
    at = at or [min(len(x[2]), len(y[2]))] * 2
    return ' (read %d bytes, native %d; bytes %d to %d differ: %r, native %r)' % (
        len(y[2]), len(x[2]), at[0], at[-1], y[2][at[0]:at[0] + 8], x[2][at[0]:at[0] + 8])


def differences(a, b):
    """What differs between two trees, a line each (at most 10)."""
    (x, xl), (y, yl) = tree(a), tree(b)
    lines = []
    for p in sorted(set(x) | set(y)):
        if x.get(p) != y.get(p):
            lines.append('%s: %s, native %s%s' % (p, y.get(p, 'missing'), x.get(p, 'missing'),
                                                  where(x.get(p), y.get(p))))
    if xl != yl:
        lines.append('names of one inode: %s, native %s' % (yl, xl))
    return lines[:10]


class Side:
    def __init__(self, top):
        self.top = top
        self.held = []  # descriptors, in the order both sides opened them

    def p(self, rel):
        return os.path.join(self.top, rel)


def dirs(top):
    out = ['']
    for d, sub, _ in os.walk(top):
        rel = os.path.relpath(d, top)
        out += [os.path.join(rel, s) if rel != '.' else s for s in sub]
    return sorted(set(out))


def existing(top):
    out = []
    for d, sub, files in os.walk(top):
        rel = os.path.relpath(d, top)
        out += [os.path.join(rel, n) if rel != '.' else n for n in sub + files]
    return sorted(out)


def draw_op(rng, top, nheld):
    """One operation on the names below @top (the native side, which both
    mirror), as a list: its name, then its arguments."""
    ds = [d for d in dirs(top) if d.count('/') < 2]
    have = existing(top)

    def path(old):
        if have and rng.random() < old:
            return rng.choice(have)
        d = rng.choice(ds)
        return os.path.join(d, rng.choice(NAMES)) if d else rng.choice(NAMES)
    data = [rng.choice([0, 1, 100, 4096, 5000, rng.randrange(1, 70000)]), rng.randrange(1 << 30)]
    k = rng.random()
    if k < 0.12:
        return ['create', path(0.2), rng.choice(MODES), rng.random() < 0.3] + data
    if k < 0.18:
        return ['write', path(0.9), rng.random() < 0.5] + data
    if k < 0.22:
        return ['truncate', path(0.9), rng.randrange(0, 9000)]
    if k < 0.32:
        return ['unlink', path(0.9)]
    if k < 0.40:
        return ['mkdir', path(0.2), rng.choice(MODES)]
    if k < 0.45:
        return ['rmdir', path(0.9)]
    if k < 0.60:
        return ['rename', path(0.95), path(0.5), RENAME_NOREPLACE if rng.random() < 0.2 else 0]
    if k < 0.70:
        return ['link', path(0.95), path(0.3)]
    if k < 0.75:
        return ['symlink', rng.choice(TARGETS), path(0.2)]
    if k < 0.78:
        return ['mkfifo', path(0.2)]
    if k < 0.83:
        return ['chmod', path(0.9), rng.choice(MODES)]
    if k < 0.87 and nheld < HELD:
        return ['hold', path(0.95)]
    if k < 0.95 and nheld:
        i, w = rng.randrange(nheld), rng.random()
        if w < 0.4:
            return ['pwrite', i, rng.randrange(0, 9000)] + data
        if w < 0.7:
            return ['look', i]
        if w < 0.8:
            return ['ftruncate', i, rng.randrange(0, 9000)]
        return ['close', i]
    if k < 0.98:
        return ['fsync', rng.choice(ds)]
    return ['sync']


def data(n, seed):
    return random.Random(seed).randbytes(n)


def do(s, op):
    """Do @op on side @s; what it answers."""
    what, a = op[0], op[1:]
    p = s.p(a[0]) if a and isinstance(a[0], str) else None
    if what in ('create', 'write'):
        flags = os.O_WRONLY | os.O_NONBLOCK
        if what == 'create':
            flags |= os.O_CREAT | (os.O_EXCL if a[2] else os.O_TRUNC)
        else:
            flags |= os.O_APPEND if a[1] else os.O_TRUNC
        fd = os.open(p, flags, a[1] if what == 'create' else 0)
        try:
            return os.write(fd, data(*a[-2:])), os.fstat(fd).st_size
        finally:
            os.close(fd)
    if what == 'truncate':
        return os.truncate(p, a[1])
    if what == 'unlink':
        return os.unlink(p)
    if what == 'mkdir':
        return os.mkdir(p, a[1])
    if what == 'rmdir':
        return os.rmdir(p)
    if what == 'rename':
        return renameat2(p, s.p(a[1]), a[2])
    if what == 'link':
        return os.link(p, s.p(a[1]), follow_symlinks=False)
    if what == 'symlink':
        return os.symlink(a[0], s.p(a[1]))
    if what == 'mkfifo':
        return os.mkfifo(p, 0o640)
    if what == 'chmod':
        return os.chmod(p, a[1])
    if what == 'hold':
        return s.held.append(os.open(p, os.O_RDWR | os.O_NONBLOCK))
    if what == 'pwrite':
        return os.pwrite(s.held[a[0]], data(*a[2:]), a[1])
    if what == 'look':
        st = os.fstat(s.held[a[0]])
        return (st.st_nlink, st.st_size, oct(st.st_mode),
                Bytes(os.pread(s.held[a[0]], st.st_size + 1, 0)))
    if what == 'ftruncate':
        return os.ftruncate(s.held[a[0]], a[1])
    if what == 'close':
        return os.close(s.held.pop(a[0]))
    if what == 'fsync':
        fd = os.open(s.p(a[0]), os.O_RDONLY | os.O_DIRECTORY)
        try:
            return os.fsync(fd)
        finally:
            os.close(fd)
    return os.sync()


def step(i, op, native, mount):
    """Do operation @i on both sides; None, or what differs."""
    x, y = answer(lambda: do(native, op)), answer(lambda: do(mount, op))
    if x != y:
        return ['answered %r, native %r' % (y, x)]
    if i % 8 == 0 or op[0] in CHECKED:
        return differences(native.top, mount.top) or None
    return None


def finish(native, mount):
    """Close what both sides hold; None, or what differs then."""
    for s in (native, mount):
        while s.held:
            os.close(s.held.pop())
    return ['once closed: ' + b for b in differences(native.top, mount.top)] or None


def run(ops, native, mount):
    """Do @ops on both sides: None, or what differs."""
    for i, op in enumerate(ops):
        bad = step(i, op, native, mount)
        if bad:
            return bad
    return finish(native, mount)


def shrink(ops, native, mount, seconds):
    """The fewest of @ops (most of them, in time) that still make a
    difference, each try in directories of its own."""
    end, n, k = time.monotonic() + seconds, 0, len(ops) // 2
    while k >= 1 and time.monotonic() < end:
        at = 0
        while at < len(ops) and time.monotonic() < end:
            tryout = ops[:at] + ops[at + k:]
            n += 1
            sides = [Side(os.path.join(s.top, '.shrink%d' % n)) for s in (native, mount)]
            for s in sides:
                os.mkdir(s.top)
            if run(tryout, *sides):
                ops = tryout
            else:
                at += k
        k //= 2
    return ops


def main():
    ap = argparse.ArgumentParser(usage=__doc__)
    ap.add_argument('native')
    ap.add_argument('mount')
    ap.add_argument('--ops', type=int, default=2000)
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--compare', action='store_true')
    ap.add_argument('--replay', metavar='FILE')
    ap.add_argument('--shrink', type=int, default=120, metavar='SECONDS')
    a = ap.parse_args()
    if a.compare:
        diff = differences(a.native, a.mount)
        if diff:
            print('names.py: %s differs from %s:\n  %s' % (a.mount, a.native, '\n  '.join(diff)))
            sys.exit(1)
        print('ok: %s as %s' % (a.mount, a.native))
        return
    for d in (a.native, a.mount):
        if os.listdir(d):
            sys.exit('names.py: %s is not empty' % d)
        os.mkdir(os.path.join(d, 'run'))
    native, mount = Side(os.path.join(a.native, 'run')), Side(os.path.join(a.mount, 'run'))
    if a.replay:
        with open(a.replay) as f:
            ops = [json.loads(line) for line in f if line.strip()]
        for op in ops:  # each answer shown, the tree compared after each
            x, y = answer(lambda: do(native, op)), answer(lambda: do(mount, op))
            print(json.dumps(op), '->', y, '' if x == y else 'native: %r' % (x,))
            bad = differences(native.top, mount.top) if x == y else ['answers differ']
            if bad:
                break
        else:
            bad = finish(native, mount)
        print('\n'.join(bad or ['ok: the mount as the native directory']))
        sys.exit(1 if bad else 0)
    rng = random.Random(a.seed)
    ops, bad = [], None
    for i in range(a.ops):
        ops.append(draw_op(rng, native.top, len(native.held)))
        bad = step(i, ops[-1], native, mount)
        if bad:
            break
    else:
        bad = finish(native, mount)
    if not bad:
        print('ok: %d operations on names, seed %d, the mount as the native directory'
              % (a.ops, a.seed))
        return
    print('names.py: seed %d: after %d operations the mount differs:\n  %s'
          % (a.seed, len(ops), '\n  '.join(bad)))
    short = shrink(ops, Side(a.native), Side(a.mount), a.shrink)
    print('the shortest list of them found that differs (%d; names.py --replay takes it):'
          % len(short))
    print('\n'.join(json.dumps(op) for op in short))
    sys.exit(1)


main()
