# The bulk operations of the compiled kernel (included by _core.pyx):
# ``Store.update``, ``get_many`` and ``delete_many`` run their loops here,
# in C, without releasing the GIL. What makes them cheaper per item than a
# loop of item operations, beside the Python calls the loop no longer
# makes: the full check of the store once per call (a few loads per item
# after that); an update grows the table once for the items of a dict,
# list or tuple, and stores items of bytes in runs (room made in the table
# and the buffer once per run, the records' checksums computed one after
# another); and the lookups of many keys are pipelined: the slots of a key
# some keys ahead are asked for first, then the record its probe leads to,
# so that the processor fetches the memory of several keys at once instead
# of waiting for each in turn.
# docs/bulk.md has the measurements.

from cpython.bytearray cimport PyByteArray_Check
from cpython.dict cimport PyDict_Next, PyDict_Size
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.memoryview cimport PyMemoryView_Check

cdef enum:
    # Items of bytes that an update stores together (see bulk_store_run): half the
    # queue of index updates (PENDING_LIMIT), so that the updates a run's
    # queuing applies were queued, their slots asked for, a run before
    # (measured: 8 is faster than 4, 16 or 32).
    RUN_ITEMS = 8
    # How many keys ahead a bulk lookup asks for a key's slot, and for its record.
    SLOT_AHEAD = 16
    RECORD_AHEAD = 8
    # Slots a look ahead for a key's record visits at most (it is only a hint).
    PEEK_STEPS = 4
    # Keys up to which delete_many looks for a key given twice by comparing
    # slots pairwise rather than with a bitmap over every slot.
    PAIRWISE_REPEATS = 32

# Marks the ``where`` of a key found in the private table (else: a mapped slot).
cdef uint64_t PRIVATE_SLOT = <uint64_t>1 << 63


cdef struct BulkTarget:
    # A key of get_many or delete_many: its bytes (held by a Python object),
    # its hash, and where delete_many found it.
    const char* key
    Py_ssize_t size
    uint64_t where
    uint32_t hashed


# --- update ---

cdef struct BulkRun:
    # Items of bytes that an update stores together (``bulk_store_run``): the
    # objects, each held (a reference) until then, and the bytes of their records.
    PyObject* keys[RUN_ITEMS]
    PyObject* values[RUN_ITEMS]
    int count
    Py_ssize_t size


cdef int bulk_update(Store store, object other, dict extra) except -1:
    """``Store.update``: store the items of ``other``, then those of ``extra`` (the keywords).

    As ``dict.update``: a mapping (anything with ``keys()``) gives
    ``other[key]`` for each of its keys, anything else must be an
    iterable of pairs. Each item is stored as an assignment stores it;
    an error stops the update with the items before it stored. Items
    of bytes from a dict, or a list or tuple of pairs, are stored in
    runs (``bulk_store_run``); where the items come from code (an iterator,
    a mapping's ``[]``), each is stored before the code runs again,
    which may look at the database.
    """
    cdef BulkRun run
    run.count = 0
    run.size = 0
    store.check_writable("write")
    try:
        if type(other) is dict:
            bulk_put_dict(store, &run, other)
        elif hasattr(other, "keys"):
            for key in other.keys():
                bulk_put_item(store, &run, key, other[key], False)
        else:
            bulk_put_pairs(store, &run, other)
        if extra:
            bulk_put_dict(store, &run, extra)
        bulk_store_run(store, &run)
    finally:
        bulk_let_go(&run)
    return 0


cdef int bulk_reserve(Store store, Py_ssize_t count) except -1:
    """Grow the private table once, if need be, to room for ``count`` keys more.

    Adding them one at a time would grow it step by step, moving every
    key each time. Items that replace keys the table holds need no room,
    so the table may end one size larger than that would leave it.
    """
    cdef Table* table = &store.index.table
    if count > 0 and not table_has_room(table, table.pending_count + count - 1):
        table_grow(table, table.count + table.pending_count + count)
    return 0


