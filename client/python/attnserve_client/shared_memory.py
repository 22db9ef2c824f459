"""SystemSharedMemory: a POSIX shared-memory object for same-host zero-copy calls.

    from attnserve_client import Client, SystemSharedMemory

    with Client("localhost:50051") as client, SystemSharedMemory(64 << 20) as shm:
        client.register_system_region("io", shm)
        q = shm.ndarray((1, 4096, 16, 128), np.float16)     # views of the shared memory
        ...fill q, k, v...
        out = shm.ndarray(q.shape, np.float16)
        out, timing = client.attend(q, k, v, out=out)        # by reference, written in place

The object is created here (shm_open with O_CREAT | O_EXCL, mode 0600,
under /dev/shm on Linux) and mapped read-write; an attn_server on this host
started with --allow_shared_memory maps it too once it is registered
(Client.register_system_region) and reads inputs from it and writes outputs
into it in place.

close() (or leaving the `with` block) unlinks the name: the server keeps its
mapping for as long as the region stays registered, and the arrays from
ndarray() stay valid (this process's mapping goes with the last of them);
the memory is freed when the last mapping goes.
multiprocessing's resource tracker also unlinks the name if this process
ends without close() (a crash, or SIGKILL), so /dev/shm does not fill up
with leftovers; only the creating process registers with it (nothing here
attaches to someone else's object, which is where the tracker would unlink
what it does not own).
"""

import itertools
import mmap
import os
import secrets
from multiprocessing import resource_tracker

import numpy as np

try:  # CPython's shm_open/shm_unlink, what multiprocessing.shared_memory uses
    import _posixshmem
except ImportError:  # pragma: no cover - not a POSIX CPython
    _posixshmem = None

ALIGNMENT = 64  # ndarray()'s placement; the server takes offsets that are multiples of 16
_counter = itertools.count()


class SystemSharedMemory:
    """A POSIX shared-memory object of `size` bytes (zero-filled), created and
    mapped by this process, with NumPy arrays placed in it by ndarray()."""

    def __init__(self, size, name=None):
        """name: the shm_open name ('/...' ; None: a fresh '/attn-py-<pid>-<n>-<random>')."""
        if _posixshmem is None:
            raise OSError("POSIX shared memory is not available on this platform")
        size = int(size)
        if size <= 0:
            raise ValueError(f"size must be > 0, got {size}")
        if name is None:
            name = f"/attn-py-{os.getpid()}-{next(_counter)}-{secrets.token_hex(4)}"
        if not name.startswith("/") or "/" in name[1:] or len(name) < 2:
            raise ValueError(f"name must be '/' and 1 to 254 characters without '/', got {name!r}")
        fd = _posixshmem.shm_open(name, os.O_CREAT | os.O_EXCL | os.O_RDWR, mode=0o600)
        try:
            os.ftruncate(fd, size)
            self._mmap = mmap.mmap(fd, size)
        except BaseException:
            _posixshmem.shm_unlink(name)
            raise
        finally:
            os.close(fd)  # the mapping keeps the object
        resource_tracker.register(name, "shared_memory")
        self.name = name
        self.size = size
        self._linked = True
        self._next = 0
        self.address = np.frombuffer(self._mmap, dtype=np.uint8, count=1).ctypes.data

    def __repr__(self):
        return f"SystemSharedMemory({self.name!r}, size={self.size})"

    def ndarray(self, shape, dtype, offset=None):
        """A NumPy array of `shape` and `dtype` viewing this memory (no copy).

        offset: its byte offset; None places it after the last array handed
        out, at the next multiple of ALIGNMENT. ValueError when it does not fit.
        """
        if self._mmap is None:
            raise ValueError(f"{self.name} is closed")
        dtype = np.dtype(dtype)
        shape = tuple(int(d) for d in (shape if np.iterable(shape) else (shape,)))
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if offset is None:
            offset = -(-self._next // ALIGNMENT) * ALIGNMENT
        offset = int(offset)
        if offset < 0 or offset + nbytes > self.size:
            raise ValueError(f"an array of {nbytes} bytes at offset {offset} does not fit in "
                             f"{self.name}, which has {self.size} bytes")
        self._next = max(self._next, offset + nbytes)
        return np.ndarray(shape, dtype=dtype, buffer=self._mmap, offset=offset)

    def offset_of(self, array):
        """The byte offset of `array`'s first element in this memory (ValueError when outside)."""
        array = np.asarray(array)
        offset = array.ctypes.data - self.address
        if offset < 0 or offset + array.nbytes > self.size:
            raise ValueError(f"the array is not inside {self.name}")
        return offset

    def close(self):
        """Unlinks the name and unmaps what no array views any more (idempotent)."""
        if self._linked:
            self._linked = False
            try:
                _posixshmem.shm_unlink(self.name)
            except FileNotFoundError:
                pass
            resource_tracker.unregister(self.name, "shared_memory")
        # Not mmap.close(): NumPy arrays keep the mmap object as their base but
        # hold no buffer export on it, so closing it would leave them dangling.
        # Dropping this reference unmaps it now, or with the last array.
        self._mmap = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_mmap", None) is not None or getattr(self, "_linked", False):
            self.close()
