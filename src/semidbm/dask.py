"""semidbm databases as Dask collections, read and written in parallel (``semidbm[dask]``).

Reading: :func:`read_bag` (a bag of ``(key, value)`` pairs, keys or
values), :func:`read_dataframe` (a DataFrame of decoded values, one row
per key) and :func:`read_keys` (a partitioned ``get_many``). Partition
``i`` of ``n`` holds the keys whose hash falls in the ``i``-th of ``n``
equal ranges (``semidbm._parts``): each task opens the database itself
and lists its keys from that range of the index's slots, without a
walk of the log or a copy of the whole index. The plan records the
state of the database it was made for; a task that finds another
(written since, compacted) raises :class:`DatabaseChanged` rather than
return keys another task also returns, or miss some.

A sharded database (``semidbm.sharded``: a directory holding
``shards.json``) is read shard by shard: each shard has a plan of its
own, and a partition is a ``(shard, part)`` pair, read by a task that
opens that shard alone and checks that shard's state.

Writing: :func:`to_semidbm` writes a bag of pairs or a DataFrame into
one database through shared writers, each partition one batch: a task
killed and retried leaves no part of its partition behind. Into a
sharded database, each partition's task encodes its pairs as one batch
record per shard (``sharded._batches_by_shard``, in C on the compiled
kernel), and one task per shard appends its record of every
partition: only encoded records travel between workers.

This module imports Dask when it is imported: ``import semidbm`` never
does. docs/dask.md is the guide.
"""

import math
import operator
import os
import pickle
from dataclasses import dataclass
from typing import (
    Any,
    Callable,
    Final,
    Iterable,
    List,
    Optional,
    Sequence,
    Tuple,
    TypeVar,
    Union,
    cast,
)

try:
    # Dask's types where it is installed; where it is not (the type checks of
    # the packaging session), no error: the module is then not importable.
    import dask  # type: ignore[import-not-found,unused-ignore]
    import dask.bag  # type: ignore[import-not-found,unused-ignore]
except ImportError as exc:  # pragma: no cover - where the extra is installed, it imports
    raise ImportError(
        "semidbm.dask needs Dask: pip install 'semidbm[dask]' (%s)" % exc
    ) from exc

from . import _messages, _parts, sharded
from ._database import Database
from .db import open as _open
from .errors import DBMError, DBMSignatureError
from .format import BATCH_FORMAT
from .sharded import ShardedDatabase, open_sharded
from .shelf import SigningSerializer, make_serializer

__all__ = [
    "DatabaseChanged",
    "read_bag",
    "read_dataframe",
    "read_keys",
    "to_semidbm",
    "KEYS_PER_PARTITION",
]

#: Keys per partition when ``npartitions`` is not given (a reader's
#: default; the last partitions may hold a few more or fewer: the keys'
#: hashes decide).
KEYS_PER_PARTITION = 1_000_000

#: The flag of the handles that write partitions (a shared writer that creates).
WRITE_FLAG: Final = "cm"

#: The flags of an open database that ``to_semidbm`` writes through: shared writers.
SHARED_WRITE_FLAGS: Final = ("wm", WRITE_FLAG)

#: A database to read or write: its directory, or an open handle (of one database or sharded).
Source = Union[str, "os.PathLike[str]", Database, ShardedDatabase]
#: A database's directory (a Source that is no open database).
Path = Union[str, "os.PathLike[str]"]
#: An open database, single or sharded.
Opened = TypeVar("Opened", Database, ShardedDatabase)


class DatabaseChanged(DBMError):
    """A task found the database in another state than the one its partitions were planned for.

    Written since, compacted, or replaced: the partitions of one state may
    overlap or miss keys in another, so the task refuses. Read again
    (plan anew) once the writes are over.
    """


@dataclass(frozen=True)
class Plan:
    """What every task of a read needs: a handle, the parts and the planned state.

    ``source`` is an unopened read-only handle (each task opens one of
    its own from it, ``handle``); ``parts`` the
    number of partitions; ``seed`` the hash seed of the parts
    (``Store.key_seed`` of the planning process); ``state`` the
    ``Store.log_state`` the parts were planned for.
    """

    source: Database
    parts: int
    seed: int
    state: Tuple[int, Tuple[int, ...]]


