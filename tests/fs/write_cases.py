"""write_cases.py - the cases of a writable mount that once went wrong, each
with real system calls on a real mount.

usage: write_cases.py ZR ZRFS MKDS SCRATCH [CASE...]   (all, or those named)

- new files are listed as soon as they are closed, before their group is
  committed (ls after cp -r counted fewer);
- a rename followed at once by an open for writing of the new name writes
  the record that name is now (it wrote the source record, whose inode the
  kernel kept at that name);
- stat of a record being written shows its stored size until it is
  published, but to its writer (fstat after open(O_TRUNC) showed the old
  size, and Python's mmap refused to map what had been written);
- a record emptied by open(O_TRUNC) and closed with nothing written reads
  empty at the next open (: > f; cat f read the old value: the close that
  publishes it came after);
- a new file opened twice and truncated by its name (the O_TRUNC of an
  open that has no handle yet) does not hang the mount;
- a record replaced over and over (open with O_TRUNC, write, close) has
  each value whole: the RELEASE of one close came after the next open's
  truncation and stored it (an empty value; in a fixed-shape field it was
  refused, and what the next writer had written so far dropped with it);
- a new file opened, appended to and closed again and again (a shell's
  >>) keeps every line: a close while its group stored the file (which
  then made it its record's) found it a new file, ready already, and what
  was appended since was never stored (5% of 6 files' lines were lost);
  and one written on after a duplicate of its descriptor was closed (as
  sh's printf a >&3 does) reads what was written once closed (it read
  what the group stored, 5 of 60 times);
- an fsync of a new file just closed and opened again is durable when it
  returns, also when the group that stores new files took the file in
  between (it made the file its record's, and the fsync committed nothing
  of what was written since);
- O_APPEND appends at the end of what is being written: Python's
  WatchedFileHandler, which stats the file before every line, keeps every
  line (it kept two of five);
- opening a large record for writing without O_TRUNC copies it into a
  private file, not into the daemon's memory (8 opens of one record took
  eight copies of it);
- a file still being written when the daemon is told to stop is logged, its
  name escaped (a newline in a name forged a line; the file was dropped
  silently).
- a name never reads another file's bytes while records move under it:
  files of B/ read over and over while A/'s are removed (removing a record
  moves the last one into its id; B's files read the removed A's bytes
  until the commit was in the view), and two threads that each create,
  read back and remove their own files.
- a file made through the mount, opened for reading, reads the value it
  had at the open until closed, whole, when it is written anew and
  committed meanwhile (its number follows the record: each read showed the
  value of its own moment, the start of the old and the rest of the new),
  and so does a record's file not made through the mount, opened before
  its number is first opened for writing;
- an atomic save acknowledged by fsync of its directory is what the
  record holds, with six threads saving and moving their own records at
  once (a rename while a group stored the new file stored it as a new
  record under its temporary name: a stray record, and the save lost once
  remounted).
- fstat of a record's file (written through the mount or not) opened,
  then removed or replaced by a save (a new file renamed onto its name),
  gives its size and no link, before the change is committed and after,
  and it reads its old bytes (ESTALE: the number a written file kept was
  nobody's once the record's value was gone; 1 link for a replaced file
  not written through the mount);
- a file made through the mount in a flate field, rewritten and committed
  while a reader has it open: that reader reads the old value whole, and
  one opening it after the commit the new one (the inflated values were
  cached under the record's version, which goes back to 0 when the kernel
  holds no number of the record: the first reader read the old value's
  start and the new one's rest, as CI saw once, or the second the old
  value);
- a file removed or replaced and committed while the kernel holds its
  inode opens again (through /proc/self/fd, as an open racing the change
  after its lookup does) and reads the bytes it had, with no link: a file
  written in place, one saved by a rename, and a record's own, in a raw
  and a flate field (ESTALE, which an open that raced twice returned);
- a program writing more large values at once than the daemon has
  descriptors for gets ENOSPC past a quarter of them, and another
  program's save beside it is committed (every commit failed "Too many
  open files");
- a new file opened for reading before its group stores it reads its
  bytes, whole, after it is stored and then removed or replaced by a
  rename, and fstat of it gives its size and no link (its reads followed
  the number to the record, gone by then: ENOENT); and with one thread
  writing anew and removing eight files while three open and read them,
  no read of a file that opened fails (1 or 2 did in 40 s) and the mount
  never stops answering (a lookup of a file being published waited for
  the publisher, which waited for the lookup's lock);
- new files in tree/ committed by their own fsync, one after the other,
  while two threads list their directory: no listing gives a name twice
  (a view that had the commit was published before the files were marked
  as its records: 572 of 15,358 listings did);
- a new file renamed over and over (n0 to n1 to n2 ...), in tree/ and in a
  field directory, for CHAIN_SECS seconds (default 3): every rename
  returns 0, the directory then holds the last name alone with the file's
  bytes, and the dataset one record for it (a rename's ENOENT, and the
  name before coming back, were seen in 2 of 10 runs of 0.5 s);
- six threads holding record files open fstat and read them while two
  rewrite those records, each write fsync'd, for HELD_SECS seconds
  (default 3): no call on a held file fails (ESTALE was seen);
- record files removed (rm, 30 of them, a quarter open) are gone from
  stat, ls and open at once, read whole with no link through a descriptor
  opened before, and a new file under a removed name is the new one: the
  removals wait for a group as new files do, and a sync of the directory
  commits them (each removal was a commit of its own: rm -rf of 34,000
  files took minutes); once committed, the mount still says the open
  files have no link (it said 1: their numbers showed the view before);
- a record's file opened for writing (touch) and renamed is gone from
  its old name (the number it kept as the file's identity was the one a
  lookup of the old name gave, and showed the moved file there);
- a new file with one byte written at 4 GiB - 20 takes the disk space of
  its data, not 4 GB: its hole stays a hole in the value being written and
  in the chunk it is stored in, and reads as zeros.
- a new file that another process has open while its group stores it,
  then punches a hole in or truncates, and closes: a reader after that
  close reads the change (the close did not publish it, as the writer of
  the first bytes was still counted the file's; the group's bytes were
  read until the last close stored it: 26 of 50 times, and posix.py's
  u_fallocate_kills_setuid differed 1 run in 4).

Exit 0 on success; a message and 1 on the first failure.
"""
import ctypes
import errno
import logging
import logging.handlers
import os
import random
import resource
import signal
import subprocess
import sys
import threading
import time

ZR, ZRFS, MKDS, T = sys.argv[1:5]
ONLY = set(sys.argv[5:])
DS, MNT, LOG = os.path.join(T, 'ds'), os.path.join(T, 'mnt'), os.path.join(T, 'log')
LIBC = ctypes.CDLL(None, use_errno=True)
DAEMON = []


