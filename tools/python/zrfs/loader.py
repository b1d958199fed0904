"""Batches of a zrfs mount, read in sampler order from one process.

A zrfs mount hands out whole batches under .batches/SPEC/epoch-E/K/: one
file per field per step (FIELD.npy for a fixed shape, FIELD and
FIELD.offsets for variable sizes, ids). A Loader reads them with a pool of
threads, each reading one batch file with os.preadv (which releases the
GIL) into a buffer of its own, several steps ahead, and hands the steps
over in order: as NumPy arrays, as torch tensors, or, for a CUDA device,
as tensors copied there from a reusable pool of pinned host buffers on a
stream of their own, so that the copy of one step overlaps the reading of
the next. A step's ids stay open until its batch is made, so that while a
writer commits the mount shows all the step's files in one state. No
worker process, no pickling: the mount's own threads assemble batches,
this process only moves bytes.
"""
import concurrent.futures
import errno
import io
import json
import os
import sys
import threading

import numpy as np

__all__ = ["Loader", "ZrfsError"]

DTYPES = {"u8": "<u1", "u16": "<u2", "u32": "<u4", "u64": "<u8", "i8": "<i1", "i16": "<i2",
          "i32": "<i4", "i64": "<i8", "f16": "<f2", "f32": "<f4", "f64": "<f8", "bool": "?",
          "bytes": "<u1"}


class ZrfsError(OSError):
    """A batch file could not be read: the file, the spec, the epoch and the step."""


class Field:
    """One field as the mount's meta.json describes it."""

    def __init__(self, meta):
        self.name = meta["name"]
        self.dtype = np.dtype(DTYPES[meta["dtype"]])
        self.shape = tuple(meta["shape"]) if "shape" in meta else None  # None: variable

    def files(self):
        """The batch files a step has of this field."""
        return [self.name + ".npy"] if self.shape is not None else \
            [self.name, self.name + ".offsets"]


def fields_of(mount):
    """The mount's fields, and the names of those `zr import` keeps beside
    the files (their names, times, modes and owners: core/FORMAT.md, "names")."""
    try:
        with open(os.path.join(mount, "meta.json"), "rb") as f:
            meta = json.load(f)
        names = meta.get("names") or {}
        return ([Field(m) for m in meta["fields"]],
                {names.get(k) for k in ("field", "mtime", "mode", "atime", "ctime", "uid", "gid")}
                - {None})
    except (OSError, ValueError, KeyError, AttributeError) as e:
        raise ZrfsError(f"{mount}/meta.json: not a zrfs mount's ({e})") from e


def _shard(spec, rank, world_size):
    """What to add to @spec for @rank of @world_size ("auto": torch.distributed's)."""
    if rank == "auto" or world_size == "auto":
        if (rank, world_size) != ("auto", "auto"):
            raise ZrfsError(errno.EINVAL, "rank and world_size: both \"auto\" or neither")
        import torch.distributed as dist
        if not (dist.is_available() and dist.is_initialized()):
            return ""
        rank, world_size = dist.get_rank(), dist.get_world_size()
    if rank is None and world_size is None:
        return ""
    if not (isinstance(rank, int) and isinstance(world_size, int) and 0 <= rank < world_size):
        raise ZrfsError(errno.EINVAL, f"rank {rank!r} of world_size {world_size!r}: "
                                      f"0 <= rank < world_size, both given")
    keys = {part.split("=", 1)[0].strip() for part in spec.split(",")}
    if keys & {"rank", "world"}:
        raise ZrfsError(errno.EINVAL, f"spec {spec!r} has its own rank or world: give "
                                      f"them there or as arguments, not both")
    return f",rank={rank},world={world_size}"


def npy_array(buf):
    """The array in the bytes of a .npy file (format 1.0, as zrfs writes it), not copied."""
    head = io.BytesIO(bytes(buf[:10 + int.from_bytes(bytes(buf[8:10]), "little")]))
    np.lib.format.read_magic(head)
    shape, fortran, dtype = np.lib.format.read_array_header_1_0(head)
    count = int(np.prod(shape))
    return np.frombuffer(buf, dtype, count, head.tell()).reshape(shape), head.tell()


def tensor_of(torch, arr):
    """torch.from_numpy(@arr), or where this torch has no tensors of its
    unsigned dtype (u16, u32 before torch 2.3: a file's mode is u32), a
    copy widened to the next signed one (i32, i64), which holds every value."""
    try:
        return torch.from_numpy(arr)
    except TypeError:
        wider = {2: np.int32, 4: np.int64}.get(arr.dtype.itemsize) if arr.dtype.kind == "u" else None
        if wider is None:
            raise
        return torch.from_numpy(arr.astype(wider))


