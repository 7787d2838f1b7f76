"""Sharded databases: several semidbm databases opened as one mapping, each key in one of them.

A sharded database is a directory holding a manifest, ``shards.json``,
and the shards: plain semidbm databases, each a directory, inside it by
default or anywhere else (another mount) when the manifest names them by
an absolute path. A key lives in the shard that the manifest's hash
rule gives it (:func:`shard_of`), so writers of different shards never
wait for each other, and each shard can be read, written or copied as
the single database it is. The manifest is written once, after every
shard exists, and never changed; docs/FORMAT.md, "Sharded databases",
gives its fields and the checks each open makes of them.

:func:`open_sharded` opens one as a :class:`ShardedDatabase`; each
operation goes to the shard of its key, and a bulk operation to each
shard once, with that shard's part. Atomicity is a shard's: nothing
spans two shards at once.
"""

from __future__ import annotations

import errno
import heapq
import itertools
import json
import os
import stat
import threading
import zlib
from collections.abc import MutableMapping
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence

from . import _files, _messages, _order, db
from ._database import Database
from ._progress import quantity
from ._records import as_bytes, as_pair, encode_batch, key_list
from ._shared import SHARED_FLAGS
from .errors import DBMError
from .format import DATA_NAME

if TYPE_CHECKING:
    from types import ModuleType

    from _typeshed import StrOrBytesPath

    from ._types import Data, Flag

#: The manifest's name in the sharded database's directory.
MANIFEST_NAME = "shards.json"
#: The manifest's ``format``: what marks the file as a sharded semidbm manifest.
MANIFEST_FORMAT = "semidbm-sharded"
#: The manifest versions this module reads (and the one it writes, the last).
MANIFEST_VERSIONS = (1,)


#: The hash rules by the name a manifest gives them: each a function of a key's bytes to a
#: number from 0 up, whose remainder by the count of shards is the key's shard. ``"crc32"`` is
#: the key's CRC-32, as :func:`zlib.crc32` gives it. A new rule takes a new name, and its
#: routing in each kernel's ``ShardRouter`` (which routes by ``"crc32"``).
HASH_RULES: dict[str, Callable[[bytes], int]] = {"crc32": zlib.crc32}
#: The rule a new sharded database takes.
DEFAULT_HASH_RULE = "crc32"


def shard_of(key: Data, count: int) -> int:
    """Return the shard, from 0 to ``count - 1``, that holds ``key`` under the default rule.

    The rule is ``"crc32"``: ``zlib.crc32(key) % count``, the same in
    every process, Python version and machine (unlike :func:`hash`), so
    that any process can route a key. ``key`` is bytes (a str key is
    stored as its UTF-8 bytes, which route it, and may be given so).
    ``count`` is an int from 1 up (ValueError or TypeError otherwise).

    >>> semidbm.shard_of(b"key", 4)
    1
    """
    if isinstance(count, bool) or not isinstance(count, int):
        raise TypeError("count must be an int, not %s" % type(count).__name__)
    if count < 1:
        raise ValueError("count must be 1 or more, not %d" % count)
    return HASH_RULES[DEFAULT_HASH_RULE](as_bytes(key, "keys")) % count


def open_sharded(
    path: StrOrBytesPath,
    flag: Flag = "r",
    shards: int | Iterable[StrOrBytesPath] | None = None,
    mode: int = 0o666,
    **options: Any,
) -> ShardedDatabase:
    """Open the sharded semidbm database in the directory ``path`` as one mapping.

    Args:
        path: the directory holding the manifest (``shards.json``) and,
            by default, the shards.
        flag: as for :func:`semidbm.open`, applied to every shard:
            ``'r'``, ``'w'``, ``'c'``, ``'n'`` (every shard emptied; the
            manifest kept), ``'wm'`` or ``'cm'``. ``'r'`` and ``'w'``
            (``'wm'``) need a manifest; ``'c'``, ``'cm'`` and ``'n'``
            create the database if it has none, or complete a creation cut
            short (shards made, no manifest yet).
        shards: needed to create one: the number of shards (named
            ``shard-0000``, ``shard-0001``... inside ``path``), or the
            list of their directories, relative to ``path`` or absolute
            (a shard on another mount). Given for an existing database, it
            must agree with its manifest.
        mode: the permissions of the directory, the manifest and each
            shard (as for :func:`semidbm.open`).
        **options: the other arguments of :func:`semidbm.open`
            (``buffer_size``, ``verify_checksums``, ``lock_timeout``...),
            for each shard.

    Returns:
        ShardedDatabase: the open database; close it, or use it in a
        ``with`` block.

    Raises:
        ValueError: a bad flag or ``shards``; :exc:`TypeError` for an
            argument of the wrong type.
        semidbm.error: no manifest where one is needed (``errno.ENOENT``,
            also for a shard it names that is missing), a manifest that
            is refused (an unknown version or hash rule, a count that does
            not match its list of shards, a relative path leading out of
            the directory), ``shards`` that disagree with it, or a shard's
            own open failing. Shards already opened are closed again.

    >>> with semidbm.open_sharded("sharded.db", "c", shards=4) as db:
    ...     db.update({b"a": b"1", b"b": b"2", b"c": b"3"})
    ...     len(db), db.shard_of(b"a")
    (3, 3)
    """
    return open_sharded_with(db._default_kernel, path, flag, shards, mode, **options)