def fail(msg):
    print('FAIL: ' + msg, file=sys.stderr)
    for d in DAEMON:
        d.kill()
    for m in (MNT, os.path.join(T, 'storm.mnt'), os.path.join(T, 'fds.mnt'),
              os.path.join(T, 'once.mnt')):
        subprocess.run(['umount', '-l', m], capture_output=True)
    sys.exit(1)


def zr(*args):
    r = subprocess.run([ZR] + list(args), capture_output=True)
    if r.returncode != 0:
        fail('zr %s: %s' % (' '.join(args), r.stderr.decode()))
    return r.stdout


def mount():
    d = subprocess.Popen([ZRFS, DS, MNT, '-o', 'writable', '-f'], stderr=open(LOG, 'ab'))
    DAEMON[:] = [d]
    while not os.path.ismount(MNT):
        if d.poll() is not None:
            fail('zrfs exited %s: %s' % (d.returncode, open(LOG).read()[-300:]))
    return d


def unmount(d):
    subprocess.run(['fusermount3', '-u', MNT], capture_output=True)
    if d.wait(60) != 0:
        fail('zrfs exited %d: %s' % (d.returncode, open(LOG).read()[-300:]))


def sync(field):
    fd = os.open(os.path.join(MNT, field), os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(fd)
    os.close(fd)


def anon_kb(pid):
    """The daemon's private memory now (RssAnon: not the page cache it maps)."""
    for line in open('/proc/%d/status' % pid):
        if line.startswith('RssAnon:'):
            return int(line.split()[1])
    return 0


def listed_before_committed(d):
    src = os.path.join(T, 'many')
    os.makedirs(src)
    for i in range(300):
        open(os.path.join(src, 'f%03d.jpg' % i), 'wb').write(b'%d' % i * (i + 1))
    before = len(os.listdir(os.path.join(MNT, 'img')))
    subprocess.run(['cp', '-r', src + '/.', os.path.join(MNT, 'img') + '/'], check=True)
    now = len(os.listdir(os.path.join(MNT, 'img')))
    if now != before + 300:
        fail('ls right after cp -r of 300 files: %d entries, %d before' % (now, before))
    sync('img')
    now = len(os.listdir(os.path.join(MNT, 'img')))
    if now != before + 300:
        fail('ls after their commit: %d entries, %d before' % (now, before))
    return '300 files listed at once'


def rename_then_write(d):
    img = os.path.join(MNT, 'img')
    present = sorted(int(n.split('.')[0]) for n in os.listdir(img) if n[0].isdigit())
    pairs = list(zip(present[0::2], present[1::2]))[:50]
    for a, b in pairs:
        os.rename('%s/%d.jpg' % (img, a), '%s/%d.jpg' % (img, b))
        with open('%s/%d.jpg' % (img, b), 'wb') as f:
            f.write(b'written after the rename %d' % a)
    for a, b in pairs:
        if os.path.exists('%s/%d.jpg' % (img, a)):
            fail('img/%d.jpg is back after it was renamed onto img/%d.jpg' % (a, b))
        if zr('cat', DS, 'img', str(b)) != b'written after the rename %d' % a:
            fail('a write through img/%d.jpg just after mv %d.jpg %d.jpg went elsewhere'
                 % (b, a, b))
    return '%d renames, each written at once' % len(pairs)


def stat_shows_the_stored_size(d):
    p = os.path.join(MNT, 'img', '199.jpg')  # no case before touches it
    old = os.stat(p).st_size

    def other():  # another process's stat(2)
        return int(subprocess.run(['stat', '-c', '%s', p], check=True,
                                  capture_output=True).stdout)

    fd = os.open(p, os.O_WRONLY | os.O_APPEND)
    os.write(fd, b'x' * 1000)
    for _ in range(2):  # the writer's and the other's, in turn: neither cached
        if other() != old:
            fail('stat of a record being written, by another process: %d, not its stored %d'
                 % (other(), old))
        if os.stat(p).st_size != old + 1000 or os.fstat(fd).st_size != old + 1000:
            fail('stat and fstat of a record being written, by its writer: %d and %d, not %d'
                 % (os.stat(p).st_size, os.fstat(fd).st_size, old + 1000))
    # a listing and a stat of each entry (what ls -l does), by the writer:
    # its entry shows the size being written, and fstat after it too
    with os.scandir(os.path.dirname(p)) as it:
        listed = {e.name: e.stat().st_size for e in it}
    if listed['199.jpg'] != old + 1000 or os.fstat(fd).st_size != old + 1000:
        fail('a listing by the writer of a record it writes: %d, then fstat %d, not %d'
             % (listed['199.jpg'], os.fstat(fd).st_size, old + 1000))
    if other() != old:
        fail('stat by another process after the listing: %d, not the stored %d' % (other(), old))
    os.close(fd)
    if os.stat(p).st_size != old + 1000 or other() != old + 1000:
        fail('stat once written: %d, not %d' % (os.stat(p).st_size, old + 1000))
    return 'its writer sees its size, others the stored one until the close'


def emptied_then_read(d):
    p = os.path.join(MNT, 'img', '198.jpg')  # no case before touches it
    for k in range(60):
        with open(p, 'wb') as f:
            f.write(b'full %d' % k)
        # open(O_TRUNC) and close, nothing written (: > f): the next open
        # reads it empty, in this process and in another
        os.close(os.open(p, os.O_WRONLY | os.O_TRUNC))
        with open(p, 'rb') as f:
            got = f.read()
        if got:
            fail('img/198.jpg read %r just after an open(O_TRUNC) was closed' % got)
    out = subprocess.run(['sh', '-c', 'echo full > "$1"; : > "$1"; cat "$1"', 'sh', p],
                         check=True, capture_output=True).stdout
    if out:
        fail(': > f; cat f printed %r' % out)
    return '60 opens with O_TRUNC closed: read empty at once'


def replaced_over_and_over(d):
    records, rounds, wrong = (180, 181, 182, 183), 300, []
    said = len(open(LOG, 'rb').read())

    def writer(r):
        p = os.path.join(MNT, 'lab', str(r))
        for k in range(rounds):
            v = (k * 1000003 + r).to_bytes(8, 'little')
            fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
            os.pwrite(fd, v[4:], 4)  # in two pieces, the second half first
            os.pwrite(fd, v[:4], 0)
            os.close(fd)  # returns once the mount shows the value
            with open(p, 'rb') as f:
                got = f.read()
            if got != v and not wrong:
                wrong.append('lab/%d: round %d read %s after its close, not %s'
                             % (r, k, got.hex(), v.hex()))
    threads = [threading.Thread(target=writer, args=(r,)) for r in records]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if wrong:
        fail(wrong[0])
    text = open(LOG, 'rb').read()[said:].decode(errors='replace')
    if 'not stored' in text:
        fail('a value replaced over and over was refused: %s' % text[-300:])
    return '%d values, each whole' % (len(records) * rounds)


def fsync_beside_its_group(d):
    img = os.path.join(MNT, 'img')
    gone = [i for i in range(150, 200) if not os.path.exists('%s/%d.jpg' % (img, i))]
    if not gone:
        fail('the dataset has no record without an img value')
    rng = random.Random(5)
    for k in range(40):
        p = '%s/%d.jpg' % (img, gone[0])
        with open(p, 'wb') as f:  # a new file: stored by the next group
            f.write(b'first %d' % k)
        # the group comes -o commit_ms (100 ms) after: open it again about then
        time.sleep(rng.uniform(0.09, 0.11))  # the instant, not a synchronisation
        fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
        os.write(fd, b'second %d' % k)
        os.fsync(fd)
        stored = zr('cat', DS, 'img', str(gone[0]))
        os.close(fd)
        if stored != b'second %d' % k:
            fail('img/%d.jpg: the dataset holds %r after the fsync of %r'
                 % (gone[0], stored, b'second %d' % k))
        os.unlink(p)
    return '40 fsyncs durable'


def appended_across_groups(d):
    img = os.path.join(MNT, 'img')
    rng = random.Random(7)
    for k in range(6):
        p = '%s/appended%d.jpg' % (img, k)
        want = b''
        for i in range(150):  # open, append a line, close: as a shell's >> does
            line = b'line %d of %d\n' % (i, k)
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.write(fd, line)
            os.close(fd)
            want += line
            time.sleep(rng.uniform(0, 0.002))  # spread over groups, not a synchronisation
        got = open(p, 'rb').read()
        if got != want:
            fail('%s: %d bytes of %d appended read back (the lines closed while its group '
                 'stored it are lost)' % (p, len(got), len(want)))
    sync('img')
    return '6 files of 150 appends, whole'


def written_after_a_dup_closed(d):
    img = os.path.join(MNT, 'img')
    rng = random.Random(3)
    for k in range(60):
        p = '%s/dup%d.jpg' % (img, k)
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, b'a')
        os.close(os.dup(fd))  # as sh restores its stdout after printf a >&3: ready
        # its group comes -o commit_ms (100 ms) after: write on about then
        time.sleep(rng.uniform(0.095, 0.105))  # the instant, not a synchronisation
        os.write(fd, b'b')
        os.close(fd)
        got = open(p, 'rb').read()
        if got != b'ab':
            fail('%s reads %r after b was written and it was closed' % (p, got))
    sync('img')
    return '60 files whole'


