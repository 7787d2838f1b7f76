"""The stores the benchmark history times, and the records they all get.

The stores, one asv parameter:

- ``semidbm-cython``: semidbm on its compiled kernel;
- ``semidbm-python``: semidbm on its pure-Python kernel
  (``SEMIDBM_PURE_PYTHON=1``);
- ``dbm.gnu`` and ``dbm.dumb`` from the standard library, for scale.

semidbm chooses its kernel from the environment when it is first
imported, so no module of this package imports it at the top:
``dbm_module`` sets or clears the variable, then imports semidbm, and
fails if the kernel it got is not the one asked for. A store that this
Python lacks (``dbm.gnu`` needs Debian's ``python3-gdbm``) raises
``NotImplementedError``, which asv reports as a skipped parameter.

The records are the classic dbm benchmark's: keys ``b"%016d" % i``,
100-byte values sliced from one block of random bytes. Every order and
choice comes from a fixed seed, so each commit is timed on the same
data. They are built once per process and kept (they are immutable);
the databases are not.
"""

import functools
import importlib
import os
import random

STORES = ["semidbm-cython", "semidbm-python", "dbm.gnu", "dbm.dumb"]

#: The semidbm kernel each semidbm store must run (``semidbm.implementation``).
SEMIDBM_KERNELS = {"semidbm-cython": "cython", "semidbm-python": "python"}

VALUE_SIZE = 100

#: Bytes of random data that the values are sliced from.
BLOCK_SIZE = 1 << 20

SEED = 20260101


def dbm_module(store):
    """Return the module whose ``open(path, flag)`` opens databases of ``store``.

    Raises ``NotImplementedError`` (asv skips the parameter) when this
    Python lacks the module, and ``RuntimeError`` when semidbm runs
    another kernel than ``store`` names: timing the wrong kernel
    silently would be worse than failing.
    """
    kernel = SEMIDBM_KERNELS.get(store)
    if kernel is None:
        try:
            return importlib.import_module(store)
        except ImportError as exc:
            raise NotImplementedError("%s is not available here: %s" % (store, exc)) from exc
    if kernel == "python":
        os.environ["SEMIDBM_PURE_PYTHON"] = "1"
    else:
        os.environ.pop("SEMIDBM_PURE_PYTHON", None)
    import semidbm

    if semidbm.implementation != kernel:
        raise RuntimeError(
            "%s needs semidbm's %r kernel, but semidbm.implementation is %r"
            % (store, kernel, semidbm.implementation)
        )
    return semidbm


@functools.lru_cache(maxsize=None)
def records(count):
    """Return ``count`` (key, value) pairs in key order."""
    block = random.Random(SEED).randbytes(BLOCK_SIZE)
    span = BLOCK_SIZE - VALUE_SIZE
    return tuple(
        (b"%016d" % i, block[i % span : i % span + VALUE_SIZE]) for i in range(count)
    )


@functools.lru_cache(maxsize=None)
def shuffled_records(count):
    """Return ``records(count)`` in a random order, the same in every run."""
    shuffled = list(records(count))
    random.Random(SEED).shuffle(shuffled)
    return tuple(shuffled)


@functools.lru_cache(maxsize=None)
def keys(count):
    """Return the keys of ``records(count)``, in key order."""
    return tuple(key for key, _ in records(count))


@functools.lru_cache(maxsize=None)
def shuffled_keys(count):
    """Return the keys of ``records(count)`` in a random order, the same in every run."""
    return tuple(key for key, _ in shuffled_records(count))


@functools.lru_cache(maxsize=None)
def hot_keys(count):
    """Return ``count`` keys drawn from 1% of ``keys(count)``: that 1%, over and over."""
    hot = random.Random(SEED).sample(keys(count), max(1, count // 100))
    return tuple(hot[i % len(hot)] for i in range(count))
