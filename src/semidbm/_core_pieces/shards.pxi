# A sharded database's reads routed in C: ShardRouter, the base of
# semidbm.sharded.ShardedDatabase, whose ``db[key]``, ``in`` and ``get`` are its
# slots and methods, and Store._routed_get_many. Each key's shard is the CRC-32
# of its bytes modulo the number of shards (the manifest's rule "crc32",
# zlib.crc32's number, computed by crc32.h), then the shard's own lookup, with
# no Python frame in between.
# ``Store._routed_split`` splits ``update``'s pairs by shard the same way, for the
# writes of a sharded database and of semidbm.dask into one.
# The pure kernel's twin of ShardRouter is _router.py; it routes its get_many and
# splits in Python (sharded.py).

from cpython.bytes cimport PyBytes_CheckExact
from cpython.dict cimport PyDict_SetItem
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE


cdef inline uint32_t shards_route(const char* key, Py_ssize_t size, Py_ssize_t count) noexcept:
    """The shard, of ``count``, of the key of ``size`` bytes at ``key``: its CRC-32 modulo
    ``count``."""
    return crc32(0, key, size) % <uint32_t>count


@cython.auto_pickle(False)
cdef class ShardRouter:
    """The shards of a sharded database, and its reads of a key routed to its shard in C.

    ``semidbm.sharded.ShardedDatabase`` derives from it: ``db[key]``,
    ``key in db`` and ``db.get(key, default)`` run here, with no Python
    frame. A key is taken as ``Store.__getitem__`` takes it (str as
    UTF-8, bytes-like), its errors first (TypeError, or ValueError for
    more bytes than a key can have, as ``_records.as_bytes`` raises
    them); its shard is the CRC-32 of its bytes modulo the number of
    shards (the rule ``"crc32"``, the only one). A compiled Store's
    lookup is called directly; any other shard (the pure kernel's) is
    asked through its own ``[]``, ``in`` or ``get``. The shards are a
    tuple, fixed when the router is made, which holds them: a shard
    closed by another thread, or by a finalizer that ran as the key was
    read, is found closed by its check (DBMError), never used freed.
    """

    cdef readonly tuple _shards

    def __init__(self, shards):
        """Route to ``shards`` (an iterable of open databases, in the manifest's order)."""
        self._shards = tuple(shards)

    cdef object route(self, object key, Borrowed* borrowed):
        """The shard of ``key``, whose bytes ``borrowed`` holds then (the caller gives them back).

        ValueError if there is no shard (a router never given any).
        """
        cdef tuple shards = self._shards
        if not shards:
            raise ValueError("no shard")
        borrow(key, borrowed, "keys")
        if borrowed.size > MAX_LENGTH:
            give_back(borrowed)
            raise ValueError(TOO_LONG % "keys")
        return <object>PyTuple_GET_ITEM(
            shards, shards_route(borrowed.data, borrowed.size, PyTuple_GET_SIZE(shards)))

    def __getitem__(self, key):
        """The value of ``key`` from its shard: KeyError of ``key`` as given if it is missing."""
        cdef Borrowed borrowed
        cdef uint64_t now
        shard = self.route(key, &borrowed)
        try:
            if isinstance(shard, Store):
                (<Store>shard).check_reads(&now)
                return (<Store>shard).get(borrowed.data, borrowed.size, key, now)
        finally:
            give_back(&borrowed)
        return shard[key]

    def __contains__(self, key):
        """Whether ``key`` is in its shard."""
        cdef Borrowed borrowed
        cdef uint64_t now
        shard = self.route(key, &borrowed)
        try:
            if isinstance(shard, Store):
                (<Store>shard).check_reads(&now)
                return (<Store>shard).holds(borrowed.data, borrowed.size, now)
        finally:
            give_back(&borrowed)
        return key in shard

    def get(self, key, default=None, /):
        """The value of ``key`` from its shard, or ``default`` if it is missing."""
        cdef Borrowed borrowed
        cdef uint64_t now
        shard = self.route(key, &borrowed)
        try:
            if isinstance(shard, Store):
                (<Store>shard).check_reads(&now)
                try:
                    return (<Store>shard).get(borrowed.data, borrowed.size, key, now)
                except KeyError:  # only a missing key's: the lookup raises no other
                    return default
        finally:
            give_back(&borrowed)
        return shard.get(key, default)


cdef list shards_get_many(tuple shards, object keys, object default):
    """``get_many`` across ``shards``: each shard's keys looked up together (``bulk_get_targets``).

    The keys are read and checked first, as ``_records.key_list`` and
    ``as_bytes`` check them, and held in a tuple: a shard opened at its
    first use runs Python code, which must not free a key whose bytes
    are read after. Their bytes are then put in order of shard (each
    shard's in the order given), so that each shard reads its part in
    place; the answers come back in the keys' order.
    """
    cdef Py_ssize_t count, at, number
    cdef Py_ssize_t shard_count = PyTuple_GET_SIZE(shards)
    cdef list copies = []
    cdef list parts, answers
    cdef BulkTarget* targets
    cdef BulkTarget* grouped = NULL  # the keys' bytes, in order of shard
    cdef uint32_t* numbers = NULL  # each key's shard
    cdef Py_ssize_t* starts = NULL  # where each shard's keys start in grouped; then the end
    cdef Py_ssize_t* taken = NULL  # each shard's keys placed in grouped, then answered
    if not shards:
        raise ValueError("no shard")
    keys = tuple(bulk_key_sequence(keys, "get_many"))
    count = len(keys)
    targets = bulk_key_targets(keys, count, copies)
    try:
        grouped = <BulkTarget*>malloc(count * sizeof(BulkTarget) + 1)
        numbers = <uint32_t*>malloc(count * sizeof(uint32_t) + 1)
        starts = <Py_ssize_t*>calloc(shard_count + 1, sizeof(Py_ssize_t))
        taken = <Py_ssize_t*>calloc(shard_count, sizeof(Py_ssize_t))
        if grouped == NULL or numbers == NULL or starts == NULL or taken == NULL:
            raise MemoryError("cannot allocate room for %d keys" % count)
        for at in range(count):
            numbers[at] = shards_route(targets[at].key, targets[at].size, shard_count)
            starts[numbers[at] + 1] += 1
        for number in range(shard_count):
            starts[number + 1] += starts[number]
        for at in range(count):
            grouped[starts[numbers[at]] + taken[numbers[at]]] = targets[at]
            taken[numbers[at]] += 1
        parts = []
        for number in range(shard_count):
            parts.append(bulk_get_targets(<Store?>shards[number], grouped + starts[number],
                                          taken[number], default) if taken[number] else None)
            taken[number] = 0
        answers = PyList_New(count)
        for at in range(count):
            item = <object>PyList_GET_ITEM(parts[numbers[at]], taken[numbers[at]])
            taken[numbers[at]] += 1
            Py_INCREF(item)
            PyList_SET_ITEM(answers, at, item)
    finally:
        free(targets)
        free(grouped)
        free(numbers)
        free(starts)
        free(taken)
    return answers


