# A batch's commit in the compiled kernel (included by _core.pyx): the
# batch record is encoded here, appended in one write, and its records
# enter the index, all in C without releasing the GIL, so that no other
# thread sees a part of it (docs/FORMAT.md, "Batches").


cdef object batch_commit(Store store, list changes):
    """``_interface.Store._commit_batch``: ``changes`` as one batch record.

    ``changes`` holds ``(key, value)`` pairs of bytes, ``value`` None for
    a delete, each key once. A delete of a key that is not live is left
    out (this semidbm never writes one), and nothing is written if
    nothing is left. Room in the table for every put is made before the
    record is appended, so that nothing fails between the append and the
    index's update.
    """
    cdef list kept = []
    cdef Py_ssize_t body_size = 0
    cdef Py_ssize_t puts = 0
    cdef uint64_t offset
    cdef bytes record
    if not store.log.batches:
        raise DBMError(_messages.NO_BATCHES % ((store.path,) + tuple(store.version)))
    if store.index.table.pending_count:
        keys_apply_pending(store)
    for change in changes:
        key, value = change
        if not PyBytes_Check(key) or not (value is None or PyBytes_Check(value)):
            raise TypeError("a batch's changes are pairs of bytes (the value None for a delete)")
        if value is None:
            if keys_find(store, PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key),
                         hash_key(store.index.seed, PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key)),
                         &offset) != 1:
                continue  # not live: nothing to delete
            body_size += RECORD_OVERHEAD + PyBytes_GET_SIZE(key)
        else:
            body_size += RECORD_OVERHEAD + PyBytes_GET_SIZE(key) + PyBytes_GET_SIZE(value)
            puts += 1
        if body_size > MAX_LENGTH:
            raise ValueError(_messages.BATCH_TOO_LONG % MAX_LENGTH)
        kept.append(change)
    if not kept:
        return None
    record = batch_record(kept, body_size)
    if puts and not table_has_room(&store.index.table, puts - 1):
        table_grow(&store.index.table, store.index.table.count + puts)
    offset = store.append_encoded(record)
    batch_index(store, offset, PyBytes_AS_STRING(record), body_size)
    return None


cdef bytes batch_record(list changes, Py_ssize_t body_size):
    """The batch record of ``changes`` (checked by ``batch_commit``), its body ``body_size`` bytes.

    Its lengths (the body's, ``BATCH``), the body's CRC-32, then the body:
    each change's put or delete record, as ``append`` encodes them.
    """
    cdef bytes record = PyBytes_FromStringAndSize(NULL, RECORD_OVERHEAD + body_size)
    cdef char* body = PyBytes_AS_STRING(record) + RECORD_OVERHEAD
    cdef char* out = body
    for key, value in changes:
        out += encode_record(out, PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key),
                             NULL if value is None else PyBytes_AS_STRING(value),
                             0 if value is None else PyBytes_GET_SIZE(value))
    encode_lengths(PyBytes_AS_STRING(record), body_size, BATCH)
    store_be32(PyBytes_AS_STRING(record) + LENGTHS_SIZE, crc32(0, body, body_size))
    return record


cdef int batch_index(Store store, uint64_t offset, const char* record,
                     Py_ssize_t body_size) except -1:
    """Apply the records of the batch record at ``offset`` (its bytes at ``record``) to the index.

    As a replay applies records; the table has room for every put. If the
    mapped index file proves damaged, it is dropped, and the replay of the
    whole log that follows applies this batch too.
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
