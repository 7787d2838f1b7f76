"""Types of the compiled kernel ``semidbm._core`` (built from ``_core.pyx``).

Its ``Store`` is the interface of ``semidbm._interface``, written there
once. The interface's members have no bodies, which makes them abstract
to a type checker; ``ABCMeta`` says so (stubtest allows it as a typing
device), and no typed code makes a Store but the API layer.
"""

from abc import ABCMeta
from collections.abc import Iterable, Iterator
from typing import Any

from typing_extensions import disjoint_base

from . import _index_file
from ._interface import Store as _Store
from ._interface import summarize_log as summarize_log
from ._types import Data

@disjoint_base
class Store(_Store, metaclass=ABCMeta):
    def __iter__(self) -> KeyIterator: ...
    # A sharded database's get_many, routed in C (semidbm.sharded): the compiled kernel's alone.
    @staticmethod
    def _routed_get_many(
        shards: tuple[Store, ...], keys: Iterable[Data], default: object = None
    ) -> list[object]: ...

@disjoint_base
class ShardRouter:
    """A sharded database's reads of a key, routed to its shard in C (semidbm.sharded)."""

    @property
    def _shards(self) -> tuple[Any, ...]: ...
    def __init__(self, shards: Iterable[Any]) -> None: ...
    def __getitem__(self, key: Data, /) -> bytes: ...
    def __contains__(self, key: object, /) -> bool: ...
    def get(self, key: Data, default: Any = None, /) -> Any: ...

@disjoint_base
class KeyIterator(Iterator[bytes]):
    """Iterates over a Store's keys (as bytes), in the index's order."""

    def __new__(cls, store: Store, /) -> KeyIterator: ...
    def __iter__(self) -> KeyIterator: ...
    def __next__(self) -> bytes: ...

@disjoint_base
class SortedLines(Iterator[tuple[int, bytes]]):
    """The chunks of ``Store._sorted_lines``: ``(lines, bytes)``, made as they are asked for."""

    def __iter__(self) -> SortedLines: ...
    def __next__(self) -> tuple[int, bytes]: ...

@disjoint_base
class IndexFileBody:
    """The body of a new index file: ``_index_file.install`` calls it with the file to write to."""

    def __call__(self, out: int, /) -> None: ...

def _format_constants() -> dict[str, int]: ...
def _crc32(data: bytes, crc: int = 0, way: str = "chosen") -> int: ...
def _crc32_hardware() -> str | None: ...
def _index_file_load(
    directory_fd: int, data_fd: int, data_size: int
) -> tuple[int, _index_file.Header] | None: ...
