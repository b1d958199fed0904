"""follow.py - a mount follows a dataset that one writer keeps changing.

usage: follow.py ZR DATASET MOUNT COMMITS KILLS

The dataset (made here) has a raw image-like field, a raw i64 label and a
flate f32[4] embedding. Phase 1: one writer makes COMMITS commits with the
zr command, a mix of put, set and rm, with three rebalances among them,
while four reader threads read through the mount: record files, the
label.npy and emb.npy views, and batch files of .batches. Every read is
checked against the states committed so far: a record file's bytes must be
a value that record id has had (or a value in flight, about to be
committed), a whole .npy view must be the array of one such state, a batch
file's records those of their ids. No read may fail but with ENOENT (a
record not in the state shown). After the writer stops, the mount must
equal 'zr export' of the dataset within 2 seconds. Phase 2: KILLS times, a
writer is killed with SIGKILL at a random instant, and the mount must then
show the committed state (old or new) within 2 seconds.

Exit 0 on success; a message and 1 on the first failure.
"""
import errno
import hashlib
import os
import random
import signal
import subprocess
import sys
import shutil
import tempfile
import threading
import time

import numpy as np

ZR, DS, MNT = sys.argv[1], sys.argv[2], sys.argv[3]
COMMITS, KILLS = int(sys.argv[4]), int(sys.argv[5])
FIELDS = ('img', 'lab', 'emb')
H_MISSING = 'missing'


def digest(b):
    return hashlib.sha1(b).hexdigest()


class Failure(Exception):
    pass


