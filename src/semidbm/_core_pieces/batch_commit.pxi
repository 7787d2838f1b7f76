# A batch's commit in the compiled kernel (included by _core.pyx): the
# batch record is encoded here, appended in one write, and its records
# enter the index, all in C without releasing the GIL, so that no other
# thread sees a part of it (docs/FORMAT.md, "Batches").

from cpython.bytes cimport PyBytes_CheckExact
from cpython.dict cimport PyDict_Next


cdef object batch_commit(Store store, dict changes, uint64_t expires_at):
    """``_interface.Store._commit_batch``: ``changes`` as one batch record.

    ``changes`` maps each key (bytes) to its value (bytes), or to None
    for a delete; each put is followed by its expiry record if
    ``expires_at`` (milliseconds since the Unix epoch) is not 0, which a
    store of a format before 2.1 refuses (DBMError, nothing written). A
    delete of a key that is not live is left out (this semidbm never
    writes one), and nothing is written if nothing is left. The dict is
    read in place, twice (sizes, then records): no Python code runs in
    between that could change it, since keys and values must be bytes
    exactly (a subclass's ``__hash__`` or ``__eq__``, which the set of
    left-out deletes calls, could), and ``batch_record`` checks that the
    records fill the size counted.
    Room in the table for every put is made before the record is
    appended, so that nothing fails between the append and the index's
    update.
    """
    cdef Py_ssize_t position = 0
    cdef PyObject* key
    cdef PyObject* value
    cdef Py_ssize_t body_size = 0
    cdef Py_ssize_t puts = 0
    cdef uint64_t offset
    cdef set dead = set()  # the deletes left out
    batch_prepare(store)
    while PyDict_Next(changes, &position, &key, &value):
        if not PyBytes_CheckExact(<object>key) or not (
            <object>value is None or PyBytes_CheckExact(<object>value)
        ):
            raise TypeError(_messages.BATCH_CHANGES)
        if <object>value is None:
            if keys_find(store, PyBytes_AS_STRING(<object>key), PyBytes_GET_SIZE(<object>key),
                         hash_key(store.index.seed, PyBytes_AS_STRING(<object>key),
                                  PyBytes_GET_SIZE(<object>key)),
                         &offset) != 1:
                dead.add(<object>key)  # not live: nothing to delete
                continue
            body_size += RECORD_OVERHEAD + PyBytes_GET_SIZE(<object>key)
        else:
            body_size += (RECORD_OVERHEAD + PyBytes_GET_SIZE(<object>key)
                          + PyBytes_GET_SIZE(<object>value))
            if expires_at:
                body_size += EXPIRY_OVERHEAD + PyBytes_GET_SIZE(<object>key)
            puts += 1
        if body_size > MAX_LENGTH:
            raise ValueError(_messages.BATCH_TOO_LONG % MAX_LENGTH)
    if expires_at and not store.log.expirable:
        raise DBMError(_messages.NO_EXPIRY % ((store.path,) + tuple(store.version)))
    if not body_size:
        return None
    return batch_store(store, batch_record(changes, dead, body_size, expires_at), body_size, puts)


cdef int batch_prepare(Store store) except -1:
    """Refuse a store without batches (DBMError), then apply its pending index updates."""
    if not store.log.batches:
        raise DBMError(_messages.NO_BATCHES % ((store.path,) + tuple(store.version)))
    if store.index.table.pending_count:
        keys_apply_pending(store)
    return 0


cdef object batch_store(Store store, bytes record, Py_ssize_t body_size, Py_ssize_t puts):
    """Append the batch record ``record`` (its body ``body_size`` bytes, ``puts`` of its records
    puts) and apply it to the index, room in the table made first."""
    cdef uint64_t offset
    if puts and not table_has_room(&store.index.table, puts - 1):
        table_grow(&store.index.table, store.index.table.count + puts)
    offset = store.append_encoded(record)
    batch_index(store, offset, PyBytes_AS_STRING(record), body_size)
    return None


