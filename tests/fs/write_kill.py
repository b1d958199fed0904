"""write_kill.py - a writable mount killed while programs write through it.

usage: write_kill.py ZR ZRFS DATASET MOUNT TRIALS

The dataset (made here) has a flate bytes field "txt" and a raw i64 "lab".
TRIALS times: mount it with -o writable (in the foreground, this process's
child), start a writer thread that replaces, appends and removes records
through the mount (some files fsync'd, some only closed, some written in
several pieces at random offsets) and a reader thread that reads the files
the writer touches, then SIGKILL the daemon at a random instant. Checked:
- every read returns a value that record has had, whole (the value it had
  before the trial, or one written during it), or fails with ENOENT; a
  record with no value is a new file, read as what has been written so far
  (pieced());
- after the kill, `zr verify` is clean;
- every value whose fsync returned is there, byte-exact, unless a later
  write of the same record may have replaced it (its close began); every
  record the writer never touched is as it was.

- the daemon finishes dying (a notification of a commit never waits for
  a directory's lock that a program's request holds): no trial needs the
  connection aborted, where the kernel has FUSE_NOTIFY_INC_EPOCH (Linux
  6.16); before it, such trials are counted (zrfs(8), BUGS).

Then TRIALS times the same in tree/ of a directory import, where the writer
saves files as editors and git do (write a new name, fsync it or not,
rename it over the old one, fsync the directory), moves files between
directories, overwrites and removes them, while a reader lists and stats
the directories and reads the files the writer touches; checked: every
read as above, zr verify, every save whose fsync returned, and no daemon
that cannot die.

Last, FOLLOW_KILLS (default TRIALS) read-only daemons are killed while
readers list, stat and read the records and another process commits to
the dataset (zr put), which the mount follows: every daemon dies.

Before that, on one mount that stays, programs that write are killed instead
(SIGKILL or SIGTERM, at a random instant): a Python writer replacing a
record in many writes, cp and dd of a large file onto a record, a shell
that opened a record for its redirection and exec'd a program that never
writes, a Python writer making a new file. After each, the record has its
old value or the whole new one, never what the killed program had written
so far, and a new file of a killed writer is not there at all, or whole.

Exit 0 on success; a message and 1 on the first failure.
"""
import ctypes
import errno
import os
import random
import signal
import subprocess
import sys
import threading
import time

ZR, ZRFS, DS, MNT = sys.argv[1:5]
TRIALS = int(sys.argv[5])
N0 = 50


DAEMON = []   # the daemon of the trial running, killed and unmounted on failure
LIBC = ctypes.CDLL(None, use_errno=True)
# what a request in flight gets when the daemon dies: ENOTCONN or
# ECONNABORTED through /dev/fuse; ECANCELED when it was in an io_uring ring
# (-o uring: the kernel cancels the ring's commands)
DAEMON_GONE = (errno.ENOTCONN, errno.ECONNABORTED, errno.ECANCELED)
MNT_FORCE, MNT_DETACH = 1, 2


def umount2(flags):
    """umount2(2) of the mount, from this process. Not umount(8): starting a
    program closes this process's descriptors in the child, and closing a
    file of the mount (a writer thread's) asks the daemon to flush it: a
    daemon that cannot finish dying never answers, and the child never
    runs umount."""
    LIBC.umount2(MNT.encode(), flags)


def fail(msg):
    print('FAIL: ' + msg, file=sys.stderr)
    for d in DAEMON:
        d.kill()
    umount2(MNT_FORCE)
    umount2(MNT_DETACH)
    for d in DAEMON:
        d.wait()
    os._exit(1)


def zr(*args, check=True):
    r = subprocess.run([ZR, *args], capture_output=True)
    if check and r.returncode != 0:
        fail('zr %s: %s' % (' '.join(args), r.stderr.decode()))
    return r


def start_daemon(what, ds=DS, opts=('-o', 'writable')):
    """A mount of dataset @ds (writable unless @opts says otherwise), its
    daemon this process's child."""
    d = subprocess.Popen([ZRFS, ds, MNT, *opts, '-f'],
                         stderr=open('%s.log' % DS, 'ab'))
    DAEMON[:] = [d]
    t0 = time.monotonic()
    while not mounted():
        if d.poll() is not None or time.monotonic() - t0 > 30:
            fail('%s: not mounted (daemon exit %s)' % (what, d.poll()))
    return d