class Host:
    """Buffers for NumPy arrays and host tensors, one pool per batch file
    name (their sizes match from step to step), each reused once nothing
    the caller kept refers to it any more: CPython's reference count says
    so (the pool's, the loop's and getrefcount's own are all it has then).
    A buffer made afresh costs its pages' faults, which a reused one has
    paid already."""

    KEEP = 16  # buffers kept per file name: the rest are the caller's to free

    def __init__(self):
        self.pools, self.lock = {}, threading.Lock()

    def take(self, name, size):
        with self.lock:
            pool = self.pools.setdefault(name, [])
            for buf in pool:
                if buf.size >= size and sys.getrefcount(buf) <= 3:
                    return buf
            buf = np.empty(size + size // 4 + 4096, np.uint8)
            if len(pool) < self.KEEP:
                pool.append(buf)
            return buf


class Pinned:
    """A pool of pinned host buffers for copies to a CUDA device, each reused
    once the copy out of it is done (an event on the copy stream says so)."""

    def __init__(self, torch):
        self.torch, self.free, self.busy = torch, [], []
        self.lock = threading.Lock()  # taken by the reading threads and the iteration

    def take(self, size):
        with self.lock:
            done = [b for b in self.busy if b[0].query()]
            self.busy = [b for b in self.busy if b not in done]
            self.free += [buf for _, buf in done]
            for i, buf in enumerate(self.free):
                if buf.numel() >= size:
                    return self.free.pop(i)
        # grow by a quarter: the sizes of variable fields vary a little
        return self.torch.empty(size + size // 4 + 4096, dtype=self.torch.uint8,
                                pin_memory=True)

    def give_back(self, buf, event):
        with self.lock:
            self.busy.append((event, buf))


class Loader:
    """The batches of sampler spec @spec, epoch @epoch, of the zrfs mount at
    @mount, in step order. Each batch is a dict: "ids" (int64, one per
    record), and per field (@fields: a name or names; default every field
    but the ones `zr import` keeps beside the files: their names, times and
    modes) an array of shape (B, *shape) for a fixed-shape field (missing
    records read as zeros), or (data, offsets) for a variable-size one:
    record i is data[offsets[i]:offsets[i + 1]] (uint8; flate records come
    inflated). As tensors, with a torch that has none of a field's unsigned
    dtype (u16, u32 before torch 2.3), the field comes widened to int32 or
    int64.

    @rank, @world_size: this process's share of every step (added to the
    spec as rank=R,world=W: zr(1), SAMPLER ORDERS); "auto" takes both from
    torch.distributed when it is initialized (else the whole of each step).
    @device: None for NumPy arrays; "cpu" for torch tensors; a CUDA device
    ("cuda", "cuda:1", a torch.device) for tensors there, copied from
    pinned memory on a stream of their own. @threads batch files are read
    at once (os.preadv: it releases the GIL), up to @prefetch steps ahead
    (default: enough to keep them busy). @steps: the steps to read (default
    all: an iterable, e.g. range(k, n) to start at step k). @direct: open
    with O_DIRECT, so that no second copy of a batch stays in the page
    cache (the mount serves it from the dataset's pages). @info: add the
    step's info.json as "info" (position_after: where a resumed job goes
    on, with from=).

    As torch's samplers and torchdata's StatefulDataLoader: set_epoch(e)
    before each epoch, len() its steps, state_dict() where the iteration
    is (the epoch and the next step) and load_state_dict() to go on from
    there. A mount that is not one, a field it does not have, a spec or
    an epoch it refuses raise ZrfsError at once, with the reason; errors
    of reading name the file, the spec, the epoch and the step, and one
    raised by a reading thread is raised by the iteration that would have
    returned its batch.
    """

    def __init__(self, mount, spec, epoch=0, *, fields=None, rank=None, world_size=None,
                 device=None, threads=8, prefetch=None, steps=None, direct=True, info=False):
        if not isinstance(spec, str) or not spec:
            raise ZrfsError(errno.EINVAL, f"spec {spec!r}: a sampler spec, such as "
                                          f"'shuffle,seed=42,batch=256' (zr(1), SAMPLER ORDERS)")
        self.mount = mount
        if not os.path.isdir(os.path.join(mount, ".batches")):
            why = ("a dataset directory: mount it (zrfs DATASET MOUNTPOINT) and give the "
                   "mount point" if os.path.isfile(os.path.join(mount, "meta.json"))
                   else "no .batches in it")
            raise ZrfsError(errno.ENOENT, f"{mount}: not a zrfs mount ({why})")
        self.spec = spec + _shard(spec, rank, world_size)
        known, bookkeeping = fields_of(mount)
        if isinstance(fields, str):
            fields = [fields]
        if fields is None:
            self.fields = [f for f in known if f.name not in bookkeeping]
        else:
            byname = {f.name: f for f in known}
            missing = [n for n in fields if n not in byname]
            if missing:
                raise ZrfsError(errno.ENOENT, f"{mount}: no field {', '.join(missing)} "
                                              f"(it has {', '.join(byname)})")
            self.fields = [byname[n] for n in fields]
        self.threads = max(1, threads)
        self.files = ["ids"] + [n for f in self.fields for n in f.files()] + \
            (["info.json"] if info else [])
        self.prefetch = prefetch or max(2, -(-2 * self.threads // len(self.files)))
        self.flags = os.O_RDONLY | os.O_CLOEXEC | (os.O_DIRECT if direct else 0)
        self.info = info
        self.torch = self.device = None
        if device is not None:
            import torch
            self.torch, self.device = torch, torch.device(device)
        self.cuda = self.device is not None and self.device.type == "cuda"
        self._steps = steps
        self._start = 0   # where the next iteration starts (load_state_dict)
        self._next = 0    # the step after the last one an iteration returned
        self.set_epoch(epoch)

    def set_epoch(self, epoch):
        """Read epoch @epoch from now on (from its first step): raises
        ZrfsError if the mount refuses it."""
        if not isinstance(epoch, int) or epoch < 0:
            raise ZrfsError(errno.EINVAL, f"epoch {epoch!r}: a number 0 or more")
        self.epoch, self._start, self._next = epoch, 0, 0
        self.dir = os.path.join(self.mount, ".batches", self.spec, f"epoch-{epoch}")
        self._count = self._listed()

    def __len__(self):
        return len(self.steps())

    def steps(self):
        """The steps this loader reads, from where load_state_dict() put it."""
        if self._steps is None:
            return range(self._start, self._count)
        return [s for s in self._steps if s >= self._start]

    def state_dict(self):
        """Where the iteration is: the spec, the epoch and the step after
        the last one returned (the epoch's step count once it ended)."""
        return {"spec": self.spec, "epoch": self.epoch, "step": self._next}

    def load_state_dict(self, state):
        """Go on from @state (state_dict()'s): the next iteration starts at
        its step of its epoch."""
        if state.get("spec", self.spec) != self.spec:
            raise ZrfsError(errno.EINVAL, f"a state of batches {state['spec']}, not of "
                                          f"{self.spec}")
        self.set_epoch(state["epoch"])
        step = state["step"]
        if not isinstance(step, int) or not 0 <= step <= self._count:
            raise ZrfsError(errno.EINVAL, f"step {step!r} of epoch {self.epoch}: "
                                          f"it has {self._count} steps")
        self._start = self._next = step

    def _listed(self):
        """The epoch's step count, as the mount lists it."""
        try:
            return len(os.listdir(self.dir))
        except FileNotFoundError:
            # the mount refused the spec or the epoch (from=P at the end of
            # an epoch is an epoch of no steps: it lists nothing, above);
            # .batches/.why/SPEC says why it refuses a spec
            why = self._why()
            if why and not why.startswith("ok"):
                raise ZrfsError(errno.ENOENT, f"{self.dir}: the mount refuses batches "
                                f"{self.spec}: {why}") from None
            raise ZrfsError(errno.ENOENT, f"{self.dir}: no such epoch "
                            f"(batches {self.spec}, epoch {self.epoch}): the mount "
                            f"refused the epoch; `zr sample '{self.spec}' "
                            f"--n RECORDS --epoch {self.epoch}` says why") from None
        except OSError as e:
            raise ZrfsError(e.errno, f"{self.dir}: {e.strerror} "
                            f"(batches {self.spec}, epoch {self.epoch})") from None

    def _why(self):
        """Why the mount refuses this loader's spec ("ok..." where it
        takes it), as .batches/.why/SPEC says; None if it says nothing."""
        try:
            with open(os.path.join(self.mount, ".batches", ".why", self.spec), "rb") as f:
                return f.read().decode(errors="replace").strip()
        except OSError:
            return None

    # ---- reading ----

    def _hold(self, step):
        """Step @step's ids, opened: while it is open the mount shows all the
        step's files in one state (zrfs(8), -o hold_ms), however long the
        threads reading the others take. None if it cannot be opened (its
        reading thread then says why)."""
        try:
            return os.open(os.path.join(self.dir, str(step), "ids"), self.flags)
        except OSError:
            return None

    def _read(self, step, name, pool, fd=None):
        """The bytes of batch file @name of step @step (read by a thread): a
        uint8 NumPy array, and the pinned tensor it lies in, if any. @fd:
        the file, opened by the caller, who closes it."""
        path = os.path.join(self.dir, str(step), name)
        own = fd is None
        try:
            if own:
                fd = os.open(path, self.flags)
        except OSError as e:
            raise self._error(path, step, e) from None
        try:
            size = os.fstat(fd).st_size
            pinned = pool.take(size) if self.cuda and name != "info.json" else None
            buf = pinned.numpy()[:size] if pinned is not None else pool.take(name, size)[:size]
            done = 0
            while done < size:
                n = os.preadv(fd, [memoryview(buf)[done:]], done)
                if n == 0:
                    raise OSError(5, f"ends after {done} of {size} bytes")
                done += n
            return buf, pinned
        except OSError as e:
            raise self._error(path, step, e) from None
        finally:
            if own:
                os.close(fd)

    def _error(self, path, step, e):
        return ZrfsError(e.errno, f"{path}: {e.strerror} (batches {self.spec}, epoch "
                                  f"{self.epoch}, step {step})")

    def _batch(self, step, got, pool, stream):
        """Step @step's batch out of its files' bytes."""
        out = {}
        bufs = dict(zip(self.files, got))
        host = {"ids": bufs["ids"][0].view("<u8").astype(np.int64)}
        for f in self.fields:
            if f.shape is not None:
                host[f.name] = npy_array(bufs[f.name + ".npy"][0])[0]
            else:
                host[f.name] = (bufs[f.name][0],
                                bufs[f.name + ".offsets"][0].view("<u8").astype(np.int64))
        if self.device is None:
            out = host
        elif not self.cuda:
            out = {k: tuple(tensor_of(self.torch, a) for a in v) if isinstance(v, tuple)
                   else tensor_of(self.torch, v) for k, v in host.items()}
        else:
            out = self._to_device(host, bufs, pool, stream)
        if self.info:
            out["info"] = json.loads(bytes(bufs["info.json"][0]))
        return out

    def _to_device(self, host, bufs, pool, stream):
        """The arrays of @host on the CUDA device: the fields' bytes copied
        straight from the pinned buffers they were read into, on @stream."""
        torch = self.torch
        out = {}
        with torch.cuda.stream(stream):
            for f in self.fields:
                if f.shape is not None:
                    buf, pinned = bufs[f.name + ".npy"]
                    arr = host[f.name]
                    empty = tensor_of(torch, arr[:0])
                    if empty.element_size() != arr.dtype.itemsize:  # widened: a copy
                        out[f.name] = tensor_of(torch, arr).to(self.device)
                        continue
                    start = arr.ctypes.data - buf.ctypes.data
                    t = pinned[start:start + arr.nbytes].to(self.device, non_blocking=True)
                    out[f.name] = t.view(empty.dtype).reshape(arr.shape)
                else:
                    buf, pinned = bufs[f.name]
                    out[f.name] = (pinned[:buf.size].to(self.device, non_blocking=True),
                                   torch.from_numpy(host[f.name][1]).to(self.device,
                                                                         non_blocking=True))
            out["ids"] = torch.from_numpy(host["ids"]).to(self.device, non_blocking=True)
            done = torch.cuda.Event()
            done.record(stream)
        for name, (buf, pinned) in bufs.items():
            if pinned is not None:
                pool.give_back(pinned, done)
        current = torch.cuda.current_stream(self.device)
        current.wait_stream(stream)  # the caller's work on its stream sees the bytes
        for v in out.values():
            for t in v if isinstance(v, tuple) else (v,):
                t.record_stream(current)
        return out

    def __iter__(self):
        steps = iter(self.steps())
        pool = Pinned(self.torch) if self.cuda else Host()
        stream = self.torch.cuda.Stream(self.device) if self.cuda else None
        queue = []  # (step, its ids held open or None, futures), oldest first
        try:
            with concurrent.futures.ThreadPoolExecutor(self.threads) as ex:
                try:
                    while True:
                        while len(queue) < self.prefetch:
                            step = next(steps, None)
                            if step is None:
                                break
                            held = self._hold(step)
                            queue.append((step, held, [
                                ex.submit(self._read, step, n, pool, held if n == "ids" else None)
                                for n in self.files]))
                        if not queue:
                            return
                        step, held, futures = queue[0]
                        got = [f.result() for f in futures]
                        queue.pop(0)
                        if held is not None:
                            os.close(held)
                        batch = self._batch(step, got, pool, stream)
                        self._next = step + 1
                        yield batch
                finally:
                    for _, _, futures in queue:
                        for f in futures:
                            f.cancel()
        finally:  # the threads are done with them
            for _, held, _ in queue:
                if held is not None:
                    os.close(held)
