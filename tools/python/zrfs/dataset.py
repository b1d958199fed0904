"""BatchDataset: a zrfs Loader as a torch IterableDataset."""
import sys

import torch
from torch.utils.data import IterableDataset, get_worker_info

from .loader import Loader


def _batched_again():
    """Whether the DataLoader that iterates the dataset batches its items
    itself (a batch_size of its own): the fetcher that calls iter() on it
    says so (torch 1.13 to 2.x; where none is found, nothing is said)."""
    f = sys._getframe(2)
    for _ in range(4):
        if f is None:
            break
        fetcher = f.f_locals.get("self")
        if type(fetcher).__name__ == "_IterableDatasetFetcher":
            return bool(getattr(fetcher, "auto_collation", False))
        f = f.f_back
    return False


class BatchDataset(IterableDataset):
    """The batches of Loader(mount, spec, epoch, ...) as an IterableDataset:
    for a DataLoader (batch_size=None: each item is a whole batch). Each
    worker of a DataLoader reads every num_workers-th step; without workers
    it reads them all, with the Loader's threads. Batches are torch tensors
    on the host (the DataLoader pins and moves them); Loader's own device
    copy is faster where no DataLoader is needed. Each item is a batch the
    mount made (the spec's batch=): give the DataLoader batch_size=None,
    never a batch size of its own."""

    def __init__(self, mount, spec, epoch=0, *, fields=None, threads=4, **kw):
        super().__init__()
        self.args = dict(mount=mount, spec=spec, epoch=epoch, fields=fields, threads=threads,
                         **kw)
        self._loader()  # a mount, spec, epoch or field it refuses: raised here

    def set_epoch(self, epoch):
        """Read epoch @epoch from the next iteration on (as a
        DistributedSampler's set_epoch)."""
        self.args["epoch"] = epoch
        self._loader()

    def _loader(self, steps=None):
        return Loader(device="cpu", steps=steps, **self.args)

    def __len__(self):
        return len(self._loader())

    def __iter__(self):
        if _batched_again():
            raise ValueError("BatchDataset: each item is already a batch (the spec's batch=); "
                             "give the DataLoader batch_size=None")
        w = get_worker_info()
        steps = self._loader().steps()
        if w is not None:
            steps = steps[w.id::w.num_workers]
        return iter(self._loader(steps))


__all__ = ["BatchDataset"]