def opened_twice_and_truncated(d):
    p = os.path.join(MNT, 'img', 'twice.jpg')
    fds = [os.open(p, os.O_WRONLY | os.O_CREAT) for _ in range(2)]
    done = threading.Event()

    def truncs():
        for size in (0, 3, 0):
            os.truncate(p, size)
        os.write(fds[0], b'abc')
        for fd in fds:
            os.close(fd)
        done.set()
    threading.Thread(target=truncs, daemon=True).start()
    if not done.wait(30):
        fail('a new file opened twice and truncated by its name hung the mount')
    open(os.path.join(MNT, 'img', 'after.jpg'), 'wb').write(b'after')
    sync('img')
    return 'no hang'


def watched_file_handler(d):
    p = os.path.join(MNT, 'txt', '6.txt')  # a record with a value: lines go after it
    old = open(p).read()
    log = logging.getLogger('zrfs-test')
    h = logging.handlers.WatchedFileHandler(p)
    h.setFormatter(logging.Formatter('%(message)s'))
    log.addHandler(h)
    log.setLevel(logging.INFO)
    for i in range(5):
        log.info('line %d', i)
        os.stat(p)  # another program looking at it meanwhile
    h.close()
    log.removeHandler(h)
    got = open(p).read()
    want = old + ''.join('line %d\n' % i for i in range(5))
    if got != want:
        fail('WatchedFileHandler appending to txt/6.txt: %r, not %r'
             % (got[len(old) - 10:], want[len(old) - 10:]))
    return '5 lines of 5'