def record_count():
    return int(next(l.split()[1] for l in zr('info', DS).stdout.decode().splitlines()
                    if l.startswith('records')))


def snapshot():
    """The record count and every value (None: missing), by zr export."""
    n = record_count()
    values = {}
    for f, ext in (('txt', '.txt'), ('lab', '')):
        out = '%s.export-%s' % (DS, f)
        subprocess.run(['rm', '-rf', out])
        zr('export', 'dir', DS, f, out)
        for i in range(n):
            p = '%s/%d%s' % (out, i, ext)
            values[(f, i)] = open(p, 'rb').read() if os.path.exists(p) else None
    return n, values


def mounted():
    return os.path.ismount(MNT)


def pieced(got, had):
    """Whether @got is what a reader may see of a new file (a record with no
    value) that a writer writes, and perhaps empties and writes again: each
    byte zero (not written yet) or the byte at its place of some value
    written. A read is one request at one instant, but a program reads a
    file in several (Python: the size it saw, plus 1, then on while more
    comes), so a file emptied and rewritten between two of them shows the
    first value's bytes, then the second's, as a native file does."""
    vals = [v for v in had if v]
    return len(got) <= max(map(len, vals), default=0) and all(
        g == 0 or any(at < len(v) and v[at] == g for v in vals) for at, g in enumerate(got))


def explain(got, had):
    """What @got shares with each value in @had, for a failure's message:
    each value's length and the byte ranges where @got holds neither that
    value's byte nor zero."""
    out = []
    for v in sorted(had, key=lambda v: -1 if v is None else len(v)):
        if v is None:
            out.append('none')
            continue
        bad, start = [], None
        for at in range(len(got) + 1):
            off = at < len(got) and got[at] != 0 and (at >= len(v) or got[at] != v[at])
            if off and start is None:
                start = at
            elif not off and start is not None:
                bad.append('%d-%d' % (start, at))
                start = None
        out.append('%d bytes, differing at %s' % (len(v), ' '.join(bad[:8]) or 'none'))
    return '; '.join(out)


def which(now, before, tried, durable):
    """Which value @now is, for a failure's message: the record's value
    before the trial, one of the values @tried in it (by position; the
    fsync'd one is tried[durable]), or none of them."""
    ctx = '%d values tried, the fsync\'d one %d' % (len(tried), durable + 1)
    if now == before:
        return 'it holds its value from before the trial (%s)' % ctx
    hits = [str(k + 1) for k, v in enumerate(tried) if v == now]
    if hits:
        return 'it holds value %s of those tried (%s)' % (', '.join(hits), ctx)
    return 'it holds %s, a value never tried (%s)' % (
        'nothing' if now is None else '%d bytes' % len(now), ctx)


