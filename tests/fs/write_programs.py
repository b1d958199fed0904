"""write_programs.py - the programs people edit files with, each run on a
native directory and on a writable mount of the same files, compared.

usage: write_programs.py ZR ZRFS SCRATCH [--tree] [NAME...]

The files are eight text records, 0.txt .. 7.txt, imported with their names
(zr import dir). For each program of the matrix (or those named), in a
fresh copy: the native directory and the dataset start with the same
files; the program runs in the native directory and in the field
directory of a writable mount (with --tree: in tree/, where records are
their names), and a reader on a second, read-only mount of the dataset
reads every file there over and over meanwhile. Then, after the mount is
gone:
- `zr export dir` writes every record back under its name: the same files,
  byte for byte and with the same permission bits, as the native directory
  (a new file keeps the name it was written under; a file renamed away
  leaves nothing behind), and the mount showed those bits too;
- no program made a record it did not mean to: the dataset has the
  records it started with plus one per name the native directory gained
  (in tree/: one record per file, as removing a file's last value removes
  its record);
- zr verify is clean, and the daemon logged nothing it never stored;
- every read of the reader was a value some program finished (zrfs(8),
  WRITING THROUGH THE MOUNT): one of the first values or one of the
  native directory's last, never a file half written.

Exit 0 on success; a message and 1 on the first failure.
"""
import errno
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import threading

ZR, ZRFS, T = sys.argv[1:4]
TREE = '--tree' in sys.argv[4:]
ONLY = set(sys.argv[4:]) - {'--tree'}
WHERE = 'tree' if TREE else 'txt'  # the directory programs run in
PY = '/usr/bin/python3'
VIM = shutil.which('vim.tiny') or shutil.which('vim')
SRC = os.path.join(T, 'src')      # what the programs copy in
FIRST = os.path.join(T, 'first')  # the files both sides start with
TEMPLATE = os.path.join(T, 'template')

# Python's atomic save, as tempfile's users and many libraries write it.
SAVE = ('import os, tempfile\n'
        'fd, tmp = tempfile.mkstemp(dir=".")\n'
        'os.write(fd, b"saved atomically\\n")\n'
        '%s'
        'os.close(fd)\n'
        'os.replace(tmp, "3.txt")\n')

# A writer that forks: the child exits, another program inherits the
# descriptor and exits; neither close publishes what the parent is writing.
FORK = ('import os, subprocess\n'
        'fd = os.open("7.txt", os.O_WRONLY | os.O_TRUNC)\n'
        'os.write(fd, b"one\\n")\n'
        'pid = os.fork()\n'
        'if pid == 0:\n'
        '    os._exit(0)\n'
        'os.waitpid(pid, 0)\n'
        'subprocess.run(["sh", "-c", "exit 0"], pass_fds=[fd], check=True)\n'
        'os.write(fd, b"two\\n")\n'
        'os.close(fd)\n')

# Two processes append to one file (a shared log): A writes, C writes after
# it, A closes (its line is kept: the close returned 0), then C is killed.
APPENDERS = ('import os, signal\n'
             'a = os.open("6.txt", os.O_WRONLY | os.O_APPEND)\n'
             'os.write(a, b"from A\\n")\n'
             'r, w = os.pipe()\n'
             'pid = os.fork()\n'
             'if pid == 0:\n'
             '    c = os.open("6.txt", os.O_WRONLY | os.O_APPEND)\n'
             '    os.write(c, b"from C\\n")\n'
             '    os.write(w, b"x")\n'
             '    signal.pause()\n'
             'os.read(r, 1)\n'
             'os.close(a)\n'
             'os.kill(pid, signal.SIGKILL)\n'
             'os.waitpid(pid, 0)\n')

# logrotate's rename of a log its program keeps writing: the program's
# later lines are in the renamed file, read by name after its close.
ROTATE = ('import os\n'
          'fd = os.open("5.txt", os.O_WRONLY | os.O_APPEND)\n'
          'os.write(fd, b"before\\n")\n'
          'os.rename("5.txt", "5.txt.1")\n'
          'os.write(fd, b"after\\n")\n'
          'os.close(fd)\n'
          'got = open("5.txt.1", "rb").read()\n'
          'assert got.endswith(b"before\\nafter\\n"), got\n')

