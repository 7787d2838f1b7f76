# Parts of the keys (included by _core.pyx): the live keys of part ``part``
# of ``parts`` under a seed, the rule of ``_parts.py``. A key belongs to the
# part ``(hash * parts) >> 32``, and its probe starts at slot
# ``(hash * capacity) >> 32``: both grow with the hash, so under the index's
# own seed a part's keys start their probes in one range of slots, of the
# mapped index file and of the private table alike, and lie there or in the
# run of slots in use just past it. Listing a part reads those slots alone
# (and checks the mapped ones as a lookup does); under another seed every
# key is hashed again. The pure-Python twin: ``_pure.Store._part_keys``.


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


cdef int parts_collect(Table* table, Base* base, uint64_t part, uint64_t parts,
                       list keys) except -3:
    """Append the keys of the part that ``table`` holds to ``keys``; 0, or DAMAGED.

    ``base`` is NULL for the private table; for the mapped one, each
    block of slots visited is verified, a marked slot skipped and a
    slot taken checked (``base_slot_sound``) before its record is read.
    The slots from the part's first probe start to its last are read,
    then on to the first empty one (a probe never passes an empty slot),
    each slot once at most.
    """
    cdef size_t capacity = table.capacity
    cdef size_t at, steps = 0, span
    cdef const char* record
    if capacity == 0:
        return 0
    at = parts_slot(parts_first_hash(part, parts), capacity)
    span = parts_slot(parts_first_hash(part + 1, parts), capacity) - at
    while steps < capacity:
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
            record = log_record(table.log, table.slots[at].offset)
            keys.append(PyBytes_FromStringAndSize(record + LENGTHS_SIZE,
                                                  <int32_t>load_be32(record)))
        steps += 1
        at = next_slot(at, capacity)
    return 0


cdef list parts_hashing(Store store, uint64_t part, uint64_t parts, uint64_t seed):
    """The keys of the part under a seed that is not the index's: every live key hashed."""
    cdef list keys = []
    cdef size_t position = 0
    cdef uint64_t offset, version
    cdef const char* record
    cdef int32_t size
    keys_verify(store)
    version = store.index.table.version
    while True:
        offset = keys_next_live(store, &position)
        if offset == 0:
            if store.index.table.version != version:  # the index file was dropped
                return parts_hashing(store, part, parts, seed)
            return keys
        record = log_record(&store.log, offset)
        size = <int32_t>load_be32(record)
        if ((<uint64_t>hash_key(seed, record + LENGTHS_SIZE, size) * parts) >> 32) == part:
            keys.append(PyBytes_FromStringAndSize(record + LENGTHS_SIZE, size))


cdef list parts_list(Store store, uint64_t part, uint64_t parts, uint64_t seed):
    """``_interface.Store._part_keys`` for an open store, its arguments checked."""
    cdef list keys
    if store.index.table.pending_count:
        keys_apply_pending(store)
    if seed != store.index.seed:
        return parts_hashing(store, part, parts, seed)
    keys = []
    if parts_collect(&store.index.base.table, &store.index.base, part, parts, keys) == DAMAGED:
        keys_drop(store)  # every key is in the private table now
        keys = []
    parts_collect(&store.index.table, NULL, part, parts, keys)
    return keys
