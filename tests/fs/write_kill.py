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

Then, on one mount that stays, programs that write are killed instead
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


def start_daemon(what):
    """A writable mount of the dataset, its daemon this process's child."""
    d = subprocess.Popen([ZRFS, DS, MNT, '-o', 'writable', '-f'],
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

    def cut_short(self, e):
        """Whether error @e is that of a request the kill cut short: one
        of DAEMON_GONE; or, after the kill only, EIO (the kernel's page
        cache path fails a page whose request was aborted) or EINTR (an
        unlink ended so once through a ring, in CI, and not again in 3,000
        kills here: zrfs never answers EINTR and this program gets no
        signal)."""
        return e.errno in DAEMON_GONE or (self.killed and e.errno in (errno.EIO, errno.EINTR))

    def name(self, field, i):
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
                    os.unlink(self.name(field, i))
                    continue
                v = (bytes(rng.randrange(256) for _ in range(rng.randrange(1, 3000)))
                     if field == 'txt' else rng.randrange(1 << 62).to_bytes(8, 'little'))
                self.tried(key, v)
                fd = os.open(self.name(field, i), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
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
        while not self.stop:
            with self.lock:
                keys = self.touched[-20:] or [('txt', 0)]
            field, i = rng.choice(keys)
            try:
                with open(self.name(field, i), 'rb') as f:
                    got = f.read()
            except OSError as e:
                if self.cut_short(e):
                    return
                if e.errno != errno.ENOENT:
                    self.errors.append('reader: %s/%d: %s (%s the daemon was killed)'
                                       % (field, i, e, 'after' if self.killed else 'before'))
                continue
            with self.lock:
                had = self.had.get((field, i), set())
                # a file being created (the record had no value) shows what is
                # written so far (zrfs(8)), holes as zeros, as a file being
                # copied does; a value being replaced shows the old one whole
                if got not in had and not (None in had and pieced(got, had)):
                    self.errors.append('reader: %s/%d: %d bytes that it never had (it had %s)'
                                       % (field, i, len(got), explain(got, had)))


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
        threads = [threading.Thread(target=t.writer), threading.Thread(target=t.reader)]
        for th in threads:
            th.start()
        time.sleep(rng.random() * 0.3)   # the instant of the kill, not a synchronisation
        t.killed = True
        d.send_signal(signal.SIGKILL)
        # A thread of the daemon may be telling the kernel about a commit and
        # wait for a directory's lock that a program holds while it waits for
        # the daemon: the daemon then cannot finish dying until the
        # connection is aborted, as umount -f does (zrfs(8), BUGS).
        try:
            d.wait(timeout=2)
        except subprocess.TimeoutExpired:
            umount2(MNT_FORCE)
            d.wait()
            aborted += 1
        t.stop = True
        for th in threads:
            th.join(30)
            if th.is_alive():
                fail('trial %d: a thread is stuck after the daemon died' % trial)
        subprocess.run(['umount', '-l', MNT], capture_output=True)
        if t.errors:
            fail('trial %d: %s' % (trial, t.errors[0]))
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
    kills = int(os.environ.get('PROGRAM_KILLS', '60'))
    program_kills(rng, kills)
    print('%d writing programs killed: every record old or whole, no new file cut short'
          % kills)


main()