# git in the directory: init, add, commit, stash twice (one popped), a
# checkout, a commit; the stash counted and the status clean on the way.
GIT = ('export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t '
       'GIT_COMMITTER_EMAIL=t@t HOME=/nonexistent; set -e; '
       'git init -q .; git add -A; git commit -qm one; '
       'sed -i s/a/A/ 1.txt; git stash -q; git stash pop -q; git stash -q; '
       'test "$(git stash list | wc -l)" = 1; '
       'sed -i s/b/B/ 2.txt; git checkout -q -- 2.txt; git stash pop -q; '
       'test "$(git stash list | wc -l)" = 0; git commit -qam two; '
       'test -z "$(git status --porcelain)"; '
       'test "$(git log --oneline | wc -l)" = 2; rm -rf .git')

# git mv of a directory: one rename(2), the status clean after it
GIT_MV = ('export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t '
          'GIT_COMMITTER_EMAIL=t@t HOME=/nonexistent; set -e; '
          'git init -q .; mkdir d; mv 1.txt 2.txt d/; git add -A; git commit -qm one; '
          'git mv d e; git commit -qm two; test -z "$(git status --porcelain)"; '
          'test "$(cat e/1.txt | wc -l)" -gt 0; rm -rf .git')

# a file written through a shared map, as databases and numpy.memmap do
MMAP = ('import mmap, os\n'
        'fd = os.open("mapped.txt", os.O_RDWR | os.O_CREAT, 0o644)\n'
        'os.ftruncate(fd, 10000)\n'
        'm = mmap.mmap(fd, 10000)\n'
        'm[5000:5012] = b"written by m"\n'
        'm.flush()\n'
        'm[0:3] = b"top"\n'
        'm.close()\n'
        'os.close(fd)\n')

# The matrix: a name, a shell command run in the directory ($SRC set), and
# values a reader may see besides the first and the last (what the model
# lets a program publish on its way, and why), or ANY: what another mount
# reads on the way is not checked (a database writes its pages in place
# between fsyncs; its own locks, not the mount, keep its readers whole). The
# first and last states are checked for every entry.
ANY = 'any'
# What a POSIX program is told at the bounds, written to calls.txt: a name
# longer than 255 bytes (ENAMETOOLONG from every call, not ENOENT),
# fallocate(2) mode 0 (the size grows; not EOPNOTSUPP), and files at a
# path of 2 KB (PATH_MAX is 4096).
CALLS = ('import ctypes, errno, os\n'
         'libc = ctypes.CDLL(None, use_errno=True)\n'
         'out = []\n'
         'def call(what, f):\n'
         '    try:\n'
         '        f()\n'
         '        out.append(what + ": ok")\n'
         '    except OSError as e:\n'
         '        out.append(what + ": " + errno.errorcode[e.errno])\n'
         'def fallocate(name, off, n):\n'
         '    fd = os.open(name, os.O_WRONLY | os.O_CREAT, 0o644)\n'
         '    try:\n'
         '        if libc.fallocate(fd, 0, ctypes.c_long(off), ctypes.c_long(n)):\n'
         '            raise OSError(ctypes.get_errno(), "fallocate")\n'
         '    finally:\n'
         '        os.close(fd)\n'
         'long = "n" * 256\n'
         'call("stat", lambda: os.stat(long))\n'
         'call("open O_CREAT", lambda: os.close(os.open(long, os.O_WRONLY | os.O_CREAT)))\n'
         'call("mkdir", lambda: os.mkdir(long))\n'
         'call("unlink", lambda: os.unlink(long))\n'
         'call("rmdir", lambda: os.rmdir(long))\n'
         'call("rename onto", lambda: os.rename("0.txt", long))\n'
         'call("rename from", lambda: os.rename(long, "x.txt"))\n'
         'call("truncate", lambda: os.truncate(long, 0))\n'
         'call("chmod", lambda: os.chmod(long, 0o600))\n'
         'call("link", lambda: os.link("1.txt", long))\n'
         'call("symlink", lambda: os.symlink("1.txt", long))\n'
         'call("fallocate a new file", lambda: fallocate("fa.txt", 0, 100))\n'
         'call("fallocate past the end", lambda: fallocate("4.txt", 10, 500))\n'
         'call("fallocate within", lambda: fallocate("5.txt", 0, 2))\n'
         'deep = "/".join(["d" * 200] * 10)\n'
         'call("mkdir -p of a 2 KB path", lambda: os.makedirs(deep))\n'
         'call("a file at a 2 KB path", lambda: open(deep + "/f.txt", "w").write("deep\\n"))\n'
         'open("calls.txt", "w").write("\\n".join(out) + "\\n")\n')

