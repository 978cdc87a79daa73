"""A shared file mapping that holds no file descriptor (for the segment indexes).

CPython's ``mmap.mmap`` keeps a ``dup()`` of the descriptor it was given for as long as the
mapping lives (``trackfd=False`` only exists from Python 3.13), so every mapped index would
cost one descriptor on top of its segment's ``.log``: three per partition instead of one, and
a broker with many partitions ran out of descriptors (issue 14, finding 7). POSIX needs no
descriptor once a mapping exists; Kafka's indexes keep none either. :func:`map_file` calls
``mmap(2)`` directly and returns a ctypes byte array over the mapping:

- it is a writable buffer: ``struct.pack_into`` / ``unpack_from`` and slicing work on it as
  on an ``mmap.mmap`` (slices are ``bytes``);
- the mapping lives exactly as long as the array object: ``munmap`` runs when the last
  reference is dropped. A reader that took a reference (the index's ``_snapshot``) keeps the
  pages valid even if the index was remapped or closed meanwhile; the index never unmaps
  memory that someone may still read.
- a read-only mapping (``writable=False``) must not be written: that would fault. The index
  checks ``writable`` before every write.

Only the caller's descriptor is used, and only during :func:`map_file`.
"""

from __future__ import annotations

import ctypes
import functools
import mmap
import os
import sys
from typing import Any

__all__ = ["MappedBytes", "map_file", "sync_mapping"]

MappedBytes = Any  # a ctypes ``c_char`` array over the mapping (see the module docstring)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_int64,
]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.msync.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_MAP_FAILED = ctypes.c_void_p(-1).value
_MS_SYNC = 4 if sys.platform.startswith("linux") else 0x10  # <sys/mman.h>


def _unmap(array: MappedBytes) -> None:
    _libc.munmap(ctypes.addressof(array), ctypes.sizeof(array))


@functools.lru_cache(maxsize=64)
def _array_type(length: int) -> type:
    """``c_char * length`` whose instances unmap themselves when freed."""
    return type("MappedBytes", (ctypes.c_char * length,), {"__slots__": (), "__del__": _unmap})


def map_file(fd: int, length: int, *, writable: bool) -> MappedBytes:
    """Map the first ``length`` bytes of ``fd`` (``MAP_SHARED``); ``fd`` may be closed after."""
    prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
    address = _libc.mmap(None, length, prot, mmap.MAP_SHARED, fd, 0)
    if address in (None, _MAP_FAILED):
        error = ctypes.get_errno()
        raise OSError(error, f"mmap: {os.strerror(error)}")
    return _array_type(length).from_address(address)


def sync_mapping(array: MappedBytes) -> None:
    """``msync(MS_SYNC)``: write the mapping's dirty pages to the file (``mmap.flush``)."""
    if _libc.msync(ctypes.addressof(array), ctypes.sizeof(array), _MS_SYNC) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"msync: {os.strerror(error)}")
