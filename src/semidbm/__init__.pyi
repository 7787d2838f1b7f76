"""Types of semidbm's public API, for type checkers (``__init__.py`` is the code).

The database object's type is :class:`Database` (``_database``, typed
in its source); the class of the object is made at run time on it and
the kernel in use (``semidbm.db.database_class``). Keys and values may
be given as str (stored as UTF-8) or any bytes-like object; they come
back as bytes.
"""

from typing import Literal

from _typeshed import StrOrBytesPath

from ._batch import Batch as Batch
from ._database import Database as Database
from .errors import DBMChecksumError as DBMChecksumError
from .errors import DBMError as DBMError
from .errors import DBMLoadError as DBMLoadError
from .errors import TornTailWarning as TornTailWarning
from .shelf import open_shelf as open_shelf

_Flag = Literal["r", "w", "c", "n"]

__all__ = [
    "open",
    "Database",
    "Batch",
    "open_shelf",
    "error",
    "DBMError",
    "DBMLoadError",
    "DBMChecksumError",
    "TornTailWarning",
    "implementation",
    "__version__",
]

__version__: str
implementation: Literal["cython", "python"]
error = DBMError

def open(
    filename: StrOrBytesPath,
    flag: _Flag = "r",
    mode: int = 0o666,
    verify_checksums: bool = False,
    *,
    buffer_size: int = 1048576,
    recover: bool = False,
    format: Literal[1, 2] | None = None,
) -> Database: ...