cdef int bulk_put_dict(Store store, BulkRun* run, dict items) except -1:
    """Store the items of the dict ``items``, read in place (they may wait in runs)."""
    cdef Py_ssize_t position = 0
    cdef PyObject* key
    cdef PyObject* value
    bulk_store_run(store, run)  # the items before, if any: nothing raises with items waiting
    bulk_reserve(store, PyDict_Size(items))
    while PyDict_Next(items, &position, &key, &value):
        # Held here: the dict may change if storing an item runs Python code.
        held_key = <object>key
        held_value = <object>value
        bulk_put_item(store, run, held_key, held_value, True)
    return 0


cdef int bulk_put_pairs(Store store, BulkRun* run, object pairs) except -1:
    """Store the ``(key, value)`` pairs of the iterable ``pairs`` (any sequence of 2 for a pair).

    The pairs of a list or tuple may wait in runs; those of another
    iterable, which may run code to make the next, are stored at once.
    """
    cdef Py_ssize_t number = 0
    cdef bint waiting = type(pairs) is list or type(pairs) is tuple
    bulk_store_run(store, run)  # the items before, if any: nothing raises with items waiting
    if waiting:
        bulk_reserve(store, len(pairs))
    for item in pairs:
        if type(item) is not tuple or len(<tuple>item) != 2:
            bulk_store_run(store, run)  # making it a tuple may run code, or it raises
            item = bulk_pair(item, number)
        key = (<tuple>item)[0]
        value = (<tuple>item)[1]
        item = None  # so that zip() may reuse its tuple for the next pair
        bulk_put_item(store, run, key, value, waiting)
        number += 1
    return 0


cdef tuple bulk_pair(object item, Py_ssize_t number):
    """Item ``number`` of ``update``'s pairs as a tuple of two, as ``dict.update`` takes it
    (``_records.as_pair``): TypeError if it is not a sequence, ValueError if not of two."""
    if type(item) is not tuple:
        try:
            item = tuple(item)
        except TypeError:
            raise TypeError(_messages.NOT_A_PAIR % (number, type(item).__name__)) from None
    if len(<tuple>item) != 2:
        raise ValueError(_messages.NOT_TWO % (number, len(<tuple>item)))
    return <tuple>item


cdef int bulk_put_item(Store store, BulkRun* run, object key, object value, bint waiting) except -1:
    """Store one item, as ``store[key] = value`` does, or add it to ``run`` if it may wait.

    With ``waiting``, an item of bytes whose record fits the buffer
    waits (a run never holds more than the buffer); any other item is
    stored now, the run first.
    """
    cdef Py_ssize_t key_size, value_size, size
    cdef Borrowed borrowed_key, borrowed_value
    if waiting and PyBytes_Check(key) and PyBytes_Check(value):
        key_size = PyBytes_GET_SIZE(key)
        value_size = PyBytes_GET_SIZE(value)
        if (key_size or value_size) and key_size <= store.buffer_size - RECORD_OVERHEAD and (
            value_size <= store.buffer_size - RECORD_OVERHEAD - key_size
        ):
            size = RECORD_OVERHEAD + key_size + value_size
            if run.size + size > store.buffer_size:
                bulk_store_run(store, run)
            Py_INCREF(key)
            Py_INCREF(value)
            run.keys[run.count] = <PyObject*>key
            run.values[run.count] = <PyObject*>value
            run.count += 1
            run.size += size
            if run.count == RUN_ITEMS:
                bulk_store_run(store, run)
            return 0
    bulk_store_run(store, run)
    if PyBytes_Check(key) and PyBytes_Check(value):
        return bulk_put_bytes(store, key, value, PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key),
                              PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value))
    borrow(key, &borrowed_key, "keys")
    try:
        borrow(value, &borrowed_value, "values")
        try:
            return bulk_put_bytes(store, key, value, borrowed_key.data, borrowed_key.size,
                                  borrowed_value.data, borrowed_value.size)
        finally:
            give_back(&borrowed_value)
    finally:
        give_back(&borrowed_key)