class Trial:
    read_errnos = ()  # what a read of a file opened may fail with, besides a kill's

    def __init__(self, n, values, rng):
        self.n = n                # record count when the trial began
        self.rng = rng
        self.had = {k: {v} for k, v in values.items()}  # every value a record has had
        self.history = {}         # (field, id) -> every value tried, in order (None: removed)
        self.durable = {}         # (field, id) -> where in its history the last fsync'd one is
        self.lock = threading.Lock()
        self.touched = []
        self.errors = []
        self.stop = False
        self.killed = False       # set just before the SIGKILL: whose error it is
        self.first = ('txt', 0)   # what the reader reads before anything is written

    def cut_short(self, e):
        """Whether error @e is that of a request the kill cut short: one
        of DAEMON_GONE; or, after the kill only, EIO (the kernel's page
        cache path fails a page whose request was aborted) or EINTR (an
        unlink ended so once through a ring, in CI, and not again in 3,000
        kills here: zrfs never answers EINTR and this program gets no
        signal)."""
        return e.errno in DAEMON_GONE or (self.killed and e.errno in (errno.EIO, errno.EINTR))

    def path(self, key):
        field, i = key
        return '%s/%s/%d%s' % (MNT, field, i, '.txt' if field == 'txt' else '')

    def tried(self, key, v):
        with self.lock:
            self.had.setdefault(key, {None}).add(v)
            self.history.setdefault(key, []).append(v)
            self.touched.append(key)

    def writer(self):
        rng = self.rng
        try:
            while not self.stop:
                op = rng.random()
                field = 'txt' if rng.random() < 0.7 else 'lab'
                i = rng.randrange(self.n)
                key = (field, i)
                if op < 0.15:
                    self.tried(key, None)
                    os.unlink(self.path(key))
                    continue
                v = (bytes(rng.randrange(256) for _ in range(rng.randrange(1, 3000)))
                     if field == 'txt' else rng.randrange(1 << 62).to_bytes(8, 'little'))
                self.tried(key, v)
                fd = os.open(self.path(key), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
                if rng.random() < 0.3:     # in pieces, backwards
                    cut = len(v) // 2
                    os.pwrite(fd, v[cut:], cut)
                    os.pwrite(fd, v[:cut], 0)
                else:
                    os.write(fd, v)
                sync = rng.random() < 0.5
                if sync:
                    os.fsync(fd)
                    with self.lock:
                        self.durable[key] = len(self.history[key]) - 1
                os.close(fd)
        except OSError as e:
            if e.errno != errno.ENOENT and not self.cut_short(e):
                self.errors.append('writer: %s (%s the daemon was killed)'
                                   % (e, 'after' if self.killed else 'before'))

    def reader(self):
        rng = self.rng.__class__(self.rng.random())
        while not self.stop and self.read_one(rng):
            pass

    def read_one(self, rng):
        """Read a file the writer touched lately, and check what it holds:
        False once the daemon is gone."""
        with self.lock:
            keys = self.touched[-20:] or [self.first]
        key = rng.choice(keys)
        try:
            f = open(self.path(key), 'rb')
        except OSError as e:
            if self.cut_short(e):
                return False
            if e.errno != errno.ENOENT:
                self.errors.append('reader: %s: %s (%s the daemon was killed)'
                                   % (self.path(key), e, 'after' if self.killed else 'before'))
            return True
        try:
            with f:
                got = f.read()
        except OSError as e:
            if self.cut_short(e):
                return False
            if e.errno not in self.read_errnos:
                self.errors.append('reader: %s: read: %s (%s the daemon was killed)'
                                   % (self.path(key), e, 'after' if self.killed else 'before'))
            return True
        with self.lock:
            had = self.had.get(key, set())
            # a file being created (the record had no value) shows what is
            # written so far (zrfs(8)), holes as zeros, as a file being
            # copied does; a value being replaced shows the old one whole
            if got not in had and not (None in had and pieced(got, had)):
                whose = sorted(str(k) for k, vs in self.had.items() if got in vs)
                self.errors.append('reader: %s: %d bytes that it never had (it had %s; %s)'
                                   % (self.path(key), len(got), explain(got, had),
                                      'a value of ' + ', '.join(whose) if whose
                                      else 'no value any file had'))
        return True


class TreeTrial(Trial):
    """A trial in tree/: keys are paths under it, each holding one value."""

    # a file made through the mount, open for reading when it is removed or
    # replaced, may answer the next read with ESTALE (zrfs(8), BUGS)
    read_errnos = (errno.ESTALE,)

    def __init__(self, values, rng):
        super().__init__(0, values, rng)
        self.first = sorted(values)[0]
        self.now = dict(values)   # what the writer left at each path (None: nothing)

    def path(self, key):
        return '%s/tree/%s' % (MNT, key)

    def durable_at(self, key):
        with self.lock:
            self.durable[key] = len(self.history[key]) - 1

    def write_new(self, key, v):
        """@v into @key through a descriptor: whether it was fsync'd."""
        fd = os.open(self.path(key), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            os.write(fd, v)
            sync = self.rng.random() < 0.5
            if sync:
                os.fsync(fd)
            return sync
        finally:
            os.close(fd)

    def one(self, rng, names):
        op = rng.random()
        key = rng.choice(names)
        v = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 3000)))
        if op < 0.4:        # a save: a new name renamed over the old, as editors and git do
            tmp = '%s/tmp%d.txt' % (key.split('/')[0], rng.randrange(1 << 30))
            self.had.setdefault(tmp, {None}).add(v)
            synced = self.write_new(tmp, v)
            self.tried(key, v)
            os.rename(self.path(tmp), self.path(key))
            self.now[key] = v
            if synced:
                fd = os.open(os.path.dirname(self.path(key)), os.O_RDONLY | os.O_DIRECTORY)
                os.fsync(fd)
                os.close(fd)
                self.durable_at(key)
        elif op < 0.6:      # a move, often to another directory
            to = rng.choice(names)
            v = self.now.get(key)
            if v is None or to == key:
                return
            self.tried(to, v)
            self.tried(key, None)
            os.rename(self.path(key), self.path(to))
            self.now[to], self.now[key] = v, None
        elif op < 0.85:     # an overwrite in place
            self.tried(key, v)
            # the file may be a new one its group has not committed yet (a
            # save just renamed into place), which shows what is written so
            # far, from nothing on, as a native file written in place does
            with self.lock:
                self.had[key].add(None)
            if self.write_new(key, v):
                self.durable_at(key)
            self.now[key] = v
        else:
            self.tried(key, None)
            os.unlink(self.path(key))
            self.now[key] = None

    def reader(self):
        """Lists and stats a directory of tree/ over and over (requests that
        hold the directory's lock while they wait for the daemon), and reads
        the files the writer touched, as Trial's reader does: records move
        ids under names the kernel holds and files keep their numbers across
        commits, and every read is a value the file had, whole (or, of a
        new file being written, what is written so far)."""
        rng = self.rng.__class__(self.rng.random())
        while not self.stop:
            d = '%s/tree/d%d' % (MNT, rng.randrange(4))
            try:
                for name in os.listdir(d):
                    os.stat('%s/%s' % (d, name))
            except OSError as e:
                if self.cut_short(e):
                    return
                if e.errno != errno.ENOENT:
                    self.errors.append('reader: %s: %s (%s the daemon was killed)'
                                       % (d, e, 'after' if self.killed else 'before'))
            if not self.read_one(rng):
                return

    def writer(self):
        rng = self.rng
        names = ['d%d/f%d.txt' % (d, f) for d in range(4) for f in range(10)]
        while not self.stop:
            try:
                self.one(rng, names)
            except OSError as e:
                if self.cut_short(e):
                    return
                if e.errno != errno.ENOENT:  # a directory whose last file went (#49)
                    self.errors.append('writer: %s (%s the daemon was killed)'
                                       % (e, 'after' if self.killed else 'before'))
                    return