# The times and links programs read (make, rsync, find, tar, git's index),
# as relations written to times.txt: a new file's time is its write's (not
# the last commit's), its ctime no older; utime sets the access and the
# modification time apart, and touch -a the first alone; a file's times
# stay as they are when it or another file is committed, and its ctime
# moves when its mode or name changes; a directory's time moves when a
# name in it is made or removed, and is what utime sets; an open file
# removed has no link; a directory's links count its subdirectories.
TIMES = ('import os, subprocess, time\n'
         'out = []\n'
         'def times(name):\n'
         '    st = os.stat(name)\n'
         '    return (st.st_atime_ns, st.st_mtime_ns, st.st_ctime_ns)\n'
         'def committed(name):\n'
         '    with open(name, "a") as f:\n'
         '        os.fsync(f.fileno())\n'
         'd0 = os.stat(".").st_mtime_ns\n'
         'time.sleep(0.01)\n'
         't0 = time.time()\n'
         'open("new.txt", "w").write("x")\n'
         'st = os.stat("new.txt")\n'
         'out.append("a new file is timed at its write: %s" % (abs(st.st_mtime - t0) < 2))\n'
         'out.append("its ctime is no older: %s" % (st.st_ctime >= st.st_mtime - 1e-6))\n'
         'os.utime("new.txt", (1900000000, 1950000000))\n'
         'st = os.stat("new.txt")\n'
         'out.append("utime sets atime and mtime: %d %d" % (st.st_atime, st.st_mtime))\n'
         'out.append("and the ctime is now: %s" % (abs(st.st_ctime - time.time()) < 2))\n'
         'subprocess.run(["touch", "-a", "-d", "@1800000000", "new.txt"], check=True)\n'
         'st = os.stat("new.txt")\n'
         'out.append("touch -a: %d %d" % (st.st_atime, st.st_mtime))\n'
         'open("c.txt", "w").write("c")\n'
         'before = times("c.txt")\n'
         'committed("c.txt")\n'
         'out.append("a new file committed keeps its times: %s" % (times("c.txt") == before))\n'
         'time.sleep(0.01)\n'
         'open("d.txt", "w").write("d")\n'
         'committed("d.txt")\n'
         'out.append("... when another is: %s" % (times("c.txt") == before))\n'
         'os.chmod("c.txt", 0o600)\n'
         'out.append("chmod changes the ctime: %s" % (times("c.txt")[2] > before[2]))\n'
         'after = times("c.txt")\n'
         'time.sleep(0.01)\n'
         'os.rename("c.txt", "e.txt")\n'
         'out.append("so does a rename: %s" % (times("e.txt")[2] > after[2]))\n'
         'out.append("and not the others: %s" % (times("e.txt")[:2] == after[:2]))\n'
         'fd = os.open("new.txt", os.O_RDONLY)\n'
         'os.unlink("new.txt")\n'
         'out.append("links of an open file removed: %d" % os.fstat(fd).st_nlink)\n'
         'os.close(fd)\n'
         'out.append("the directory is newer: %s" % (os.stat(".").st_mtime_ns > d0))\n'
         'os.makedirs("sub/s1")\n'
         'os.mkdir("sub/s2")\n'
         'open("sub/s1/f.txt", "w").write("f")\n'
         'out.append("links of a directory of 2: %d" % os.stat("sub").st_nlink)\n'
         'os.rmdir("sub/s2")\n'
         'out.append("... of 1: %d" % os.stat("sub").st_nlink)\n'
         'os.utime("sub", (1900000000, 1900000000))\n'
         'os.utime(".", (1910000000, 1910000000))\n'
         'out.append("utime of directories: %d %d" % (os.stat("sub").st_mtime, '
         'os.stat(".").st_mtime))\n'
         'open("times.txt", "w").write("\\n".join(out) + "\\n")\n')