def big_record_opened_eight_times(d):
    p = os.path.join(MNT, 'img', '1.jpg')
    big = 48 << 20
    with open(p, 'wb') as f:
        f.write(b'z' * big)
    before, peak, stop = anon_kb(d.pid), [0], threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], anon_kb(d.pid))
    sampler = threading.Thread(target=sample)
    sampler.start()
    fds = [None] * 8

    def writer(k):  # eight programs open it at once, each writes a byte
        fds[k] = os.open(p, os.O_RDWR)
        os.pwrite(fds[k], b'%d' % k, k)
    threads = [threading.Thread(target=writer, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for fd in fds:
        os.close(fd)
    stop.set()
    sampler.join()
    grown = peak[0] - before
    if grown > 24 << 10:
        fail('8 writers of a 48 MiB record grew the daemon by %d MiB' % (grown >> 10))
    got = zr('cat', DS, 'img', '1')
    if len(got) != big or got[:8] != b'01234567' or got[8:64] != b'z' * 56:
        fail('img/1 after 8 writers: %d bytes, %r' % (len(got), got[:16]))
    return 'the daemon grew %d MiB at most' % (grown >> 10)


def reads_while_removing(d):
    img = os.path.join(MNT, 'img')
    wrong, reads = [], [0]

    def value(d, k):
        return ('%s %d\n' % (d, k)).encode() * (k + 1)

    def reader(b, stop):
        while not stop:
            for k in range(64):
                got = open(os.path.join(img, b, 'f%d' % k), 'rb').read()
                reads[0] += 1
                if got != value(b, k):
                    wrong.append('%s/f%d read %r' % (b, k, got[:12]))

    def cycle(c):
        os.mkdir(os.path.join(img, c))
        for k in range(64):
            p = os.path.join(img, c, 'f%d' % k)
            open(p, 'wb').write(value(c, k))
            got = open(p, 'rb').read()
            reads[0] += 1
            if got != value(c, k):
                wrong.append('%s/f%d read back %r' % (c, k, got[:12]))
            os.unlink(p)

    # 10 rounds, or READ_REMOVE_SECS seconds of them
    end, r = time.monotonic() + float(os.environ.get('READ_REMOVE_SECS', '0')), -1
    while r < 9 or time.monotonic() < end:
        r += 1
        a, b = 'A%d' % r, 'B%d' % r
        for x in (a, b):
            os.mkdir(os.path.join(img, x))
            for k in range(64):
                open(os.path.join(img, x, 'f%d' % k), 'wb').write(value(x, k))
        sync('img')
        stop = []
        t = threading.Thread(target=reader, args=(b, stop))
        t.start()
        for k in range(64):
            os.unlink(os.path.join(img, a, 'f%d' % k))
        stop.append(1)
        t.join()
        pair = [threading.Thread(target=cycle, args=('C%d%s' % (r, x),)) for x in 'xy']
        for t in pair:
            t.start()
        for t in pair:
            t.join()
    if wrong:
        fail('%d of %d reads returned another file\'s bytes: %s' % (len(wrong), reads[0], wrong[:3]))
    return '%d reads while records moved, each its own file\'s bytes' % reads[0]


def held_under_commits(d):
    # six threads hold five record files each open and fstat and read them
    # while two rewrite those records, each write fsync'd (a commit): no
    # call on a held file fails (fstat gave ESTALE hundreds of times in
    # 30 s of such commits); HELD_SECS seconds (default 3)
    txt = os.path.join(MNT, 'txt')
    for i in range(30):
        open(os.path.join(txt, '%d.txt' % i), 'wb').write(b'v-')
    sync('txt')
    end = time.monotonic() + float(os.environ.get('HELD_SECS', '3'))
    errors, reads, writes = [], [0], [0]

    def reader(k):
        fds = [os.open(os.path.join(txt, '%d.txt' % i), os.O_RDONLY) for i in range(k * 5, k * 5 + 5)]
        try:
            while time.monotonic() < end and not errors:
                for fd in fds:
                    try:
                        os.fstat(fd)
                        if not os.pread(fd, 64, 0).startswith(b'v'):
                            errors.append('a held file read bytes no write gave it')
                        reads[0] += 1
                    except OSError as e:
                        errors.append('fstat or read of a held file: %s' % e)
        finally:
            for fd in fds:
                os.close(fd)

    def writer(k):
        i = k
        while time.monotonic() < end and not errors:
            fd = os.open(os.path.join(txt, '%d.txt' % (i % 30)), os.O_WRONLY | os.O_TRUNC)
            try:
                os.write(fd, b'v%d' % i)
                os.fsync(fd)
            finally:
                os.close(fd)
            writes[0] += 1
            i += 2

    threads = [threading.Thread(target=reader, args=(k,)) for k in range(6)]
    threads += [threading.Thread(target=writer, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        fail('%d failed calls on held files (%d reads, %d commits): %s' % (len(errors), reads[0], writes[0], errors[:3]))
    return '%d reads of held files across %d commits, none failed' % (reads[0], writes[0])


def read_across_a_commit(d):
    img = os.path.join(MNT, 'img')
    old, new = b'old value, ' * 2000, b'NEW VALUE; ' * 3000
    p = os.path.join(img, 'across.jpg')
    open(p, 'wb').write(old)
    sync('img')  # a record now, the file keeps its number
    torn = 0
    for k in range(20):
        with open(p, 'rb', buffering=0) as r:
            head = r.read(100)
            with open(p, 'wb') as w:  # written anew, committed at its close
                w.write(new if k % 2 == 0 else old)
            sync('img')
            got = head + r.read()
        want = old if k % 2 == 0 else new
        if got != want:
            torn += 1
        if os.stat(p).st_size != len(new if k % 2 == 0 else old):
            fail('read_across_a_commit: the name does not show the value written')
    if torn:
        fail('%d of 20 reads across a commit were not the value opened, whole' % torn)
    # a record's file not made through the mount, opened for reading before
    # its number is first opened for writing (and kept as the file's)
    torn, n = [], 0
    for k in range(60, 80):
        p = '%s/%d.jpg' % (img, k)
        if not os.path.exists(p):
            continue
        n += 1
        with open(p, 'rb', buffering=0) as r:
            head = r.read(100)
            was = head + open(p, 'rb').read()[100:]
            with open(p, 'wb') as w:
                w.write(new)
            sync('img')
            got = head + r.read()
        if got != was:
            torn.append('%d.jpg: %d bytes, %d opened' % (k, len(got), len(was)))
    if torn:
        fail('%d of %d reads of records across their first write were not the value '
             'opened, whole: %s' % (len(torn), n, '; '.join(torn[:3])))
    return '20 reads across a commit, each the value opened (and %d of records)' % n


def touched_then_moved(d):
    img = os.path.join(MNT, 'img')
    back, moved = [], 0
    for k in range(120, 160):
        p, to = '%s/%d.jpg' % (img, k), '%s/moved%d.jpg' % (img, k)
        if not os.path.exists(p):
            continue
        value = open(p, 'rb').read()
        fd = os.open(p, os.O_WRONLY)  # touch: opened for writing, nothing written
        os.utime(fd, (1e9, 1e9))
        os.close(fd)
        if k % 2:  # the kernel forgets the number (the mount keeps it)
            open('/proc/sys/vm/drop_caches', 'w').write('2')
        os.rename(p, to)
        moved += 1
        if os.path.exists(p):
            back.append(k)
        if open(to, 'rb').read() != value:
            fail('img/%d.jpg touched and moved: its new name reads other bytes' % k)
    if back:
        fail('%d of %d files touched and moved are still at their old names: %s'
             % (len(back), moved, back[:5]))
    return '%d files touched, moved, gone from their old names' % moved


def gone_while_open(how, first):
    """Record files first..first+19 of img/ (the odd ones written through
    the mount first: their numbers are the files' from then on) opened,
    then @how: 'removed', or 'replaced' by a save; fstat of each, before
    the change is committed and after, gives its size and no link, and
    it reads its bytes."""
    img = os.path.join(MNT, 'img')
    wrong, n = [], 0
    for k in range(first, first + 20):
        p = '%s/%d.jpg' % (img, k)
        if not os.path.exists(p):
            continue
        if k % 2:
            with open(p, 'r+b') as f:
                f.write(b'rewritten %d' % k)
        old = open(p, 'rb').read()
        fd = os.open(p, os.O_RDONLY)
        if how == 'removed':
            os.unlink(p)
        else:  # a save
            with open('%s/.save%d' % (img, k), 'wb') as f:
                f.write(b'saved %d' % k)
            os.rename('%s/.save%d' % (img, k), p)
        n += 1
        for when in (how, 'committed'):
            try:
                st = os.fstat(fd)
                if st.st_nlink != 0 or st.st_size != len(old) or \
                        os.pread(fd, 1 << 16, 0) != old:
                    wrong.append('%d.jpg, %s: links %d, size %d (%d before)'
                                 % (k, when, st.st_nlink, st.st_size, len(old)))
            except OSError as e:
                wrong.append('%d.jpg, %s: %s' % (k, when, e))
            if when == how:
                sync('img')
        os.close(fd)
        if how == 'replaced' and (zr('cat', DS, 'img', str(k)) != b'saved %d' % k or
                                  open(p, 'rb').read() != b'saved %d' % k):
            wrong.append('%d.jpg does not hold what was saved onto it' % k)
    if wrong:
        fail('fstat of %d files %s while open: %s' % (n, how, '; '.join(wrong[:3])))
    return '%d files %s while open, each with its size, bytes and no link' % (n, how)


def removed_while_open(d):
    return gone_while_open('removed', 100)


def replaced_while_open(d):
    return gone_while_open('replaced', 120)


def read_beside_an_older_reader(d):
    """A file made through the mount in a flate field (the kernel holds its
    own number, none of its record's), rewritten while a reader holds it
    open: that reader reads on the old value, whole, and one opening it
    after the commit reads the new one, whichever reads first."""
    txt = os.path.join(MNT, 'txt')
    wrong = []
    for k in range(8):
        p = '%s/older%d.txt' % (txt, k)
        old, new = b'old %d\n' % k * (50 + k), b'new value %d\n' % k * (80 + k)
        with open(p, 'wb') as f:
            f.write(old)
        sync('txt')
        with open(p, 'rb') as a:
            first = a.read(10)
            with open(p, 'wb') as f:
                f.write(new)
            sync('txt')
            if k % 2:  # the older reader goes on first, or the newer reads first
                rest = a.read()
            with open(p, 'rb') as b:
                now = b.read()
            if not k % 2:
                rest = a.read()
        if first + rest != old:
            wrong.append('%s: the reader before the commit read %d bytes, not the old %d'
                         % (p, len(first + rest), len(old)))
        if now != new:
            wrong.append('%s: a reader after the commit read %s'
                         % (p, 'the old value' if now == old else '%d bytes' % len(now)))
    if wrong:
        fail('; '.join(wrong[:3]))
    return '8 files rewritten under a reader: each reader read one value whole'


def reopened_once_gone(d):
    """Files opened again through /proc/self/fd once removed or replaced and
    committed: the kernel opens the inode it holds, as when a program's
    lookup and open race a rename or an unlink."""
    said = 0
    for field, ext in (('img', '.jpg'), ('txt', '.txt')):
        top = os.path.join(MNT, field)
        for k in range(160, 172):
            p = '%s/%d%s' % (top, k, ext)
            how = ('unlink', 'replace')[k % 2]
            if k % 4 >= 2:  # written in place: its number is the file's from now on
                with open(p, 'wb') as f:
                    f.write(b'in place %d\n' % k * 40)
            elif k % 8 >= 4:  # saved: a new file renamed onto it
                with open(p + '.new', 'wb') as f:
                    f.write(b'saved %d\n' % k * 30)
                os.rename(p + '.new', p)
            sync(field)
            if not os.path.exists(p):
                continue
            fd = os.open(p, os.O_RDONLY)
            had = os.read(fd, 1 << 20)
            if how == 'unlink':
                os.unlink(p)
            else:
                with open(p + '.new', 'wb') as f:
                    f.write(b'the next value')
                os.rename(p + '.new', p)
            sync(field)
            try:
                again = os.open('/proc/self/fd/%d' % fd, os.O_RDONLY)
                got, links = os.read(again, 1 << 20), os.fstat(again).st_nlink
                os.close(again)
            except OSError as e:
                fail('%s/%d%s (%s) opened again once gone: %s' % (field, k, ext, how, e))
            finally:
                os.close(fd)
            if got != had or links != 0:
                fail('%s/%d%s (%s) opened again once gone: %d bytes, %d links (it had %d '
                     'bytes)' % (field, k, ext, how, len(got), links, len(had)))
            said += 1
    return '%d files removed or replaced read their bytes opened again' % said


class _Statx(ctypes.Structure):
    _fields_ = [('mask', ctypes.c_uint32), ('blksize', ctypes.c_uint32),
                ('attributes', ctypes.c_uint64), ('nlink', ctypes.c_uint32),
                ('uid', ctypes.c_uint32), ('gid', ctypes.c_uint32), ('mode', ctypes.c_uint16),
                ('spare0', ctypes.c_uint16), ('ino', ctypes.c_uint64), ('size', ctypes.c_uint64),
                ('rest', ctypes.c_uint8 * 200)]


def statx_now(fd):
    """(links, size) of open file @fd as the filesystem has them now."""
    st = _Statx()
    # AT_EMPTY_PATH | AT_STATX_FORCE_SYNC; STATX_NLINK | STATX_SIZE
    if LIBC.statx(fd, b'', 0x1000 | 0x2000, 0x4 | 0x200, ctypes.byref(st)) < 0:
        raise OSError(ctypes.get_errno(), 'statx')
    return st.nlink, st.size


def removed_in_groups(d):
    img = os.path.join(MNT, 'img')
    gen0 = zr('info', DS)
    ks = [k for k in range(150, 190) if os.path.exists('%s/%d.jpg' % (img, k))]
    was = {k: open('%s/%d.jpg' % (img, k), 'rb').read() for k in ks}
    fds = {k: os.open('%s/%d.jpg' % (img, k), os.O_RDONLY) for k in ks[::4]}
    for k in ks:
        os.unlink('%s/%d.jpg' % (img, k))
        if os.path.exists('%s/%d.jpg' % (img, k)):
            fail('%d.jpg is there right after rm' % k)
    listed = set(os.listdir(img))
    back = ['%d.jpg' % k for k in ks if '%d.jpg' % k in listed]
    if back:
        fail('ls right after rm lists %s' % back[:3])
    for k, fd in fds.items():
        st = os.fstat(fd)
        got = os.pread(fd, len(was[k]) + 1, 0)
        if st.st_nlink != 0 or st.st_size != len(was[k]) or got != was[k]:
            fail('%d.jpg removed while open: links %d, size %d, %d of %d bytes read back'
                 % (k, st.st_nlink, st.st_size, len(got), len(was[k])))
    for k in ks[:3]:  # a new file under a removed name is the new one
        open('%s/%d.jpg' % (img, k), 'wb').write(b'anew %d' % k)
    for k in ks[:3]:
        if open('%s/%d.jpg' % (img, k), 'rb').read() != b'anew %d' % k:
            fail('%d.jpg made anew after rm reads another value' % k)
    sync('img')  # durable: the dataset has the removals, and the new values
    # and once committed, asked of the mount (statx AT_STATX_FORCE_SYNC: the
    # kernel's copy set aside), still no link (the number of the view before
    # the commit said 1)
    for k, fd in fds.items():
        links, size = statx_now(fd)
        os.close(fd)
        if links != 0 or size != len(was[k]):
            fail('%d.jpg removed while open, committed: links %d, size %d of %d'
                 % (k, links, size, len(was[k])))
    for k in ks:
        r = subprocess.run([ZR, 'cat', DS, 'img', str(k)], capture_output=True)
        want = b'anew %d' % k if k in ks[:3] else None
        if (want is None and r.returncode == 0) or (want is not None and r.stdout != want):
            fail('after sync of img/, record %d holds %r' % (k, r.stdout[:20]))
    if zr('info', DS) == gen0:
        fail('zr info: nothing committed')
    return '%d files removed (%d open), each gone at once, read whole while open' % (
        len(ks), len(fds))


def new_file_read_as_it_goes(d):
    img = os.path.join(MNT, 'img')
    wrong = []
    for k in range(10):
        value = b'new file %d, read on; ' % k * (300 + k)
        tmp, p = '%s/.opened%d.jpg' % (img, k), '%s/opened%d.jpg' % (img, k)
        open(tmp, 'wb').write(value)  # a dot name: nothing stores it by itself
        fd = os.open(tmp, os.O_RDONLY)
        head = os.read(fd, 100)
        os.rename(tmp, p)
        sync('img')  # stored and committed: a record, the file keeps its number
        if k % 2:
            os.unlink(p)
        else:
            open(p + '.tmp', 'wb').write(b'another file')
            os.rename(p + '.tmp', p)
        sync('img')
        try:
            got = head + os.read(fd, len(value))
            st = os.fstat(fd)
            if got != value or st.st_size != len(value) or st.st_nlink != 0:
                wrong.append('%s: %d bytes (%d written), fstat %d bytes, %d links'
                             % (p, len(got), len(value), st.st_size, st.st_nlink))
        except OSError as e:
            wrong.append('%s: %s' % (p, e))
        os.close(fd)
    if wrong:
        fail('%d of 10 new files opened for reading, then %s: %s'
             % (len(wrong), 'removed or replaced', '; '.join(wrong[:3])))

    # the same at random: reads that follow their file whatever happens to it
    d = os.path.join(img, 'churn')
    os.mkdir(d)
    end, errs, counts = time.monotonic() + 8, [], [0, 0]  # each thread runs for 8 s

    def writer():
        r = random.Random(7)
        while time.monotonic() < end:
            p = '%s/%d.jpg' % (d, r.randrange(8))
            try:
                if r.random() < 0.3:
                    os.unlink(p)
                else:
                    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
                    os.write(fd, os.urandom(r.randrange(1, 2000)))
                    os.close(fd)
                    counts[0] += 1
            except OSError as e:
                if e.errno != errno.ENOENT:
                    errs.append('write %s: %s' % (p, e))

    def reader(seed):
        r = random.Random(seed)
        while time.monotonic() < end:
            p = '%s/%d.jpg' % (d, r.randrange(8))
            try:
                f = open(p, 'rb', buffering=0)
            except OSError as e:
                if e.errno != errno.ENOENT:
                    errs.append('open %s: %s' % (p, e))
                continue
            with f:
                try:
                    f.read()
                    counts[1] += 1
                except OSError as e:
                    errs.append('read of %s, opened: %s' % (p, e))

    ts = [threading.Thread(target=writer, daemon=True)]
    ts += [threading.Thread(target=reader, args=(k,), daemon=True) for k in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(end - time.monotonic() + 60)
        if t.is_alive():
            fail('new_file_read_as_it_goes: a request has had no answer for 60 s: '
                 'the mount hangs')
    if errs:
        fail('new_file_read_as_it_goes: %d errors in %d writes and %d reads: %s'
             % (len(errs), counts[0], counts[1], '; '.join(errs[:3])))
    return ('10 new files read whole after they were stored and removed or replaced; '
            '%d writes, %d reads of files that opened, none failed' % tuple(counts))


def disk_bytes(top):
    return sum(os.lstat(os.path.join(r, n)).st_blocks * 512
               for r, _, names in os.walk(top) for n in names)


def sparse_stays_sparse(d):
    p = os.path.join(MNT, 'img', 'sparse.jpg')
    at = (4 << 30) - 20  # the largest value is 4 GiB - 16
    before = disk_bytes(DS)
    fd = os.open(p, os.O_WRONLY | os.O_CREAT, 0o644)
    os.pwrite(fd, b'Z', at)
    data = os.lseek(fd, 0, os.SEEK_DATA)  # being written: the hole is its own
    os.close(fd)
    if data < at - 4096:
        fail('lseek(SEEK_DATA) of the file being written found data at %d' % data)
    sync('img')
    grew = disk_bytes(DS) - before
    if grew > 64 << 20:
        fail('a 1-byte write at 4 GiB - 20 took %d MB of disk' % (grew >> 20))
    fd = os.open(p, os.O_RDONLY)
    st, end, mid = os.fstat(fd), os.pread(fd, 9, at - 8), os.pread(fd, 4096, 1 << 31)
    # stored: the chunk's holes (a page at each end of the value may be data)
    hole = os.lseek(fd, 0, os.SEEK_HOLE)
    data = os.lseek(fd, hole, os.SEEK_DATA)
    os.close(fd)
    if st.st_size != at + 1 or end != bytes(8) + b'Z' or mid != bytes(4096):
        fail('the sparse file reads %d bytes, %r at its end, %r... in the middle'
             % (st.st_size, end, mid[:8]))
    if st.st_blocks * 512 > 1 << 20 or hole > 8192 or data < at - 8192:
        fail('the stored sparse file: %d blocks, a hole at %d, data again at %d'
             % (st.st_blocks, hole, data))
    # cp finds the holes (st_blocks, then lseek) and writes none of them
    copy = os.path.join(T, 'sparse.copy')
    subprocess.run(['cp', p, copy], check=True)
    cst = os.stat(copy)
    os.unlink(copy)
    if cst.st_size != at + 1 or cst.st_blocks * 512 > 1 << 20:
        fail('cp of the sparse file made %d bytes in %d blocks' % (cst.st_size, cst.st_blocks))
    os.unlink(p)
    sync('img')
    return 'a 4 GiB file of one byte took %d KB, %d blocks; cp: %d blocks' % (
        grew >> 10, st.st_blocks, cst.st_blocks)


def changed_by_another_once_stored(d):
    img = os.path.join(MNT, 'img')
    for k in range(20):
        p = '%s/another%d.jpg' % (img, k)
        with open(p, 'wb') as f:
            f.write(b'a' * 100)
        opened, go = os.pipe(), os.pipe()
        pid = os.fork()
        if pid == 0:  # another process: its own descriptor table
            code = 1
            try:
                fd = os.open(p, os.O_RDWR)
                os.write(opened[1], b'o')
                os.read(go[0], 1)
                if k % 2:
                    os.ftruncate(fd, 10)
                elif LIBC.fallocate(fd, 3, ctypes.c_long(0), ctypes.c_long(10)) < 0:
                    raise OSError(ctypes.get_errno(), 'fallocate')
                os.close(fd)
                code = 0
            finally:
                os._exit(code)
        os.read(opened[0], 1)
        sync('img')  # its group stores it: the other process holds it open
        os.write(go[1], b'g')
        _, status = os.waitpid(pid, 0)
        for fd in opened + go:
            os.close(fd)
        want = b'a' * 10 if k % 2 else bytes(10) + b'a' * 90
        got = open(p, 'rb').read()
        if status != 0 or got != want:
            fail('%s: %r... (%d bytes) after another process %s it and closed (status %d)'
                 % (p, got[:12], len(got), 'truncated' if k % 2 else 'punched a hole in',
                    status))
        os.unlink(p)
    sync('img')
    return '20 files changed by another process, read as changed'


def mount_beside(ds, mnt, nofile=None):
    """Mount @ds on @mnt (made here, unmounted by fail), the daemon's
    descriptors limited to @nofile if given."""
    os.makedirs(mnt)
    limit = (lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))) \
        if nofile else None
    d = subprocess.Popen([ZRFS, ds, mnt, '-o', 'writable', '-f'], stderr=open(LOG, 'ab'),
                         preexec_fn=limit)
    DAEMON.append(d)
    while not os.path.ismount(mnt):
        if d.poll() is not None:
            fail('zrfs exited %s: %s' % (d.returncode, open(LOG).read()[-300:]))
    return d


def private_files(pid):
    """How many unnamed files (values being written) daemon @pid has open."""
    n = 0
    for fd in os.listdir('/proc/%d/fd' % pid):
        try:
            n += os.readlink('/proc/%d/fd/%s' % (pid, fd)).endswith(' (deleted)')
        except OSError:
            pass
    return n


def values_past_the_descriptors(_):
    """A daemon of 1,024 descriptors; one program writes 1,200 record files
    at once, each value too large for memory (a private file each)."""
    ds, mnt = os.path.join(T, 'fds'), os.path.join(T, 'fds.mnt')
    subprocess.run([MKDS, ds, os.path.join(T, 'fds.ref'), '--records', '1200'], check=True,
                   capture_output=True)
    d = mount_beside(ds, mnt, 1024)
    # the writer keeps them open until it is killed: nothing it wrote is stored
    writer = subprocess.Popen([sys.executable, '-c', '''if 1:
        import errno, os, sys
        fds, refused = [], []
        for i in range(1200):
            fd = os.open(sys.argv[1] + "/img/%d.jpg" % i, os.O_WRONLY | os.O_CREAT)
            fds.append(fd)
            try:
                os.pwrite(fd, b"x", (1 << 20) + 1)
            except OSError as e:
                refused.append((i, e.errno))
        print(len(refused), refused[0][1] if refused else 0, flush=True)
        sys.stdin.read()
        ''', mnt], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    said = writer.stdout.readline().decode().split()
    # another program's save meanwhile is committed
    p = os.path.join(mnt, 'txt', 'other.txt')
    open(p, 'wb').write(b'saved beside it')
    fd = os.open(os.path.join(mnt, 'txt'), os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    except OSError as e:
        fail('values_past_the_descriptors: a save beside the writer failed: %s' % e)
    os.close(fd)
    if open(p, 'rb').read() != b'saved beside it':
        fail('values_past_the_descriptors: the save beside the writer reads other bytes')
    writer.kill()
    writer.wait()
    # its files' releases handled (their private files closed) before the
    # unmount: one racing 1,200 releases was seen to abort the connection
    deadline = time.monotonic() + 60
    while private_files(d.pid):
        if time.monotonic() > deadline:
            fail('values_past_the_descriptors: %d private files still open a minute '
                 'after their writer died' % private_files(d.pid))
    subprocess.run(['fusermount3', '-u', mnt], capture_output=True)
    if d.wait(60) != 0:
        fail('zrfs exited %d: %s' % (d.returncode, open(LOG).read()[-300:]))
    refused, why = int(said[0]), int(said[1])
    if refused and why != errno.ENOSPC:
        fail('values_past_the_descriptors: the writer was told %s, not ENOSPC'
             % os.strerror(why))
    if not 200 <= 1200 - refused <= 300:
        fail('values_past_the_descriptors: %d of 1,200 values kept, a quarter of 1,024 '
             'descriptors expected' % (1200 - refused))
    return '%d values in files at once, the rest ENOSPC; a save beside them kept' % (1200 - refused)


def saves_in_a_storm(_):
    """On a dataset of its own (no names kept: a new file's name is an
    alias of its record), mounted beside the other."""
    ds, mnt = os.path.join(T, 'storm'), os.path.join(T, 'storm.mnt')
    zr('create', ds, '--field', 'img:bytes:ext=png')
    for i in range(30):
        open(os.path.join(T, 'v'), 'wb').write(b'first %d' % i)
        zr('put', ds, '--img=' + os.path.join(T, 'v'))
    d = mount_beside(ds, mnt)
    img = os.path.join(mnt, 'img')
    wrong, done, last = [], [0], {}

    def worker(w):
        rng = random.Random(w)
        for k in range(700):
            i = rng.randrange(w * 5, w * 5 + 5)
            name = os.path.join(img, '%d.png' % i)
            if rng.random() < 0.3:  # away and back
                t = os.path.join(img, 'away%d' % w)
                os.rename(name, t)
                os.rename(t, name)
                continue
            # large enough that a group storing it takes a while: a rename
            # then lands while another thread's fsync stores it
            v = b'saved by %d, %d ' % (w, k) * 8192
            tmp = os.path.join(img, 'save%d.tmp' % w)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.write(fd, v)
            if rng.random() < 0.2:
                os.fsync(fd)
            os.close(fd)
            os.rename(tmp, name)
            fd = os.open(img, os.O_RDONLY | os.O_DIRECTORY)
            os.fsync(fd)
            os.close(fd)
            if open(name, 'rb').read() != v:
                wrong.append('%d.png read other bytes after its save' % i)
            last[i] = v
            done[0] += 1

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    subprocess.run(['fusermount3', '-u', mnt], capture_output=True)
    if d.wait(60) != 0:
        fail('zrfs exited %d: %s' % (d.returncode, open(LOG).read()[-300:]))
    n = int(zr('info', ds).decode().split('records')[1].split()[0])
    wrong += ['%d.png: the dataset holds another value than its last save' % i
              for i, v in sorted(last.items()) if zr('cat', ds, 'img', str(i)) != v]
    if wrong or n != 30:
        fail('%d acknowledged saves: %d lost (%s); %d records, 30 before'
             % (done[0], len(wrong), wrong[:2], n))
    return '%d saves acknowledged by fsync of the directory, each kept' % done[0]


def renamed_along_a_chain(_):
    """On a directory import of its own, mounted beside the other: a new
    file renamed along a chain of names, in tree/ and in the field
    directory, through its groups' commits."""
    src, ds, mnt = (os.path.join(T, x) for x in ('chain.src', 'chain', 'chain.mnt'))
    os.makedirs(os.path.join(src, 'c'))
    open(os.path.join(src, 'c', 'kept.bin'), 'wb').write(b'kept')
    zr('import', 'dir', src, ds)
    d = mount_beside(ds, mnt)
    secs = float(os.environ.get('CHAIN_SECS', '3'))
    said = []
    for where, first in ((os.path.join(mnt, 'tree', 'c'), 'n0.bin'),
                         (os.path.join(mnt, 'data'), 'f0.bin')):
        stem = first[0]
        with open(os.path.join(where, first), 'wb') as f:
            f.write(b'chained')
        k, end = 0, time.monotonic() + secs
        while time.monotonic() < end:
            a, b = (os.path.join(where, '%s%d.bin' % (stem, i)) for i in (k, k + 1))
            try:
                os.rename(a, b)
            except OSError as e:
                fail('%s: rename %s%d -> %s%d: %s (after %d renames)'
                     % (where, stem, k, stem, k + 1, e, k))
            k += 1
        last = '%s%d.bin' % (stem, k)
        # (a field directory lists a committed file by its record's id)
        left = sorted(n for n in os.listdir(where) if n.startswith(stem))
        if os.path.lexists(os.path.join(where, '%s%d.bin' % (stem, k - 1))) or \
                left not in ([last], []):
            fail('%s: after %d renames the directory holds %s, not %s alone'
                 % (where, k, left[:5], last))
        with open(os.path.join(where, last), 'rb') as f:
            if f.read() != b'chained':
                fail('%s/%s: not the bytes renamed' % (where, last))
        said.append('%d in %s' % (k, 'tree/' if 'tree' in where else 'data/'))
    subprocess.run(['fusermount3', '-u', mnt], capture_output=True)
    if d.wait(60) != 0:
        fail('zrfs exited %d: %s' % (d.returncode, open(LOG).read()[-300:]))
    names = zr('export', 'dir', ds, os.path.join(T, 'chain.out'))
    got = sorted(os.path.relpath(os.path.join(r, f), os.path.join(T, 'chain.out'))
                 for r, _, fs in os.walk(os.path.join(T, 'chain.out')) for f in fs)
    if len(got) != 3 or 'c/kept.bin' not in got:
        fail('after the chains the dataset exports %s (%s)' % (got[:6], names))
    return 'renames %s: each returned 0, the last name alone holds the bytes' % ', '.join(said)


def listed_once_across_fsyncs(_):
    """On a directory import of its own (tree/), mounted beside the other:
    new files committed by their fsync (not by the committer, which holds
    its groups while a listing is open) are listed once by a listing at
    any moment, as themselves or as the records they became, never both."""
    src, ds, mnt = (os.path.join(T, x) for x in ('once.src', 'once', 'once.mnt'))
    os.makedirs(os.path.join(src, 'd'))
    open(os.path.join(src, 'd', 'kept.bin'), 'wb').write(b'kept')
    zr('import', 'dir', src, ds)
    d = mount_beside(ds, mnt)
    where = os.path.join(mnt, 'tree', 'd')
    twice, listings, stop = [], [0], []

    def lister():
        while not stop:
            names = os.listdir(where)
            if len(names) != len(set(names)):
                twice.append(sorted({n for n in names if names.count(n) > 1})[:3])
            listings[0] += 1

    ts = [threading.Thread(target=lister) for _ in range(2)]
    for t in ts:
        t.start()
    try:
        for k in range(300):
            fd = os.open(os.path.join(where, 'once%d.bin' % k), os.O_WRONLY | os.O_CREAT, 0o644)
            os.write(fd, b'%d' % k)
            os.fsync(fd)
            os.close(fd)
    finally:
        stop.append(1)
        for t in ts:
            t.join()
    subprocess.run(['fusermount3', '-u', mnt], capture_output=True)
    if d.wait(60) != 0:
        fail('zrfs exited %d: %s' % (d.returncode, open(LOG).read()[-300:]))
    if twice:
        fail('%d of %d listings gave a name twice: %s' % (len(twice), listings[0], twice[:3]))
    return '%d listings while 300 new files were fsync\'d: each name once' % listings[0]


def unstored_at_stop(_):
    d = mount()
    fd = os.open(os.path.join(MNT, 'img', 'held\nopen.jpg'), os.O_WRONLY | os.O_CREAT)
    os.write(fd, b'never closed')
    d.send_signal(signal.SIGTERM)
    if d.wait(60) != 0:
        fail('zrfs exited %d on SIGTERM' % d.returncode)
    try:
        os.close(fd)
    except OSError as e:
        # the daemon is gone: the close's FLUSH was ended with ENOTCONN or
        # ECONNABORTED through /dev/fuse, ECANCELED when it was in an
        # io_uring ring whose task had exited
        if e.errno not in (errno.ENOTCONN, errno.ECONNABORTED, errno.ECANCELED):
            raise
    subprocess.run(['umount', '-l', MNT], capture_output=True)
    text = open(LOG, 'rb').read().decode()
    if 'img/held\\x0aopen.jpg: still being written at unmount, never stored' not in text:
        fail('a file being written at SIGTERM is not logged, escaped: %s' % text[-400:])
    return 'logged'


def main():
    os.makedirs(MNT, exist_ok=True)  # lib.sh made it, and unmounts it on exit
    subprocess.run([MKDS, DS, os.path.join(T, 'ref'), '--records', '200'], check=True,
                   capture_output=True)
    said = []
    d = mount()
    for case in (listed_before_committed, rename_then_write, stat_shows_the_stored_size,
                 emptied_then_read, replaced_over_and_over, fsync_beside_its_group,
                 appended_across_groups,
                 written_after_a_dup_closed, opened_twice_and_truncated,
                 watched_file_handler,
                 big_record_opened_eight_times, reads_while_removing, held_under_commits,
                 read_across_a_commit,
                 read_beside_an_older_reader,
                 touched_then_moved, removed_while_open, replaced_while_open,
                 reopened_once_gone,
                 removed_in_groups,
                 new_file_read_as_it_goes, sparse_stays_sparse,
                 changed_by_another_once_stored):
        if not ONLY or case.__name__ in ONLY:
            said.append('%s: %s' % (case.__name__, case(d)))
    unmount(d)
    if not ONLY or 'saves_in_a_storm' in ONLY:
        said.append('saves_in_a_storm: %s' % saves_in_a_storm(None))
    if not ONLY or 'values_past_the_descriptors' in ONLY:
        said.append('values_past_the_descriptors: %s' % values_past_the_descriptors(None))
    if not ONLY or 'renamed_along_a_chain' in ONLY:
        said.append('renamed_along_a_chain: %s' % renamed_along_a_chain(None))
    if not ONLY or 'listed_once_across_fsyncs' in ONLY:
        said.append('listed_once_across_fsyncs: %s' % listed_once_across_fsyncs(None))
    if not ONLY or 'unstored_at_stop' in ONLY:
        said.append('unstored_at_stop: %s' % unstored_at_stop(None))
    zr('verify', DS)
    print('ok: ' + '; '.join(said))


main()