def zr(*args, check=True):
    r = subprocess.run([ZR, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if check and r.returncode != 0:
        raise Failure(f"zr {' '.join(args)}: exit {r.returncode}: {r.stderr.decode()}")
    return r


class Model:
    """The records as the writer made them, and every value each (field, id)
    and every .npy view has had in a committed (or committing) state."""

    def __init__(self):
        self.lock = threading.Lock()
        self.records = []  # per id: {field: bytes}
        self.history = {f: {} for f in FIELDS}  # field -> id -> set of digests
        self.arrays = {'lab': set(), 'emb': set()}  # digests of whole .npy data
        self.seq = 0

    def value(self, field):
        self.seq += 1
        r = random.Random(self.seq)
        if field == 'img':
            return r.randbytes(r.choice((0, 1, 7, 300, 5000, 70000)))
        if field == 'lab':
            return np.int64(self.seq).tobytes()
        return np.array([r.random() for _ in range(4)], dtype='<f4').tobytes()

    def note(self):
        """The current records are (about to be) a committed state."""
        with self.lock:
            for i, rec in enumerate(self.records):
                for f in FIELDS:
                    self.history[f].setdefault(i, set()).add(digest(rec[f]))
            for f, size in (('lab', 8), ('emb', 16)):
                self.arrays[f].add(digest(b''.join(rec[f] for rec in self.records)))

    def allowed(self, field, i, d):
        with self.lock:
            return d in self.history[field].get(i, ())

    def array_allowed(self, field, d):
        with self.lock:
            return d in self.arrays[field]


def write_values(tmp, rec, fields):
    args = []
    for f in fields:
        p = os.path.join(tmp, f)
        with open(p, 'wb') as fh:
            fh.write(rec[f])
        args.append(f'--{f}={p}')
    return args


def writer(model, tmp, stop_after):
    rng = random.Random(1)
    rebalances = {stop_after // 4, stop_after // 2, 3 * stop_after // 4}
    for c in range(stop_after):
        n = len(model.records)
        if c in rebalances:
            zr('rebalance', DS)
            continue
        op = rng.random()
        if op < 0.35 or n < 20:
            rec = {f: model.value(f) for f in FIELDS}
            with model.lock:
                model.records.append(rec)
            model.note()
            zr('put', DS, *write_values(tmp, rec, FIELDS))
        elif op < 0.85:
            i = rng.randrange(n)
            fields = rng.sample(FIELDS, rng.randint(1, 3))
            rec = dict(model.records[i])
            for f in fields:
                rec[f] = model.value(f)
            with model.lock:
                model.records[i] = rec
            model.note()
            zr('set', DS, str(i), *write_values(tmp, rec, fields))
        else:
            i = rng.randrange(n)
            with model.lock:
                model.records[i] = model.records[-1]
                model.records.pop()
            model.note()
            zr('rm', DS, str(i))


class Reader(threading.Thread):
    def __init__(self, model, seed, done):
        super().__init__()
        self.model, self.rng, self.done = model, random.Random(seed), done
        self.error, self.reads = None, 0

    def read(self, path):
        with open(path, 'rb', buffering=0) as fh:
            return fh.read()

    def record(self):
        f = self.rng.choice(FIELDS)
        i = self.rng.randrange(len(self.model.records) + 5)
        ext = '.png' if f == 'img' else ''
        try:
            b = self.read(f'{MNT}/{f}/{i}{ext}')
        except FileNotFoundError:
            return  # not in the state shown
        if not self.model.allowed(f, i, digest(b)):
            raise Failure(f'{f}/{i}: {len(b)} bytes that record never had')

    def npy(self):
        f = self.rng.choice(('lab', 'emb'))
        a = np.load(f'{MNT}/{f}.npy')
        if not self.model.array_allowed(f, digest(a.tobytes())):
            raise Failure(f'{f}.npy: {a.shape} rows that are no committed state')

    def batch(self):
        d = f'{MNT}/.batches/seq,batch=8/epoch-{self.rng.randrange(1 << 20)}'
        try:
            k = self.rng.randrange(len(os.listdir(d)))
        except FileNotFoundError:
            return  # an epoch of fewer records than its spec wants
        ids = np.frombuffer(self.read(f'{d}/{k}/ids'), dtype='<u8')
        offs = np.frombuffer(self.read(f'{d}/{k}/img.offsets'), dtype='<u8')
        data = self.read(f'{d}/{k}/img')
        if len(offs) != len(ids) + 1 or offs[-1] != len(data):
            raise Failure(f'{d}/{k}: offsets do not fit the data ({len(ids)} ids, '
                          f'{len(offs)} offsets ending at {offs[-1] if len(offs) else None}, '
                          f'{len(data)} bytes)')
        for j, i in enumerate(ids):
            b = data[offs[j]:offs[j + 1]]
            if not self.model.allowed('img', int(i), digest(b)) and len(b) != 0:
                raise Failure(f'{d}/{k}: record {i} holds bytes it never had')

    def run(self):
        try:
            while not self.done.is_set():
                self.rng.choice((self.record, self.record, self.npy, self.batch))()
                self.reads += 1
        except (Failure, OSError) as e:
            self.error = e


def equals_export(model, tmp):
    """Whether every record file and .npy view of the mount equals the
    dataset as zr export writes it; a reason if not."""
    for f in FIELDS:
        out = tempfile.mkdtemp(dir=tmp)
        os.rmdir(out)
        try:
            zr('export', 'dir', DS, f, out)
            names = sorted(os.listdir(out))
            if sorted(os.listdir(f'{MNT}/{f}')) != names:
                return f'{f}/: names differ from zr export'
            for name in names:
                with open(f'{out}/{name}', 'rb') as a, open(f'{MNT}/{f}/{name}', 'rb') as b:
                    if a.read() != b.read():
                        return f'{f}/{name} differs from zr export'
        finally:
            shutil.rmtree(out, ignore_errors=True)
    for f in ('lab', 'emb'):
        out = f'{tmp}/{f}.npy'
        zr('export', 'npy', DS, f, out)
        try:
            if np.load(out).tobytes() != np.load(f'{MNT}/{f}.npy').tobytes():
                return f'{f}.npy differs from zr export'
        finally:
            os.unlink(out)
    return None


def settles(model, tmp, what):
    deadline = time.monotonic() + 2
    while True:
        why = equals_export(model, tmp)
        if why is None:
            return
        if time.monotonic() > deadline:
            raise Failure(f'{what}: 2 s on, {why}')
        time.sleep(0.05)  # polling the mount's state against the dataset's


def kills(model, tmp):
    rng = random.Random(2)
    big = os.path.join(tmp, 'big')
    for t in range(KILLS):
        with open(big, 'wb') as fh:
            fh.write(rng.randbytes(rng.randint(1, 4 << 20)))
        p = subprocess.Popen([ZR, 'set', DS, str(rng.randrange(len(model.records))), f'--img={big}'],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.random() * 0.03)  # a random instant of the writer's life
        p.send_signal(signal.SIGKILL)
        p.wait()
        settles(model, tmp, f'after kill {t}')


def main():
    with tempfile.TemporaryDirectory() as tmp:
        run(tmp)


def run(tmp):
    model = Model()
    model.note()  # empty, as follow.sh left it
    settles(model, tmp, 'before the writer started')  # its last zr rm shown
    done = threading.Event()
    readers = [Reader(model, s, done) for s in range(4)]
    for r in readers:
        r.start()
    try:
        writer(model, tmp, COMMITS)
    finally:
        done.set()
        for r in readers:
            r.join()
    for r in readers:
        if r.error is not None:
            raise Failure(f'a reader: {r.error}')
    print(f'{COMMITS} commits, {sum(r.reads for r in readers)} checked reads')
    settles(model, tmp, 'after the writer stopped')
    kills(model, tmp)
    print(f'{KILLS} writers killed; the mount followed every one')


if __name__ == '__main__':
    try:
        main()
    except Failure as e:
        print(f'FAIL: {e}', file=sys.stderr)
        sys.exit(1)