MATRIX = [
    ('sed -i', "sed -i 's/a/A/g' 1.txt"),
    ('perl -pi', "perl -pi -e 's/b/B/g' 2.txt"),
    ('python atomic save, fsync', "%s -c '%s'" % (PY, SAVE % 'os.fsync(fd)\n')),
    ('python atomic save', "%s -c '%s'" % (PY, SAVE % '')),
    ('vim backupcopy=yes', VIM + " -u NONE -N -es -c 'set backupcopy=yes writebackup "
     "backupskip=' -c '%s/c/C/g' -c wq 4.txt"),
    ('vim backupcopy=no', VIM + " -u NONE -N -es -c 'set backupcopy=no writebackup "
     "backupskip=' -c '%s/c/C/g' -c wq 4.txt"),
    ('sh >', "printf 'replaced by a redirection\\n' > 5.txt"),
    ('sh >>', "printf 'appended\\n' >> 6.txt"),
    ('a writer that forks', "%s -c '%s'" % (PY, FORK)),
    # a builtin's redirection (>&3) duplicates the descriptor and closes the
    # duplicate after printf wrote: that close is the writing process's
    ('sh exec 3> and forked children', "exec 3>7.txt; printf 'one\\n' >&3; (true); "
     "sh -c 'exit 0'; printf 'two\\n' >&3; exec 3>&-", [b'one\n']),
    ('two appenders, one killed', "%s -c '%s'" % (PY, APPENDERS)),
    # sqlite compares the inode of the database's name with its open file's
    # at every transaction: a new file must keep its number once committed
    ('sqlite3', "sqlite3 db.sqlite 'create table t(x); insert into t values (1);' && "
     "sqlite3 db.sqlite 'insert into t values (2); insert into t values (3);' && "
     "[ \"$(sqlite3 db.sqlite 'select sum(x) from t;')\" = 6 ]", ANY),
    # what msync wrote back is published before the program ends, as by a
    # program that writes in place
    ('python mmap shared', "%s -c '%s'" % (PY, MMAP), ANY),
    # a record that was a database before the mount: its file keeps its
    # number when its bytes change, as any file written in place does
    ('sqlite3 on an imported database', "sqlite3 8.txt 'insert into t values (2);' && "
     "sqlite3 8.txt 'insert into t values (3); insert into t values (4);' && "
     "[ \"$(sqlite3 8.txt 'select sum(x) from t;')\" = 10 ]", ANY),
    # WAL mode maps the -shm file shared: a writable mount's files are
    # direct_io, which the kernel maps only if the mount says it may
    ('sqlite3 WAL', "sqlite3 w.sqlite 'pragma journal_mode=wal; create table t(x); "
     "insert into t values (1);' >/dev/null && sqlite3 w.sqlite 'insert into t values (2);' && "
     "[ \"$(sqlite3 w.sqlite 'select sum(x) from t;')\" = 3 ] && "
     "[ ! -e w.sqlite-wal ] && [ ! -e w.sqlite-shm ]", ANY),
    ('logrotate: mv while open', "%s -c '%s'" % (PY, ROTATE)),
    ('dd conv=notrunc', "printf XYZ | dd of=0.txt bs=1 seek=2 conv=notrunc status=none"),
    ('cp', 'cp "$SRC/new1.txt" 1.txt && cp "$SRC/new2.txt" copied.txt'),
    ('cp -a', 'cp -a "$SRC/new3.txt" "$SRC/new1.txt" .'),
    ('install', 'install -m 644 "$SRC/new1.txt" 2.txt'),
    ('tar x', 'tar -xf "$SRC/files.tar"'),
    ('rsync', 'rsync -r "$SRC/r/" ./'),
    ('rsync --inplace', 'rsync --inplace "$SRC/r/4.txt" 4.txt'),
    ('rsync --delay-updates', 'rsync -r --delay-updates "$SRC/r/" ./'),
    ('rsync -a twice', 'rsync -a "$SRC/r/" ./ && rsync -a "$SRC/r/" ./'),
    ('truncate', 'truncate -s 3 5.txt && truncate -s 0 6.txt && truncate -s 9 cut.txt'),
    ('touch a new name', 'touch touched.txt'),
    ('mv to a new name', 'mv 7.txt moved.txt'),
    ('mv onto a file', 'mv 1.txt 2.txt'),
    ('rm', 'rm 3.txt'),
    # a name replaced by a rename, then removed or renamed away before the
    # new file's group is committed: the old value does not come back. (A
    # group due between the commands, as on a loaded machine, commits the
    # new value: the reader may read it, finished, then)
    ('sed -i, then rm', "sed -i 's/a/A/g' 1.txt && rm 1.txt",
     [b''.join(b'record 1, line %d: Abc bcd cde\n' % k for k in range(3))]),
    ('a lockfile renamed over, then removed', "printf 'v2\\n' > 3.txt.lock && "
     "mv 3.txt.lock 3.txt && rm 3.txt", [b'v2\n']),
    ('mv onto a file, then away', "printf 'new\\n' > x.tmp && mv x.tmp 2.txt && "
     "mv 2.txt moved.txt"),
    # git's lockfiles (index.lock, HEAD.lock renamed onto their names) and
    # its stash: a stash popped and made again is one entry, not two; the
    # repository goes at the end (a dot directory's files are temporary).
    # 2.txt, edited then checked out, may be read edited
    ('git', GIT, [b''.join(b'record 2, line %d: aBc bcd cde\n' % k for k in range(4))]),
    ('cp -r of a directory', 'cp -r "$SRC/r" newdir && mkdir -p a/b && cp 0.txt a/b/c.txt'),
    # patch writes the patched file beside it and renames it over; ed
    # rewrites it in place
    ('patch', 'patch -s -p0 < "$SRC/p.diff"'),
    ('ed', "printf ',s/b/B/g\\nw\\nq\\n' | ed -s 3.txt"),
    # gzip and xz give the file they write the original's mode and times
    # through its descriptor (fchmod, futimens) before closing it
    ('gzip -k, xz -k', 'gzip -k 1.txt 2.txt && xz -k 5.txt'),
    # zip writes a temporary file and renames it; unzip makes a directory
    # and sets each file's time after closing it. zip first creates z.zip
    # empty, closes it and removes it (a state a reader may see, as on ext4)
    ('zip, unzip', 'zip -q -X z.zip 6.txt 7.txt && unzip -q -d u z.zip', [b'']),
    # Python's byte-compiled files: a directory made, each written under a
    # temporary name and renamed (by hash: no source time in them)
    ('python compileall', "printf 'x = 1\\n' > m.py && %s -m compileall -q "
     "--invalidation-mode unchecked-hash m.py" % PY),
    # permission bits: chmod of a file at rest, a new file's mode at
    # create (mkstemp's 0600, the umask's), a script made executable runs
    ('calls at the bounds', "%s -c '%s'" % (PY, CALLS)),
    ('times and links', "%s -c '%s'" % (PY, TIMES), [b'x']),
    ('chmod', "chmod 755 1.txt && chmod 600 2.txt && umask 027 && printf 'x\\n' > masked.txt && "
     "printf '#!/bin/sh\\necho ran\\n' > run.sh && chmod +x run.sh && ./run.sh > ran.txt && "
     "%s -c 'import os, tempfile; os.replace(tempfile.mkstemp(dir=\".\")[1], \"made.txt\")' && "
     "chmod 640 run.sh" % PY),
    # rename(2) of a directory moves it and what is in it (onto an empty
    # one, that one goes); git mv of a directory is one rename
    ('tree: mv of a directory', "mkdir -p d/e && mv 1.txt 2.txt d/ && mv 3.txt d/e/ && "
     "mv d moved && mkdir empty && %s -c 'import os; os.rename(\"moved/e\", \"empty\")'"
     % PY),
    ('tree: git mv of a directory', GIT_MV),
    # in tree/ a dot name is a name of the tree: it is stored as any
    ('tree: dotfiles', "printf '*.o\\n' > .gitignore && mkdir -p .cfg && printf 'k=v\\n' > .cfg/.env "
     "&& printf 'x\\n' > .keep && mv .keep .kept && chmod 700 .kept"),
]