cdef tuple shards_pair(object item, Py_ssize_t number):
    """Item ``number`` of ``update``'s pairs as a tuple of bytes: key and value.

    Checked as ``update`` checks it (``bulk_pair``), then its key and
    value converted and checked by ``_records.as_bytes``, which is
    called for anything but bytes.
    """
    cdef tuple pair = bulk_pair(item, number)
    key = pair[0]
    value = pair[1]
    if PyBytes_CheckExact(key) and PyBytes_CheckExact(value):
        return pair
    return (key if PyBytes_CheckExact(key) else as_bytes(key, "keys"),
            value if PyBytes_CheckExact(value) else as_bytes(value, "values"))


cdef list shards_split(object pairs, Py_ssize_t count):
    """``Store._routed_split``: the ``(key, value)`` pairs of ``pairs`` as one dict per shard.

    Each key goes to the dict of its shard (``shards_route``) with the
    last value given for it, both as bytes (``shards_pair``). Every pair
    is read and checked before the dicts return: a writer that stores
    them stores none of a bad input.
    """
    cdef Py_ssize_t number = 0
    cdef list pieces
    cdef tuple pair
    cdef bytes key
    if count < 1:
        raise ValueError("no shard")
    pieces = [{} for _ in range(count)]
    for item in pairs:
        pair = shards_pair(item, number)
        key = pair[0]
        PyDict_SetItem(<dict>PyList_GET_ITEM(
            pieces, shards_route(PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key), count)),
            key, pair[1])
        number += 1
    return pieces


cdef list shards_batches(object pairs, Py_ssize_t count):
    """``Store._routed_batches``: the ``(key, value)`` pairs of ``pairs`` as one batch record per
    shard (None for a shard without any), routed and checked as ``shards_split`` does.

    Two passes: the first reads and checks every pair (``shards_pair``)
    and sums each shard's body, so that a shard's body over MAX_LENGTH
    bytes raises ValueError before anything is allocated; the second
    encodes each pair, in the order given, straight into its shard's
    record, allocated once at its final size. A buffer that grew and was
    then copied would touch each page twice: in a Dask worker, whose
    freed memory goes back to the system, each page new to the process
    costs a page fault (and, in a virtual machine, often the host's
    too). A key given twice has two records, applied in order: the last
    value wins. Each record's checksum is computed as it is encoded;
    each body's, once it is whole, goes into its batch head.
    """
    cdef Py_ssize_t number = 0
    cdef Py_ssize_t shard
    cdef tuple pair
    cdef bytes key, value
    cdef size_t size
    cdef size_t* sizes
    cdef bytes record
    cdef char** ends  # where each shard's next record goes, in its record's body
    cdef list checked = []  # the pairs as bytes: the second pass runs no Python code
    cdef list records
    cdef char* data
    if count < 1:
        raise ValueError("no shard")
    sizes = <size_t*>calloc(count, sizeof(size_t))
    ends = <char**>calloc(count, sizeof(char*))
    try:
        if sizes == NULL or ends == NULL:
            raise MemoryError("cannot allocate room for %d shards" % count)
        for item in pairs:
            pair = shards_pair(item, number)
            key = pair[0]
            value = pair[1]
            size = RECORD_OVERHEAD + PyBytes_GET_SIZE(key) + PyBytes_GET_SIZE(value)
            shard = shards_route(PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key), count)
            if sizes[shard] + size > <size_t>MAX_LENGTH:
                raise ValueError(_messages.BATCH_TOO_LONG % MAX_LENGTH)
            sizes[shard] += size
            checked.append(pair)
            number += 1
        records = []
        for shard in range(count):
            if not sizes[shard]:
                records.append(None)
                continue
            record = PyBytes_FromStringAndSize(NULL, RECORD_OVERHEAD + sizes[shard])
            records.append(record)
            ends[shard] = PyBytes_AS_STRING(record) + RECORD_OVERHEAD
        for pair in checked:
            key = pair[0]
            value = pair[1]
            shard = shards_route(PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key), count)
            ends[shard] += encode_record(ends[shard], PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key),
                                         PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value))
        for shard in range(count):
            if sizes[shard]:
                data = PyBytes_AS_STRING(records[shard])
                encode_lengths(data, sizes[shard], BATCH)
                store_be32(data + LENGTHS_SIZE, crc32(0, data + RECORD_OVERHEAD, sizes[shard]))
        return records
    finally:
        free(sizes)
        free(ends)
