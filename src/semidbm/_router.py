"""The pure kernel's ShardRouter: a sharded database's reads of a key routed to its shard.

The twin of the compiled kernel's ``ShardRouter`` (``_core_pieces/shards.pxi``),
which ``semidbm.sharded.ShardedDatabase`` derives from where that kernel is
used: there ``db[key]``, ``in`` and ``get`` run in C, with no Python
frame. This one serves where the compiled kernel cannot be imported or
the pure one is chosen (``_kernel``), with the same answers and errors.
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Any, Iterable

from ._records import as_bytes

if TYPE_CHECKING:
    from ._types import Data


class ShardRouter:
    """The shards of a sharded database, and its reads of a key routed to its shard.

    A key is taken as a database takes it (str as UTF-8, bytes-like),
    its errors first (``_records.as_bytes``); its shard is the CRC-32 of
    its bytes modulo the number of shards (the rule ``"crc32"``, the
    only one); then the shard's own ``[]``, ``in`` or ``get`` answers.
    The shards are a tuple, fixed when the router is made.
    """

    __slots__ = ("_shards",)

    _shards: tuple[Any, ...]

    def __init__(self, shards: Iterable[Any]) -> None:
        """Route to ``shards`` (an iterable of open databases, in the manifest's order)."""
        self._shards = tuple(shards)

    def _route(self, key: Data) -> Any:
        """The shard of ``key``; ValueError if there is no shard (a router never given any)."""
        shards = self._shards
        if not shards:
            raise ValueError("no shard")
        return shards[zlib.crc32(as_bytes(key, "keys")) % len(shards)]

    def __getitem__(self, key: Data, /) -> bytes:
        """The value of ``key`` from its shard: KeyError of ``key`` as given if it is missing."""
        value: bytes = self._route(key)[key]
        return value

    def __contains__(self, key: object, /) -> bool:
        """Whether ``key`` is in its shard."""
        return key in self._route(key)  # type: ignore[arg-type]

    def get(self, key: Data, default: Any = None, /) -> Any:
        """The value of ``key`` from its shard, or ``default`` if it is missing."""
        return self._route(key).get(key, default)
