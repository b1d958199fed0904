"""posix.py - a writable tree/ against ext4, system call by system call.

usage: posix.py NATIVE_DIR MOUNT_TREE_DIR [--users]

About 250 checks in pjdfstest's ground, each run in a directory of its own
on a native directory and on the mount's tree/, their results (a value, or
the errno) compared: names and their lengths, open(2)'s flags and the
modes it makes, reads and writes through several descriptors, truncate,
mmap, fallocate, locks, chmod, chown and set-group-ID directories,
utimensat (UTIME_NOW, UTIME_OMIT, nanoseconds, before 1970), mkdir, rmdir,
unlink and rename in every corner, symbolic links, hard links and special
files (FIFOs and sockets too), xattrs, access(2), and which of a file's or directory's times each
call moves (the clock is waited on until it passes them, no sleep).

The mount must answer as ext4 does but where zrfs(8) says it does not
(EXPECTED, each with its reason): then it must answer exactly that. A
difference not listed, or a listed one that is gone, fails the run.
Run as root (owners are given away). Exit 0, or 1 with the differences.
"""
import ctypes
import errno
import fcntl
import mmap
import os
import stat
import subprocess
import sys
import time

LIBC = ctypes.CDLL(None, use_errno=True)

# what the mount answers where it is not ext4, and why (zrfs(8))
EXPECTED = {
    'o_tmpfile': ('ENOTSUP', 'O_TMPFILE: no unnamed files'),
    'write_beyond_4g': ('EFBIG', 'a value holds at most 4 GiB'),
    'truncate_big': ('EFBIG', 'a value holds at most 4 GiB'),
    'fallocate_collapse': ('ENOTSUP', 'fallocate: no collapse or insert of ranges'),
    'fallocate_insert': ('ENOTSUP', 'fallocate: no collapse or insert of ranges'),
    'utime_past_2262': ("ok (9223372035000000000, 9223372035000000000)",
                        'times from 1677 to 2262: others clamped (ext4: 1901 to 2446)'),
    'utime_before_1677': ("ok (-9223372036000000000, -9223372036000000000)",
                          'times from 1677 to 2262: others clamped (ext4: 1901 to 2446)'),
    'utime_dir_past_2262': ("ok 9223372035000000000",
                            'times from 1677 to 2262: others clamped (ext4: 1901 to 2446)'),
    'rename_exchange': ('EINVAL', 'RENAME_EXCHANGE: refused'),
    'unlink_open_write_again': ('ESTALE', 'a removed file opens again for reading only'),
    'unlink_stored_write_again': ('ESTALE', 'a removed file opens again for reading only'),
    'device_open': ('EACCES', 'a device opens nowhere: a FUSE mount is nodev'),
    'setxattr': ('ENOTSUP', 'no extended attributes'),
    'listxattr': ('ENOTSUP', 'no extended attributes'),
    'getxattr_missing': ('ENOTSUP', 'no extended attributes'),
}


def en(e):
    return errno.errorcode.get(e, str(e))


def coarse():
    return time.clock_gettime_ns(5)  # CLOCK_REALTIME_COARSE: what file times take


def tick(*paths):
    """Wait until the clock is past every time of @paths."""
    m = 0
    for p in paths:
        s = os.lstat(p)
        m = max(m, s.st_mtime_ns, s.st_ctime_ns, s.st_atime_ns)
    while coarse() <= m:
        pass


def times(p):
    s = os.lstat(p)
    return (s.st_atime_ns, s.st_mtime_ns, s.st_ctime_ns)


def moved(p, before):
    """Which of @p's access, modification and change times moved since @before."""
    now = times(p)
    return ''.join(k for k, x, y in zip('amc', before, now) if x != y) or '-'


def moved_by(p, change):
    """Which of @p's times calling @change moves (the clock past them first)."""
    before = times(p)
    tick(p)
    change()
    return moved(p, before)


class UtimeSpec(ctypes.Structure):
    _fields_ = [('sec', ctypes.c_long), ('nsec', ctypes.c_long)]


UTIME_NOW = (1 << 30) - 1
UTIME_OMIT = (1 << 30) - 2
AT_FDCWD = -100
AT_SYMLINK_NOFOLLOW = 0x100


def _raise():
    e = ctypes.get_errno()
    raise OSError(e, os.strerror(e))


def utimensat(p, a, m, flags=0):
    ts = (UtimeSpec * 2)(a, m)
    if LIBC.utimensat(AT_FDCWD, p.encode(), ts, flags) < 0:
        _raise()


def renameat2(a, b, flags):
    if LIBC.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), flags) < 0:
        _raise()


def fallocate(fd, mode, off, ln):
    LIBC.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
    if LIBC.fallocate(fd, mode, off, ln) < 0:
        _raise()


def mk(p, data=b'data'):
    with open(p, 'wb') as f:
        f.write(data)


def wr(p, data=b'w', flags=0):
    fd = os.open(p, os.O_WRONLY | flags)
    os.write(fd, data)
    os.close(fd)


def rd(p):
    with open(p, 'rb') as f:
        return f.read()


CHECKS = []


def check(f):
    CHECKS.append(f)
    return f


# ---- names
@check
def name_255():
    mk('n' * 255)
    return len(os.listdir('.'))


@check
def name_256_create():
    mk('n' * 256)


@check
def name_256_mkdir():
    os.mkdir('n' * 256)


@check
def name_256_stat():
    os.stat('n' * 256)


@check
def name_256_symlink():
    os.symlink('x', 'n' * 256)


@check
def name_256_rename():
    mk('a')
    os.rename('a', 'n' * 256)


@check
def statvfs_namemax():
    return os.statvfs('.').f_namemax


@check
def path_long():
    p = '/'.join(['d' * 200] * 22)
    os.makedirs(p)


@check
def symlink_target_4095():
    os.symlink('t' * 4095, 'l')
    return len(os.readlink('l'))


@check
def symlink_target_4096():
    os.symlink('t' * 4096, 'l')


@check
def name_with_newline_and_utf8():
    mk('a\nb')
    mk('é')
    mk(' sp ')
    return sorted(os.listdir('.'))


@check
def enotdir_component():
    mk('f')
    os.stat('f/x')


@check
def creat_enotdir_component():
    mk('f')
    mk('f/x')


@check
def eloop():
    os.symlink('l2', 'l1')
    os.symlink('l1', 'l2')
    os.stat('l1')


@check
def trailing_slash_file():
    mk('f')
    os.stat('f/')


@check
def trailing_slash_create():
    os.open('nf/', os.O_CREAT | os.O_WRONLY, 420)


# ---- open
@check
def open_creat_mode_umask():
    old = os.umask(23)
    try:
        os.close(os.open('f', os.O_CREAT | os.O_WRONLY, 511))
    finally:
        os.umask(old)
    return oct(os.stat('f').st_mode)


@check
def open_creat_mode_0():
    os.close(os.open('f', os.O_CREAT | os.O_WRONLY, 0))
    return oct(os.stat('f').st_mode)


@check
def open_creat_excl_exists():
    mk('f')
    os.open('f', os.O_CREAT | os.O_EXCL | os.O_WRONLY)


@check
def open_creat_excl_symlink():
    os.symlink('nowhere', 'l')
    os.open('l', os.O_CREAT | os.O_EXCL | os.O_WRONLY)


@check
def open_creat_through_dangling():
    os.symlink('target', 'l')
    os.close(os.open('l', os.O_CREAT | os.O_WRONLY, 420))
    return sorted(os.listdir('.'))


@check
def open_nofollow():
    mk('f')
    os.symlink('f', 'l')
    os.open('l', os.O_RDONLY | os.O_NOFOLLOW)


@check
def open_dir_write():
    os.mkdir('d')
    os.open('d', os.O_WRONLY)


@check
def open_dir_rdonly():
    os.mkdir('d')
    os.close(os.open('d', os.O_RDONLY))
    return 'ok'


@check
def open_file_directory():
    mk('f')
    os.open('f', os.O_RDONLY | os.O_DIRECTORY)


@check
def open_trunc_times():
    mk('f')
    return moved_by('f', lambda: os.close(os.open('f', os.O_WRONLY | os.O_TRUNC)))


@check
def open_trunc_empty_times():
    mk('f', b'')
    return moved_by('f', lambda: os.close(os.open('f', os.O_WRONLY | os.O_TRUNC)))


@check
def open_creat_parent_times():
    os.mkdir('d')
    return moved_by('d', lambda: mk('d/f'))


@check
def open_creat_existing_parent_times():
    os.mkdir('d')
    mk('d/f')
    b = times('d')
    tick('d', 'd/f')
    os.close(os.open('d/f', os.O_CREAT | os.O_WRONLY))
    return moved('d', b)