def open_sharded_with(
    kernel: ModuleType,
    path: StrOrBytesPath,
    flag: Flag = "r",
    shards: int | Iterable[StrOrBytesPath] | None = None,
    mode: int = 0o666,
    **options: Any,
) -> ShardedDatabase:
    """Like :func:`open_sharded`, each shard on the given kernel module (for tests and tools)."""
    if flag not in db._FLAGS:
        raise ValueError(_messages.BAD_FLAG % (flag,))
    wanted = _shard_list(shards)
    directory = os.fsdecode(os.fspath(path))
    try:
        return _open_or_create(kernel, directory, flag, wanted, mode, options)
    except DBMError:
        raise
    except OSError as exc:
        raise _files.os_error(exc, "cannot open sharded semidbm database") from None


def _open_or_create(kernel, directory, flag, wanted, mode, options):
    """``open_sharded_with`` once its arguments are checked (``wanted``: the shards given, or
    None), with the operating system's errors as they come."""
    manifest = _read_manifest(directory)
    if manifest is None:
        if flag[0] in "rw":
            if not os.path.isdir(directory):
                raise DBMError(errno.ENOENT, _messages.NO_SHARDED, directory)
            raise DBMError(errno.ENOENT, _messages.NO_MANIFEST % directory, directory)
        if wanted is None:
            raise DBMError(errno.ENOENT, _messages.NO_SHARDS_GIVEN % directory, directory)
        return _create(kernel, directory, flag, wanted, mode, options)
    rule, paths = manifest
    if wanted is not None:
        refuse_other_shards(directory, wanted, paths)
    _check_shards(directory, paths)
    return ShardedDatabase(directory, flag, rule, _open_shards(kernel, directory, paths,
                                                               _existing(flag), mode, options))


def _existing(flag):
    """The flag that opens an existing shard as ``flag`` asks: ``'c'`` and ``'cm'`` create none.

    A shard missing since the manifest was written may be on a mount that
    is not mounted: a new empty one in its place would hide its keys.
    """
    return {"c": "w", "cm": "wm"}.get(flag, flag)


def _shard_list(shards):
    """``open_sharded``'s ``shards`` as the list of shard paths a manifest holds, or None.

    A number ``N`` gives ``shard-0000`` to ``shard-N-1`` (relative); a list
    of paths is checked as a manifest's is (``_shard_paths_problem``).
    """
    if shards is None:
        return None
    if isinstance(shards, int) and not isinstance(shards, bool):
        if shards < 1:
            raise ValueError("shards must be 1 or more, not %d" % shards)
        return ["shard-%04d" % number for number in range(shards)]
    if isinstance(shards, (str, bytes, bool)) or not isinstance(shards, Iterable):
        raise TypeError(
            "shards must be a number of shards or a list of their paths, not %s"
            % type(shards).__name__
        )
    paths = [_stored_path(os.fsdecode(os.fspath(shard))) for shard in shards]
    problem = _shard_paths_problem(paths)
    if problem is not None:
        raise ValueError("shards: %s" % problem)
    return paths


def _stored_path(path):
    """How a manifest stores a shard's path: absolute as it is, relative normalized, with ``/``."""
    if os.path.isabs(path):
        return os.path.normpath(path)
    return os.path.normpath(path).replace(os.sep, "/")


