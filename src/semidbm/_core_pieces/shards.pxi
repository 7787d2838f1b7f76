# A sharded database's reads routed in C (Store._routed_get, _routed_get_many,
# for semidbm.sharded): each key's shard is the CRC-32 of its bytes modulo the
# number of shards (the manifest's rule "crc32", zlib.crc32's number, computed
# by crc32.h), then the shard's own lookup, with no Python frame in between.
# The pure kernel has no twin: sharded.py routes its shards in Python.

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