cdef int bulk_store_run(Store store, BulkRun* run) except -1:
    """Store the items of ``run``, in order, and empty it.

    Room is made once: in the table for all its keys, in the buffer for
    all its records (written out first if need be). The records are
    encoded into the buffer, then their checksums computed one after
    another (independent work the processor overlaps), then their index
    updates queued. Nothing in between runs Python code or raises, so
    no code sees a record before its checksum.
    """
    cdef int at
    cdef uint32_t hashes[RUN_ITEMS]
    cdef Py_ssize_t start, key_size, value_size, size
    cdef uint64_t offset
    cdef char* out
    if run.count == 0:
        return 0
    try:
        if store.fd < 0 or store.busy or not store.writable:
            store.check_writable("write")
        if store.buffer_used + run.size > store.buffer_size:
            store.flush()
        # After the flush, whose index updates may drop the index file (and the room made).
        bulk_reserve(store, run.count)
        start = store.buffer_used
        out = store.log.buffer + start
        for at in range(run.count):
            key_size = PyBytes_GET_SIZE(<object>run.keys[at])
            value_size = PyBytes_GET_SIZE(<object>run.values[at])
            hashes[at] = hash_key(store.index.seed, PyBytes_AS_STRING(<object>run.keys[at]),
                                  key_size)
            encode_lengths(out, key_size, value_size)
            memcpy(out + LENGTHS_SIZE, PyBytes_AS_STRING(<object>run.keys[at]), key_size)
            memcpy(out + LENGTHS_SIZE + key_size, PyBytes_AS_STRING(<object>run.values[at]),
                   value_size)
            out += RECORD_OVERHEAD + key_size + value_size
        out = store.log.buffer + start
        for at in range(run.count):
            key_size = <int32_t>load_be32(out)
            value_size = <int32_t>load_be32(out + 4)
            # The CRC covers the key and value, side by side in the buffer.
            store_be32(out + LENGTHS_SIZE + key_size + value_size,
                       crc32(0, out + LENGTHS_SIZE, key_size + value_size))
            out += RECORD_OVERHEAD + key_size + value_size
        store.buffer_used += run.size
        offset = store.log.disk_end + start
        out = store.log.buffer + start
        for at in range(run.count):
            if index_defer(&store.index, hashes[at], offset) == DAMAGED:
                keys_drop(store)  # its replay indexes the rest of the run too
                break
            size = RECORD_OVERHEAD + <int32_t>load_be32(out) + <int32_t>load_be32(out + 4)
            offset += size
            out += size
    finally:
        bulk_let_go(run)
    return 0


cdef void bulk_let_go(BulkRun* run) noexcept:
    """Empty ``run``, letting go of its objects."""
    cdef int at
    for at in range(run.count):
        Py_XDECREF(run.keys[at])
        Py_XDECREF(run.values[at])
    run.count = 0
    run.size = 0


cdef int bulk_put_bytes(Store store, object key, object value, const char* key_data,
                        Py_ssize_t key_size, const char* value_data,
                        Py_ssize_t value_size) except -1:
    """Append the record of ``key`` and ``value`` (their bytes given) and queue its index update.

    What ``Store.__setitem__`` does for an item that cannot wait in a
    run; the rare ones (a length past the limit, the empty key with the
    empty value, which is sealed) go through it. Borrowing may have run
    Python code, so the store is checked again here: a few loads.
    """
    cdef uint32_t hashed
    cdef uint64_t offset
    cdef int damaged
    if store.fd < 0 or store.busy or not store.writable:
        store.check_writable("write")
    if key_size > MAX_LENGTH or value_size > MAX_LENGTH or (key_size == 0 and value_size == 0):
        store[key] = value
        return 0
    hashed = hash_key(store.index.seed, key_data, key_size)
    table_reserve(&store.index.table)
    offset = store.append(key_data, key_size, value_data, value_size)
    if offset >= store.log.disk_end:
        damaged = index_defer(&store.index, hashed, offset)
    else:
        damaged = index_put(&store.index, hashed, offset)
    if damaged == DAMAGED:
        keys_drop(store)  # its replay applies this record too
    return 0


# --- the keys of get_many and delete_many ---

cdef object bulk_key_sequence(object keys, str method):
    """``keys`` as a list or tuple (made from any other iterable); one key is refused.

    A str or bytes-like object would give its characters or bytes as keys.
    """
    if PyUnicode_Check(keys) or PyBytes_Check(keys) or PyByteArray_Check(keys) or (
        PyMemoryView_Check(keys)
    ):
        raise TypeError(_messages.ONE_KEY % (method, type(keys).__name__))
    if type(keys) is list or type(keys) is tuple:
        return keys
    return list(keys)