def tree_snapshot(ds):
    """Every file of @ds's tree: path -> bytes, by zr export dir."""
    out = '%s.export' % ds
    subprocess.run(['rm', '-rf', out])
    zr('export', 'dir', ds, out)
    values = {}
    for top, _, files in os.walk(out):
        for f in files:
            p = os.path.join(top, f)
            values[os.path.relpath(p, out)] = open(p, 'rb').read()
    return values


def tree_trials(rng, trials):
    """Daemons killed while a program saves, moves and removes files in tree/."""
    src, ds = '%s.src' % DS, '%s.tree' % DS
    for d in range(4):
        os.makedirs('%s/d%d' % (src, d))
        for f in range(10):
            open('%s/d%d/f%d.txt' % (src, d, f), 'wb').write(b'file %d of d%d\n' % (f, d) * f)
    zr('import', 'dir', src, ds)
    values = tree_snapshot(ds)
    aborted = 0
    for trial in range(trials):
        d = start_daemon('tree trial %d' % trial, ds)
        t = TreeTrial(values, rng)
        aborted += run_trial(t, d, 'tree trial %d' % trial)
        r = zr('verify', ds, check=False)
        if r.returncode != 0:
            fail('tree trial %d: zr verify: %s%s' % (trial, r.stdout.decode(), r.stderr.decode()))
        now = tree_snapshot(ds)
        for key, at in t.durable.items():
            tried = t.history[key]
            if now.get(key) not in tried[at:]:
                fail('tree trial %d: %s: a save whose fsync returned was lost: %s'
                     % (trial, key, which(now.get(key), values.get(key), tried, at)))
        for key, v in values.items():
            if key not in t.history and now.get(key) != v:
                fail('tree trial %d: %s changed though nobody wrote it' % (trial, key))
        values = now
    return aborted


