"""The messages of the errors both kernels raise, and of the warning of a torn tail, written once.

The two kernels must raise the same errors with the same words (the
tests compare them), so each message lives here and both format it; the
tools raise the same for a damaged file. Every ``%s`` of a database is
its data file's path. A file that is no data file at all is refused by
one function, ``format.check_header``, and its messages stay with it.
"""

from .format import MAX_LENGTH

#: The flags that open a shared writer, as messages name them: semidbm's own and dbm.gnu's.
SHARED_WRITER_FLAGS = "flag 'wm' or 'cm', or dbm.gnu's 'wu' or 'cu'"
#: A key or value of a type the store does not take (``%s``: "keys" or
#: "values", then the type's name).
WRONG_TYPE = "semidbm %s must be str or bytes-like, not %s"
#: A key or value longer than a length field holds (``%s``: "keys" or "values").
TOO_LONG = "semidbm %%s are limited to %d bytes (2 GiB - 1)" % MAX_LENGTH
#: An item of ``update``'s iterable that is not a sequence (its number
#: from 0, then its type's name), and one whose length is not 2 (its
#: number, its length): the words of ``dict.update``'s errors.
NOT_A_PAIR = "cannot convert semidbm update sequence element #%d (%s) to a sequence"
NOT_TWO = "semidbm update sequence element #%d has length %d; 2 is required"
#: ``get_many`` or ``delete_many`` given one key (str or bytes-like), whose
#: characters or bytes it would otherwise take for keys (the method, the type's name).
ONE_KEY = "semidbm %s takes an iterable of keys, not one key (a %s): put it in a list"
#: An argument that must be True or False given another type (its name, the type's name).
NOT_A_BOOL = "semidbm %s must be True or False, not %s"
#: A shelf's ordered iteration over a database that has none (the type's name).
NO_ORDER = "a shelf's iter_sorted needs a database with iter_sorted (semidbm's), not a %s"
#: A bound or prefix of a shelf's ordered iteration that is not a str (its name, the type's name).
SHELF_KEY = "semidbm shelf %s must be a str, as the shelf's keys are, not %s"
#: An operation on a closed store.
CLOSED = "semidbm database %s is closed"
#: The next step of an iterator whose store was closed since it began.
CLOSED_DURING_ITERATION = "semidbm database %s was closed during iteration"
#: A write to a store opened read-only (the action, then the path).
READ_ONLY = "cannot %s: semidbm database %s is open read-only"
#: A flag ``open`` does not know (the flag's repr).
BAD_FLAG = (
    "flag must be 'r', 'w', 'c' or 'n', or 'wm' or 'cm' for a writer that shares the "
    "database with other processes, not %r"
)
#: A flag of ``semidbm.open`` that is none of its own nor one with dbm.gnu's letters.
BAD_OPEN_FLAG = (
    "flag must be 'r', 'w', 'c' or 'n', or 'wm' or 'cm' for a writer that shares the "
    "database with other processes, each of the first four followed by any of dbm.gnu's "
    "letters f, s and u ('cf', 'ws', 'wu'), not %r"
)
#: dbm.gnu's 'u' (no lock) after 'n' (the flag): the shared writers it stands for open an
#: existing database or create one, and never empty one.
NEW_UNLOCKED = (
    "flag %r: semidbm reads dbm.gnu's 'u' (no lock) as a shared writer ('wm' or 'cm': any "
    "number of processes write the database at once, each in its turn), which never empties "
    "a database; open it with 'n' and close it, then open it with 'wu' (or 'wm')"
)
#: Pickling an exclusive writer (the database's repr).
NOT_PICKLED = (
    "an exclusive semidbm writer cannot be pickled: another process could not open it while "
    "it is open; pickle a reader (flag 'r'), or open a shared writer (%s) "
    "(%%r)" % SHARED_WRITER_FLAGS
)
#: Pickling a closed database (the database's repr).
CLOSED_NOT_PICKLED = "a closed semidbm database cannot be pickled (%r)"
#: A sharded database's directory without a manifest, opened where one is needed (the path).
NO_MANIFEST = (
    "no sharded semidbm database at %r: it has no manifest (shards.json); if its creation was "
    "cut short before the manifest was written, open it with flag 'c' and shards=N to complete it"
)
#: A sharded database to create, without the shards it needs (the path).
NO_SHARDS_GIVEN = (
    "no sharded semidbm database at %r (no shards.json): give shards=N, or the list of the "
    "shards' paths, to create one"
)
#: ``open_sharded``'s ``shards`` against the manifest's (the path, what was given, what it has).
OTHER_SHARDS = "sharded semidbm database %r: shards=%s given, but its manifest names %s"
#: A manifest refused (its path, what is wrong).
BAD_MANIFEST = "%s: not a manifest this semidbm can trust: %s"
#: A shard that the manifest names and that is missing (its number, the database's path).
SHARD_MISSING = (
    "shard %d of sharded semidbm database %r is missing (not mounted, or removed): refusing to "
    "open without its keys"
)
#: A sharded database to open that does not exist.
NO_SHARDED = "no sharded semidbm database"
#: A single database's directory given to create a sharded database in (its path).
SINGLE_NOT_SHARDED = (
    "%r is a semidbm database, not a sharded one: open it with semidbm.open, or create the "
    "sharded database in another directory"
)
#: A sharded database's path that is not a directory.
NOT_SHARDED_DIRECTORY = "not a sharded semidbm database (not a directory): %r"
#: ``locked()`` on a database that is not a shared writer (path).
NOT_SHARED = (
    "semidbm database %%s is not a shared writer: only a database opened "
    "with %s has a write lock to hold" % SHARED_WRITER_FLAGS
)
#: A write in a forked child to its parent's writer (action, path, parent's pid).
FORKED = (
    "cannot %s: semidbm database %s belongs to process %d; a forked "
    "child may only read it"
)
#: A value whose CRC-32 does not match (path, key, offset of its record, as
#: ``semidbm verify`` reports it).
CHECKSUM_MISMATCH = "%s: checksum mismatch in the record of key %r at offset %d"
#: A live record whose key or lengths were damaged, so that it no longer reads
#: as the key the index holds there (path, offset).
LIVE_RECORD_DAMAGED = (
    "%s: the live record at offset %d is damaged: its key or lengths no longer read "
    "as the key the index holds there"
)
#: The sync after a write under dbm.gnu's flag letter 's' failed (the failure's message).
NOT_SYNCED = (
    "%s; what the write changed, if anything, is in the database, which shows it, but may "
    "not be on the disk: after a failed sync the system may have dropped the written "
    "data, and a later sync() cannot be trusted to make it durable"
)
#: A sharded compaction stopped by a shard's error (the error, the shards compacted before
#: it, the shards, the damaged records they left out, as ``_progress.quantity`` says it).
SHARDS_COMPACTED = "%s; %d of the %d shards were compacted before it, leaving out %s"
#: What follows CHECKSUM_MISMATCH or LIVE_RECORD_DAMAGED when a compaction meets a damaged
#: live record.
COMPACT_DAMAGED = (
    "; the compaction copies no damaged record, and changed nothing: compact(recover=True) "
    "(semidbm compact --recover) leaves such records out, and their keys with them"
)
#: A record whose lengths no record can have (path, offset, key length,
#: value length): nothing after it can be read.
CORRUPT_RECORD = "%s: corrupt record at offset %d (key length %d, value length %d)"
#: A value the index places past the end of the data file (path, bytes
#: wanted, offset, bytes there): the file was cut under the open database.
ENDED_EARLY = "%s: expected %d bytes at offset %d, the file ended after %d"
#: A long unreadable tail after which records go on (path, tail length,
#: offset, then the torn prefix and offset of the file a writer keeps).
DAMAGED_LENGTH = (
    "%s: %d unreadable bytes at offset %d, a record whose length runs "
    "past records that follow it; open with recover=True to drop them "
    "(a writer keeps them in %s%d)"
)
#: The warning of a torn tail left out at open (path, length, offset).
TORN_TAIL = "%s: dropped a torn tail of %d bytes at offset %d"
#: A write that failed and, failing to cut back its partial record, closed the store.
WRITE_CLOSED = "cannot write to %s (database closed)"
#: A write that failed.
WRITE_FAILED = "cannot write to %s"
#: A progress callback of a compaction that uses the database.
COMPACTING = "semidbm database %s is being compacted: its progress callback cannot use it"
#: Code that runs in the middle of an operation of the same thread (a
#: signal handler, a finalizer) and uses the database: the interrupted
#: operation has the log half updated.
INTERRUPTED = (
    "semidbm database %s is in the middle of an operation that this code "
    "interrupted (a signal handler or a finalizer): it cannot be used until "
    "that operation returns"
)
#: An iterator whose database gained or lost keys, or was compacted or
#: refreshed, since the iteration began.
CHANGED_DURING_ITERATION = (
    "semidbm database %s changed during iteration (keys were added or "
    "removed, or it was compacted or refreshed)"
)
#: An operation that finds the log other than the database wrote it (path, offset).
CHANGED_UNDER = "%s changed under the open database at offset %d"
#: A reader's ``refresh()`` that finds the data file shorter than the log
#: it has read (path, size, log read): another process cut the file. The
#: reader is closed, since what it indexed is gone.
SHRANK = (
    "%s is %d bytes, shorter than the %d bytes of log this reader has read: "
    "the data file was cut under the open database; the reader is closed"
)
#: ``Store._sorted_lines`` asked for a form it does not make (the form, the forms).
NO_LINE_FORM = "no form of lines %r (choose from %s)"
#: ``summarize_log`` given fewer bytes than a data file's header (its size).
SHORTER_THAN_HEADER = "a data file holds at least its %d-byte header"
#: A batch on a database whose format has none (with the path, then the major and minor version).
NO_BATCHES = (
    "%s is of format %d.%d, which has no batches: upgrade it to format 2 with "
    "db.compact(format=2) or the command `semidbm upgrade DIRECTORY`"
)
#: ``expire=`` on a database of a format without expiry records (path, major, minor).
NO_EXPIRY = (
    "%s is of format %d.%d, which has no expiring values: upgrade it to format 2.1 with "
    "db.compact(format=2) or the command `semidbm upgrade DIRECTORY`"
)
#: ``compact(format=1)`` of a log with a value that has not expired yet (the path).
EXPIRY_NOT_KEPT = (
    "%s holds values that expire, which format 1.1 cannot hold: compact it to format 1 "
    "once they have expired, or delete them first"
)
#: A ``semidbm.Cache`` opened with the flag ``'r'``.
CACHE_READ_ONLY = "a semidbm.Cache writes what it keeps: open it with 'c', 'w', 'cm' or 'wm'"
#: ``Cache(size_limit=)`` that is not an int of 0 or more (the value).
CACHE_SIZE_LIMIT = "size_limit must be a number of bytes, an int of 0 or more, not %r"
#: ``memoize`` without ``name=`` of a function whose qualified name others share (the name).
CACHE_UNNAMED = (
    "memoize needs a name= for %s: its qualified name is shared by every function made "
    "where it is (a lambda, or a function defined inside another), whose results would mix"
)
#: An argument of a memoized call of a type ``cache.encode_argument`` does not take.
CACHE_ARGUMENT = (
    "memoize keys a call by its arguments' values, which may be None, bool, int, float, "
    "str, bytes, and tuples, lists, dicts and sets of them; not %s"
)
#: ``expire=`` of another type than int or float (the type's name).
EXPIRE_TYPE = "expire must be a number of seconds (int or float), not %s"
#: ``expire=`` that is not a finite number of seconds above 0 (the number).
EXPIRE_VALUE = "expire must be a finite number of seconds above 0, not %r"
#: ``semidbm.open(expire=)`` for a reader, which writes nothing.
EXPIRE_READER = "expire is the lifetime of the values a writer writes: a reader ('r') takes none"
#: ``semidbm.open(expire=)`` with a format that has no expiring values (the format).
EXPIRE_FORMAT = "expire needs format 2 (2.1), which has values that expire, not format %d"
#: A batch larger than a batch record holds (with the limit).
BATCH_TOO_LONG = "a semidbm batch holds at most %d bytes of records (2 GiB - 1)"
#: A batch's changes that are not bytes mapped to bytes or None (``Store._commit_batch``).
BATCH_CHANGES = "a batch's changes map bytes to bytes (to None for a delete)"
#: A record given to ``Store._commit_encoded`` that is not a sound batch record of puts alone.
NOT_A_BATCH = (
    "not a semidbm batch record of puts: lengths, checksums and records must be those that "
    "Store._routed_batches encodes"
)
#: A dump whose records do not fit in the batch it is imported into (their bytes, the room left).
DUMP_OVER_BATCH = (
    "its records add up to %s, more than the batch can take (%s): import it without a batch "
    "(semidbm import --no-batch), record by record"
)
#: A batch changed or committed after it ended (how it ended: ``_batch.COMMITTED``, ...).
BATCH_OVER = "this semidbm batch is over (%s): start another with db.batch()"
#: A rollback of a committed batch.
BATCH_COMMITTED = (
    "cannot roll back this semidbm batch: it was committed, and its changes are in the database"
)
#: A batch with changes collected before its commit or rollback (how many keys it changed).
BATCH_UNENDED = (
    "a semidbm batch changing %d key(s) was never committed or rolled back, and its changes "
    "are discarded: call batch.commit() or batch.rollback(), or use it in a with block"
)
#: ``open(format=)`` naming another format than an existing database's (path, its major and
#: minor version, the format asked for).
OTHER_FORMAT = (
    "%s is of format %d.%d, not %d: open(format=) chooses the format of a new database; "
    "db.compact(format=) (or `semidbm upgrade DIRECTORY`) converts an existing one"
)
#: A compaction refused where a mapped file cannot be renamed over (Windows) while views of
#: values are alive (``_compaction.check_views_released``; the path, how many).
VIEWS_ALIVE = (
    "cannot compact %s while %d view(s) of its values are alive: this system cannot "
    "replace a mapped file; release them (memoryview.release(), or drop every reference) first"
)
#: A writer refused because this process has the database open as an exclusive writer
#: (``db._refuse_writer_here``; the lock's own refusal would name this process's id).
LOCKED_HERE = (
    "semidbm database is locked by another writer (this process: a database object "
    "still open for writing; use that one, or close it first)"
)
#: A shelf value refused by its signature before it was deserialized (the key as the shelf
#: names it, then one of the reasons below).
SIGNATURE_REFUSED = "refused the value of %r before deserializing it: %s"
#: A value without the signed layout's prefix, read where a signature is needed.
UNSIGNED = "it is unsigned (written by a shelf without a key, or by another program)"
#: A value with the signed layout's prefix but too short to hold a name and a tag (its length).
SIGNATURE_CUT = "its signature is cut short (the value is %d bytes, too few for a name and a tag)"
#: A signed value whose serializer's name is not the reader's (its name, the reader's).
OTHER_SERIALIZER = "it was signed for the %r serializer, not for %r"
#: A signed value whose tag does not match.
BAD_SIGNATURE = (
    "its signature does not match: it was signed with another key, or for another key of "
    "the database, or it was changed since"
)
#: A signed value read by a shelf that has no key to check it with.
SIGNED_NO_KEY = (
    "it is signed, and this shelf has no key to check it with: open the shelf with its key "
    "(open_shelf(..., key=...))"
)
#: An unsigned shelf's serializer returned a value that starts as a signed value does.
LOOKS_SIGNED = (
    "the serializer returned bytes that start as a signed value does (%r), which a shelf "
    "would refuse to read back"
)