@check
def open_rdonly_trunc():
    mk('f')
    os.close(os.open('f', os.O_RDONLY | os.O_TRUNC))
    return os.stat('f').st_size


@check
def open_path():
    mk('f')
    fd = os.open('f', os.O_PATH)
    s = os.fstat(fd).st_size
    os.close(fd)
    return s


@check
def o_tmpfile():
    os.open('.', os.O_TMPFILE | os.O_WRONLY, 384)


# ---- read / write
@check
def write_times():
    mk('f')

    def change():
        fd = os.open('f', os.O_WRONLY)
        os.write(fd, b'x')
        os.close(fd)

    return moved_by('f', change)


@check
def read_times():
    mk('f')
    b = times('f')
    tick('f')
    rd('f')
    m = moved('f', b)
    return m.replace('a', '') or '-'


@check
def pwrite_hole_read():
    fd = os.open('f', os.O_CREAT | os.O_RDWR, 420)
    os.pwrite(fd, b'x', 100000)
    os.close(fd)
    d = rd('f')
    return (len(d), d.count(0))


@check
def write_then_read_same_fd():
    fd = os.open('f', os.O_CREAT | os.O_RDWR, 420)
    os.write(fd, b'hello')
    os.lseek(fd, 1, 0)
    r = os.read(fd, 10)
    os.close(fd)
    return r


@check
def two_fds_see_each_other():
    mk('f', b'aaaa')
    a = os.open('f', os.O_RDWR)
    b = os.open('f', os.O_RDONLY)
    os.pwrite(a, b'bb', 1)
    r = os.pread(b, 10, 0)
    os.close(a)
    os.close(b)
    return r


@check
def two_fds_see_each_other_stored():
    # the same, of a file stored (a mount's record) before it is written
    mk('f', b'aaaa')
    sync_here()
    a = os.open('f', os.O_RDWR)
    b = os.open('f', os.O_RDONLY)
    os.pwrite(a, b'bb', 1)
    r = os.pread(b, 10, 0), os.fstat(b).st_size
    os.ftruncate(a, 6)
    r += os.pread(b, 10, 0), os.fstat(b).st_size
    os.close(a)
    os.close(b)
    return r


@check
def stored_written_then_opened_by_name():
    # stat(2) and a new open by the name agree with what the writer wrote
    mk('f', b'x' * 9000)
    sync_here()
    fd = os.open('f', os.O_RDWR)
    os.pwrite(fd, b'new', 8000)
    os.ftruncate(fd, 8003)
    r = os.stat('f').st_size, rd('f')[7998:]
    os.close(fd)
    return r + (rd('f')[7998:],)


@check
def writer_and_reader_other_open():
    fd = os.open('f', os.O_CREAT | os.O_WRONLY, 420)
    os.write(fd, b'abc')
    r = rd('f')
    os.close(fd)
    return r


@check
def write_beyond_4g():
    fd = os.open('f', os.O_CREAT | os.O_WRONLY, 420)
    try:
        os.pwrite(fd, b'x', (1 << 32) + 10)
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


@check
def truncate_big():
    mk('f')
    os.truncate('f', 1 << 33)
    return os.stat('f').st_size


@check
def truncate_huge():
    mk('f')
    os.truncate('f', 1 << 50)


@check
def truncate_times():
    mk('f')
    return moved_by('f', lambda: os.truncate('f', 2))


@check
def truncate_same_size_times():
    mk('f')
    return moved_by('f', lambda: os.truncate('f', 4))


@check
def ftruncate_times():
    mk('f')

    def change():
        fd = os.open('f', os.O_WRONLY)
        os.ftruncate(fd, 1)
        os.close(fd)

    return moved_by('f', change)


@check
def truncate_dir():
    os.mkdir('d')
    os.truncate('d', 0)


@check
def truncate_grow_zeroes():
    mk('f', b'abc')
    os.truncate('f', 6)
    return rd('f')


@check
def ftruncate_rdonly():
    mk('f')
    fd = os.open('f', os.O_RDONLY)
    try:
        os.ftruncate(fd, 0)
    finally:
        os.close(fd)


@check
def mmap_shared_read():
    mk('f', b'abcdefgh' * 512)
    fd = os.open('f', os.O_RDONLY)
    m = mmap.mmap(fd, 0, mmap.MAP_SHARED, mmap.PROT_READ)
    r = m[:4]
    m.close()
    os.close(fd)
    return r


@check
def mmap_private_read():
    mk('f', b'abcdefgh' * 512)
    fd = os.open('f', os.O_RDONLY)
    m = mmap.mmap(fd, 0, mmap.MAP_PRIVATE, mmap.PROT_READ)
    r = m[:4]
    m.close()
    os.close(fd)
    return r