cdef BulkTarget* bulk_key_targets(object keys, Py_ssize_t count, list copies) except NULL:
    """An array of the bytes of the ``count`` keys of the list or tuple ``keys``.

    A key given as bytes or str is read in place (a str's UTF-8 stays
    with it); another is copied into bytes, kept in ``copies``, so that
    no buffer can change between two reads of it (one too long for a
    key is refused, as ``_records.as_bytes`` refuses it). From the first such
    key on, the keys of a list are held in ``copies`` too. The caller
    frees the array.
    """
    cdef BulkTarget* targets = <BulkTarget*>malloc(count * sizeof(BulkTarget) + 1)
    cdef Py_ssize_t at
    cdef Borrowed borrowed
    cdef bytes copy
    cdef bint holding = False  # the keys of a list are held in copies
    if targets == NULL:
        raise MemoryError("cannot allocate room for %d keys" % count)
    try:
        for at in range(count):
            key = keys[at]
            if holding:
                copies.append(key)
            if PyBytes_Check(key):
                targets[at].key = PyBytes_AS_STRING(key)
                targets[at].size = PyBytes_GET_SIZE(key)
            elif PyUnicode_Check(key):
                targets[at].key = PyUnicode_AsUTF8AndSize(key, &targets[at].size)
            else:
                if not holding and type(keys) is list:
                    # Borrowing may run Python code, which may change the
                    # list: the keys read so far, and those after, are held.
                    copies.extend(keys[:at + 1])
                    holding = True
                borrow(key, &borrowed, "keys")
                try:
                    if borrowed.size > MAX_LENGTH:  # no such key, and too much to copy
                        raise ValueError(TOO_LONG % "keys")
                    copy = PyBytes_FromStringAndSize(borrowed.data, borrowed.size)
                finally:
                    give_back(&borrowed)
                copies.append(copy)
                targets[at].key = PyBytes_AS_STRING(copy)
                targets[at].size = PyBytes_GET_SIZE(copy)
    except BaseException:
        free(targets)
        raise
    return targets


# --- lookups, pipelined ---

cdef inline void bulk_ask_for_slots(Store store, BulkTarget* target) noexcept:
    """Hash the key of ``target`` and ask the processor for the slots where its probes start."""
    target.hashed = hash_key(store.index.seed, target.key, target.size)
    if store.index.table.capacity:
        table_prefetch(&store.index.table, target.hashed)
    if store.index.base.table.capacity:
        table_prefetch(&store.index.base.table, target.hashed)


cdef inline uint64_t bulk_candidate(const Table* table, uint32_t hashed, uint64_t limit) noexcept:
    """The offset in the first slot of the probe for ``hashed`` whose hash matches; 0 if none.

    Only a hint for a prefetch: a few slots at most, and an offset at or
    past ``limit`` counts as none.
    """
    cdef size_t index = home_slot(hashed, table.capacity)
    cdef int steps
    for steps in range(PEEK_STEPS):
        if table.slots[index].offset == 0:
            return 0
        if table.slots[index].hash == hashed:
            return table.slots[index].offset if table.slots[index].offset < limit else 0
        index = next_slot(index, table.capacity)
    return 0


cdef inline void bulk_ask_for_record(Store store, const BulkTarget* target) noexcept:
    """Ask the processor for the record that the probe for ``target``'s key will compare."""
    cdef uint64_t offset = 0
    if store.index.table.capacity:
        offset = bulk_candidate(&store.index.table, target.hashed,
                                store.log.disk_end + <uint64_t>store.buffer_used)
    if offset == 0 and store.index.base.table.capacity:
        offset = bulk_candidate(&store.index.base.table, target.hashed, store.index.base.covered)
    if offset >= HEADER_SIZE:
        log_prefetch(&store.log, offset)


cdef inline void bulk_look_ahead(Store store, BulkTarget* targets, Py_ssize_t count,
                                 Py_ssize_t at) noexcept:
    """Before key ``at`` is looked up: ask for the slots of a key further on, the record of one
    nearer (``SLOT_AHEAD``, ``RECORD_AHEAD``)."""
    if at + SLOT_AHEAD < count:
        bulk_ask_for_slots(store, &targets[at + SLOT_AHEAD])
    if at + RECORD_AHEAD < count:
        bulk_ask_for_record(store, &targets[at + RECORD_AHEAD])


