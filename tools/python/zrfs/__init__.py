"""zrfs: read a zrfs mount's sampler-ordered batches from one process.

    import zrfs
    for batch in zrfs.Loader("/mnt/cats", "shuffle,seed=42,batch=256", epoch=0,
                             device="cuda"):
        images, labels = batch["image"], batch["label"]

Loader reads the batch files of .batches/SPEC/epoch-E/ with a pool of
threads into reusable pinned buffers and copies them to the device on a
stream of its own; BatchDataset is the same as a torch IterableDataset, for
code that wants a DataLoader. See zrfs(8) and README.md, "Read batches".
"""
from .loader import Loader, ZrfsError

__version__ = "0.1.0"  # the project's (CMakeLists.txt); pkg.python checks it
__all__ = ["Loader", "ZrfsError", "BatchDataset", "__version__"]


def __getattr__(name):  # torch only for those who ask for it
    if name == "BatchDataset":
        from .dataset import BatchDataset
        return BatchDataset
    raise AttributeError(name)