@dataclass(frozen=True)
class ShardedPlan:
    """The plans of a sharded database's shards, in the manifest's order, and how keys route.

    ``path`` is the database's directory; ``rule`` the manifest's hash rule
    (a name of ``sharded.HASH_RULES``); ``shards`` one :class:`Plan` per shard.
    """

    path: str
    rule: str
    shards: Tuple[Plan, ...]


def checked_npartitions(npartitions: Any) -> Optional[int]:
    """``npartitions`` as an int from 1 to 2**32 (the most parts of a hash), or None if None.

    Any integer is taken (``operator.index``: a NumPy one too), but not a
    bool, which is one by accident (TypeError, as for a float); one out of
    range is a ValueError, rather than a task that fails or a graph
    that never finishes building.
    """
    if npartitions is None:
        return None
    if isinstance(npartitions, bool):
        raise TypeError("npartitions must be an int, not bool")
    try:
        number = operator.index(npartitions)
    except TypeError:
        raise TypeError(
            "npartitions must be an int, not %s" % type(npartitions).__name__
        ) from None
    if not 1 <= number <= _parts.HASHES:
        raise ValueError("npartitions must be from 1 to 2**32, not %d" % number)
    return number


def plan(source: Source, npartitions: Optional[int] = None) -> Plan:
    """Open ``source`` read-only once and plan its partitions: ``npartitions``, or one per
    :data:`KEYS_PER_PARTITION` keys (at least one).

    ``source`` is a database's directory, or an open reader (whose kernel
    and options the tasks' handles keep). No key is read.
    """
    npartitions = checked_npartitions(npartitions)
    with reader(source) as database:
        parts = npartitions or max(1, math.ceil(len(database) / KEYS_PER_PARTITION))
        return Plan(handle(database), parts, database.key_seed, database.log_state)


def is_sharded(source: Source) -> bool:
    """Whether ``source`` is a sharded database: an open one, or a directory holding a manifest."""
    if isinstance(source, ShardedDatabase):
        return True
    if isinstance(source, Database):
        return False
    return os.path.isfile(os.path.join(os.fsdecode(os.fspath(source)), sharded.MANIFEST_NAME))