class FollowTrial(Trial):
    """A read-only mount killed while programs read it and another process
    commits to the dataset (zr put): the mount tells the kernel about each
    commit while readers' lookups and listings hold its directories."""

    def writer(self):
        i = 0
        while not self.stop:
            p = '%s.put%d' % (DS, i % 2)
            open(p, 'wb').write(b'appended %d' % i)
            r = subprocess.run([ZR, 'put', DS, '--txt=' + p], capture_output=True)
            if r.returncode != 0:
                self.errors.append('zr put: %s' % r.stderr.decode(errors='replace'))
                return
            i += 1

    def reader(self):
        rng = self.rng.__class__(self.rng.random())
        d = MNT + '/txt'
        while not self.stop:
            try:
                names = os.listdir(d)
                for n in rng.sample(names, min(8, len(names))):
                    os.stat('%s/%s' % (d, n))
                    with open('%s/%s' % (d, n), 'rb') as f:
                        f.read()
            except OSError as e:
                if self.cut_short(e):
                    return
                if e.errno != errno.ENOENT:
                    self.errors.append('reader: %s (%s the daemon was killed)'
                                       % (e, 'after' if self.killed else 'before'))


def follow_trials(rng, trials):
    """Read-only daemons killed while they follow another writer's commits."""
    aborted = 0
    for trial in range(trials):
        d = start_daemon('read-only trial %d' % trial, DS, ())
        aborted += run_trial(FollowTrial(0, {}, rng), d, 'read-only trial %d' % trial)
    r = zr('verify', DS, check=False)
    if r.returncode != 0:
        fail('read-only trials: zr verify: %s%s' % (r.stdout.decode(), r.stderr.decode()))
    return aborted


def program_kills(rng, trials):
    """Programs killed while they write through a mount that stays."""
    big = '%s.big' % DS
    with open(big, 'wb') as f:
        f.write(bytes(rng.randrange(256) for _ in range(1 << 16)) * 64)  # 4 MiB
    whole = open(big, 'rb').read()
    writer = ('import os, sys\n'
              'fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)\n'
              'data = open(sys.argv[2], "rb").read()\n'
              'for at in range(0, len(data), 4096):\n'
              '    os.write(fd, data[at:at + 4096])\n'
              'os.close(fd)\n')
    d = start_daemon('program kills')
    n = record_count()
    for trial in range(trials):
        kind = rng.choice(('python', 'cp', 'dd', 'exec sleep', 'new file'))
        i = rng.randrange(n)
        path = '%s/txt/%d.txt' % (MNT, i) if kind != 'new file' else \
            '%s/txt/killed%d.txt' % (MNT, trial)
        try:
            old = open(path, 'rb').read()
        except FileNotFoundError:
            old = None
        if kind in ('python', 'new file'):
            argv = ['/usr/bin/python3', '-c', writer, path, big]
        elif kind == 'cp':
            argv = ['cp', big, path]
        elif kind == 'dd':
            argv = ['dd', 'if=' + big, 'of=' + path, 'bs=4k', 'status=none']
        else:
            argv = ['sh', '-c', 'exec sleep 60 > "$1"', 'sh', path]
        p = subprocess.Popen(argv, stderr=subprocess.DEVNULL)
        time.sleep(rng.random() * 0.2)  # the instant of the kill, not a synchronisation
        p.send_signal(rng.choice((signal.SIGKILL, signal.SIGTERM)))
        p.wait()
        fd = os.open('%s/txt' % MNT, os.O_RDONLY | os.O_DIRECTORY)
        os.fsync(fd)  # new files ready are committed now
        os.close(fd)
        try:
            now = open(path, 'rb').read()
        except FileNotFoundError:
            now = None
        if now != old and now != whole:
            fail('program kill %d (%s, exit %d): %s holds %s bytes: neither its old value '
                 '(%s) nor the whole new one' % (trial, kind, p.returncode, path,
                                                  None if now is None else len(now),
                                                  None if old is None else len(old)))
    subprocess.run(['fusermount3', '-u', MNT], capture_output=True)
    if d.wait() != 0:
        fail('program kills: the daemon exited %d' % d.returncode)
    r = zr('verify', DS, check=False)
    if r.returncode != 0:
        fail('program kills: zr verify: %s%s' % (r.stdout.decode(), r.stderr.decode()))


def epochs():
    """Whether the kernel has FUSE_NOTIFY_INC_EPOCH (Linux 6.16)."""
    major, minor = (int(x) for x in os.uname().release.split('.')[:2])
    return (major, minor) >= (6, 16)