def _shard_paths_problem(paths):
    """What is wrong with ``paths`` as a manifest's list of shards; None if nothing is.

    The list may not be empty; a relative path must lead to a place
    inside the directory, other than the directory itself (``..``, or on
    Windows another drive, would put a shard, and the writes to it,
    outside what the manifest's owner gave it); no two may be the same
    shard.
    """
    if not paths:
        return "no shard"
    for path in paths:
        if not isinstance(path, str) or not path:
            return "a shard's path is not a non-empty string: %r" % (path,)
        if "\0" in path or not _encodable(path):
            return "a shard's path is no file name: %r" % (path,)
        if not os.path.isabs(path):
            parts = os.path.normpath(path).split(os.sep)
            if parts[0] in (os.curdir, os.pardir) or os.path.splitdrive(path)[0]:
                return "the relative path %r leads out of the directory" % path
    normalized = [os.path.normpath(path) for path in paths]
    if len(set(normalized)) != len(normalized):
        return "a shard is named twice"
    return None


def _encodable(path):
    """Whether ``path`` can be a file name here (a surrogate that stands for no byte cannot)."""
    try:
        os.fsencode(path)
    except UnicodeError:
        return False
    return True


def refuse_other_shards(directory: str, wanted: list[str], paths: list[str]) -> None:
    """Raise DBMError unless ``wanted``, the shards given for ``directory``, are ``paths``, its
    manifest's: the manifest of an existing database decides, and never changes."""
    if wanted != paths:
        raise DBMError(_messages.OTHER_SHARDS % (directory, _describe(wanted), _describe(paths)))


def manifest_shards(directory: str) -> list[str]:
    """The shards that the manifest of the sharded database ``directory`` names (as stored).

    Raises DBMError (``errno.ENOENT``) if it has no manifest, or for one refused.
    """
    manifest = _read_manifest(directory)
    if manifest is None:
        raise DBMError(errno.ENOENT, _messages.NO_MANIFEST % directory, directory)
    return manifest[1]


def _describe(paths):
    """``paths`` for a message: the count, then the list if they are not the default names."""
    if paths == _shard_list(len(paths)):
        return "%d shards" % len(paths)
    return "%d shards %r" % (len(paths), paths)


def _read_manifest(directory):
    """The manifest of the sharded database ``directory``: ``(rule, paths)``, None if it has none.

    Every field is checked (docs/FORMAT.md, "Sharded databases"): a
    manifest that fails a check raises DBMError saying which; a
    ``directory`` that is a file, too.
    """
    manifest_path = os.path.join(directory, MANIFEST_NAME)
    try:
        with open(manifest_path, "rb") as handle:
            text = handle.read()
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        raise DBMError(_messages.NOT_SHARDED_DIRECTORY % directory) from None
    except OSError as exc:
        raise _files.os_error(exc, "cannot read the manifest") from None
    try:
        manifest = json.loads(text)
    except ValueError as exc:
        raise DBMError(_messages.BAD_MANIFEST % (manifest_path, "not JSON: %s" % exc)) from None
    except RecursionError:
        raise DBMError(_messages.BAD_MANIFEST % (manifest_path, "nested too deep")) from None
    problem = _manifest_problem(manifest)
    if problem is not None:
        raise DBMError(_messages.BAD_MANIFEST % (manifest_path, problem))
    return manifest["hash"], [_stored_path(path) for path in manifest["shards"]]


def _manifest_problem(manifest):
    """What makes ``manifest`` (the parsed JSON) one this module must refuse; None if nothing."""
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        return "its format is not %r" % MANIFEST_FORMAT
    version = manifest.get("version")
    if type(version) is not int or version not in MANIFEST_VERSIONS:
        return "version %r, which this semidbm does not know (it reads %s)" % (
            version, ", ".join(map(str, MANIFEST_VERSIONS)))
    if manifest.get("hash") not in HASH_RULES:
        return "the hash rule %r, which this semidbm does not know (it knows %s)" % (
            manifest.get("hash"), ", ".join(sorted(HASH_RULES)))
    count, paths = manifest.get("count"), manifest.get("shards")
    if not isinstance(paths, list):
        return "no list of shards"
    if type(count) is not int or count != len(paths):
        return "a count of %r shards, and a list of %d" % (count, len(paths))
    return _shard_paths_problem(paths)


def _resolve(directory, path):
    """Where the shard a manifest names by ``path`` is: absolute, or relative to ``directory``."""
    return path if os.path.isabs(path) else os.path.join(directory, path)