@check
def mmap_shared_write():
    mk('f', b'abcdefgh' * 512)
    fd = os.open('f', os.O_RDWR)
    m = mmap.mmap(fd, 0, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    m[0:2] = b'XY'
    m.flush()
    m.close()
    os.close(fd)
    return rd('f')[:4]


@check
def mmap_new_file_write():
    fd = os.open('f', os.O_CREAT | os.O_RDWR, 420)
    os.ftruncate(fd, 4096)
    m = mmap.mmap(fd, 4096)
    m[0:3] = b'new'
    m.close()
    os.close(fd)
    return rd('f')[:4]


@check
def fallocate_plain():
    fd = os.open('f', os.O_CREAT | os.O_RDWR, 420)
    try:
        fallocate(fd, 0, 0, 8192)
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def runs(b):
    """@b as runs of one byte: 'a4096 \\x00100 ...'."""
    out, i = [], 0
    while i < len(b):
        j = i
        while j < len(b) and b[j] == b[i]:
            j += 1
        out.append('%r%d' % (bytes([b[i]]), j - i))
        i = j
    return ' '.join(out)


def fallocated(mode, off, ln, size=8192):
    """fallocate(2) on a file of @size bytes, open anew: its size, its
    bytes as runs, and which times moved."""
    mk('f', b'a' * size)
    b = times('f')
    tick('f')
    fd = os.open('f', os.O_RDWR)
    try:
        fallocate(fd, mode, off, ln)
    finally:
        os.close(fd)
    m = moved('f', b)
    with open('f', 'rb') as f:
        data = f.read()
    return len(data), runs(data), m


KEEP_SIZE, PUNCH_HOLE, COLLAPSE, ZERO_RANGE, INSERT = 1, 2, 8, 16, 32


# fallocate(2) on a file of 8 KiB (or of the size given): each mode, within
# the value and past its end
FALLOCATED = [
    ('within', 0, 0, 100),
    ('keep_size', KEEP_SIZE, 0, 20000),
    ('punch', PUNCH_HOLE | KEEP_SIZE, 0, 4096),
    ('punch_past_end', PUNCH_HOLE | KEEP_SIZE, 8000, 10000),
    # a value past the daemon's memory for one (1 MiB): in its private file
    ('punch_big', PUNCH_HOLE | KEEP_SIZE, 4096, 1 << 20, 3 << 20),
    ('punch_without_keep_size', PUNCH_HOLE, 0, 4096),
    ('zero_range', ZERO_RANGE, 100, 100),
    ('zero_range_grows', ZERO_RANGE, 8000, 4000),
    ('zero_range_keep_size', ZERO_RANGE | KEEP_SIZE, 8000, 4000),
    ('collapse', COLLAPSE, 0, 4096),
    ('insert', INSERT, 0, 4096),
]
for _name, *_args in FALLOCATED:
    def _fallocated(args=tuple(_args)):
        return fallocated(*args)
    _fallocated.__name__ = 'fallocate_' + _name
    check(_fallocated)


@check
def fallocate_keep_size_new():
    fd = os.open('f', os.O_CREAT | os.O_RDWR, 420)
    try:
        fallocate(fd, KEEP_SIZE, 0, 8192)
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


@check
def fallocate_written():
    # a file being written: zeros over what this descriptor wrote
    fd = os.open('f', os.O_CREAT | os.O_RDWR, 420)
    try:
        os.write(fd, b'b' * 5000)
        fallocate(fd, PUNCH_HOLE | KEEP_SIZE, 1000, 1000)
        os.write(fd, b'c' * 10)
        return runs(os.pread(fd, 10000, 0))
    finally:
        os.close(fd)


@check
def posix_fallocate():
    fd = os.open('f', os.O_CREAT | os.O_RDWR, 420)
    try:
        os.posix_fallocate(fd, 0, 10000)
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


@check
def flock_and_lockf():
    mk('f')
    fd = os.open('f', os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    fcntl.lockf(fd, fcntl.LOCK_EX)
    fcntl.lockf(fd, fcntl.LOCK_UN)
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)
    return 'ok'


@check
def ofd_lock_conflict():
    mk('f')
    a = os.open('f', os.O_RDWR)
    b = os.open('f', os.O_RDWR)
    fcntl.flock(a, fcntl.LOCK_EX)
    try:
        fcntl.flock(b, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return 'got it'
    except OSError as e:
        return en(e.errno)
    finally:
        os.close(a)
        os.close(b)


@check
def fsync_fdatasync():
    mk('f')
    fd = os.open('f', os.O_RDWR)
    os.write(fd, b'z')
    os.fsync(fd)
    os.fdatasync(fd)
    os.close(fd)
    return rd('f')


@check
def sync_file_range_dir_fsync():
    os.mkdir('d')
    fd = os.open('d', os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    return 'ok'


@check
def lseek_data_hole():
    fd = os.open('f', os.O_CREAT | os.O_RDWR, 420)
    os.pwrite(fd, b'x', 1 << 20)
    r = (os.lseek(fd, 0, os.SEEK_DATA), os.lseek(fd, 0, os.SEEK_HOLE))
    os.close(fd)
    return r


@check
def copy_file_range():
    mk('f', b'0123456789')
    a = os.open('f', os.O_RDONLY)
    b = os.open('g', os.O_CREAT | os.O_WRONLY, 420)
    n = os.copy_file_range(a, b, 10)
    os.close(a)
    os.close(b)
    return (n, rd('g'))


@check
def sendfile_out():
    mk('f', b'0123456789')
    a = os.open('f', os.O_RDONLY)
    b = os.open('g', os.O_CREAT | os.O_WRONLY, 420)
    n = os.sendfile(b, a, 0, 10)
    os.close(a)
    os.close(b)
    return (n, rd('g'))


# ---- chmod / chown
@check
def chmod_file_modes():
    mk('f')
    r = []
    for m in (511, 2541, 1517, 1005, 4095, 0):
        os.chmod('f', m)
        r.append(oct(os.stat('f').st_mode))
    return r


@check
def chmod_dir_modes():
    os.mkdir('d')
    r = []
    for m in (511, 1023, 1517, 448):
        os.chmod('d', m)
        r.append(oct(os.stat('d').st_mode))
    return r


@check
def chmod_ctime():
    mk('f')
    return moved_by('f', lambda: os.chmod('f', 384))


@check
def chmod_chown_open_file_after_store():
    # a new file written, closed and opened again, stored meanwhile (a
    # mount commits it), then its mode and owner changed: stat(2) shows
    # them at once
    fd = os.open('f', os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    os.write(fd, b'x')
    os.close(fd)
    fd = os.open('f', os.O_RDWR)
    sync_here()
    os.chmod('f', 0o1755)
    os.chown('f', 1234, 5678)
    s = os.stat('f')
    os.close(fd)
    t = os.stat('f')
    return [(oct(x.st_mode), x.st_uid, x.st_gid) for x in (s, t)]


@check
def chmod_same_ctime():
    mk('f')
    os.chmod('f', 420)
    return moved_by('f', lambda: os.chmod('f', 420))


@check
def chmod_dir_ctime():
    os.mkdir('d')
    return moved_by('d', lambda: os.chmod('d', 448))


@check
def chmod_dir_same_ctime():
    os.mkdir('d')
    os.chmod('d', 493)
    return moved_by('d', lambda: os.chmod('d', 493))


@check
def chown_dir_minus1():
    os.mkdir('d')
    return moved_by('d', lambda: os.chown('d', -1, -1))


@check
def chmod_symlink_follows():
    mk('f')
    os.symlink('f', 'l')
    os.chmod('l', 384)
    return (oct(os.stat('f').st_mode), oct(os.lstat('l').st_mode))


@check
def chown_same():
    mk('f')
    s = os.stat('f')
    return moved_by('f', lambda: os.chown('f', s.st_uid, s.st_gid))


@check
def chown_minus1():
    mk('f')
    return moved_by('f', lambda: os.chown('f', -1, -1))


@check
def chown_other():
    mk('f')
    os.chown('f', 65534, 65534)
    s = os.stat('f')
    return (s.st_uid, s.st_gid)


@check
def chown_dir_other():
    os.mkdir('d')
    os.chown('d', 65534, 65534)
    s = os.stat('d')
    return (s.st_uid, s.st_gid)


@check
def lchown_symlink():
    os.symlink('x', 'l')
    os.lchown('l', 65534, 65534)
    return os.lstat('l').st_uid


@check
def chown_new_file():
    fd = os.open('f', os.O_CREAT | os.O_WRONLY, 420)
    os.fchown(fd, 65534, 65534)
    os.close(fd)
    return os.stat('f').st_uid


@check
def chown_ctime():
    mk('f')
    return moved_by('f', lambda: os.chown('f', 7, 8))


@check
def chown_kills_suid():
    mk('f')
    os.chmod('f', 3565)
    os.chown('f', 7, 8)
    return oct(os.stat('f').st_mode)


@check
def chown_at_rest_after_sync():
    mk('f')
    fd = os.open('.', os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    os.chown('f', 9, 10)
    s = os.stat('f')
    return (s.st_uid, s.st_gid)


@check
def chown_dir_ctime():
    os.mkdir('d')
    return moved_by('d', lambda: os.chown('d', 7, 8))


@check
def chown_symlink_ctime():
    os.symlink('x', 'l')
    return moved_by('l', lambda: os.lchown('l', 7, 8))


@check
def setgid_dir_inherits():
    os.mkdir('d')
    os.chown('d', 0, 77)
    os.chmod('d', 1533)
    mk('d/f')
    os.mkdir('d/s')
    os.symlink('x', 'd/l')
    return [(os.lstat(p).st_gid, oct(os.lstat(p).st_mode)) for p in ('d/f', 'd/s', 'd/l')]


@check
def new_file_owner():
    mk('f')
    os.mkdir('d')
    os.symlink('x', 'l')
    return [(os.lstat(p).st_uid, os.lstat(p).st_gid) for p in 'fdl']


@check
def chmod_clears_setgid_on_write():
    mk('f')
    os.chmod('f', 3565)
    fd = os.open('f', os.O_WRONLY)
    os.write(fd, b'z')
    os.close(fd)
    return oct(os.stat('f').st_mode)


@check
def root_write_and_truncate_keep_setuid():
    mk('f')
    os.chmod('f', 0o6755)
    fd = os.open('f', os.O_WRONLY)
    os.write(fd, b'z')
    os.ftruncate(fd, 1)
    os.close(fd)
    os.truncate('f', 0)
    return oct(os.stat('f').st_mode)


# ---- utimes
@check
def utime_ns_file():
    mk('f')
    os.utime('f', ns=(1000000123, 2000000456))
    s = os.stat('f')
    return (s.st_atime_ns, s.st_mtime_ns)


@check
def utime_ctime():
    mk('f')
    return moved_by('f', lambda: os.utime('f', ns=(5, 6)))


@check
def utime_now():
    mk('f')
    os.utime('f', ns=(5, 6))
    t = coarse()
    utimensat('f', (0, UTIME_NOW), (0, UTIME_NOW))
    s = os.stat('f')
    return (s.st_atime_ns >= t - 10 ** 7, s.st_mtime_ns >= t - 10 ** 7)


@check
def utime_omit():
    mk('f')
    os.utime('f', ns=(5, 6))
    utimensat('f', (0, UTIME_OMIT), (7, 8))
    s = os.stat('f')
    r1 = (s.st_atime_ns, s.st_mtime_ns)
    utimensat('f', (9, 10), (0, UTIME_OMIT))
    s = os.stat('f')
    return (r1, (s.st_atime_ns, s.st_mtime_ns))


@check
def utime_negative():
    mk('f')
    os.utime('f', ns=(-1500000000, -2000000000))
    s = os.stat('f')
    return (s.st_atime_ns, s.st_mtime_ns)


@check
def utime_far_future():
    mk('f')
    os.utime('f', (2 ** 33, 2 ** 33))
    return os.stat('f').st_mtime


@check
def utime_past_2262():
    mk('f')
    os.utime('f', (2 ** 34, 2 ** 34 + 1))
    s = os.stat('f')
    return (s.st_atime_ns, s.st_mtime_ns)


@check
def utime_before_1677():
    mk('f')
    os.utime('f', (-2 ** 34, -2 ** 34))
    s = os.stat('f')
    return (s.st_atime_ns, s.st_mtime_ns)


@check
def utime_dir_past_2262():
    os.mkdir('d')
    os.utime('d', (2 ** 34, 2 ** 34))
    return os.stat('d').st_mtime_ns


@check
def utime_symlink_nofollow():
    mk('f')
    os.symlink('f', 'l')
    utimensat('l', (11, 12), (13, 14), AT_SYMLINK_NOFOLLOW)
    s = os.lstat('l')
    return (s.st_atime_ns, s.st_mtime_ns, os.stat('f').st_mtime_ns == 14)


@check
def utime_dir():
    os.mkdir('d')
    os.utime('d', ns=(3000000001, 4000000002))
    s = os.stat('d')
    return s.st_mtime_ns


@check
def utime_bad_nsec():
    mk('f')
    utimensat('f', (0, 1000000000), (0, 0))


# ---- mkdir / rmdir
@check
def mkdir_mode_umask():
    old = os.umask(18)
    try:
        os.mkdir('d', 511)
        os.mkdir('e', 1023)
        os.mkdir('g', 1535)
    finally:
        os.umask(old)
    return [oct(os.stat(x).st_mode) for x in 'deg']


@check
def mkdir_parent_times_nlink():
    os.mkdir('d')
    b = times('d')
    n = os.stat('d').st_nlink
    tick('d')
    os.mkdir('d/s')
    return (moved('d', b), os.stat('d').st_nlink - n, os.stat('d/s').st_nlink)


@check
def rmdir_parent_times_nlink():
    os.makedirs('d/s')
    b = times('d')
    n = os.stat('d').st_nlink
    tick('d')
    os.rmdir('d/s')
    return (moved('d', b), os.stat('d').st_nlink - n)


@check
def rmdir_nonempty():
    os.makedirs('d/s')
    os.rmdir('d')


@check
def rmdir_file():
    mk('f')
    os.rmdir('f')


@check
def rmdir_dot():
    os.mkdir('d')
    os.rmdir('d/.')


@check
def rmdir_dotdot():
    os.makedirs('d/s')
    os.rmdir('d/s/..')


@check
def rmdir_symlink_to_dir():
    os.mkdir('d')
    os.symlink('d', 'l')
    os.rmdir('l')


@check
def mkdir_exists_symlink():
    os.symlink('nowhere', 'l')
    os.mkdir('l')


@check
def rmdir_cwd_then_create():
    os.mkdir('d')
    here = os.getcwd()
    os.chdir('d')
    os.rmdir(os.path.join(here, 'd'))
    try:
        mk('x')
    finally:
        os.chdir(here)


@check
def dir_size_and_nlink():
    os.mkdir('d')
    s = os.stat('d')
    return (s.st_nlink, s.st_size > 0)


@check
def readdir_dots():
    os.mkdir('d')
    mk('d/f')
    r = sorted(((e.name, e.is_dir(follow_symlinks=False)) for e in os.scandir('d')))
    return r


@check
def dotdot_ino():
    os.makedirs('d/s')
    return os.stat('d/s/..').st_ino == os.stat('d').st_ino


@check
def readdir_while_removing():
    os.mkdir('d')
    for i in range(300):
        mk('d/%03d' % i)
    seen = set()
    with os.scandir('d') as it:
        for i, e in enumerate(it):
            seen.add(e.name)
            if i == 10:
                for j in range(0, 300, 2):
                    try:
                        os.unlink('d/%03d' % j)
                    except FileNotFoundError:
                        pass
    odd = set(('%03d' % i for i in range(1, 300, 2)))
    return (odd <= seen, len(seen) <= 300)


# ---- unlink
@check
def unlink_dir():
    os.mkdir('d')
    os.unlink('d')


@check
def unlink_parent_times():
    os.mkdir('d')
    mk('d/f')
    return moved_by('d', lambda: os.unlink('d/f'))


@check
def unlink_symlink_keeps_target():
    mk('f')
    os.symlink('f', 'l')
    os.unlink('l')
    return os.path.exists('f')


@check
def unlink_open_fstat():
    mk('f', b'abc')
    fd = os.open('f', os.O_RDONLY)
    os.unlink('f')
    s = os.fstat(fd)
    r = (s.st_nlink, s.st_size, os.read(fd, 5))
    os.close(fd)
    return r


@check
def unlink_open_write_read():
    mk('f', b'abc')
    fd = os.open('f', os.O_RDWR)
    os.unlink('f')
    os.pwrite(fd, b'Z', 5)
    r = os.pread(fd, 10, 0)
    os.close(fd)
    return r


@check
def unlink_stored_open_read_after_moves():
    # a stored file open, not written, removed: its descriptor reads its
    # bytes after the removal is stored (a mount moves its last record
    # into the removed one's place) and after other files are replaced
    mk('a', b'aaaa')
    mk('c', b'cccc')
    mk('b', b'')
    sync_here()
    fd = os.open('c', os.O_RDWR)
    os.unlink('c')
    sync_here()
    mk('d', b'dd')
    os.rename('d', 'b')
    sync_here()
    r = os.pread(fd, 10, 0), os.fstat(fd).st_size
    os.close(fd)
    return r + (sorted(os.listdir('.')),)


@check
def replaced_stored_open_read():
    # the same, the file replaced by a rename onto its name
    mk('c', b'cccc')
    sync_here()
    fd = os.open('c', os.O_RDWR)
    mk('n', b'new')
    os.rename('n', 'c')
    sync_here()
    r = os.pread(fd, 10, 0), rd('c')
    os.close(fd)
    return r


@check
def made_where_stored_file_removed():
    # a stored file removed, its name taken at once by a directory, a hard
    # link, a symbolic link and a FIFO (tar x over files)
    for n in 'dlsp':
        mk(n)
        mk('x')
    sync_here()
    for n in 'dlsp':
        os.unlink(n)
    os.mkdir('d')
    os.link('x', 'l')
    os.symlink('x', 's')
    os.mkfifo('p')
    return [(n, stat.S_IFMT(os.lstat(n).st_mode)) for n in 'dlsp'], os.stat('x').st_nlink


@check
def moved_where_stored_file_removed():
    # the same, the name taken by a rename of a directory and of a link
    mk('f')
    mk('g')
    sync_here()
    os.unlink('f')
    os.unlink('g')
    os.mkdir('d')
    os.rename('d', 'f')
    os.symlink('x', 's')
    os.rename('s', 'g')
    return stat.S_IFMT(os.lstat('f').st_mode), os.readlink('g')


def sync_here():
    """fsync(2) of the directory the check runs in: what was made, renamed
    or removed in it is stored (a mount commits it)."""
    d = os.open('.', os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(d)
    os.close(d)


def reopened(fd, write=False):
    """Open @fd's file again through /proc/self/fd (no lookup of its name:
    the kernel opens the inode it has, as when a lookup and an open race a
    rename or an unlink), once the change is stored: what it reads, and its
    link count; with @write, for writing, written through it and read
    through @fd."""
    sync_here()
    again = os.open('/proc/self/fd/%d' % fd, os.O_RDWR if write else os.O_RDONLY)
    if write:
        os.pwrite(again, b'XY', 1)
        os.close(again)
        again = os.dup(fd)
    r = (os.pread(again, 10, 0), os.fstat(again).st_nlink)
    os.close(again)
    os.close(fd)
    return r


def open_removed(stored):
    """A file made (@stored: and stored), opened and removed: the descriptor."""
    mk('f', b'abc')
    if stored:
        sync_here()
    fd = os.open('f', os.O_RDONLY)
    os.unlink('f')
    return fd


@check
def unlink_open_reopen():
    return reopened(open_removed(False))


@check
def unlink_open_write_again():
    return reopened(open_removed(False), write=True)


@check
def unlink_stored_write_again():
    return reopened(open_removed(True), write=True)


@check
def unlink_saved_reopen():
    mk('f', b'abc')
    mk('g', b'saved')
    os.rename('g', 'f')   # a save, as editors make them
    sync_here()
    fd = os.open('f', os.O_RDONLY)
    os.unlink('f')
    return reopened(fd)


# ---- rename
@check
def rename_file_times():
    os.mkdir('d')
    mk('d/f')
    b = times('d/f')
    bd = times('d')
    tick('d', 'd/f')
    os.rename('d/f', 'd/g')
    return (moved('d/g', b), moved('d', bd))


@check
def rename_across_dirs_times():
    os.mkdir('a')
    os.mkdir('b')
    mk('a/f')
    ba = times('a')
    bb = times('b')
    tick('a', 'b', 'a/f')
    os.rename('a/f', 'b/f')
    return (moved('a', ba), moved('b', bb))


@check
def rename_dir_across_nlink():
    os.makedirs('a/s')
    os.mkdir('b')
    na = os.stat('a').st_nlink
    nb = os.stat('b').st_nlink
    os.rename('a/s', 'b/s')
    up = os.stat('b/s/..').st_ino == os.stat('b').st_ino
    return (os.stat('a').st_nlink - na, os.stat('b').st_nlink - nb, up)


@check
def rename_over_file_ino():
    mk('f', b'1')
    mk('g', b'2')
    i = os.stat('f').st_ino
    os.rename('f', 'g')
    return (os.stat('g').st_ino == i, rd('g'))


@check
def rename_over_open_file():
    mk('f', b'new')
    mk('g', b'old')
    fd = os.open('g', os.O_RDONLY)
    os.rename('f', 'g')
    r = (os.read(fd, 5), os.fstat(fd).st_nlink, rd('g'))
    os.close(fd)
    return r


@check
def rename_over_open_reopen():
    mk('f', b'new')
    mk('g', b'old')
    fd = os.open('g', os.O_RDONLY)
    os.fsync(fd)
    os.rename('f', 'g')
    return reopened(fd) + (rd('g'),)


@check
def rename_over_stored_reopen():
    mk('g', b'old')
    sync_here()   # stored: a record's file now, on the mount
    fd = os.open('g', os.O_RDONLY)
    mk('f', b'new')
    os.rename('f', 'g')
    return reopened(fd) + (rd('g'),)


@check
def rename_over_stored_fstat():
    mk('g', b'old')
    sync_here()   # a record's file: the save onto its name is not stored yet
    fd = os.open('g', os.O_RDONLY)
    mk('f', b'new')
    os.rename('f', 'g')
    r = (os.fstat(fd).st_nlink, os.read(fd, 5), rd('g'))
    os.close(fd)
    return r


@check
def rename_file_onto_dir():
    mk('f')
    os.mkdir('d')
    os.rename('f', 'd')


@check
def rename_dir_onto_file():
    mk('f')
    os.mkdir('d')
    os.rename('d', 'f')


@check
def rename_dir_onto_nonempty():
    os.mkdir('d')
    os.makedirs('e/s')
    os.rename('d', 'e')


@check
def rename_dir_onto_dir_with_new_file():
    # its only file just written (a mount's: not stored yet), and one open
    os.mkdir('d')
    os.mkdir('e')
    os.mkdir('g')
    mk('e/f')
    fd = os.open('g/f', os.O_CREAT | os.O_WRONLY, 0o644)
    r = []
    for t in ('e', 'g'):
        try:
            os.rename('d', t)
            r.append('ok')
        except OSError as e:
            r.append(en(e.errno))
    os.close(fd)
    return r, sorted(os.listdir('.')), rd('e/f')


@check
def rename_dir_into_itself():
    os.makedirs('d/s')
    os.rename('d', 'd/s/t')


@check
def rename_dir_to_child_name():
    os.mkdir('d')
    os.rename('d', 'd/x')


@check
def rename_to_itself_file():
    mk('f')
    return moved_by('f', lambda: os.rename('f', 'f'))


@check
def rename_dot():
    os.mkdir('d')
    os.rename('d/.', 'e')


@check
def rename_symlink():
    os.symlink('target', 'l')
    os.rename('l', 'm')
    return os.readlink('m')


@check
def rename_symlink_over_symlink():
    os.symlink('one', 'l')
    os.symlink('two', 'm')
    ino = os.lstat('l').st_ino
    os.rename('l', 'm')
    return os.readlink('m'), os.lstat('m').st_ino == ino, os.listdir('.')


@check
def rename_symlink_over_file():
    """A link renamed onto a stored file: the file goes (what is open on it
    still reads), the link keeps its number; so after the next commit."""
    mk('f')
    sync_here()
    fd = os.open('f', os.O_RDONLY)
    os.symlink('one', 'l')
    ino = os.lstat('l').st_ino
    os.rename('l', 'f')
    r = (os.readlink('f'), os.lstat('f').st_ino == ino, os.listdir('.'), os.pread(fd, 9, 0))
    os.close(fd)
    sync_here()
    return r, os.readlink('f'), sorted(os.listdir('.'))


@check
def rename_symlink_over_new_file():
    mk('f')
    os.symlink('one', 'l')
    os.rename('l', 'f')
    sync_here()
    return os.readlink('f'), os.listdir('.')


@check
def rename_noreplace():
    mk('f')
    mk('g')
    renameat2('f', 'g', 1)


@check
def rename_noreplace_ok():
    mk('f')
    renameat2('f', 'g', 1)
    return sorted(os.listdir('.'))


@check
def rename_exchange():
    mk('f', b'1')
    mk('g', b'2')
    renameat2('f', 'g', 2)
    return (rd('f'), rd('g'))


@check
def rename_missing():
    os.rename('nope', 'x')


@check
def rename_dir_parent_ctime():
    os.makedirs('a/s')
    b = times('a/s')
    tick('a/s')
    os.rename('a/s', 't')
    return moved('t', b)


@check
def rename_dir_same_parent_ctime():
    os.mkdir('s')
    b = times('s')
    tick('s')
    os.rename('s', 't')
    return moved('t', b)


@check
def rename_symlink_ctime():
    os.symlink('x', 'l')
    b = times('l')
    tick('l')
    os.rename('l', 'm')
    return moved('m', b)


@check
def rename_trailing_slash_file():
    mk('f')
    os.rename('f', 'g/')


@check
def rename_dir_trailing_slash():
    os.mkdir('d')
    os.rename('d/', 'e/')
    return os.path.isdir('e')


@check
def rename_hidden_lockfile():
    mk('config', b'old')
    mk('config.lock', b'new')
    os.rename('config.lock', 'config')
    return (sorted(os.listdir('.')), rd('config'))


# ---- symlink / readlink
@check
def symlink_lstat():
    os.symlink('some/target', 'l')
    s = os.lstat('l')
    return (oct(s.st_mode), s.st_size, s.st_nlink)


@check
def symlink_exists():
    mk('f')
    os.symlink('x', 'f')


@check
def symlink_parent_times():
    os.mkdir('d')
    return moved_by('d', lambda: os.symlink('x', 'd/l'))


@check
def readlink_file():
    mk('f')
    os.readlink('f')


@check
def symlink_empty_target():
    os.symlink('', 'l')


@check
def symlink_follow_dir():
    os.mkdir('d')
    mk('d/f', b'in')
    os.symlink('d', 'l')
    return rd('l/f')


@check
def symlink_chain_40():
    mk('f', b'x')
    prev = 'f'
    for i in range(40):
        os.symlink(prev, 'l%d' % i)
        prev = 'l%d' % i
    return rd(prev)


# ---- link / mknod
def same_file(*paths):
    """Whether @paths are one inode, and its links."""
    s = [os.lstat(p) for p in paths]
    return len({x.st_ino for x in s}) == 1, [x.st_nlink for x in s]


@check
def hard_link():
    mk('f')
    os.link('f', 'g')
    return os.stat('f').st_nlink, same_file('f', 'g'), rd('g')


@check
def link_times():
    mk('f')
    os.mkdir('d')
    before, dir_before = times('f'), times('d')
    tick('f', 'd')
    os.link('f', 'd/g')
    return moved('f', before), moved('d', dir_before)


@check
def link_write_through_other():
    mk('f', b'one')
    os.link('f', 'g')
    wr('g', b'TWO', os.O_APPEND)
    os.chmod('g', 0o640)
    return rd('f'), oct(os.stat('f').st_mode), os.stat('f').st_size


@check
def link_unlink_first():
    mk('f', b'kept')
    os.link('f', 'g')
    before = times('g')
    tick('g')
    os.unlink('f')
    return moved('g', before), same_file('g'), rd('g'), sorted(os.listdir('.'))


@check
def link_unlink_second():
    mk('f', b'kept')
    os.link('f', 'g')
    os.unlink('g')
    return same_file('f'), rd('f'), sorted(os.listdir('.'))


@check
def link_three_unlink_middle():
    mk('f', b'x')
    os.link('f', 'g')
    os.link('g', 'h')
    os.unlink('g')
    return same_file('f', 'h'), sorted(os.listdir('.'))


@check
def link_rename_first():
    mk('f', b'x')
    os.link('f', 'g')
    os.rename('f', 'h')
    return same_file('g', 'h'), sorted(os.listdir('.'))


@check
def link_rename_onto_other_name():
    mk('f', b'x')
    os.link('f', 'g')
    os.rename('g', 'f')  # one inode: rename(2) does nothing
    return same_file('f', 'g'), sorted(os.listdir('.'))


def link_replaced(name):
    """f and g one file, @name of them replaced by a rename onto it."""
    mk('f', b'old')
    os.link('f', 'g')
    mk('n', b'new')
    os.rename('n', name)
    other = 'g' if name == 'f' else 'f'
    return rd('f'), rd('g'), same_file(other), os.stat(name).st_nlink


@check
def link_first_replaced_by_rename():
    return link_replaced('f')


@check
def link_second_replaced_by_rename():
    return link_replaced('g')


@check
def link_dir_moved():
    mk('f', b'x')
    os.mkdir('d')
    os.link('f', 'd/g')
    os.rename('d', 'e')
    os.mkdir('t')
    os.link('e/g', 't/h')
    os.rename('f', 't/f2')
    return same_file('t/f2', 'e/g', 't/h'), rd('t/h')


@check
def link_failed_dir_rename_moves_nothing():
    os.mkdir('a')
    mk('a/f', b'in a')
    os.mkdir('m')
    mk('m/x', b'in m')
    os.link('a/f', 'h')
    os.link('m/x', 'h2')
    try:
        os.rename('m', 'a')  # ENOTEMPTY: nothing moves
    except OSError as e:
        err = errno.errorcode[e.errno]
    return err, rd('h'), rd('h2'), same_file('a/f', 'h'), same_file('m/x', 'h2')


@check
def link_open_then_unlink_all():
    mk('f', b'open')
    os.link('f', 'g')
    fd = os.open('f', os.O_RDONLY)
    try:
        os.unlink('f')
        mid = os.fstat(fd).st_nlink
        os.unlink('g')
        return mid, os.fstat(fd).st_nlink, os.read(fd, 10)
    finally:
        os.close(fd)


@check
def link_new_file_open():
    fd = os.open('f', os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.write(fd, b'being written')
        os.link('f', 'g')
        os.write(fd, b', still')
    finally:
        os.close(fd)
    return rd('g'), same_file('f', 'g')


@check
def link_while_records_move():
    # removing a record moves the last one into its place: the hard link
    # names a path, and keeps naming the file that moved
    for n in 'abc':
        mk(n, n.encode())
    mk('f', b'mine')
    os.link('f', 'g')
    os.unlink('a')
    os.unlink('b')
    fd = os.open('.', os.O_RDONLY)
    os.fsync(fd)  # committed: the moves made
    os.close(fd)
    return rd('g'), same_file('f', 'g'), rd('c')


@check
def link_exists():
    mk('f')
    mk('g')
    os.link('f', 'g')


@check
def link_onto_symlink():
    mk('f')
    os.symlink('f', 's')
    os.link('f', 's')


@check
def link_missing():
    os.link('nothing', 'g')


@check
def link_dir():
    os.mkdir('d')
    os.link('d', 'g')


@check
def link_symlink_itself():
    os.symlink('target', 's')
    os.link('s', 't', follow_symlinks=False)
    return same_file('s', 't'), os.readlink('t')


@check
def link_fifo_and_device():
    os.mkfifo('p')
    os.mknod('c', 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    os.link('p', 'p2')
    os.link('c', 'c2')
    os.unlink('p')
    return same_file('p2'), same_file('c', 'c2'), lattrs('c2')


@check
def link_name_256():
    mk('f')
    os.link('f', 'n' * 256)


@check
def mknod_reg():
    os.mknod('r', 420 | stat.S_IFREG)
    return oct(os.stat('r').st_mode)


@check
def mknod_reg_default():
    old = os.umask(0o022)
    try:
        os.mknod('r')  # type 0: a regular file, 0600
    finally:
        os.umask(old)
    s = os.lstat('r')
    return oct(s.st_mode), s.st_size, s.st_nlink, rd('r')


@check
def mknod_reg_then_write():
    os.mknod('r', 0o644 | stat.S_IFREG)
    ino = os.lstat('r').st_ino
    wr('r', b'after mknod')
    return rd('r'), os.lstat('r').st_ino == ino


@check
def mknod_reg_exists():
    mk('f')
    os.mknod('f', 0o644 | stat.S_IFREG)


@check
def mknod_reg_parent_times():
    os.mkdir('d')
    return moved_by('d', lambda: os.mknod('d/r', 0o644 | stat.S_IFREG))


# ---- FIFOs, sockets and devices (a name and attributes; the kernel is
# the pipe, the socket's end, the device's driver)
def lattrs(p):
    s = os.lstat(p)
    return (oct(s.st_mode), s.st_size, s.st_nlink, s.st_blocks,
            os.major(s.st_rdev), os.minor(s.st_rdev))


def mknod_device(kind, major, minor):
    os.mknod('n', 0o640 | kind, os.makedev(major, minor))
    return lattrs('n')


@check
def mknod_chr():
    return mknod_device(stat.S_IFCHR, 1, 3)


@check
def mknod_blk():
    return mknod_device(stat.S_IFBLK, 7, 300)


@check
def mknod_device_largest():
    # Linux's largest device number: 12 bits of major, 20 of minor
    return mknod_device(stat.S_IFCHR, 4095, 1048575)


@check
def mknod_device_umask():
    old = os.umask(0o027)
    try:
        os.mknod('c', 0o666 | stat.S_IFCHR, os.makedev(1, 5))
    finally:
        os.umask(old)
    return lattrs('c')


@check
def mknod_device_exists():
    os.mkfifo('p')
    os.mknod('p', 0o600 | stat.S_IFCHR, os.makedev(1, 3))


@check
def mknod_device_parent_times():
    os.mkdir('d')
    return moved_by('d', lambda: os.mknod('d/c', 0o600 | stat.S_IFBLK, os.makedev(8, 1)))


@check
def device_open():
    os.mknod('c', 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's
    fd = os.open('c', os.O_RDWR)
    try:
        return os.write(fd, b'gone'), os.read(fd, 10)
    finally:
        os.close(fd)


@check
def device_chmod_chown_utime():
    os.mknod('c', 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    m = moved_by('c', lambda: os.chmod('c', 0o2644))
    o = moved_by('c', lambda: os.chown('c', 65534, 65533))
    os.utime('c', ns=(5 * 10**17 + 7, 6 * 10**17 + 9))
    return m, o, owner_mode('c'), times('c')[:2], lattrs('c')


@check
def device_truncate():
    os.mknod('b', 0o600 | stat.S_IFBLK, os.makedev(7, 0))
    os.truncate('b', 0)


@check
def device_rename_unlink():
    os.mkdir('d')
    os.mknod('c', 0o640 | stat.S_IFCHR, os.makedev(10, 200))
    ino, before = os.lstat('c').st_ino, times('c')
    tick('c')
    os.rename('c', 'd/c2')
    kept = moved('d/c2', before), os.lstat('d/c2').st_ino == ino, lattrs('d/c2')
    return kept, moved_by('d', lambda: os.unlink('d/c2')), os.listdir('d')


@check
def device_rename_over_file():
    mk('f')
    os.mknod('c', 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    os.rename('c', 'f')
    return lattrs('f'), sorted(os.listdir('.'))


@check
def mkfifo():
    os.mkfifo('p')
    return lattrs('p')


@check
def mkfifo_mode_umask():
    old = os.umask(0o027)
    try:
        os.mkfifo('p', 0o666)
    finally:
        os.umask(old)
    return lattrs('p')


@check
def mknod_fifo():
    os.mknod('p', 0o640 | stat.S_IFIFO)
    return lattrs('p')


@check
def mkfifo_exists():
    mk('f')
    os.mkfifo('f')


@check
def mkfifo_parent_times():
    os.mkdir('d')
    return moved_by('d', lambda: os.mkfifo('d/p'))


@check
def fifo_carries_data():
    os.mkfifo('p')
    r = os.open('p', os.O_RDONLY | os.O_NONBLOCK)
    w = os.open('p', os.O_WRONLY)
    os.write(w, b'through the pipe')
    os.close(w)
    data = os.read(r, 100)
    os.close(r)
    return data, os.lstat('p').st_size


@check
def fifo_write_no_reader():
    os.mkfifo('p')
    os.open('p', os.O_WRONLY | os.O_NONBLOCK)


@check
def fifo_chmod():
    os.mkfifo('p', 0o600)
    return moved_by('p', lambda: os.chmod('p', 0o4751)), oct(os.lstat('p').st_mode)


@check
def fifo_chown():
    os.mkfifo('p')
    return moved_by('p', lambda: os.chown('p', 65534, 65533)), owner_mode('p')


@check
def fifo_utime():
    os.mkfifo('p')
    os.utime('p', ns=(5 * 10**17 + 7, 6 * 10**17 + 9))
    return times('p')[:2]


@check
def fifo_truncate():
    os.mkfifo('p')
    os.truncate('p', 0)


@check
def fifo_readlink():
    os.mkfifo('p')
    os.readlink('p')


@check
def fifo_rmdir():
    os.mkfifo('p')
    os.rmdir('p')


@check
def fifo_unlink():
    os.mkdir('d')
    os.mkfifo('d/p')
    m = moved_by('d', lambda: os.unlink('d/p'))
    return m, os.listdir('d')


@check
def fifo_open_removed_fstat():
    # a FIFO open, its name removed or renamed over: fstat(2) answers, no link
    os.mkfifo('p', 0o640)
    os.mkfifo('q', 0o600)
    mk('f')
    a = os.open('p', os.O_RDWR | os.O_NONBLOCK)
    b = os.open('q', os.O_RDWR | os.O_NONBLOCK)
    os.unlink('p')
    os.rename('f', 'q')
    try:
        return [(oct(s.st_mode), s.st_nlink) for s in (os.fstat(a), os.fstat(b))]
    finally:
        os.close(a)
        os.close(b)


@check
def fifo_rename():
    os.mkfifo('p', 0o640)
    ino, before = os.lstat('p').st_ino, times('p')
    tick('p')
    os.rename('p', 'q')
    return moved('q', before), os.lstat('q').st_ino == ino, lattrs('q'), os.path.lexists('p')


@check
def fifo_rename_over_fifo():
    os.mkfifo('p')
    os.mkfifo('q', 0o600)
    os.rename('p', 'q')
    return lattrs('q'), os.listdir('.')


@check
def file_rename_over_fifo():
    mk('f')
    os.mkfifo('p')
    os.rename('f', 'p')
    return rd('p'), sorted(os.listdir('.'))


@check
def fifo_rename_over_file():
    mk('f')
    os.mkfifo('p')
    os.rename('p', 'f')
    return lattrs('f')


@check
def fifo_rename_noreplace():
    os.mkfifo('p')
    os.mkfifo('q')
    renameat2('p', 'q', 1)


@check
def fifo_listed():
    os.mkfifo('p')
    with os.scandir('.') as it:
        # (the types the listing gives, d_type: no stat)
        return [(e.name, e.is_file(follow_symlinks=False), e.is_dir(follow_symlinks=False),
                 e.is_symlink()) for e in it]


@check
def fifo_in_setgid_dir():
    os.mkdir('d')
    os.chown('d', 0, 65533)
    os.chmod('d', 0o2775)
    os.mkfifo('d/p')
    return owner_mode('d/p')


@check
def socket_bind():
    import socket
    s = socket.socket(socket.AF_UNIX)
    s.bind('sock')
    s.close()
    return lattrs('sock')


@check
def socket_connect():
    import socket
    s = socket.socket(socket.AF_UNIX)
    s.bind('sock')
    s.listen(1)
    c = socket.socket(socket.AF_UNIX)
    c.connect('sock')
    a, _ = s.accept()
    c.sendall(b'over the socket')
    got = a.recv(100)
    for x in (a, c, s):
        x.close()
    return got


@check
def socket_bind_exists():
    import socket
    mk('f')
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind('f')
    finally:
        s.close()


@check
def socket_unlink_rebind():
    import socket
    for _ in range(2):
        s = socket.socket(socket.AF_UNIX)
        s.bind('sock')
        s.close()
        os.unlink('sock')
    return os.listdir('.')


# ---- xattr
@check
def setxattr():
    mk('f')
    os.setxattr('f', 'user.k', b'v')


@check
def listxattr():
    mk('f')
    return os.listxattr('f')


@check
def getxattr_missing():
    mk('f')
    os.getxattr('f', 'user.k')


# ---- misc
@check
def access_x():
    mk('f')
    os.chmod('f', 420)
    return (os.access('f', os.X_OK), os.access('f', os.W_OK))


@check
def exec_noexec_file():
    import subprocess
    mk('f', b'#!/bin/sh\necho hi\n')
    os.chmod('f', 420)
    try:
        subprocess.run(['./f'], capture_output=True)
    except PermissionError as e:
        return en(e.errno)


@check
def exec_file():
    import subprocess
    mk('f', b'#!/bin/sh\necho hi\n')
    os.chmod('f', 493)
    return subprocess.run(['./f'], capture_output=True).stdout


@check
def root_writes_0444():
    mk('f')
    os.chmod('f', 292)
    fd = os.open('f', os.O_WRONLY)
    os.write(fd, b'w')
    os.close(fd)
    return rd('f')


@check
def root_enters_0000_dir():
    os.mkdir('d')
    mk('d/f', b'x')
    os.chmod('d', 0)
    r = rd('d/f')
    os.chmod('d', 493)
    return r


@check
def st_blksize_blocks():
    mk('f', b'x' * 10000)
    s = os.stat('f')
    return s.st_blocks * 512 >= 10000


@check
def new_file_ino_stable_after_commit():
    mk('f')
    i = os.stat('f').st_ino
    fd = os.open('.', os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    return os.stat('f').st_ino == i


@check
def dev_same_in_tree():
    os.mkdir('d')
    return os.stat('d').st_dev == os.stat('.').st_dev



# ---- another user (the mount with allow_other: the kernel checks the mode
# bits against the owners the mount keeps, as pjdfstest's -u/-g cases ask)
USER_CHECKS = []


def user_check(f):
    USER_CHECKS.append(f)
    return f


def as_user(fn, uid=65534, gid=65534, groups=()):
    """fn() run by @uid:@gid (and @groups) in a child: its value, or its OSError."""
    import pickle
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            os.setgroups(list(groups))
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
            try:
                out = ('ok', fn())
            except OSError as e:
                out = ('err', e.errno)
            except Exception as e:
                out = ('exc', '%s %s' % (type(e).__name__, str(e)[:60]))
            os.write(w, pickle.dumps(out))
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, 'rb') as f:
        data = f.read()
    os.waitpid(pid, 0)
    kind, v = pickle.loads(data)
    if kind == 'err':
        raise OSError(v, os.strerror(v))
    if kind == 'exc':
        raise RuntimeError(v)
    return v


def open_dir(mode=0o777):
    os.mkdir('d')
    os.chmod('d', mode)


def owner_mode(p):
    s = os.lstat(p)
    return (s.st_uid, s.st_gid, oct(s.st_mode))


@user_check
def u_create_in_root_dir():
    os.mkdir('d')
    as_user(lambda: mk('d/f'))


@user_check
def u_create_owner_and_mode():
    open_dir()

    def make():
        os.umask(0o22)
        mk('d/f')
        os.mkdir('d/s')
        os.symlink('x', 'd/l')
    as_user(make)
    return [owner_mode('d/' + n)[:2] for n in 'fsl'] + [oct(os.stat('d/f').st_mode)]


@user_check
def u_create_in_setgid_dir():
    open_dir(0o2777)
    os.chown('d', 0, 100)
    as_user(lambda: (mk('d/f'), os.mkdir('d/s')))
    return [owner_mode('d/f'), owner_mode('d/s')]


@user_check
def u_open_own_0444_for_writing():
    open_dir()
    as_user(lambda: mk('d/f'))
    os.chmod('d/f', 0o444)
    as_user(lambda: os.close(os.open('d/f', os.O_WRONLY)))


@user_check
def u_open_root_0644():
    mk('f')
    return as_user(lambda: (rd('f'), os.open('f', os.O_RDWR)))


@user_check
def u_read_root_0600():
    mk('f')
    os.chmod('f', 0o600)
    return as_user(lambda: rd('f'))


@user_check
def u_trunc_root_0644():
    mk('f')
    as_user(lambda: os.truncate('f', 0))


@user_check
def u_chmod_root_file():
    mk('f')
    as_user(lambda: os.chmod('f', 0o777))


@user_check
def u_chmod_own_file():
    open_dir()
    as_user(lambda: (mk('d/f'), os.chmod('d/f', 0o600)))
    return owner_mode('d/f')


@user_check
def u_chmod_setgid_not_member():
    open_dir()
    as_user(lambda: mk('d/f'))
    os.chown('d/f', 65534, 0)
    as_user(lambda: os.chmod('d/f', 0o2755))
    return owner_mode('d/f')


@user_check
def u_chown_own_to_root():
    open_dir()
    as_user(lambda: (mk('d/f'), os.chown('d/f', 0, -1)))


@user_check
def u_chgrp_own_to_other_group():
    open_dir()
    as_user(lambda: (mk('d/f'), os.chown('d/f', -1, 0)))


@user_check
def u_chgrp_own_to_member_group():
    open_dir()
    as_user(lambda: (mk('d/f'), os.chown('d/f', -1, 100)), groups=(65534, 100))
    return owner_mode('d/f')


@user_check
def u_chgrp_kills_setuid():
    open_dir()
    as_user(lambda: (mk('d/f'), os.chmod('d/f', 0o6755)))
    as_user(lambda: os.chown('d/f', -1, 100), groups=(65534, 100))
    return owner_mode('d/f')


@user_check
def u_write_kills_setuid():
    mk('f')
    os.chmod('f', 0o6777)
    as_user(lambda: wr('f'))
    return owner_mode('f')


@user_check
def u_write_kills_setgid_not_member():
    mk('f')
    os.chmod('f', 0o2666)
    as_user(lambda: wr('f', flags=os.O_APPEND))
    return owner_mode('f'), rd('f')


@user_check
def u_create_setuid_then_write():
    open_dir()

    def make():
        os.umask(0o22)
        fd = os.open('d/f', os.O_CREAT | os.O_WRONLY, 0o4755)
        os.write(fd, b'x')
        os.close(fd)
    as_user(make)
    return owner_mode('d/f')


@user_check
def u_write_keeps_setgid_member_no_gx():
    open_dir()
    as_user(lambda: (mk('d/f'), os.chmod('d/f', 0o2644)))
    as_user(lambda: mk('d/f', b'again'))
    return owner_mode('d/f')


@user_check
def u_truncate_kills_setuid():
    open_dir()
    as_user(lambda: (mk('d/f'), os.chmod('d/f', 0o4755), os.truncate('d/f', 1)))
    return owner_mode('d/f'), os.stat('d/f').st_size


@user_check
def u_ftruncate_kills_setuid():
    open_dir()

    def cut():
        mk('d/f')
        os.chmod('d/f', 0o4755)
        fd = os.open('d/f', os.O_RDWR)
        os.ftruncate(fd, 2)
        os.close(fd)
    as_user(cut)
    return owner_mode('d/f')


@user_check
def u_fallocate_kills_setuid():
    mk('f', b'a' * 100)
    os.chmod('f', 0o6777)

    def punch():
        fd = os.open('f', os.O_RDWR)
        try:
            fallocate(fd, 3, 0, 10)  # PUNCH_HOLE | KEEP_SIZE
        finally:
            os.close(fd)
    as_user(punch)
    return owner_mode('f'), rd('f')[:12]


@user_check
def u_open_trunc_kills_setuid():
    open_dir()
    as_user(lambda: (mk('d/f'), os.chmod('d/f', 0o4755),
                     os.close(os.open('d/f', os.O_WRONLY | os.O_TRUNC))))
    return owner_mode('d/f')


@user_check
def u_unlink_in_sticky_dir():
    open_dir(0o1777)
    mk('d/root')
    as_user(lambda: mk('d/mine'))
    got = []
    for n in ('root', 'mine'):
        try:
            as_user(lambda: os.unlink('d/' + n))
            got.append('ok')
        except OSError as e:
            got.append(en(e.errno))
    return got


@user_check
def u_rename_in_sticky_dir():
    open_dir(0o1777)
    mk('d/root')
    as_user(lambda: os.rename('d/root', 'd/x'))


@user_check
def u_rename_dir_to_other_parent():
    open_dir()
    os.mkdir('e')
    os.chmod('e', 0o777)
    os.mkdir('d/sub')
    os.chmod('d/sub', 0o555)
    as_user(lambda: os.rename('d/sub', 'e/sub'))


@user_check
def u_rmdir_in_root_dir():
    os.mkdir('d')
    os.mkdir('d/s')
    as_user(lambda: os.rmdir('d/s'))


@user_check
def u_mkdir_in_own_0555_dir():
    open_dir()
    as_user(lambda: (os.mkdir('d/s'), os.chmod('d/s', 0o555), os.mkdir('d/s/t')))


@user_check
def u_enter_0700_dir():
    os.mkdir('d')
    mk('d/f')
    os.chmod('d', 0o700)
    as_user(lambda: os.stat('d/f'))


@user_check
def u_list_0711_dir():
    os.mkdir('d')
    mk('d/f')
    os.chmod('d', 0o711)
    return as_user(lambda: (os.stat('d/f').st_size, os.listdir('d')))


@user_check
def u_utime_now_writable_not_owner():
    mk('f')
    os.chmod('f', 0o666)
    as_user(lambda: os.utime('f'))


@user_check
def u_utime_set_writable_not_owner():
    mk('f')
    os.chmod('f', 0o666)
    as_user(lambda: os.utime('f', ns=(5, 6)))


@user_check
def u_utime_now_not_writable():
    mk('f')
    as_user(lambda: os.utime('f'))


@user_check
def u_utime_omit_not_owner():
    mk('f')
    as_user(lambda: utimensat('f', (0, UTIME_OMIT), (0, UTIME_OMIT)))


@user_check
def u_utime_own_0444():
    open_dir()
    as_user(lambda: (mk('d/f'), os.chmod('d/f', 0o444), os.utime('d/f', ns=(7, 8))))
    return os.stat('d/f').st_mtime_ns


@user_check
def u_access():
    mk('f')
    os.chmod('f', 0o754)
    os.chown('f', 0, 100)
    return [as_user(lambda: [os.access('f', m) for m in (os.R_OK, os.W_OK, os.X_OK)]),
            as_user(lambda: [os.access('f', m) for m in (os.R_OK, os.W_OK, os.X_OK)],
                    groups=(100,))]


@user_check
def u_exec_without_x():
    mk('f', b'#!/bin/sh\necho hi\n')
    os.chmod('f', 0o744)
    as_user(lambda: os.execv('./f', ['./f']))


@user_check
def u_symlink_in_open_dir():
    open_dir()
    as_user(lambda: os.symlink('x', 'd/l'))
    return owner_mode('d/l')


@user_check
def u_mkfifo_in_root_dir():
    os.mkdir('d')
    as_user(lambda: os.mkfifo('d/p'))


@user_check
def u_mkfifo_in_open_dir():
    open_dir()
    as_user(lambda: os.mkfifo('d/p', 0o640))
    return owner_mode('d/p')


@user_check
def u_chmod_root_fifo():
    os.mkfifo('p')
    as_user(lambda: os.chmod('p', 0o666))


@user_check
def u_open_root_fifo_0600():
    os.mkfifo('p', 0o600)
    as_user(lambda: os.open('p', os.O_RDONLY | os.O_NONBLOCK))


@user_check
def u_unlink_fifo_in_sticky_dir():
    open_dir(0o1777)
    os.mkfifo('d/p')
    as_user(lambda: os.unlink('d/p'))


@user_check
def u_mknod_device_in_open_dir():
    open_dir()
    as_user(lambda: os.mknod('d/c', 0o600 | stat.S_IFCHR, os.makedev(1, 3)))


@user_check
def u_chown_root_device():
    os.mknod('c', 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    as_user(lambda: os.chown('c', os.getuid(), -1))


@user_check
def u_unlink_device_in_sticky_dir():
    open_dir(0o1777)
    os.mknod('d/c', 0o600 | stat.S_IFBLK, os.makedev(7, 1))
    as_user(lambda: os.unlink('d/c'))

def run(root, checks, sub):
    """Every check in a directory of its own under @root/@sub: name -> result."""
    base = os.path.join(root, sub)
    os.mkdir(base)
    os.chmod(base, 0o755)
    got = {}
    for i, f in enumerate(checks):
        d = os.path.join(base, 'c%03d' % i)
        os.mkdir(d)
        os.chdir(d)
        try:
            r = f()
            got[f.__name__] = 'ok' if r is None else 'ok ' + repr(r)
        except OSError as e:
            got[f.__name__] = en(e.errno)
        except Exception as e:  # a check's own fault: shown, and it differs
            got[f.__name__] = 'EXC %s %s' % (type(e).__name__, str(e)[:60])
        finally:
            os.chdir(root)
    return got


def main():
    checks, sub = (USER_CHECKS, 'users') if sys.argv[3:] == ['--users'] else (CHECKS, 'posix')
    native, mount = run(sys.argv[1], checks, sub), run(sys.argv[2], checks, sub)
    wrong = []
    for name, want in native.items():
        have = mount[name]
        if name in EXPECTED:
            if have != EXPECTED[name][0]:
                wrong.append('%s: %s on the mount, %s expected (%s); ext4: %s'
                             % (name, have, EXPECTED[name][0], EXPECTED[name][1], want))
            elif want == have:
                wrong.append('%s: now as ext4 (%s): drop it from EXPECTED and zrfs(8)'
                             % (name, want))
        elif have != want or want.startswith('EXC'):
            wrong.append('%s: %s on the mount, %s on ext4' % (name, have, want))
    if wrong:
        print('posix.py: %d of %d checks differ:\n  %s' % (len(wrong), len(native),
                                                            '\n  '.join(wrong)))
        return 1
    listed = len([n for n in native if n in EXPECTED])
    print('ok: %d checks, the mount as ext4 in %d, as zrfs(8) says in %d'
          % (len(native), len(native) - listed, listed))
    return 0


if __name__ == '__main__':
    sys.exit(main())