def fail(msg):
    print('FAIL: ' + msg, file=sys.stderr)
    sys.exit(1)


def run(args, **kw):
    r = subprocess.run(args, capture_output=True, **kw)
    if r.returncode != 0:
        fail('%s exited %d: %s' % (' '.join(args), r.returncode,
                                   (r.stderr or r.stdout).decode(errors='replace')[-400:]))
    return r


def make_inputs():
    os.makedirs(FIRST)
    for i in range(8):
        lines = ''.join('record %d, line %d: abc bcd cde\n' % (i, k) for k in range(i + 2))
        open(os.path.join(FIRST, '%d.txt' % i), 'w').write(lines)
    # a database that was a record before the mount
    run(['sqlite3', os.path.join(FIRST, '8.txt'), 'create table t(x); insert into t values (1);'])
    os.makedirs(os.path.join(SRC, 'r'))
    for k in (1, 2, 3):
        open(os.path.join(SRC, 'new%d.txt' % k), 'w').write('new file %d\n' % k * k)
    open(os.path.join(SRC, 'r', '4.txt'), 'w').write('rsynced over record 4\n')
    open(os.path.join(SRC, 'r', 'rnew.txt'), 'w').write('a new file by rsync\n')
    t = os.path.join(T, 'tarred')
    os.makedirs(t)
    open(os.path.join(t, '3.txt'), 'w').write('record 3 from a tar\n')
    open(os.path.join(t, 'tarred.txt'), 'w').write('a new file from a tar\n')
    with tarfile.open(os.path.join(SRC, 'files.tar'), 'w') as tar:
        for n in ('3.txt', 'tarred.txt'):
            tar.add(os.path.join(t, n), n)
    # a patch of record 2 (its lines 0 and 2)
    patched = ''.join('record 2, line %d: %s\n' % (k, 'abc bcd cde' if k % 2 else 'patched')
                      for k in range(4))
    open(os.path.join(T, 'patched'), 'w').write(patched)
    diff = subprocess.run(['diff', '-u', os.path.join(FIRST, '2.txt'), os.path.join(T, 'patched')],
                          capture_output=True).stdout.decode()
    lines = diff.splitlines(True)
    open(os.path.join(SRC, 'p.diff'), 'w').write('--- 2.txt\n+++ 2.txt\n' + ''.join(lines[2:]))
    run([ZR, 'import', 'dir', FIRST, TEMPLATE, '--field', 'txt', '--compress', 'flate'])