def _check_shards(directory, paths):
    """Raise DBMError for the first shard of ``paths`` that is missing or named twice.

    A manifest is written after its shards: one missing since
    (``errno.ENOENT``) may be on a mount that is not mounted, or removed;
    either way its keys are gone from view, and an open that went on
    would hide that (or create an empty shard in its place). Two names
    of one directory (an absolute path and a relative one, or a symbolic
    link) would count its keys twice and route none of them right.
    """
    seen = {}
    for number, path in enumerate(paths):
        shard = _resolve(directory, path)
        try:
            info = os.stat(shard)
        except FileNotFoundError:
            info = None
        except OSError as exc:
            raise _files.os_error(exc, "cannot open shard %d of %r" % (number, directory)) from None
        if info is None or not stat.S_ISDIR(info.st_mode):
            raise DBMError(errno.ENOENT, _messages.SHARD_MISSING % (number, directory), shard)
        other = seen.setdefault((info.st_dev, info.st_ino), number)
        if other != number:
            raise DBMError(_messages.BAD_MANIFEST % (
                os.path.join(directory, MANIFEST_NAME),
                "shards %d and %d are one directory" % (other, number)))


def _create(kernel, directory, flag, paths, mode, options):
    """Make the sharded database ``directory``: its shards first, then its manifest.

    So a crash at any point leaves no manifest naming a shard that was
    not made; ``'c'`` completes such a creation. If a shard's open fails,
    the directory is removed again if that leaves it empty. A single
    database's directory is refused: shards made inside it would be
    nested databases that no one reads. The parent directory is flushed
    last, as for a single database.
    """
    try:
        os.mkdir(directory, mode | ((mode & 0o444) >> 2))
        made = True
    except FileExistsError:
        if not stat.S_ISDIR(os.stat(directory).st_mode):
            raise DBMError(_messages.NOT_SHARDED_DIRECTORY % directory) from None
        if os.path.lexists(os.path.join(directory, DATA_NAME)):
            raise DBMError(_messages.SINGLE_NOT_SHARDED % directory) from None
        made = False
    try:
        opened = _open_shards(kernel, directory, paths, flag, mode, options)
    except BaseException:
        if made:
            db._remove_empty_directory(directory)
        raise
    try:
        rule = _write_manifest(directory, paths, mode)
        _files.fsync_directory(os.path.dirname(os.path.abspath(directory)))
    except BaseException:
        _close_after_failure(opened)
        raise
    for shard in opened:  # they exist now: one pickled from here must not make a missing one again
        arguments = shard._arguments  # type: ignore[attr-defined]
        shard._arguments = (arguments[0], _existing(flag)) + arguments[2:]  # type: ignore[attr-defined]
    return ShardedDatabase(directory, flag, rule, opened)


def _write_manifest(directory, paths, mode):
    """Write the manifest naming ``paths``, atomically and durably; return its hash rule's name.

    The manifest is written to a file of its own (named after the process
    and thread), flushed, then linked to its name, which fails if a
    manifest is there already (another process creating the same database
    with ``'cm'``): the manifest found then must name the same shards. The
    directory is flushed last.
    """
    manifest = {
        "format": MANIFEST_FORMAT,
        "version": MANIFEST_VERSIONS[-1],
        "hash": DEFAULT_HASH_RULE,
        "count": len(paths),
        "shards": paths,
    }
    folder = _files.Directory(directory)
    try:
        temporary = "%s.%d.%d.new" % (MANIFEST_NAME, os.getpid(), threading.get_ident())
        folder.create_file(temporary, json.dumps(manifest, indent=1).encode("ascii"), mode)
        try:
            folder.link(temporary, MANIFEST_NAME)
        except FileExistsError:
            rule, found = _read_manifest(directory)
            refuse_other_shards(directory, paths, found)
            return rule
        finally:
            folder.remove(temporary)
        folder.fsync()
    finally:
        folder.close()
    return DEFAULT_HASH_RULE


def _open_shards(kernel, directory, paths, flag, mode, options):
    """Open every shard of ``paths`` with ``flag``, in order; if one fails, close those opened."""
    opened = []
    try:
        for path in paths:
            opened.append(db.open_with(kernel, _resolve(directory, path), flag, mode, **options))
    except BaseException:
        _close_after_failure(opened)
        raise
    return opened


