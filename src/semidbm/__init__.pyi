"""Types of semidbm's public API, for type checkers (``__init__.py`` is the code).

The class of the database object is made at run time, on the kernel in
use (``semidbm.db.database_class``); ``_Database`` describes it here and
exists only for type checkers. Keys and values may be given as str
(stored as UTF-8) or any bytes-like object; they come back as bytes.
"""

from collections.abc import Iterator, MutableMapping
from typing import Literal, TypeVar, Union, overload

from _typeshed import ReadableBuffer, StrOrBytesPath
from typing_extensions import Self

from .errors import DBMChecksumError as DBMChecksumError
from .errors import DBMError as DBMError
from .errors import DBMLoadError as DBMLoadError
from .errors import TornTailWarning as TornTailWarning

_T = TypeVar("_T")
_Data = Union[str, ReadableBuffer]

__all__ = [
    "open",
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

class _Database(MutableMapping[bytes, bytes]):
    """A semidbm database, as ``semidbm.open`` returns it."""

    @property
    def path(self) -> str: ...
    @property
    def writable(self) -> bool: ...
    @property
    def closed(self) -> bool: ...
    def __getitem__(self, key: _Data, /) -> bytes: ...
    def __setitem__(self, key: _Data, value: _Data, /) -> None: ...
    def __delitem__(self, key: _Data, /) -> None: ...
    def __contains__(self, key: object, /) -> bool: ...
    def __iter__(self) -> Iterator[bytes]: ...
    def __len__(self) -> int: ...
    # Lists, as dbm.dumb and dbm.gnu return, not the views of Mapping.
    def keys(self) -> list[bytes]: ...  # type: ignore[override]
    def values(self) -> list[bytes]: ...  # type: ignore[override]
    def items(self) -> list[tuple[bytes, bytes]]: ...  # type: ignore[override]
    @overload
    def get(self, key: _Data, /) -> bytes | None: ...
    @overload
    def get(self, key: _Data, default: bytes, /) -> bytes: ...
    @overload
    def get(self, key: _Data, default: _T, /) -> bytes | _T: ...
    @overload
    def pop(self, key: _Data, /) -> bytes: ...
    @overload
    def pop(self, key: _Data, default: bytes, /) -> bytes: ...
    @overload
    def pop(self, key: _Data, default: _T, /) -> bytes | _T: ...
    def clear(self) -> None: ...
    def sync(self) -> None: ...
    def compact(self) -> None: ...
    def refresh(self) -> None: ...
    def close(self, compact: bool = False) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, *exc_info: object) -> None: ...

def open(
    filename: StrOrBytesPath,
    flag: Literal["r", "w", "c", "n"] = "r",
    mode: int = 0o666,
    *,
    verify_checksums: bool = False,
    buffer_size: int = 1048576,
    recover: bool = False,
) -> _Database: ...
