# A sharded database's reads routed in C (Store._routed_get, _routed_get_many,
# for semidbm.sharded): each key's shard is the CRC-32 of its bytes modulo the
# number of shards (the manifest's rule "crc32", zlib.crc32's number, computed
# by crc32.h), then the shard's own lookup, with no Python frame in between.
# ``Store._routed_split`` splits ``update``'s pairs by shard the same way, for the
# writes of a sharded database and of semidbm.dask into one.
# The pure kernel has no twin: sharded.py routes its shards in Python.

from cpython.bytes cimport PyBytes_CheckExact
from cpython.dict cimport PyDict_SetItem
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE


cdef object shards_get(list shards, object key):
    """``shards[crc32(key) % len(shards)][key]``: the value of ``key`` from its shard.

    ``key`` is taken as ``Store.__getitem__`` takes it, its errors first
    (TypeError, or ValueError for more bytes than a key can have, as
    ``_records.as_bytes`` raises them), then the shard's (closed: DBMError;
    missing: KeyError of ``key`` as given).
    """
    cdef Borrowed borrowed
    cdef Store shard
    if not shards:
        raise ValueError("no shard")
    borrow(key, &borrowed, "keys")
    try:
        if borrowed.size > MAX_LENGTH:
            raise ValueError(TOO_LONG % "keys")
        shard = <Store?><object>PyList_GET_ITEM(
            shards, crc32(0, borrowed.data, borrowed.size) % <uint32_t>PyList_GET_SIZE(shards))
        shard.check_reads()
        return shard.get(borrowed.data, borrowed.size, key)
    finally:
        give_back(&borrowed)


cdef list shards_get_many(list shards, object keys, object default):
    """``get_many`` across ``shards``: each shard asked once (``bulk_get``) for its keys, if any.

    The keys are read and checked first, as ``_records.key_list`` and
    ``as_bytes`` check them; the answers come back in the keys' order.
    """
    cdef Py_ssize_t count, at, number
    cdef Py_ssize_t shard_count = PyList_GET_SIZE(shards)
    cdef list copies = []
    cdef list parts, answers
    cdef BulkTarget* targets
    cdef uint32_t* numbers
    cdef Py_ssize_t* taken
    if not shards:
        raise ValueError("no shard")
    keys = bulk_key_sequence(keys, "get_many")
    count = len(keys)
    targets = bulk_key_targets(keys, count, copies)
    numbers = <uint32_t*>malloc(count * sizeof(uint32_t) + 1)
    taken = <Py_ssize_t*>calloc(shard_count, sizeof(Py_ssize_t))
    try:
        if numbers == NULL or taken == NULL:
            raise MemoryError("cannot allocate room for %d keys" % count)
        parts = [[] for _ in range(shard_count)]
        for at in range(count):
            numbers[at] = crc32(0, targets[at].key, targets[at].size) % <uint32_t>shard_count
            # Without copies, no Python code ran: the keys are those read, bytes or str.
            (<list>parts[numbers[at]]).append(
                keys[at] if not copies
                else PyBytes_FromStringAndSize(targets[at].key, targets[at].size))
        for number in range(shard_count):
            if parts[number]:
                parts[number] = bulk_get(<Store?>shards[number], parts[number], default)
        answers = PyList_New(count)
        for at in range(count):
            item = <object>PyList_GET_ITEM(parts[numbers[at]], taken[numbers[at]])
            taken[numbers[at]] += 1
            Py_INCREF(item)
            PyList_SET_ITEM(answers, at, item)
    finally:
        free(targets)
        free(numbers)
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


cdef inline uint32_t shards_route(bytes key, Py_ssize_t count) noexcept:
    """The shard, of ``count``, of the bytes ``key``: its CRC-32 modulo ``count``."""
    return crc32(0, PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key)) % <uint32_t>count


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
    if count < 1:
        raise ValueError("no shard")
    pieces = [{} for _ in range(count)]
    for item in pairs:
        pair = shards_pair(item, number)
        PyDict_SetItem(<dict>PyList_GET_ITEM(pieces, shards_route(pair[0], count)),
                       pair[0], pair[1])
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
            shard = shards_route(key, count)
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
            shard = shards_route(key, count)
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