def files(d):
    """Every file under @d: relative path -> bytes."""
    out = {}
    for root, dirs, names in os.walk(d):
        for n in names:
            p = os.path.join(root, n)
            out[os.path.relpath(p, d)] = open(p, 'rb').read()
    return out


def modes(d):
    """Every file under @d: relative path -> its permission bits."""
    out = {}
    for root, dirs, names in os.walk(d):
        for n in names:
            p = os.path.join(root, n)
            out[os.path.relpath(p, d)] = oct(os.lstat(p).st_mode & 0o7777)
    return out


def sha(b):
    return hashlib.sha1(b).hexdigest()


class Mount:
    def __init__(self, ds, at, log, *opts):
        os.makedirs(at)
        self.at = at
        self.log = open(log, 'ab')
        self.proc = subprocess.Popen([ZRFS, ds, at, '-f'] + list(opts), stderr=self.log)
        while not os.path.ismount(at):
            if self.proc.poll() is not None:
                fail('zrfs %s exited %s' % (' '.join(opts), self.proc.returncode))

    def close(self):
        if os.path.ismount(self.at):
            subprocess.run(['fusermount3', '-u', self.at], capture_output=True)
        try:
            rc = self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            subprocess.run(['umount', '-l', self.at], capture_output=True)
            rc = self.proc.wait()
        self.log.close()
        return rc


class Reader:
    """Reads every file of a field directory of a read-only mount over and
    over until stopped, keeping what each read returned."""

    def __init__(self, d):
        self.d, self.seen, self.errors, self.stop = d, {}, [], False
        self.reads = 0
        self.thread = threading.Thread(target=self.loop)
        self.thread.start()

    def loop(self):
        while not self.stop:
            try:
                names = os.listdir(self.d)
            except OSError as e:
                self.errors.append('listing: %s' % e)
                return
            for n in names:
                try:
                    with open(os.path.join(self.d, n), 'rb') as f:
                        v = f.read()
                        self.seen.setdefault(sha(v), (n, v))
                    self.reads += 1
                except OSError as e:
                    # gone meanwhile; a directory made by a program
                    if e.errno not in (errno.ENOENT, errno.EISDIR):
                        self.errors.append('%s: %s' % (n, e))

    def finish(self):
        self.stop = True
        self.thread.join()


