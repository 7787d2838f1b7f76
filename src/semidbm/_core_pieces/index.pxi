# The keys of the compiled kernel (included by _core.pyx): the persistent
# index file, mapped and shared (Base), under a private table for the log
# past what it covers (Index.table), and the updates that wait for that
# table. A key the log past the base has set or deleted is marked in the
# base (``shadowed``, a private bit per mapped slot): the private table
# then has its record, or it was deleted. docs/FORMAT.md, "The index
# file", says what the file holds and which of its bytes are trusted
# when: here every slot is checked before its record is read, and each
# block of slots the first time it is used.
# A check that fails returns DAMAGED, and the Store then drops the index file
# (replays the log whole); nothing here raises for a bad file.

cdef enum:
    # What a lookup in the mapped index file may find besides a slot.
    MISSING = -1
    DAMAGED = -2
    # What index_merge returns when the keys would leave no empty slot.
    OVERFULL = -3


cdef struct Base:
    # The index file's table, mapped read-only: ``table.slots`` points
    # into the mapping and is never written; capacity 0 if there is none.
    Table table
    const char* map
    size_t map_size
    const char* checksums
    uint8_t* verified     # per block: its checksum has matched
    size_t verified_count  # blocks verified
    bint all_verified     # every block is (these three change only with the GIL held)
    # Per slot, a bit: the log past the base set or deleted its key
    # (NULL until the first).
    uint8_t* shadowed
    uint64_t shadowed_count
    uint64_t covered      # the log it answers for: [0, covered)
    uint64_t seed         # of the hash in its slots


cdef struct Index:
    # A Store's keys: the mapped index file (base), then the private table
    # (the keys the log from base.covered on has set).
    Table table
    Base base
    uint64_t seed


cdef inline uint64_t index_live(const Index* index) noexcept nogil:
    """The number of live keys (a forged ``count`` below the marks counts as none)."""
    if index.base.shadowed_count > index.base.table.count:
        return index.table.count
    return index.base.table.count - index.base.shadowed_count + index.table.count


cdef inline bint base_is_shadowed(const Base* base, size_t slot) noexcept nogil:
    """Whether the log past the base has set or deleted the key of the mapped ``slot``."""
    return base.shadowed != NULL and (base.shadowed[slot >> 3] >> (slot & 7)) & 1


cdef int base_shadow(Base* base, size_t slot) except -1:
    """Mark the mapped ``slot``'s key as set or deleted by the log past the base."""
    if not base_is_shadowed(base, slot):
        base_mark(base, slot)
    return 0


cdef inline int base_mark(Base* base, size_t slot) except -1:
    """``base_shadow`` for a ``slot`` known not to be marked (inline: a delete of a key the base
    holds does this every time)."""
    if base.shadowed == NULL:
        base_start_marks(base)
    base.shadowed[slot >> 3] |= <uint8_t>(1 << (slot & 7))
    base.shadowed_count += 1
    return 0