cdef void bulk_start_lookups(Store store, BulkTarget* targets, Py_ssize_t count) noexcept:
    """Hash the first keys and ask for their slots and records (``bulk_look_ahead``: the rest)."""
    cdef Py_ssize_t at
    for at in range(min(count, SLOT_AHEAD)):
        bulk_ask_for_slots(store, &targets[at])
    for at in range(min(count, RECORD_AHEAD)):
        bulk_ask_for_record(store, &targets[at])


# --- get_many ---

cdef list bulk_get(Store store, object keys, object default):
    """``Store.get_many``: the values of ``keys`` in order, ``default`` for a missing one."""
    cdef Py_ssize_t count
    cdef BulkTarget* targets
    cdef list copies = []
    if store.fd < 0 or store.busy:
        store.check_open()
    keys = bulk_key_sequence(keys, "get_many")
    count = len(keys)
    targets = bulk_key_targets(keys, count, copies)
    try:
        return bulk_get_targets(store, targets, count, default)
    finally:
        free(targets)


cdef list bulk_get_targets(Store store, BulkTarget* targets, Py_ssize_t count, object default):
    """The values of the ``count`` keys of ``targets`` in ``store``, in order, ``default`` for a
    missing one: the lookups pipelined.

    The store is checked here (``check_reads``, which reads the clock for
    the expiry checks first), once the list of values is made: reading
    the keys, or making that list (a collection, whose finalizers run
    Python code), may have run code that closed it.
    """
    cdef Py_ssize_t at, value_size
    cdef uint64_t offset
    cdef const char* value
    cdef list values = PyList_New(count)
    cdef uint64_t now
    store.check_reads(&now)
    bulk_start_lookups(store, targets, count)
    for at in range(count):
        bulk_look_ahead(store, targets, count, at)
        if keys_find(store, targets[at].key, targets[at].size, targets[at].hashed,
                     &offset) == 1:
            value = store.value_at(offset, &value_size)
            if store.log.expiring and store.expired(offset, now):
                item = default
            else:
                item = PyBytes_FromStringAndSize(value, value_size)
        else:
            item = default
        Py_INCREF(item)
        PyList_SET_ITEM(values, at, item)
    return values


# --- delete_many ---

cdef int bulk_delete(Store store, object keys) except -1:
    """``Store.delete_many``: check that every key is live, and given once, then delete them all.

    A key missing, or given a second time, raises KeyError for the
    first such key before anything is written.
    """
    cdef Py_ssize_t count, located, repeated
    cdef BulkTarget* targets
    cdef list copies = []
    store.check_writable("delete")
    keys = bulk_key_sequence(keys, "delete_many")
    count = len(keys)
    targets = bulk_key_targets(keys, count, copies)
    try:
        if store.fd < 0 or store.busy or not store.writable:
            store.check_writable("delete")
        if store.index.table.pending_count:
            keys_apply_pending(store)
        located = bulk_locate_keys(store, targets, count)
        repeated = bulk_first_repeat(store, targets, located)
        if repeated >= 0:
            raise KeyError(keys[repeated])
        if located < count:
            raise KeyError(keys[located])
        bulk_delete_located(store, targets, count)
    finally:
        free(targets)
    return 0


cdef Py_ssize_t bulk_locate_keys(Store store, BulkTarget* targets, Py_ssize_t count) except -2:
    """Set each target's ``where``: its private slot (marked ``PRIVATE_SLOT``) or its mapped slot.

    Stops at the first key that is not live; returns how many keys were
    located (``count`` if all are live). A mapped index file that fails a
    check is dropped and the search starts again.
    """
    cdef Py_ssize_t at, slot, held
    cdef uint64_t found
    cdef int32_t value_size
    bulk_start_lookups(store, targets, count)
    for at in range(count):
        bulk_look_ahead(store, targets, count, at)
        slot = table_find(&store.index.table, targets[at].key, targets[at].size,
                          targets[at].hashed)
        if slot >= 0:
            targets[at].where = PRIVATE_SLOT | <uint64_t>slot
            continue
        if store.index.base.table.capacity == 0:
            return at
        held = base_find(&store.index.base, targets[at].key, targets[at].size,
                         targets[at].hashed, &found, &value_size)
        if held == DAMAGED:
            keys_drop(store)
            return bulk_locate_keys(store, targets, count)
        if held < 0 or base_is_shadowed(&store.index.base, held):
            return at
        targets[at].where = <uint64_t>held
    return count


