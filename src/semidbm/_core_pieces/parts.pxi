# Parts of the keys (included by _core.pyx): the live keys of part ``part``
# of ``parts`` under a seed, the rule of ``_parts.py``, listed as keys,
# values or (key, value) pairs. A key belongs to the part
# ``(hash * parts) >> 32``, and its probe starts at slot
# ``(hash * capacity) >> 32``: both grow with the hash, so under the index's
# own seed a part's keys start their probes in one range of slots, of the
# mapped index file and of the private table alike, and lie there or in the
# run of slots in use just past it. Listing a part reads those slots alone
# (and checks the mapped ones as a lookup does); under another seed every
# key is hashed again. A value is read from the record its slot names, as
# ``get`` reads it (``Store.value_at``'s checks): no second lookup, and no
# key object when only values are asked for. The pure-Python twin:
# ``_pure.Store._part``.

cdef enum:
    # What a part lists (``parts_form``): its keys, values, or both as pairs.
    PART_KEYS = 1
    PART_VALUES = 2
    PART_ITEMS = PART_KEYS | PART_VALUES
    # How many slots past the one read a listing asks the processor for the record of:
    # the records of a range of slots lie all over the log, each a miss of the caches.
    PARTS_AHEAD = 16


cdef int parts_form(object what) except -1:
    """The PART_ flag of ``what``, a name of ``_parts.WHAT`` (checked by ``_parts.check_part``)."""
    if what == "keys":
        return PART_KEYS
    return PART_VALUES if what == "values" else PART_ITEMS


cdef int parts_add(Store store, uint64_t offset, int form, list listed) except -1:
    """Append to ``listed`` what a part lists of the live record at ``offset``: its key, its
    value, or both, the key first (``parts_list`` pairs them at the end).

    The value is read as ``get`` reads it (``Store.value_at``: the record
    within the log, its checksum with ``verify``), into new bytes. Bytes
    alone while slots are read: making a tuple may start a collection of
    garbage, which runs Python code (a finalizer could change the table
    being read).
    """
    cdef const char* record
    cdef const char* value
    cdef Py_ssize_t value_size = 0
    if form & PART_KEYS:
        record = log_record(&store.log, offset)
        listed.append(PyBytes_FromStringAndSize(record + LENGTHS_SIZE,
                                                <int32_t>load_be32(record)))
    if form & PART_VALUES:
        value = store.value_at(offset, &value_size)
        listed.append(PyBytes_FromStringAndSize(value, value_size))
    return 0


cdef inline uint64_t parts_first_hash(uint64_t part, uint64_t parts) noexcept nogil:
    """The smallest hash of part ``part`` of ``parts``; 2**32 for ``part == parts``."""
    if part == parts:
        return 1ULL << 32
    return ((part << 32) + parts - 1) // parts


cdef inline size_t parts_slot(uint64_t first_hash, size_t capacity) noexcept nogil:
    """Where the probes of hashes from ``first_hash`` on start; ``capacity`` past the last."""
    if first_hash >> 32:
        return capacity
    return home_slot(<uint32_t>first_hash, capacity)


cdef inline void parts_ask_ahead(Store store, const Table* table, size_t ahead,
                                 uint64_t limit) noexcept:
    """Ask for the record that slot ``ahead`` names, if it is one below ``limit``.

    Only a hint (``log_prefetch``): the slot is not checked yet, so an
    offset past the log is skipped rather than trusted.
    """
    cdef uint64_t offset = table.slots[ahead].offset
    if HEADER_SIZE <= offset < limit:
        log_prefetch(&store.log, offset)


cdef int parts_collect(Store store, Table* table, Base* base, uint64_t part, uint64_t parts,
                       int form, list listed) except -3:
    """Append the entries (``parts_add``) of the part that ``table`` holds to ``listed``;
    0, or DAMAGED.

    ``base`` is NULL for the private table; for the mapped one, each
    block of slots visited is verified, a marked slot skipped and a
    slot taken checked (``base_slot_sound``) before its record is read.
    The slots from the part's first probe start to its last are read,
    then on to the first empty one (a probe never passes an empty slot),
    each slot once at most.
    """
    cdef size_t capacity = table.capacity
    cdef size_t at, ahead, steps = 0, span
    cdef uint64_t limit = (base.covered if base != NULL
                           else store.log.disk_end + <uint64_t>store.buffer_used)
    if capacity == 0:
        return 0
    at = parts_slot(parts_first_hash(part, parts), capacity)
    span = parts_slot(parts_first_hash(part + 1, parts), capacity) - at
    ahead = at + PARTS_AHEAD
    while ahead >= capacity:
        ahead -= capacity
    while steps < capacity:
        parts_ask_ahead(store, table, ahead, limit)
        ahead = next_slot(ahead, capacity)
        if base != NULL and (steps == 0 or at % BLOCK_SLOTS == 0) and not base_verify_block(
            base, at // BLOCK_SLOTS
        ):
            return DAMAGED
        if table.slots[at].offset == 0:
            if steps >= span:
                break
        elif ((<uint64_t>table.slots[at].hash * parts) >> 32) == part and (
            base == NULL or not base_is_shadowed(base, at)
        ):
            if base != NULL and not base_slot_sound(base, at):
                return DAMAGED
            parts_add(store, table.slots[at].offset, form, listed)
        steps += 1
        at = next_slot(at, capacity)
    return 0


cdef list parts_hashing(Store store, uint64_t part, uint64_t parts, uint64_t seed, int form):
    """The entries of the part under a seed that is not the index's: every live key hashed."""
    cdef list listed = []
    cdef size_t position = 0
    cdef uint64_t offset, version
    cdef const char* record
    keys_verify(store)
    version = store.index.table.version
    while True:
        offset = keys_next_live(store, &position)
        if offset == 0:
            if store.index.table.version != version:  # the index file was dropped
                return parts_hashing(store, part, parts, seed, form)
            return listed
        record = log_record(&store.log, offset)
        if ((<uint64_t>hash_key(seed, record + LENGTHS_SIZE, <int32_t>load_be32(record))
             * parts) >> 32) == part:
            parts_add(store, offset, form, listed)


cdef list parts_list(Store store, uint64_t part, uint64_t parts, uint64_t seed, int form):
    """``_interface.Store._part`` for an open store, its arguments checked."""
    cdef list listed
    if store.index.table.pending_count:
        keys_apply_pending(store)
    if seed != store.index.seed:
        listed = parts_hashing(store, part, parts, seed, form)
    else:
        listed = []
        if parts_collect(store, &store.index.base.table, &store.index.base, part, parts, form,
                         listed) == DAMAGED:
            keys_drop(store)  # every key is in the private table now
            listed = []
        parts_collect(store, &store.index.table, NULL, part, parts, form, listed)
    if form == PART_ITEMS:
        return parts_pairs(listed)
    return listed


cdef list parts_pairs(list listed):
    """``(key, value)`` pairs of ``listed``, which holds each key, then its value.

    Made once every record is read: a collection of garbage that making
    a tuple starts may run Python code now.
    """
    cdef Py_ssize_t count = PyList_GET_SIZE(listed) // 2
    cdef Py_ssize_t at
    cdef list pairs = PyList_New(count)
    for at in range(count):
        pair = (<object>PyList_GET_ITEM(listed, 2 * at),
                <object>PyList_GET_ITEM(listed, 2 * at + 1))
        Py_INCREF(pair)
        PyList_SET_ITEM(pairs, at, pair)
    return pairs