cdef bytes batch_record(dict changes, set dead, Py_ssize_t body_size, uint64_t expires_at):
    """The batch record of ``changes`` but the keys in ``dead`` (as ``batch_commit`` checked
    them), its body ``body_size`` bytes, each put followed by its expiry record if
    ``expires_at`` is not 0.

    Its lengths (the body's, ``BATCH``), the body's CRC-32, then the body:
    each change's put or delete record, as ``append`` encodes them.
    """
    cdef Py_ssize_t position = 0
    cdef PyObject* key
    cdef PyObject* value
    cdef bytes record = PyBytes_FromStringAndSize(NULL, RECORD_OVERHEAD + body_size)
    cdef char* body = PyBytes_AS_STRING(record) + RECORD_OVERHEAD
    cdef char* out = body
    cdef Py_ssize_t size
    while PyDict_Next(changes, &position, &key, &value):
        if dead and <object>key in dead:
            continue
        size = RECORD_OVERHEAD + PyBytes_GET_SIZE(<object>key) + (
            0 if <object>value is None else PyBytes_GET_SIZE(<object>value))
        if expires_at and <object>value is not None:
            size += EXPIRY_OVERHEAD + PyBytes_GET_SIZE(<object>key)
        if size > body_size - (out - body):
            raise RuntimeError("a semidbm batch changed while it was committed")
        out += encode_record(out, PyBytes_AS_STRING(<object>key), PyBytes_GET_SIZE(<object>key),
                             NULL if <object>value is None else PyBytes_AS_STRING(<object>value),
                             0 if <object>value is None else PyBytes_GET_SIZE(<object>value))
        if expires_at and <object>value is not None:
            out += encode_expiry_record(out, PyBytes_AS_STRING(<object>key),
                                        PyBytes_GET_SIZE(<object>key), expires_at)
    if out - body != body_size:
        raise RuntimeError("a semidbm batch changed while it was committed")
    encode_lengths(PyBytes_AS_STRING(record), body_size, BATCH)
    store_be32(PyBytes_AS_STRING(record) + LENGTHS_SIZE, crc32(0, body, body_size))
    return record


cdef object batch_append(Store store, bytes record):
    """``_interface.Store._commit_encoded``: the batch record ``record``, checked, appended.

    Refused (ValueError, nothing written) unless it is one whole batch
    record whose body is sound records back to back (``whole_batch``,
    ``parser_batch_fits``: what a replay requires of a batch), all of
    them puts, or in a file of format 2.1 expiry records of the put
    before them (``Database.set``'s): it may come from any code. Then
    appended and applied as ``batch_commit`` appends and applies the
    record it encodes.
    """
    cdef const char* data = PyBytes_AS_STRING(record)
    cdef uint64_t size = <uint64_t>PyBytes_GET_SIZE(record)
    cdef int32_t body_size
    cdef Py_ssize_t puts
    batch_prepare(store)
    body_size = <int32_t>load_be32(data) if size >= LENGTHS_SIZE else 0
    if size < RECORD_OVERHEAD or <int32_t>load_be32(data + 4) != BATCH or body_size <= 0 or (
        <uint64_t>body_size + RECORD_OVERHEAD != size
    ) or not whole_batch(data, 0, body_size, size) or not parser_batch_fits(
        data, RECORD_OVERHEAD, size, store.log.expirable
    ):
        raise ValueError(_messages.NOT_A_BATCH)
    puts = batch_puts(data + RECORD_OVERHEAD, body_size)
    if puts < 0:
        raise ValueError(_messages.NOT_A_BATCH)
    return batch_store(store, record, body_size, puts)


cdef Py_ssize_t batch_puts(const char* body, int32_t body_size) noexcept nogil:
    """The number of puts in the sound batch body ``body``, or -1 if a record is a delete."""
    cdef int32_t position = 0
    cdef int32_t value_size
    cdef Py_ssize_t puts = 0
    while position < body_size:
        value_size = <int32_t>load_be32(body + position + 4)
        if value_size == DELETED:
            return -1
        if value_size == EXPIRES:  # its put's, counted
            position += <int32_t>(EXPIRY_OVERHEAD + load_be32(body + position))
            continue
        position += <int32_t>(RECORD_OVERHEAD + load_be32(body + position) + value_size)
        puts += 1
    return puts


cdef int batch_index(Store store, uint64_t offset, const char* record,
                     Py_ssize_t body_size) except -1:
    """Apply the records of the batch record at ``offset`` (its bytes at ``record``) to the index.

    As a replay applies records; the table has room for every put. An
    expiry record is stepped over, and tells reads to look for one
    (``log.expiring``). If the mapped index file proves damaged, it is
    dropped, and the replay of the whole log that follows applies this
    batch too.
    """
    cdef uint64_t position = offset + RECORD_OVERHEAD
    cdef uint64_t end = position + <uint64_t>body_size
    cdef const char* at
    cdef int32_t key_size, value_size
    cdef uint32_t hashed
    cdef int result
    while position < end:
        at = record + (position - offset)
        key_size = <int32_t>load_be32(at)
        value_size = <int32_t>load_be32(at + 4)
        if value_size == EXPIRES:
            store.log.expiring = True
            position += EXPIRY_OVERHEAD + <uint64_t>key_size
            continue
        hashed = hash_key(store.index.seed, at + LENGTHS_SIZE, key_size)
        if value_size == DELETED:
            result = index_delete(&store.index, hashed, position)
            position += RECORD_OVERHEAD + <uint64_t>key_size
        else:
            result = index_put(&store.index, hashed, position)
            position += RECORD_OVERHEAD + <uint64_t>key_size + <uint64_t>value_size
        if result == DAMAGED:
            keys_drop(store)
            return 0
    return 0