def _close_after_failure(shards):
    """Close every shard of ``shards`` after a step of an open failed.

    That failure is what is reported: an error closing a shard is
    ignored, and the others are closed all the same.
    """
    for shard in shards:
        try:
            shard.close()
        except Exception:
            pass


def _compacted_before(done, shards, left_out):
    """What a sharded compaction's error says after a shard's ``reason``: ``done`` of the
    ``shards`` were compacted, leaving out ``left_out`` damaged records."""
    return lambda reason: _messages.SHARDS_COMPACTED % (
        reason, done, shards, quantity(left_out, "damaged record")
    )


def _on_each(shards, operation):
    """Call ``operation`` on every shard of ``shards``, even past a failure; raise the first."""
    first = None
    for shard in shards:
        try:
            operation(shard)
        except BaseException as exc:
            if first is None:
                first = exc
    if first is not None:
        raise first


def _routing_store(rule, shards):
    """The compiled kernel's Store class that routes ``shards`` in C, or None.

    It routes by CRC-32, as its ``ShardRouter`` does (``Store._routed_get_many``,
    ``_routed_split``, ``_routed_batches``), without a Python frame per key;
    it serves the ``"crc32"`` rule, over shards that are all of that kernel
    (the pure kernel has none: its shards are routed in Python).
    """
    store = type(shards[0])
    if rule != "crc32" or not hasattr(store, "_routed_get_many") or not all(
        type(shard) is store for shard in shards
    ):
        return None
    return store


def _kernel_get_many(rule, shards):
    """The ``get_many`` of ``shards`` routed in C (``_routing_store``), or None."""
    store = _routing_store(rule, shards)
    return None if store is None else store._routed_get_many


def _split_by_shard(
    pairs: Iterable[Any], shards: Sequence[Database], rule: str = DEFAULT_HASH_RULE
) -> list[dict[bytes, bytes]]:
    """The ``(key, value)`` pairs of ``pairs`` split among ``shards`` under the hash ``rule``.

    One dict per shard, of its keys and values as bytes (converted as
    :meth:`semidbm.Database.update` takes them), each key with the last
    value given for it. Every pair is read and checked before any dict
    returns, so a bad item (TypeError or ValueError, as ``update``
    raises) leaves nothing for a writer to store. Split in C where the
    shards allow (``_routing_store``), else here.
    """
    store = _routing_store(rule, shards)
    if store is not None:
        return store._routed_split(pairs, len(shards))
    return _split(pairs, len(shards), rule)


def _split(pairs: Iterable[Any], count: int, rule: str) -> list[dict[bytes, bytes]]:
    """:func:`_split_by_shard` among ``count`` shards, in Python (``Store._routed_split``'s
    twin)."""
    _check_count(count)
    pieces: list[dict[bytes, bytes]] = [{} for _ in range(count)]
    for number, key, value in _routed_pairs(pairs, count, rule):
        pieces[number][key] = value
    return pieces


def _batches_by_shard(
    pairs: Iterable[Any], shards: Sequence[Database], rule: str = DEFAULT_HASH_RULE
) -> list[bytes | None]:
    """The ``(key, value)`` pairs of ``pairs`` as one batch record of puts per shard, or None.

    What :meth:`Store._commit_encoded` of each shard appends: its pairs'
    records in the order given (a key given twice is put twice, the last
    value winning), checked and routed as :func:`_split_by_shard` does,
    every one before any record returns. ValueError if a shard's records
    pass what a batch holds (2 GiB). Encoded in C, each pair once, where
    the shards allow (``_routing_store``), else here.
    """
    store = _routing_store(rule, shards)
    if store is not None:
        return store._routed_batches(pairs, len(shards))
    return _batches(pairs, len(shards), rule)


def _batches(pairs: Iterable[Any], count: int, rule: str) -> list[bytes | None]:
    """:func:`_batches_by_shard` for ``count`` shards, in Python (``Store._routed_batches``'s
    twin)."""
    _check_count(count)
    pieces: list[list[tuple[bytes, bytes]]] = [[] for _ in range(count)]
    for number, key, value in _routed_pairs(pairs, count, rule):
        pieces[number].append((key, value))
    return [encode_batch(piece)[0] if piece else None for piece in pieces]


def _check_count(count: int) -> None:
    """Refuse a count of shards below one, as the compiled kernel's routing does."""
    if count < 1:
        raise ValueError("no shard")


