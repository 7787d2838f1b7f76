"""semidbm: a fast dbm for Python, stored as an append-only log.

A database is a directory with one append-only ``data`` file; an
in-memory index maps each key to its value's place in the file. Use it
like the standard library's dbm modules::

    import semidbm
    with semidbm.open("cache.db", "c") as db:
        db[b"key"] = b"value"

or as a ``shelve`` backend: ``shelve.Shelf(semidbm.open("cache.db", "c"))``,
or ``semidbm.open_shelf("objects.db", serializer="json")`` for a shelf
that is safe to read from untrusted sources (``semidbm.shelf``).

``semidbm.Cache`` keeps Python objects for a while, and functions' results
(``semidbm.cache``).

``semidbm.open_sharded`` opens several databases in one directory as one
mapping, each key in the shard its hash names (``semidbm.sharded``).

``semidbm.migrate`` copies stdlib dbm databases into semidbm and moves
data through a text dump; the ``semidbm`` command (``python -m semidbm``)
does both, and more, from the shell.

``implementation`` names the storage kernel in use: ``"cython"`` (the
compiled core) or ``"python"`` (the pure-Python reference, forced by
setting ``SEMIDBM_PURE_PYTHON=1``).
"""

from ._batch import Batch
from ._database import Database
from .cache import Cache
from .db import implementation, open
from .errors import (
    DBMChecksumError,
    DBMError,
    DBMLoadError,
    DBMNotSyncedError,
    DBMSignatureError,
    TornTailWarning,
    error,
)
from .sharded import ShardedDatabase, open_sharded, shard_of
from .shelf import open_shelf

__version__ = "0.6.0"

__all__ = [
    "open",
    "Database",
    "Batch",
    "Cache",
    "open_shelf",
    "open_sharded",
    "ShardedDatabase",
    "shard_of",
    "error",
    "DBMError",
    "DBMLoadError",
    "DBMChecksumError",
    "DBMNotSyncedError",
    "DBMSignatureError",
    "TornTailWarning",
    "implementation",
    "__version__",
]