def shares(npartitions: Optional[int], count: int) -> List[Optional[int]]:
    """How many partitions each of ``count`` shards gets of ``npartitions`` in all.

    As equal as can be, and at least one each (so ``count`` partitions when
    fewer are asked for); None for every shard when ``npartitions`` is
    None: each shard then has its own default.
    """
    if npartitions is None:
        return [None] * count
    return [max(1, npartitions // count + (number < npartitions % count))
            for number in range(count)]


def plan_shards(source: Source, npartitions: Optional[int] = None) -> ShardedPlan:
    """Plan each shard of the sharded database ``source`` (a path or an open reader).

    ``npartitions`` partitions in all, shared out by :func:`shares`; by
    default each shard one per :data:`KEYS_PER_PARTITION` of its keys.
    Each shard's state is recorded as :func:`plan` records it.
    """
    npartitions = checked_npartitions(npartitions)
    with sharded_reader(source) as database:
        return ShardedPlan(
            os.path.abspath(database.path),
            database._rule,
            tuple(plan(shard, share) for shard, share in
                  zip(database.shards, shares(npartitions, len(database.shards)))),
        )


def plan_any(source: Source, npartitions: Optional[int] = None) -> Union[Plan, ShardedPlan]:
    """:func:`plan_shards` for a sharded database, :func:`plan` for one database."""
    return (plan_shards if is_sharded(source) else plan)(source, npartitions)


def plans_of(planned: Union[Plan, ShardedPlan]) -> Tuple[Plan, ...]:
    """The plans of one database each in a read: its shards' for a sharded one."""
    return planned.shards if isinstance(planned, ShardedPlan) else (planned,)


def partitions_of(planned: Union[Plan, ShardedPlan]) -> List[Tuple[Plan, int]]:
    """The partitions of a read, each a plan and a part of it: a shard's plan for a sharded one."""
    return [(each, part) for each in plans_of(planned) for part in range(each.parts)]


def handle(database: Opened) -> Opened:
    """A new handle of ``database``, opened at its first use: what unpickling it makes.

    A semidbm database refuses ``copy.copy`` (it is an open file), but a
    reader or shared writer pickles as the arguments that open it again
    (``SemiDBM.__reduce__``): each task opens its own this way, in a
    worker process or in this one.
    """
    reopened: Opened = pickle.loads(pickle.dumps(database))
    return reopened


def reader(source: Source) -> Database:
    """A new read-only handle of ``source`` (a path, or an open reader)."""
    if not isinstance(source, Database):
        return _open(cast(Path, source), "r")
    refuse_unless(source, source._arguments[1] == "r", "reads through a reader", "'r'")
    return handle(source)


def sharded_reader(source: Source) -> ShardedDatabase:
    """A new read-only handle of the sharded database ``source`` (a path, or an open reader)."""
    if not isinstance(source, ShardedDatabase):
        return open_sharded(cast(Path, source), "r")
    refuse_unless(source, source._flag == "r", "reads through a reader", "'r'")
    return handle(source)


def refuse_unless(source: Any, allowed: bool, how: str, flags: str) -> None:
    """Raise ValueError saying how semidbm.dask uses a database (``how``, with ``flags``) unless
    the handle ``source`` is ``allowed``."""
    if not allowed:
        raise ValueError(
            "semidbm.dask %s: pass the path, or a database opened with %s (not %r)"
            % (how, flags, source)
        )


def opened_shards(planned: ShardedPlan) -> ShardedDatabase:
    """The task's own handle of the planned sharded database, each shard as :func:`opened` opens
    it (refused if in another state than planned)."""
    shards: List[Database] = []
    try:
        for each in planned.shards:
            shards.append(opened(each))
    except BaseException:
        for shard in shards:
            shard.close()
        raise
    return ShardedDatabase(planned.path, "r", planned.rule, shards)


def opened(plan: Plan) -> Database:
    """The task's own handle of the planned database, refused if it is in another state."""
    database = handle(plan.source)
    try:
        state = database.log_state
        if state != plan.state:
            raise DatabaseChanged(
                "%s changed since its partitions were planned (its log was %d bytes, and is "
                "%d bytes now%s): read it again"
                % (database.path, plan.state[0], state[0],
                   ", other bytes" if state[0] == plan.state[0] else "")
            )
    except BaseException:
        database.close()
        raise
    return database


#: How a task decodes a value: called with its key and a zero-copy view of it (``value_decoder``).
Decoder = Callable[[bytes, memoryview], Any]


def decoded(decode: Decoder, database: Union[Database, ShardedDatabase], key: bytes) -> Any:
    """``decode`` of ``key`` and a zero-copy view of its value; ValueError naming the key if not.

    A value refused by its signature is no decoding error: its
    :exc:`semidbm.DBMSignatureError` is raised as it is.
    """
    view = database.view(key)  # its own errors (a checksum) are not the decoder's
    try:
        return decode(key, view)
    except DBMSignatureError:
        raise
    except Exception as exc:
        raise ValueError(
            "cannot decode the value of %r in %s: %s: %s"
            % (key, database.path, type(exc).__name__, exc)
        ) from exc


def values_of(
    database: Union[Database, ShardedDatabase], keys: List[bytes], decode, default=None
) -> List[Any]:
    """The values of ``keys`` (``default`` for a missing one), each through ``decode`` if given."""
    if decode is None:
        return database.get_many(keys, default)
    return [
        decoded(decode, database, key) if key in database else default for key in keys
    ]


def read_part(plan: Plan, part: int, what: str, decode) -> List[Any]:
    """Partition ``part`` of a bag: its keys, values or ``(key, value)`` pairs (``read_bag``).

    Without ``decode``, the kernel lists them in one pass over the part
    (``Store._part``: each value from its key's slot, no second lookup);
    with one, the part's keys, then each value decoded from a view.
    """
    with opened(plan) as database:
        if decode is None:
            return database._part(part, plan.parts, plan.seed, what)
        keys = database._part(part, plan.parts, plan.seed, "keys")
        values = [] if what == "keys" else values_of(database, keys, decode)
        return _parts.shaped(keys, values, what)


def read_bag(
    path: Source,
    what: str = "items",
    npartitions: Optional[int] = None,
    decode: Optional[Callable[[memoryview], Any]] = None,
    serializer: Optional[str] = None,
    key: Union[bytes, str, None] = None,
) -> "dask.bag.Bag":
    """A Dask bag of a database's ``(key, value)`` pairs (``what="items"``), keys or values.

    ``path`` is the database's directory (or an open reader, whose kernel
    the tasks use), or a sharded database's (or an open sharded reader).
    ``npartitions`` partitions (by default one per
    :data:`KEYS_PER_PARTITION` keys), each a part of the keys by their
    hash, listed by the task that reads it; a sharded database's are
    shared out among its shards, at least one each, and each partition
    is a part of one shard, read from that shard alone. Keys are bytes; values are
    bytes, or ``decode(view)`` for a read-only memoryview of the value
    in the data file's map (no copy), valid during the call only:
    ``decode`` must return an object that does not hold it. Or
    ``serializer`` names the shelf's serializer that decodes each value
    (``"pickle"`` or ``"json"``, as ``semidbm.open_shelf`` wrote it). A
    value that does not decode raises ValueError naming the key. A task
    that finds the database written or compacted since this call raises
    :class:`DatabaseChanged`.

    ``key`` is the signing key of a signed shelf (``open_shelf(...,
    key=)``), with ``serializer``: each value's signature is checked,
    as the shelf checks it, before the serializer reads it, and a value
    refused raises :exc:`semidbm.DBMSignatureError`. A signed shelf read
    without it checks nothing: an unsigned pickle planted in the file
    runs. A ``decode`` of your own sees every value unchecked, so it
    does not go with ``key``. The key travels with the tasks, to the
    workers (docs/dask.md, "Signed shelves").
    """
    _parts.check_what(what)
    decoder = value_decoder(serializer, decode, key)
    return dask.bag.from_delayed([
        dask.delayed(read_part, pure=True)(planned, part, what, decoder)
        for planned, part in partitions_of(plan_any(path, npartitions))
    ])


def value_decoder(serializer, decode, key=None) -> Optional[Decoder]:
    """How the readers' tasks decode values (a :data:`Decoder`), or None: they keep the bytes.

    ``decode(view)``; or the ``loads`` of the serializer named
    ``serializer``, after each value's signature is checked with the
    signing ``key`` if one is given (:class:`SignedLoads`). ValueError
    for ``decode`` with either (a ``decode`` of one's own cannot be told
    which serializer signed), or ``key`` alone.
    """
    if decode is not None:
        if serializer is not None:
            raise ValueError("give serializer or decode, not both")
        if key is not None:
            raise ValueError(
                "key goes with serializer, not with decode: a decode of your own sees each "
                "value's bytes, its signature unchecked"
            )
        return lambda stored_key, view: decode(view)
    if serializer is None:
        if key is not None:
            raise ValueError("key checks values for a serializer: give serializer too")
        return None
    if key is not None:
        return SignedLoads(serializer, key)
    loads = make_serializer(serializer).loads
    return lambda stored_key, view: loads(bytes(view))


class SignedLoads:
    """A :data:`Decoder` of a signed shelf's values: ``SigningSerializer.loads``, which checks
    each value's signature under its key before the serializer reads it.

    Made from the serializer's option and the signing key, both checked
    when it is made (before any task runs). A SigningSerializer refuses
    to be pickled, so that no pickle carries its key by accident; this
    decoder is pickled on purpose, as those two arguments, for the tasks
    that Dask sends to worker processes: the key goes with them, where
    the task graph goes (docs/dask.md, "Signed shelves").
    """

    __slots__ = ("_arguments", "_signing")

    def __init__(self, serializer: Any, key: Union[bytes, str]) -> None:
        self._arguments = (serializer, key)
        self._signing = SigningSerializer(serializer, key)

    def __repr__(self) -> str:
        return "<semidbm.dask.SignedLoads for the %r serializer>" % self._signing.name

    def __reduce__(self) -> Tuple[Any, ...]:
        return SignedLoads, self._arguments

    def __call__(self, stored_key: bytes, view: memoryview) -> Any:
        return self._signing.loads(stored_key, bytes(view))  # the check copies it all the same


def text_key(key: bytes, path: str) -> str:
    """``key`` as a row's index holds it, its UTF-8 text; ValueError naming it and ``path`` if
    it is not UTF-8 (where a bare UnicodeDecodeError would name neither)."""
    try:
        return key.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(
            "the key %r in %s is not UTF-8 text, which read_dataframe indexes rows by: "
            "read_bag gives keys as bytes" % (key, path)
        ) from exc


def frame_of(pairs: List[Tuple[bytes, Any]], path: str, kept) -> Any:
    """A pandas DataFrame of decoded ``(key, value)`` pairs of the database at ``path``.

    Indexed by the keys as text (``key``); a dict value is a row of its
    columns, any other the column ``value``. ``kept`` is the list of
    columns to keep, or None for all.
    """
    import pandas  # type: ignore[import-untyped,import-not-found,unused-ignore]

    keys = [text_key(key, path) for key, _ in pairs]
    rows = [row if isinstance(row, dict) else {"value": row} for _, row in pairs]
    frame = pandas.DataFrame.from_records(rows, index=pandas.Index(keys, name="key"))
    return frame if kept is None else frame.reindex(columns=kept)


def frame_part(plan: Plan, part: int, decode, kept, meta) -> Any:
    """Partition ``part`` of ``plan`` in ``read_dataframe``: a pandas DataFrame indexed by key.

    ``kept`` as for :func:`frame_of` (not named ``columns``: ``from_map``
    takes a function with that parameter for one that selects columns
    itself, which it then asks to). An empty partition is a copy of
    ``meta``, so that it has the collection's columns and dtypes: from no
    rows, pandas would make a frame of no columns.
    """
    pairs = read_part(plan, part, "items", decode)
    return frame_of(pairs, plan.source.path, kept) if pairs else meta.copy()


#: About how many keys a part of the keys holds when ``some_key`` looks for one.
KEYS_PER_PROBE = 64


def some_key(database: Database, seed: int) -> Optional[bytes]:
    """A key of ``database``, or None if it has none, listing as few as can be.

    The first key of the first nonempty part of about :data:`KEYS_PER_PROBE`
    keys: a range of the compiled kernel's slots, rather than a pass over
    every key (the first part is empty about once in e**64 tries).
    """
    parts = max(1, len(database) // KEYS_PER_PROBE)
    for part in range(parts):
        keys = database._part(part, parts, seed, "keys")
        if keys:
            return keys[0]
    return None


def inferred_meta(planned: Union[Plan, ShardedPlan], decode, kept) -> Any:
    """The empty pandas DataFrame of the columns and dtypes of one decoded value of ``planned``.

    What ``read_dataframe`` without ``meta`` says its collection holds:
    one value read here, in the planned state (Dask would read a whole
    first partition instead, and learn no columns from an empty one).
    ValueError if the database has no key.
    """
    for each in plans_of(planned):
        with opened(each) as database:
            key = some_key(database, each.seed)
            if key is not None:
                pairs = list(zip([key], values_of(database, [key], decode)))
                return frame_of(pairs, database.path, kept).iloc[:0]
    raise ValueError(
        "%s has no key, no value to learn the DataFrame's columns from: pass meta"
        % (planned.path if isinstance(planned, ShardedPlan) else planned.source.path)
    )


def read_dataframe(
    path: Source,
    serializer: Optional[str] = None,
    decode: Optional[Callable[[memoryview], Any]] = None,
    columns: Optional[Iterable[str]] = None,
    npartitions: Optional[int] = None,
    meta: Any = None,
    key: Union[bytes, str, None] = None,
) -> Any:
    """A Dask DataFrame of a database's values, one row per key, indexed by the key (``key``).

    Each value is decoded by the shelf's serializer named ``serializer``
    (``"pickle"``, the default, or ``"json"``: a database written by
    ``semidbm.open_shelf``) or by ``decode(view)`` (as for
    :func:`read_bag`). A decoded dict is a row, its keys the columns;
    any other value is the column ``value``. Keys are UTF-8 text, as a
    shelf's (ValueError naming a key that is not). ``columns`` keeps those
    columns, in that order (a missing one is NaN), as
    ``dask.dataframe.read_parquet``'s. ``meta`` (as for
    ``dask.dataframe.from_map``) gives the columns and dtypes; without it,
    they are those of one value, read by this call (ValueError if the
    database is empty: pass ``meta``). An empty partition has the columns
    and dtypes of ``meta``. Sources and partitions as for :func:`read_bag`,
    and ``key``, the signing key of a signed shelf, as there: without it
    a signed shelf's values are read unchecked.
    """
    import dask.dataframe  # type: ignore[import-not-found,unused-ignore]
    from dask.dataframe.utils import make_meta  # type: ignore[import-not-found,unused-ignore]

    planned = plan_any(path, npartitions)
    decoder = value_decoder(serializer or (None if decode else "pickle"), decode, key)
    kept = None if columns is None else list(columns)
    meta = inferred_meta(planned, decoder, kept) if meta is None else make_meta(meta)
    plans, parts = zip(*partitions_of(planned))
    return dask.dataframe.from_map(
        frame_part, list(plans), list(parts), args=(decoder, kept, meta),
        meta=meta, enforce_metadata=False,
    )


def lookup(
    keys: List[Any], plan: Union[Plan, ShardedPlan], default, decode
) -> List[Tuple[Any, Any]]:
    """A partition of ``read_keys``: each key with its value, or ``default``.

    In a sharded database each key is looked up in its shard, each shard
    asked once for its keys of the partition (``ShardedDatabase.get_many``).
    """
    keys = list(keys)
    with (opened_shards(plan) if isinstance(plan, ShardedPlan) else opened(plan)) as database:
        return list(zip(keys, values_of(database, keys, decode, default)))


def read_keys(
    path: Source,
    keys: Union[Iterable[Any], "dask.bag.Bag"],
    npartitions: Optional[int] = None,
    default: Any = None,
    decode: Optional[Callable[[memoryview], Any]] = None,
    serializer: Optional[str] = None,
    key: Union[bytes, str, None] = None,
) -> "dask.bag.Bag":
    """A Dask bag of ``(key, value)`` pairs for ``keys``, in order: a partitioned ``get_many``.

    ``keys`` is a list (split into ``npartitions`` runs; by default one per
    :data:`KEYS_PER_PARTITION`) or a Dask bag (its partitions kept). A
    missing key gives ``default``; values as for :func:`read_bag` (``decode``,
    or ``serializer`` with a signed shelf's ``key``). Every
    task reads the state of the database this call found, or raises
    :class:`DatabaseChanged`. In a sharded database (``path`` as for
    :func:`read_bag`) each task routes its keys to their shards and
    opens those, each checked against its own planned state.
    """
    planned = plan_any(path, 1)
    if isinstance(keys, dask.bag.Bag):
        bag = keys
    else:
        listed = list(keys)
        count = checked_npartitions(npartitions) or max(
            1, math.ceil(len(listed) / KEYS_PER_PARTITION)
        )
        bag = dask.bag.from_sequence(listed, npartitions=count)
    return bag.map_partitions(lookup, planned, default, value_decoder(serializer, decode, key))


def pair_encoder(serializer, encode) -> Optional[Callable[[Any], Any]]:
    """How ``to_semidbm`` turns a value into what it stores: ``encode``, the serializer's
    ``dumps``, or None: stored as it is."""
    if encode is not None:
        if serializer is not None:
            raise ValueError("give serializer or encode, not both")
        return encode
    if serializer is not None:
        return make_serializer(serializer).dumps
    return None


def frame_pairs(frame) -> Iterable[Tuple[str, dict]]:
    """A pandas DataFrame's rows as ``(index, {column: value})`` pairs."""
    names = list(frame.columns)
    for key, *row in frame.itertuples(name=None):
        yield str(key), dict(zip(names, row))


def pairs_of(partition: Any) -> Iterable[Tuple[Any, Any]]:
    """A partition's ``(key, value)`` pairs: a bag's as they are, a pandas DataFrame's rows."""
    return frame_pairs(partition) if hasattr(partition, "itertuples") else partition


def encoded_pairs(partition: Any, encode) -> List[Tuple[Any, Any]]:
    """A partition's ``(key, value)`` pairs (``pairs_of``) as a list, each value through ``encode``
    unless it is None."""
    pairs = pairs_of(partition)
    if encode is not None:
        return [(key, encode(value)) for key, value in pairs]
    return pairs if isinstance(pairs, list) else list(pairs)


def write_batch(database: Database, record: Optional[bytes]) -> None:
    """Append ``record`` (a batch record of ``sharded._batches_by_shard``, or None: nothing) to
    ``database``, in one turn of its shared writer.

    The record reaches the log whole once every pair is in it; a task
    killed before leaves nothing of it, and a record cut by the kill is
    a torn tail the next writer's turn cuts off.
    """
    if record is not None:
        database._commit_encoded(record)


def write_part(partition: Any, target: Database, encode) -> int:
    """Write one partition as one batch of a new shared writer of ``target``; its pairs' number."""
    pairs = encoded_pairs(partition, encode)
    (record,) = sharded._batches_by_shard(pairs, [target])
    with handle(target) as database:
        write_batch(database, record)
    return len(pairs)


def encode_part(partition: Any, targets: List[Database], rule: str,
                encode) -> Tuple[int, List[Optional[bytes]]]:
    """One partition's pairs encoded for the shards ``targets``: their number, and one batch
    record per shard (None for a shard it has no pair for), routed by the manifest's hash
    ``rule`` (``sharded._batches_by_shard``)."""
    pairs = encoded_pairs(partition, encode)
    return len(pairs), sharded._batches_by_shard(pairs, targets, rule)


def write_shard(records: Sequence[Optional[bytes]], target: Database) -> None:
    """Append one shard's batch records, one from each partition (``encode_part``'s), in the
    partitions' order, through one new shared writer of the shard ``target``.

    A task killed and retried leaves no half record, and the retry
    appends every record again (the same pairs: a key's last write, its
    last partition's, wins).
    """
    with handle(target) as database:
        for record in records:
            write_batch(database, record)


def counted(counts: Sequence[int], written: Sequence[None]) -> int:
    """The pairs written: the sum of ``counts``, once ``written`` (the shards' writes) is done."""
    return sum(counts)


def checked_for_batches(database: Database) -> Database:
    """``database`` if its format has batches; if not, closed, and DBMError saying to upgrade."""
    try:
        if database.format_version[0] < BATCH_FORMAT:
            raise DBMError(_messages.NO_BATCHES % ((database.path,) + database.format_version))
    except BaseException:
        database.close()
        raise
    return database


def writer(path: Source) -> Database:
    """A shared writer of ``path`` (created, of format 2, if missing) that can write batches."""
    if not isinstance(path, Database):
        return checked_for_batches(_open(cast(Path, path), WRITE_FLAG, format=2))
    refuse_unless(path, path._arguments[1] in SHARED_WRITE_FLAGS, "writes through shared writers",
                  "'cm' or 'wm'")
    refuse_expiring(path)
    return checked_for_batches(handle(path))


def refuse_expiring(database: Database) -> None:
    """Raise ValueError if ``database`` is a handle with a lifetime (``open(expire=)``): the
    tasks append records encoded beforehand, whose values never expire."""
    refuse_unless(database, database.expire is None, "writes values that never expire",
                  "no expire=")


def shard_writers(path: Source, shards) -> Tuple[List[Database], str]:
    """Unopened shared writers of each shard of the sharded database ``path``, and its hash rule.

    ``path`` is a directory, the sharded database created there (shards of
    format 2, then the manifest) if it has no manifest, or an open shared
    writer of one. ``shards`` (a count or a list of paths, as
    ``open_sharded`` takes) must agree with an existing manifest: the
    manifest decides, and one that disagrees is refused before anything
    is written. A shard without batches is refused too, and so are one
    database's handle and shards opened with a lifetime (``expire=``:
    the tasks append records encoded beforehand; ValueError).
    """
    if isinstance(path, Database):
        raise ValueError(
            "semidbm.dask writes shards into a sharded database: pass its directory, or one "
            "opened with semidbm.open_sharded (not %r)" % path
        )
    if not isinstance(path, ShardedDatabase):
        database = open_sharded(cast(Path, path), WRITE_FLAG, shards=shards, format=2)
    else:
        refuse_unless(path, path._flag in SHARED_WRITE_FLAGS, "writes through shared writers",
                      "'cm' or 'wm'")
        if shards is not None:
            sharded.refuse_other_shards(path.path, sharded._shard_list(shards),
                                        sharded.manifest_shards(path.path))
        database = handle(path)
    with database:
        for shard in database.shards:
            refuse_expiring(shard)
            checked_for_batches(shard)
        return [handle(shard) for shard in database.shards], database._rule


def sharded_writes(collection: Any, targets: List[Database], rule: str, encode) -> Any:
    """The tasks that write ``collection`` into the shards ``targets``: their count of pairs.

    Each partition's task encodes its pairs as one batch record per shard
    (``encode_part``), then one task per shard appends its record of every
    partition (``write_shard``): one writer, one open and one close per
    shard, and only encoded records travel between workers.
    """
    encoded = [dask.delayed(encode_part, pure=True, nout=2)(partition, targets, rule, encode)
               for partition in collection.to_delayed()]
    return dask.delayed(counted)(
        [count for count, _ in encoded],
        [dask.delayed(write_shard, pure=False)([records[number] for _, records in encoded],
                                               target)
         for number, target in enumerate(targets)],
    )


def to_semidbm(
    collection: Any,
    path: Source,
    serializer: Optional[str] = None,
    encode: Optional[Callable[[Any], Any]] = None,
    compute: bool = True,
    shards: Optional[Union[int, Iterable[Any]]] = None,
    **compute_kwargs: Any,
) -> Any:
    """Write a Dask bag of ``(key, value)`` pairs, or a Dask DataFrame, into one database or shards.

    ``path`` is created (format 2) if missing, by this call, before any
    task runs (with ``compute=False`` too), or must be of format 2
    (DBMError otherwise: batches need it; it says how to upgrade). Each
    partition is written by its task's own shared writer as one batch
    (docs/dask.md): whole or not at all, so a task killed and retried
    leaves no half partition (its retry writes it again; a key's last
    write wins). A DataFrame's rows are stored under their index as
    text, each row a dict of its columns through ``serializer``
    (``"pickle"`` by default, or ``"json"``) or ``encode(row)``; a bag's
    values as they are (bytes or str) unless ``serializer`` or
    ``encode`` is given. A partition must fit one batch record (2 GiB).

    Into a sharded database: ``shards`` (a count, or a list of the shards'
    paths, as :func:`semidbm.open_sharded` takes) creates one at ``path``
    before any task runs, or must agree with the manifest already there
    (semidbm.error otherwise, before anything is written); a ``path``
    holding a manifest, or an open sharded shared writer, needs no
    ``shards``. Each partition is split by the shard of its keys, and one
    task per shard appends its piece of every partition, each piece as
    one batch, in the partitions' order: a retried task leaves no half
    piece. A key written in two partitions keeps its value from the
    later one.

    Returns the number of pairs written, once computed
    (``compute_kwargs`` go to ``dask.compute``), or with
    ``compute=False`` a ``dask.delayed`` object that computes it. Any
    other collection, a Dask Series too, is a TypeError naming its type,
    before anything is written: ``series.to_bag(index=True)`` is a bag
    of a Series' ``(index, value)`` pairs. A handle opened with a lifetime
    (``semidbm.open(expire=)``) is a ValueError: the values this writes
    never expire.
    """
    is_frame = is_dataframe(collection)
    if is_frame:
        serializer = serializer or ("pickle" if encode is None else None)
    encoder = pair_encoder(serializer, encode)
    if shards is not None or is_sharded(path):
        written = sharded_writes(collection, *shard_writers(path, shards), encoder)
    else:
        written = single_writes(collection, path, encoder)
    return written.compute(**compute_kwargs) if compute else written


def is_dataframe(collection: Any) -> bool:
    """Whether ``collection`` is a Dask DataFrame (True) or a Dask bag (False).

    TypeError naming the type of anything else: a Series would be
    written as a DataFrame's rows or a bag's pairs are, as garbage.
    """
    import dask.dataframe  # type: ignore[import-not-found,unused-ignore]

    if isinstance(collection, dask.dataframe.DataFrame):
        return True
    if isinstance(collection, dask.bag.Bag):
        return False
    raise TypeError(
        "to_semidbm writes a dask.bag.Bag of (key, value) pairs or a dask.dataframe.DataFrame, "
        "not %s (a Series' (index, value) pairs are series.to_bag(index=True))"
        % type(collection).__name__
    )


def single_writes(collection: Any, path: Source, encode) -> Any:
    """The tasks that write ``collection`` into one database, a batch per partition: their count."""
    with writer(path) as database:
        target = handle(database)
    return dask.delayed(sum)([
        dask.delayed(write_part, pure=False)(part, target, encode)
        for part in collection.to_delayed()
    ])