def _routed_pairs(
    pairs: Iterable[Any], count: int, rule: str
) -> Iterator[tuple[int, bytes, bytes]]:
    """Each pair of ``pairs`` as ``(shard, key, value)``: bytes, checked as ``update`` checks
    them, and the shard of ``count`` the hash ``rule`` gives the key."""
    route = HASH_RULES[rule]
    for number, item in enumerate(pairs):
        key, value = as_pair(item, number)
        routed = as_bytes(key, "keys")
        yield route(routed) % count, routed, as_bytes(value, "values")


def _rebuild(path, flag, rule, shards):
    """Unpickle a sharded database (``ShardedDatabase.__reduce__``) from its pickled shards.

    Each shard opens at its first use, as a pickled database does.
    """
    return ShardedDatabase(path, flag, rule, shards)


if TYPE_CHECKING:
    from ._router import ShardRouter as _Router
else:
    #: What ShardedDatabase derives its reads of a key from (``db[key]``, ``in``, ``get``):
    #: the kernel's ShardRouter, in C on the compiled kernel, with no Python frame.
    _Router = db._default_kernel.ShardRouter


class ShardedDatabase(_Router, MutableMapping):  # type: ignore[type-arg]
    """A sharded semidbm database: one mapping over the shards, each key in the shard of its hash.

    Made by :func:`open_sharded`. Keys and values are taken as a
    :class:`semidbm.Database` takes them (``str`` stored as UTF-8,
    bytes-like objects) and come back as ``bytes``; each operation on a
    key is that shard's, with its errors. ``len`` is the shards' sum;
    iteration, :meth:`keys`, :meth:`values` and :meth:`items` go shard by
    shard, in the manifest's order, each shard's part a snapshot of it
    taken in turn. The bulk operations call each shard once, with its
    part of the keys. After :meth:`close` every operation raises
    :class:`semidbm.error`. A reader or a shared writer pickles as what
    opens it again (each shard at its first use); an exclusive writer
    does not. ``db[key]``, ``key in db`` and :meth:`get` are the kernel's
    ``ShardRouter``'s: on the compiled kernel, C slots, with no Python
    frame between the call and the shard's lookup.
    """

    __slots__ = ("_path", "_flag", "_rule", "_hash", "_count", "_cursor", "_routed_get_many",
                 "__weakref__")

    def __init__(self, path: str, flag: str, rule: str, shards: Iterable[Database]) -> None:
        """Hold the open ``shards`` of the database at ``path``, its ``flag`` and hash ``rule``."""
        self._path = path
        self._flag = flag
        self._rule = rule
        self._hash = HASH_RULES[rule]
        super().__init__(shards)
        self._count = len(self._shards)
        self._cursor = None
        self._routed_get_many = _kernel_get_many(rule, self._shards)

    @property
    def path(self) -> str:
        """The directory of the sharded database (the one that holds ``shards.json``)."""
        return self._path

    @property
    def shards(self) -> list[Database]:
        """The shards, open (or closed with the database), in the manifest's order."""
        return list(self._shards)

    @property
    def closed(self) -> bool:
        """True once the database is closed, or one shard is (a reader's failed :meth:`refresh`)."""
        return any(shard.closed for shard in self._shards)

    @property
    def writable(self) -> bool:
        """True if the database was opened for writing (every shard is)."""
        return all(shard.writable for shard in self._shards)

    def shard_of(self, key: Data) -> int:
        """Return the number of the shard that holds ``key`` (its place in :attr:`shards`)."""
        return self._hash(as_bytes(key, "keys")) % self._count

    def _shard(self, key):
        """The shard that holds ``key``."""
        return self._shards[self.shard_of(key)]

    def view(self, key: Data) -> memoryview:
        """Return a read-only view of the value of ``key``, as :meth:`semidbm.Database.view`."""
        return self._shard(key).view(key)

    def __setitem__(self, key: Data, value: Data, /) -> None:
        """Store ``value`` under ``key``, in its shard."""
        self._shard(key)[key] = value

    def __delitem__(self, key: Data, /) -> None:
        """Delete ``key`` from its shard (:class:`KeyError` if missing)."""
        del self._shard(key)[key]

    def __len__(self) -> int:
        """The number of keys: the sum of the shards'."""
        return sum(len(shard) for shard in self._shards)

    def __iter__(self) -> Iterator[bytes]:
        """Iterate over the keys, lazily, shard after shard (each as a shard's iteration)."""
        for shard in self._shards:
            yield from shard

    def keys(self, prefix: Data | None = None) -> list[bytes]:  # type: ignore[override]
        """Return a list of the keys: each shard's snapshot, one shard after the other.

        With ``prefix``, the keys that start with it, in byte order: the
        shards' sorted keys merged (as :meth:`semidbm.Database.keys`).
        """
        if prefix is not None:
            return _order.listed(self, prefix, "keys")
        return [key for shard in self._shards for key in shard.keys()]

    def values(self, prefix: Data | None = None) -> list[bytes]:  # type: ignore[override]
        """Return a list of the values, in the order of :meth:`keys` (with ``prefix`` too)."""
        if prefix is not None:
            return _order.listed(self, prefix, "values")
        return [value for shard in self._shards for value in shard.values()]

    def items(  # type: ignore[override]
        self, prefix: Data | None = None
    ) -> list[tuple[bytes, bytes]]:
        """Return a list of the ``(key, value)`` pairs, in the order of :meth:`keys`."""
        if prefix is not None:
            return _order.listed(self, prefix, "items")
        return [item for shard in self._shards for item in shard.items()]

    def iter_sorted(
        self,
        start: Data | None = None,
        stop: Data | None = None,
        *,
        prefix: Data | None = None,
        reverse: bool = False,
        what: str = "keys",
    ) -> Iterator[Any]:
        """Iterate over the keys in byte order, as :meth:`semidbm.Database.iter_sorted`.

        The shards' sorted keys are merged; each shard's are a snapshot
        of it, taken one shard after the other.
        """
        return _order.iter_sorted(self, start, stop, prefix, reverse, what)

    def _sorted(self, low: bytes, high: bytes | None, what: str) -> list[Any]:
        """The keys of a range in byte order (``Store._sorted``): the shards' merged.

        Keys are in one shard each, so a merge of pairs never compares
        two values.
        """
        asked = "keys" if what == "keys" else "items"
        merged = list(heapq.merge(*(shard._sorted(low, high, asked) for shard in self._shards)))
        return [value for _, value in merged] if what == "values" else merged

    def _group(self, keys: list[bytes]) -> list[list[int]]:
        """The place in ``keys`` (bytes) of each key, grouped by shard: a list per shard."""
        places: list[list[int]] = [[] for _ in self._shards]
        add = [part.append for part in places]
        count = self._count
        for place, code in enumerate(map(self._hash, keys)):
            add[code % count](place)
        return places

    def get_many(self, keys: Iterable[Data], default: Any = None) -> list[Any]:
        """Return the values of many keys, in their order; ``default`` for a missing one.

        As :meth:`semidbm.Database.get_many`, each shard asked once for
        its keys; each shard's answers are read at once, not all of them.
        """
        if self._routed_get_many is not None:
            return self._routed_get_many(self._shards, keys, default)
        encoded = [as_bytes(key, "keys") for key in key_list(keys, "get_many")]
        answers: list[Any] = [default] * len(encoded)
        for shard, places in zip(self._shards, self._group(encoded)):
            if places:
                values = shard.get_many([encoded[place] for place in places], default)
                for place, value in zip(places, values):
                    answers[place] = value
        return answers

    def update(self, other: Any = (), /, **kwds: Data) -> None:
        """Store many items: those of ``other`` (a mapping or pairs), then the keyword arguments.

        Every key and value is checked and converted before any is
        written, so a bad item writes nothing; then each shard stores its
        part in one call to its :meth:`~semidbm.Database.update`. Atomicity
        is per shard: a shard whose write fails (a full disk) stops the
        update there, after the shards before it have stored their part.

        Raises:
            TypeError, ValueError: as :meth:`semidbm.Database.update`.
            semidbm.error: the database is read-only or closed, or a
                shard's write failed.
        """
        self._check_writable("write")
        if type(other) is dict:
            pairs: Iterable[Any] = other.items()
        elif hasattr(other, "keys"):
            pairs = [(key, other[key]) for key in other.keys()]
        else:
            pairs = other
        pieces = _split_by_shard(itertools.chain(pairs, kwds.items()), self._shards, self._rule)
        for shard, piece in zip(self._shards, pieces):
            if piece:
                shard.update(piece)

    def delete_many(self, keys: Iterable[Data]) -> None:
        """Delete many keys: all of them, or, if one is missing or given twice, none.

        Every key is looked up in its shard before any is deleted: a
        missing or repeated key raises :exc:`KeyError` for the first such
        key in the order given, and no shard changes. Then each shard
        deletes its part in one call to its
        :meth:`~semidbm.Database.delete_many`. Atomicity is per shard: a
        shard whose write fails, or, with shared writers, that finds one of
        its keys deleted by another process since the look-up, raises
        after the shards before it have deleted their part.

        Raises:
            KeyError: a key is missing or given twice (nothing deleted).
            TypeError: as :meth:`semidbm.Database.delete_many`.
            semidbm.error: the database is read-only or closed, or a
                shard's write failed.
        """
        self._check_writable("delete")
        originals = key_list(keys, "delete_many")
        encoded = [as_bytes(key, "keys") for key in originals]
        seen = set()
        for original, key in zip(originals, encoded):
            if key in seen or key not in self._shard(key):
                raise KeyError(original)
            seen.add(key)
        for shard, places in zip(self._shards, self._group(encoded)):
            if places:
                shard.delete_many([encoded[place] for place in places])

    def _check_writable(self, action):
        """Raise semidbm.error if the database is closed or read-only (``action``: the attempt)."""
        if self.closed:
            raise DBMError(_messages.CLOSED % self._path)
        if not self.writable:
            raise DBMError(_messages.READ_ONLY % (action, self._path))

    def sync(self) -> None:
        """Write out and fsync every shard (:meth:`semidbm.Database.sync`), then raise the first
        error if one failed."""
        _on_each(self._shards, lambda shard: shard.sync())

    def compact(self, format: int | None = None, recover: bool = False) -> int:
        """Compact each shard in turn (:meth:`semidbm.Database.compact`); a failure stops there.

        Returns how many damaged records ``recover`` left out, in all. A
        shard's error is raised as it is if no shard was compacted before
        it; else as an error of its class (its cause), whose message says
        how many shards were compacted and how many damaged records they
        left out, which would otherwise be lost with the return value.
        """
        left_out = 0
        for done, shard in enumerate(self._shards):
            try:
                left_out += shard.compact(format=format, recover=recover)
            except DBMError as exc:
                if not done:
                    raise
                raise _files.restated(
                    exc, type(exc), _compacted_before(done, len(self._shards), left_out)
                ) from exc
        return left_out

    def refresh(self) -> None:
        """A reader's :meth:`~semidbm.Database.refresh` of every shard; then the first error."""
        _on_each(self._shards, lambda shard: shard.refresh())

    def close(self, compact: bool = False) -> None:
        """Close every shard (compacting each first if asked), even if one fails; then raise the
        first error. Closing a closed database does nothing."""
        _on_each(self._shards, lambda shard: shard.close(compact=compact))

    # dbm.gnu's extras, the context manager and the refusal of copies: Database's own, which
    # need only keys(), ``in``, compact(), close() and _cursor.
    def clear(self) -> None:
        """Delete every key, shard by shard (each as :meth:`semidbm.Database.clear`), even a key
        that is not in the shard its hash names (written by opening a shard alone); then raise
        the first error."""
        _on_each(self._shards, lambda shard: shard.clear())

    firstkey = Database.firstkey
    nextkey = Database.nextkey
    _cursor_from = Database._cursor_from
    reorganize = Database.reorganize
    def __enter__(self) -> ShardedDatabase:
        """The database itself: ``with semidbm.open_sharded(...) as db:`` closes it at the end."""
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Close the database (:meth:`close`)."""
        self.close()

    __copy__ = __deepcopy__ = Database._refuse_copy

    def __reduce__(self):
        """Pickle a reader or a shared writer as its shards, which open again at their first use.

        An exclusive writer refuses, as a single one does: another process
        could not open its shards while it holds them.
        """
        if self.closed:
            raise TypeError(_messages.CLOSED_NOT_PICKLED % self)
        if self._flag not in ("r",) + SHARED_FLAGS:
            raise TypeError(_messages.NOT_PICKLED % self)
        return _rebuild, (os.path.abspath(self._path), self._flag, self._rule, self._shards)

    def __reduce_ex__(self, protocol):
        """As :meth:`__reduce__`, whatever the protocol."""
        return self.__reduce__()

    def __repr__(self) -> str:
        state = "closed" if self.closed else ("read-write" if self.writable else "read-only")
        return "<semidbm sharded database %r, %d shards, %s>" % (self._path, self._count, state)