cdef Py_ssize_t bulk_first_repeat(Store store, const BulkTarget* targets,
                                  Py_ssize_t count) except -2:
    """The first target whose slot an earlier one has (its key was given before); -1 if none."""
    cdef Py_ssize_t at, earlier
    cdef size_t bit
    cdef size_t slots = store.index.table.capacity + store.index.base.table.capacity
    cdef uint8_t* seen
    if count <= PAIRWISE_REPEATS:
        for at in range(1, count):
            for earlier in range(at):
                if targets[earlier].where == targets[at].where:
                    return at
        return -1
    seen = <uint8_t*>calloc(slots // 8 + 1, 1)
    if seen == NULL:
        raise MemoryError("cannot allocate a bitmap of %d slots" % slots)
    try:
        for at in range(count):
            # The private slots after the mapped ones.
            bit = <size_t>(targets[at].where & ~PRIVATE_SLOT)
            if targets[at].where & PRIVATE_SLOT:
                bit += store.index.base.table.capacity
            if seen[bit >> 3] & (1 << (bit & 7)):
                return at
            seen[bit >> 3] |= <uint8_t>(1 << (bit & 7))
    finally:
        free(seen)
    return -1


cdef int bulk_delete_located(Store store, BulkTarget* targets, Py_ssize_t count) except -1:
    """Append the delete records of the located keys in one write, then take them out of the index.

    All or none: the records are appended as one (``append_encoded``:
    into the buffer, or straight to the file when larger, cut back if
    that write fails), so a failed write deletes no key. A private key
    is found again by its record's offset (removing a key shifts the
    slots after it); a mapped slot never moves.
    """
    cdef Py_ssize_t at, slot
    cdef Table* table = &store.index.table
    if count == 0:
        return 0
    for at in range(count):
        if targets[at].where & PRIVATE_SLOT:
            targets[at].where = PRIVATE_SLOT | table.slots[targets[at].where & ~PRIVATE_SLOT].offset
    # With nothing pending, appending moves no slot.
    store.append_encoded(bulk_delete_records(targets, count))
    for at in range(count):
        if at + SLOT_AHEAD < count and targets[at + SLOT_AHEAD].where & PRIVATE_SLOT:
            table_prefetch(table, targets[at + SLOT_AHEAD].hashed)
        if targets[at].where & PRIVATE_SLOT:
            slot = bulk_slot_of_record(table, targets[at].hashed, targets[at].where & ~PRIVATE_SLOT)
            if slot >= 0:
                table_remove(table, slot)
        else:
            base_shadow(&store.index.base, <size_t>targets[at].where)
    return 0


cdef bytes bulk_delete_records(const BulkTarget* targets, Py_ssize_t count):
    """The delete records of the keys of ``targets``, one after another, as ``append`` encodes
    each."""
    cdef Py_ssize_t at
    cdef Py_ssize_t size = 0
    cdef bytes records
    cdef char* out
    for at in range(count):
        size += RECORD_OVERHEAD + targets[at].size
    records = PyBytes_FromStringAndSize(NULL, size)
    out = PyBytes_AS_STRING(records)
    for at in range(count):
        out += encode_record(out, targets[at].key, targets[at].size, NULL, 0)
    return records


cdef inline Py_ssize_t bulk_slot_of_record(const Table* table, uint32_t hashed,
                                           uint64_t offset) noexcept nogil:
    """The slot pointing at the record at ``offset``, whose key has the hash ``hashed``; -1 if none.

    None only if Python code run meanwhile (a finalizer) deleted the key.
    """
    cdef size_t index = home_slot(hashed, table.capacity)
    while table.slots[index].offset != offset:
        if table.slots[index].offset == 0:
            return -1
        index = next_slot(index, table.capacity)
    return index