def entry(k, name, cmd, also=()):
    work = os.path.join(T, 'e%d' % k)
    native, ds, out = (os.path.join(work, x) for x in ('native', 'ds', 'out'))
    os.makedirs(work)
    shutil.copytree(FIRST, native)
    shutil.copytree(TEMPLATE, ds)
    env = dict(os.environ, SRC=SRC)
    r = subprocess.run(['sh', '-c', cmd], cwd=native, env=env, capture_output=True)
    if r.returncode != 0:
        fail('%s: on a native directory it exited %d: %s'
             % (name, r.returncode, r.stderr.decode(errors='replace')))
    want = files(native)
    mounts = []
    try:
        log = os.path.join(work, 'log')
        mounts.append(Mount(ds, os.path.join(work, 'mnt'), log, '-o', 'writable'))
        mounts.append(Mount(ds, os.path.join(work, 'ro'), log))
        reader = Reader(os.path.join(work, 'ro', WHERE))
        field = os.path.join(work, 'mnt', WHERE)
        r = subprocess.run(['sh', '-c', cmd], cwd=field, env=env, capture_output=True)
        if r.returncode != 0:
            fail('%s: on the mount it exited %d: %s'
                 % (name, r.returncode, r.stderr.decode(errors='replace')))
        fd = os.open(field, os.O_RDONLY | os.O_DIRECTORY)
        os.fsync(fd)  # sync DIR: new files committed now
        os.close(fd)
        shown = modes(field)
        reader.finish()
    finally:
        rcs = [m.close() for m in reversed(mounts)]
    if any(rcs):
        fail('%s: a daemon exited %s: %s' % (name, rcs, open(log, 'rb').read()[-500:]))
    text = open(log, 'rb').read().decode(errors='replace')
    if 'never stored' in text or 'not stored' in text:
        fail('%s: the daemon dropped something: %s' % (name, text[-500:]))
    if reader.errors:
        fail('%s: the reader: %s' % (name, reader.errors[0]))
    first = files(FIRST)
    allowed = {sha(v) for v in first.values()} | {sha(v) for v in want.values()}
    allowed |= {sha(v) for v in also} if also != ANY else set(reader.seen)
    odd = [reader.seen[h] for h in set(reader.seen) - allowed]
    if odd:
        fail('%s: a reader of another mount read %d value(s) no program finished: %s'
             % (name, len(odd), '; '.join('%s: %r' % (n, v[:60]) for n, v in odd[:3])))
    run([ZR, 'export', 'dir', ds] + ([] if TREE else ['txt']) + [out])
    # (a field directory shows a new record by id: the bits it showed are
    # the native ones, whatever the names)
    for what, m in (('the mount showed', shown), ('zr export dir wrote', modes(out))):
        if m != modes(native) and (TREE or what != 'the mount showed' or
                                   sorted(m.values()) != sorted(modes(native).values())):
            bad = sorted(p for p in set(m) | set(modes(native))
                         if m.get(p) != modes(native).get(p))
            fail('%s: %s other permission bits than a native directory has: %s'
                 % (name, what, {p: (m.get(p), modes(native).get(p)) for p in bad}))
    got = files(out)
    if got != want:
        diff = sorted(set(got) ^ set(want)) or sorted(p for p in want if got[p] != want[p])
        fail('%s: the mount left other files than a native directory: %s (mount: %s)'
             % (name, diff, {p: got.get(p, b'')[:60] for p in diff}))
    info = run([ZR, 'info', ds]).stdout.decode()
    n = int(next(l.split()[1] for l in info.splitlines() if l.startswith('records')))
    gained = len(set(want) - set(first))
    if n != (len(want) if TREE else len(first) + gained):
        fail('%s: %d records, for %d files and %d new names' % (name, n, len(first), gained))
    run([ZR, 'verify', ds])
    return reader.reads


def main():
    make_inputs()
    ran = 0
    for k, (name, cmd, *also) in enumerate(MATRIX):
        if (ONLY and name not in ONLY) or (name.startswith('tree: ') and not TREE):
            continue
        reads = entry(k, name, cmd, *also)
        print('ok: %-32s %6d reads of the other mount' % (name, reads))
        ran += 1
    if ran == 0:
        fail('no program of the matrix is named %s' % sorted(ONLY))


main()
