"""Fresh memory taken the cheap way while the large tables are built, resampled and written.

A virtual machine that reports its free memory to the host (virtio-balloon free page reporting,
as the 2-core machines we measure on do) has the host back a reported block afresh when the guest
first touches it again. Measured there: 90 MB/s for a transparent huge page, which needs a whole
free 2 MB block and so comes from reported memory; 2.6 GB/s for ordinary pages, which come first
from the small free pieces the guest never reported. numpy asks for huge pages on its large
arrays (``madvise``) and pyarrow's default allocator (mimalloc) maps its own; at the study's size
(a calls table of half a gigabyte) that was seconds of system time in every aggregate. On a
machine where huge pages are cheap, ordinary pages cost only a little TLB reach.

Both switches are process-wide: each is put back as it was when its block ends.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


def set_huge_pages(enabled: bool) -> bool | None:
    """numpy's ``madvise(MADV_HUGEPAGE)`` on its large arrays switched on or off: the setting it
    had (None where this numpy has no such switch, and nothing is changed)."""
    try:
        from numpy._core.multiarray import _set_madvise_hugepage
    except ImportError:
        return None
    return bool(_set_madvise_hugepage(enabled))


@contextlib.contextmanager
def ordinary_pages() -> Iterator[None]:
    """numpy's large arrays on ordinary pages inside the block."""
    had = set_huge_pages(False)
    try:
        yield
    finally:
        if had is not None:
            set_huge_pages(had)


@contextlib.contextmanager
def system_arrow_pool() -> Iterator[None]:
    """pyarrow's default memory pool the C library's allocator inside the block (what a
    ``DataFrame.to_parquet`` allocates: it takes no pool of its own). Writing the study's calls
    table took 2.4 s with mimalloc and 1.6 s so, the same bytes written."""
    import pyarrow as pa

    had = pa.default_memory_pool()
    pa.set_memory_pool(pa.system_memory_pool())
    try:
        yield
    finally:
        pa.set_memory_pool(had)