def run_trial(t, d, what):
    """Trial @t's writer and reader on daemon @d, killed at a random instant:
    1 if the daemon could not finish dying until the connection was
    aborted (a failure where the kernel has epochs), else 0."""
    threads = [threading.Thread(target=t.writer), threading.Thread(target=t.reader)]
    for th in threads:
        th.start()
    time.sleep(t.rng.random() * 0.3)   # the instant of the kill, not a synchronisation
    t.killed = True
    d.send_signal(signal.SIGKILL)
    # Before Linux 6.16 a thread of the daemon telling the kernel about a
    # commit may wait for a directory's lock that a program holds while it
    # waits for the daemon: the daemon then cannot finish dying until the
    # connection is aborted, as umount -f does (zrfs(8), BUGS). The bound
    # only ends a hang: a daemon dies in milliseconds.
    stuck = 0
    try:
        d.wait(timeout=20)
    except subprocess.TimeoutExpired:
        stacks = []   # where the threads left are, for the message
        for tid in os.listdir('/proc/%d/task' % d.pid):
            try:
                top = open('/proc/%d/task/%s/stack' % (d.pid, tid)).read().split('\n')[:6]
            except OSError:
                continue
            if top[0]:
                stacks.append(' < '.join(top))
        umount2(MNT_FORCE)
        d.wait()
        if epochs():
            fail('%s: the daemon could not die until its connection was aborted (%s)'
                 % (what, '; '.join(stacks) or 'no stack'))
        stuck = 1
    t.stop = True
    for th in threads:
        th.join(30)
        if th.is_alive():
            fail('%s: a thread is stuck after the daemon died' % what)
    subprocess.run(['umount', '-l', MNT], capture_output=True)
    if t.errors:
        fail('%s: %s' % (what, t.errors[0]))
    return stuck


def main():
    rng = random.Random(int(os.environ.get('SEED', '7')))
    zr('create', DS, '--field', 'txt:bytes:flate:ext=txt', '--field', 'lab:i64:shape=')
    for i in range(N0):
        p = '%s.v' % DS
        open(p + 't', 'wb').write(b'value %d ' % i * (i % 7 + 1))
        open(p + 'l', 'wb').write(i.to_bytes(8, 'little'))
        zr('put', DS, '--txt=' + p + 't', '--lab=' + p + 'l')
    n, values = snapshot()
    aborted = 0
    for trial in range(TRIALS):
        d = start_daemon('trial %d' % trial)
        t = Trial(n, values, rng)
        aborted += run_trial(t, d, 'trial %d' % trial)
        r = zr('verify', DS, check=False)
        if r.returncode != 0:
            fail('trial %d: zr verify: %s%s' % (trial, r.stdout.decode(), r.stderr.decode()))
        n2, values2 = snapshot()
        if n2 < n:
            fail('trial %d: %d records, %d before' % (trial, n2, n))
        for key, v in values.items():
            now = values2.get(key)
            if key in t.durable:
                tried, at = t.history[key], t.durable[key]
                if now not in tried[at:]:  # the fsync'd value, or one tried after it
                    fail('trial %d: %s/%d: an fsync\'d value was lost: %s'
                         % ((trial,) + key + (which(now, v, tried, at),)))
            elif key in t.had and len(t.had[key]) > 1:
                if now not in t.had[key]:
                    fail('trial %d: %s/%d: a value it never had' % ((trial,) + key))
            elif now != v:
                fail('trial %d: %s/%d changed though nobody wrote it' % ((trial,) + key))
        n, values = n2, values2
    print('%d daemons killed while writing (%d stuck until the mount was aborted); '
          'every fsync\'d value kept' % (TRIALS, aborted))
    aborted = tree_trials(rng, TRIALS)
    print('%d daemons killed while saving, moving and removing in tree/ (%d stuck until the '
          'mount was aborted); every save whose fsync returned kept' % (TRIALS, aborted))
    kills = int(os.environ.get('PROGRAM_KILLS', '60'))
    program_kills(rng, kills)
    print('%d writing programs killed: every record old or whole, no new file cut short'
          % kills)
    ro = int(os.environ.get('FOLLOW_KILLS', str(TRIALS)))
    aborted = follow_trials(rng, ro)
    print('%d read-only daemons killed while following another writer\'s commits under '
          'readers (%d stuck until the mount was aborted)' % (ro, aborted))


main()
