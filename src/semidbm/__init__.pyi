"""Types of semidbm's public API, for type checkers (``__init__.py`` is the code).

The class of the database object is made at run time, on the kernel in
use (``semidbm.db.database_class``); ``_Database`` describes it here and
exists only for type checkers. Keys and values may be given as str
(stored as UTF-8) or any bytes-like object; they come back as bytes.
"""

from collections.abc import Callable, Iterator, MutableMapping
from typing import Literal, TypeVar, Union, overload

from _typeshed import ReadableBuffer, StrOrBytesPath
from typing_extensions import Self

from .errors import DBMChecksumError as DBMChecksumError
from .errors import DBMError as DBMError
from .errors import DBMLoadError as DBMLoadError
from .errors import TornTailWarning as TornTailWarning
from .shelf import open_shelf as open_shelf

_T = TypeVar("_T")
_Data = Union[str, ReadableBuffer]
_Flag = Literal["r", "w", "c", "n"]
# Called during compact() with (bytes copied, bytes to copy).
_Progress = Callable[[int, int], object]

__all__ = [
    "open",
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

class _Database(MutableMapping[bytes, bytes]):
    """A semidbm database, as ``semidbm.open`` returns it."""

    @property
    def path(self) -> str: ...
    @property
    def writable(self) -> bool: ...
    @property
    def closed(self) -> bool: ...
    # (offset, length) of the torn tail that opening left out (TornTailWarning), or None.
    @property
    def torn_tail(self) -> tuple[int, int] | None: ...
    # Bytes of the log the mapped index file answers for; 0 if the log was replayed whole.
    @property
    def index_covered(self) -> int: ...
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
    def compact(self, progress: _Progress | None = None) -> None: ...
    def refresh(self) -> None: ...
    def close(self, compact: bool = False) -> None: ...
    # dbm.gnu's names: a walk over the keys, and compaction.
    def firstkey(self) -> bytes | None: ...
    def nextkey(self, key: _Data) -> bytes | None: ...
    def reorganize(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, *exc_info: object) -> None: ...
    # The sorted keys as lines of text, for semidbm.migrate and the command (private).
    def _sorted_lines(
        self, form: str, progress: _Progress | None = None
    ) -> tuple[int, Iterator[tuple[int, bytes]]]: ...

def open(
    filename: StrOrBytesPath,
    flag: _Flag = "r",
    mode: int = 0o666,
    verify_checksums: bool = False,
    *,
    buffer_size: int = 1048576,
    recover: bool = False,
) -> _Database: ...