cdef int base_start_marks(Base* base) except -1:
    """Allocate the base's marks, none set, for its first."""
    base.shadowed = <uint8_t*>calloc((base.table.capacity + 7) // 8, 1)
    if base.shadowed == NULL:
        raise MemoryError("cannot allocate the index's marks")
    return 0


# --- The mapped table ---

cdef bint base_verify_block(Base* base, size_t block) noexcept nogil:
    """Whether the block ``block`` of slots matches its checksum (computed once per process)."""
    cdef size_t first, count
    cdef uint32_t expected
    if base.verified[block]:
        return True
    first = block * BLOCK_SLOTS
    count = base.table.capacity - first
    if count > BLOCK_SLOTS:
        count = BLOCK_SLOTS
    memcpy(&expected, base.checksums + 4 * block, 4)
    if crc32(0, <const char*>(base.table.slots + first), count * sizeof(Slot)) != expected:
        return False
    base.verified[block] = 1
    base.verified_count += 1
    base.all_verified = base.verified_count == (
        (base.table.capacity + BLOCK_SLOTS - 1) // BLOCK_SLOTS)
    return True


cdef bint base_verify_all(Base* base) noexcept nogil:
    """Whether every block of slots matches its checksum, and the slots in use number ``count``.

    Before a pass over every key, which must agree with ``len()``.
    """
    cdef size_t block, slot
    cdef uint64_t used = 0
    for block in range((base.table.capacity + BLOCK_SLOTS - 1) // BLOCK_SLOTS):
        if not base_verify_block(base, block):
            return False
    for slot in range(base.table.capacity):
        used += base.table.slots[slot].offset != 0
    return used == base.table.count


cdef inline bint base_record_lengths(const Base* base, uint64_t offset, int32_t* key_size,
                                     int32_t* value_size) noexcept nogil:
    """Whether a slot's ``offset`` points at a put record whose bytes lie within the covered log;
    its lengths, read once, in ``key_size`` and ``value_size`` (the file may change under the
    map: lengths read again could be other than those checked).

    ``covered`` is at least ``HEADER_SIZE + RECORD_OVERHEAD`` while there is a base
    (``_index_file.load`` trusts none that covers less than the log's first checkpoint:
    test_core_constants.py), so ``covered - RECORD_OVERHEAD`` does not wrap.
    """
    cdef const char* record
    if offset < HEADER_SIZE or offset > base.covered - RECORD_OVERHEAD:
        return False
    record = base.table.log.map + offset
    key_size[0] = <int32_t>load_be32(record)
    value_size[0] = <int32_t>load_be32(record + 4)
    return (key_size[0] >= 0 and value_size[0] >= 0
            and <uint64_t>key_size[0] + <uint64_t>value_size[0]
            <= base.covered - RECORD_OVERHEAD - offset)


cdef inline bint base_slot_sound(const Base* base, size_t slot) noexcept nogil:
    """Whether the mapped ``slot`` points at a put record within the covered log whose key has
    the slot's hash (check 4 of docs/FORMAT.md, "Trusting an index file")."""
    cdef uint64_t offset = base.table.slots[slot].offset
    cdef int32_t key_size, value_size
    if not base_record_lengths(base, offset, &key_size, &value_size):
        return False
    # The record's bytes only once its offset and lengths are known to lie in the log.
    return hash_key(base.seed, base.table.log.map + offset + LENGTHS_SIZE,
                    key_size) == base.table.slots[slot].hash


cdef inline bint base_enter_block(Base* base, size_t block) noexcept nogil:
    """Whether the probe may read the slots of ``block``: all blocks or this one verified, or
    it is verified now."""
    return base.all_verified or base.verified[block] or base_verify_block(base, block)


cdef inline int base_slot_holds(const Base* base, size_t index, const char* key,
                                Py_ssize_t size, uint32_t hashed, uint64_t* offset,
                                int32_t* value_size) noexcept nogil:
    """1 if the mapped slot ``index`` (of a verified block, in use) holds ``key``, with the
    record's ``offset`` and ``value_size`` as checked, 0 if it holds another key, DAMAGED if a
    check fails.

    A slot whose hash matches must be sound: its record lies within the
    covered log (its offset and lengths read once: the file may change
    under the map, and what is read again could be other than what was
    checked), so no byte outside it is read, and a slot pointing at
    another key's record, or into a record, is caught: the key there
    must be the one looked up or have the slot's hash (check 4 of
    docs/FORMAT.md, "Trusting an index file").
    """
    cdef uint64_t found = base.table.slots[index].offset
    cdef int32_t key_size, found_size
    cdef const char* record
    if base.table.slots[index].hash != hashed:
        return 0
    if not base_record_lengths(base, found, &key_size, &found_size):
        return DAMAGED
    record = base.table.log.map + found + LENGTHS_SIZE
    if key_size == size and memcmp(record, key, size) == 0:
        offset[0] = found
        value_size[0] = found_size
        return 1
    return 0 if hash_key(base.seed, record, key_size) == hashed else DAMAGED


cdef enum:
    # How many slots from its home ``base_near_home`` looks at for a key: in a table two thirds
    # full (``_index_file.capacity_for``), 98 keys in 100 lie within 6 of their home.
    NEAR_HOME = 6


cdef inline bint base_near_home(const Base* base, const char* key, Py_ssize_t size,
                                uint32_t hashed, Py_ssize_t* slot, uint64_t* offset,
                                int32_t* value_size) noexcept nogil:
    """Whether the ``NEAR_HOME`` slots from ``key``'s home, every block verified, tell what
    ``base_find`` would (in ``slot``: its slot, or MISSING): the usual lookup, inline in the
    hot paths. If not, ``slot`` is where ``base_probe`` goes on (every block is verified),
    which is too large to inline; a slot whose check fails is left to it too, to tell it
    from another key's. ``slot`` is MISSING, and False returned, if not every block is
    verified: ``base_find`` starts from the home slot."""
    cdef size_t at
    cdef Py_ssize_t steps
    cdef int held
    slot[0] = MISSING
    if not base.all_verified:
        return False
    at = home_slot(hashed, base.table.capacity)
    for steps in range(NEAR_HOME):
        if base.table.slots[at].offset == 0:
            return True
        held = base_slot_holds(base, at, key, size, hashed, offset, value_size)
        if held:
            slot[0] = at
            return held == 1
        at = next_slot(at, base.table.capacity)
    slot[0] = at
    return False


cdef inline Py_ssize_t base_find(Base* base, const char* key, Py_ssize_t size, uint32_t hashed,
                                 uint64_t* offset, int32_t* value_size) noexcept nogil:
    """The mapped slot of ``key``, MISSING, or DAMAGED if a check on the way fails.

    On a hit, ``offset`` and ``value_size`` are the record's, as checked
    (``base_slot_holds``): its value at ``offset + LENGTHS_SIZE + size``
    may be read without another check. The probe starts at the key's
    home slot, whose block it verifies (``base_probe`` goes on).
    """
    cdef size_t index
    if base.table.capacity == 0:
        return MISSING
    index = home_slot(hashed, base.table.capacity)
    if not base_enter_block(base, index // BLOCK_SLOTS):
        return DAMAGED
    return base_probe(base, key, size, hashed, index, offset, value_size)


cdef Py_ssize_t base_probe(Base* base, const char* key, Py_ssize_t size, uint32_t hashed,
                           size_t index, uint64_t* offset, int32_t* value_size) noexcept nogil:
    """``base_find`` from the slot ``index`` of a verified block on.

    Each block the probe enters is verified, and the probe ends, DAMAGED,
    at its crossing into a block that is one more than the table has
    blocks (a table without an empty slot is damaged): it visits each
    slot at most twice, and pays that test once per block, not once per
    slot.
    """
    cdef size_t crossings = 0
    cdef size_t blocks = (base.table.capacity + BLOCK_SLOTS - 1) // BLOCK_SLOTS
    cdef int held
    while True:
        if base.table.slots[index].offset == 0:
            return MISSING
        held = base_slot_holds(base, index, key, size, hashed, offset, value_size)
        if held == 1:
            return index
        if held == DAMAGED:
            return DAMAGED
        index = next_slot(index, base.table.capacity)
        if index % BLOCK_SLOTS == 0:
            crossings += 1
            if crossings > blocks or not base_enter_block(base, index // BLOCK_SLOTS):
                return DAMAGED


cdef void base_clear(Base* base) noexcept:
    """Let go of the mapped index file: no base any more."""
    if base.map != NULL:
        semidbm_unmap(base.map, base.map_size)
    free(base.verified)
    free(base.shadowed)
    base.map = NULL
    base.map_size = 0
    base.checksums = NULL
    base.verified = NULL
    base.verified_count = 0
    base.all_verified = False
    base.shadowed = NULL
    base.shadowed_count = 0
    base.covered = 0
    base.table.slots = NULL
    base.table.capacity = 0
    base.table.count = 0


# --- Changes to the keys ---

cdef int index_put(Index* index, uint32_t hashed, uint64_t offset) except -1:
    """Point the key of the put record at ``offset`` at it; 0, or DAMAGED (nothing changed).

    The caller has reserved a private slot for it (``table_reserve``).
    """
    cdef Table* table = &index.table
    cdef const char* record = log_record(table.log, offset)
    cdef Py_ssize_t slot = table_find(table, record + LENGTHS_SIZE,
                                      <int32_t>load_be32(record), hashed)
    cdef Py_ssize_t held
    cdef uint64_t found
    cdef int32_t value_size
    if slot >= 0:
        table.slots[slot].offset = offset
        return 0
    if index.base.table.capacity:
        held = base_find(&index.base, record + LENGTHS_SIZE, <int32_t>load_be32(record), hashed,
                         &found, &value_size)
        if held == DAMAGED:
            return DAMAGED
        if held >= 0:
            base_shadow(&index.base, held)
    table_place(table, -1 - slot, hashed, offset)
    return 0


cdef int index_delete(Index* index, uint32_t hashed, uint64_t offset) except -1:
    """Apply the delete record at ``offset`` (during a replay); 0, or DAMAGED.

    A private key goes from the private table (the base's slot of it,
    if any, is marked already); a key only the base holds is marked; a
    key that is not live is left so (semidbm 0.5.1 writes such deletes).
    """
    cdef Table* table = &index.table
    cdef const char* record = log_record(table.log, offset)
    cdef const char* key = record + LENGTHS_SIZE
    cdef int32_t size = <int32_t>load_be32(record)
    cdef Py_ssize_t held
    cdef uint64_t found
    cdef int32_t value_size
    cdef Py_ssize_t slot = table_find(table, key, size, hashed)
    if slot >= 0:
        table_remove(table, slot)
        return 0
    if index.base.table.capacity == 0:
        return 0
    held = base_find(&index.base, key, size, hashed, &found, &value_size)
    if held == DAMAGED:
        return DAMAGED
    if held >= 0:
        base_shadow(&index.base, held)
    return 0


# --- Updates that wait ---

cdef int index_defer(Index* index, uint32_t hashed, uint64_t offset) except -1:
    """Queue the index update for the buffered put record at ``offset``; 0, or DAMAGED.

    The update of a large table costs a cache miss; queued, with its
    slot prefetched, it is applied after the next few assignments, when
    that memory has arrived. The caller has reserved room for every
    queued key (``table_reserve``), so applying them never grows the
    table. Every operation but an assignment applies the queue first.
    DAMAGED means that applying the oldest update met a damaged index file;
    the update is queued all the same.
    """
    cdef Table* table = &index.table
    cdef size_t at
    cdef int result = 0
    if table.pending_count == PENDING_LIMIT:
        result = index_apply_oldest(index)
    table_prefetch(table, hashed)
    if index.base.table.capacity:
        table_prefetch(&index.base.table, hashed)
    at = (table.pending_first + table.pending_count) % PENDING_LIMIT
    table.pending[at].hash = hashed
    table.pending[at].offset = offset
    table.pending_count += 1
    return result


cdef int index_apply_oldest(Index* index) except -1:
    """Apply the oldest pending update; 0, or DAMAGED (the update is then dropped)."""
    cdef Table* table = &index.table
    cdef Slot entry = table.pending[table.pending_first]
    table.pending_first = (table.pending_first + 1) % PENDING_LIMIT
    table.pending_count -= 1
    return index_put(index, entry.hash, entry.offset)


# --- Writing an index file ---

cdef int index_merge(Index* index, Slot* slots, size_t capacity) noexcept:
    """Put every live key's slot into the empty ``slots``; 0, DAMAGED or OVERFULL.

    The base's slots not marked, then the private table's: each live
    key once, so no key is compared or read. Both tables are in the
    order of their hashes, as ``slots`` will be: the writes advance
    through it. The base has been verified whole (``base_verify_all``);
    a base slot must point into the covered log. The caller sized
    ``slots`` for the live keys; more keys than leave one slot empty
    (a count gone wrong) give OVERFULL, where a probe would never end.
    """
    cdef const Slot* entry
    cdef size_t at
    cdef size_t placed = 0
    for at in range(index.base.table.capacity):
        entry = &index.base.table.slots[at]
        if entry.offset == 0 or base_is_shadowed(&index.base, at):
            continue
        if entry.offset < HEADER_SIZE or entry.offset >= index.base.covered:
            return DAMAGED
        placed += 1
        if placed >= capacity:
            return OVERFULL
        slots_place(slots, capacity, entry[0])
    for at in range(index.table.capacity):
        if index.table.slots[at].offset != 0:
            placed += 1
            if placed >= capacity:
                return OVERFULL
            slots_place(slots, capacity, index.table.slots[at])
    return 0


cdef void index_block_checksums(const Slot* slots, size_t capacity, uint32_t* out) noexcept nogil:
    """The CRC-32 of each block of ``BLOCK_SLOTS`` slots, in order, into ``out``."""
    cdef size_t block = 0, first = 0, count
    while first < capacity:
        count = capacity - first
        if count > BLOCK_SLOTS:
            count = BLOCK_SLOTS
        out[block] = crc32(0, <const char*>(slots + first), count * sizeof(Slot))
        block += 1
        first += count


cdef int index_write_table(int out, const Slot* slots, size_t capacity) except -1:
    """Write an index file's slots, then their block checksums, to the file ``out``."""
    cdef size_t blocks = (capacity + BLOCK_SLOTS - 1) // BLOCK_SLOTS
    cdef uint32_t* sums = <uint32_t*>malloc(blocks * sizeof(uint32_t) + 1)
    if sums == NULL:
        raise MemoryError("cannot allocate the index's checksums")
    try:
        index_block_checksums(slots, capacity, sums)
        write_or_raise(out, <const char*>slots, capacity * sizeof(Slot))
        write_or_raise(out, <const char*>sums, blocks * sizeof(uint32_t))
    finally:
        free(sums)
    return 0


cdef class IndexFileBody:
    """The body of a new index file: ``_index_file.install`` calls it with the file to write to."""

    cdef const Slot* slots
    cdef size_t capacity

    def __call__(self, out):
        index_write_table(out, self.slots, self.capacity)
