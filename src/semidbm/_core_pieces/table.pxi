# The hash table of the compiled kernel (included by _core.pyx): one
# slot per key in an open-addressing table (linear probing,
# backward-shift deletion), and the queue of index updates that wait.
# A slot holds a record's offset and a 32-bit hash of its key; the key
# itself is compared against the record (read through the table's Log),
# so the table does not grow with key length. A key's probe starts at
# (hash * capacity) >> 32, so any capacity works (an index file's is not
# a power of two) and the slots stay in the order of their hashes, which
# makes moving them to another table a near-sequential pass. The Store
# and the index rebuild hold a Table and call these functions: the hash,
# where a key's probe starts and how full the table may get are decided
# here alone.

cdef enum:
    # Index updates an assignment may leave pending (see index_defer).
    PENDING_LIMIT = 16
    # Bytes in the smallest memory page.
    PAGE_SIZE = 4096
    # Keys ahead whose record a pass over every key asks the processor for
    # (the records lie all over the log, in the order of the slots).
    RECORD_PREFETCH = 32


# --- The index hash ---

cdef inline uint64_t hash_mix(uint64_t value) noexcept nogil:
    value ^= value >> 32
    value *= 0xD6E8FEB86659FD93ULL
    value ^= value >> 32
    value *= 0xD6E8FEB86659FD93ULL
    return value ^ (value >> 32)


cdef uint64_t random_seed() except? 0:
    """A new key for ``hash_key``, from the operating system's random source."""
    cdef uint64_t seed = 0
    for byte in os.urandom(8):
        seed = (seed << 8) | <uint8_t>byte
    return seed


cdef inline uint32_t hash_key(uint64_t seed, const char* key, Py_ssize_t size) noexcept nogil:
    """A 32-bit hash of the key bytes under the key ``seed``, against collision floods.

    The slots of the index file hold it (docs/FORMAT.md, "The index
    file"): a change here is a change of that format.
    """
    cdef uint64_t state = seed ^ (<uint64_t>size * 0x9E3779B97F4A7C15ULL)
    cdef uint64_t word
    while size >= 8:
        memcpy(&word, key, 8)
        state = (state ^ word) * 0x9E3779B97F4A7C15ULL
        state ^= state >> 29
        key += 8
        size -= 8
    if size:
        word = 0
        memcpy(&word, key, size)
        state = (state ^ word) * 0x9E3779B97F4A7C15ULL
    return <uint32_t>hash_mix(state)


# --- The table ---

cdef packed struct Slot:
    uint64_t offset   # of the record; 0 marks an empty slot (offset 0 is the header)
    uint32_t hash


cdef struct Table:
    Slot* slots
    const Log* log        # where the records are: the Store's, set once
    size_t capacity       # 0 while there are no slots
    size_t count          # live keys
    uint64_t version      # bumped whenever keys are added or removed, so iterators notice
    # Assignments appended to the log whose index update waits (oldest
    # first, a ring): see index_defer.
    size_t pending_first
    size_t pending_count
    Slot pending[PENDING_LIMIT]


cdef void table_clear(Table* table) noexcept:
    """Drop every key and the slots, pending updates too."""
    free(table.slots)
    table.slots = NULL
    table.capacity = 0
    table.count = 0
    table.pending_count = 0
    table.version += 1


# --- Finding keys ---

cdef inline size_t home_slot(uint32_t hashed, size_t capacity) noexcept nogil:
    """Where the probe for a key of hash ``hashed`` starts in a table of ``capacity`` slots."""
    return <size_t>((<uint64_t>hashed * capacity) >> 32)


cdef inline size_t next_slot(size_t index, size_t capacity) noexcept nogil:
    """The slot a probe visits after ``index``: the next one, the first after the last."""
    index += 1
    return 0 if index == capacity else index


cdef inline void table_prefetch(const Table* table, uint32_t hashed) noexcept nogil:
    """Ask the processor for the slot where the probe for ``hashed`` starts (a table with slots)."""
    semidbm_prefetch(&table.slots[home_slot(hashed, table.capacity)])


cdef inline bint table_holds(const Table* table, size_t index,
                             const char* key, Py_ssize_t size) noexcept nogil:
    """True if the record of slot ``index`` has the key ``key``."""
    cdef const char* found = log_record(table.log, table.slots[index].offset)
    return <Py_ssize_t>load_be32(found) == size and memcmp(found + LENGTHS_SIZE, key, size) == 0


cdef inline Py_ssize_t table_find(const Table* table, const char* key,
                                  Py_ssize_t size, uint32_t hashed) noexcept nogil:
    """The slot holding ``key``; if none, -1 - the empty slot that ended the search.

    Where the key is missing, that empty slot is where ``table_place``
    may put it, as long as the table has room for one more key. A table
    without slots gives -1.
    """
    cdef size_t index
    if table.capacity == 0:
        return -1
    index = home_slot(hashed, table.capacity)
    while table.slots[index].offset != 0:
        if table.slots[index].hash == hashed and table_holds(table, index, key, size):
            return index
        index = next_slot(index, table.capacity)
    return -1 - <Py_ssize_t>index


cdef inline Py_ssize_t table_find_record(const Table* table, uint64_t offset,
                                         uint32_t hashed) noexcept nogil:
    """``table_find`` for the key of the log's record at ``offset`` (whose hash is ``hashed``).

    The record is read only where a slot's hash matches: during the
    rebuild it has left the cache, or was parsed by another thread.
    """
    cdef size_t index
    cdef const char* record
    if table.capacity == 0:
        return -1
    index = home_slot(hashed, table.capacity)
    while table.slots[index].offset != 0:
        if table.slots[index].hash == hashed:
            record = log_record(table.log, offset)
            if table_holds(table, index, record + LENGTHS_SIZE, <int32_t>load_be32(record)):
                return index
        index = next_slot(index, table.capacity)
    return -1 - <Py_ssize_t>index


# --- Adding and removing keys ---

cdef inline void table_place(Table* table, size_t index, uint32_t hashed,
                             uint64_t offset) noexcept nogil:
    """Put a key known to be absent into the empty slot ``index``, the end of its probe."""
    table.slots[index].offset = offset
    table.slots[index].hash = hashed
    table.count += 1
    table.version += 1


cdef int table_insert(Table* table, uint32_t hashed, uint64_t offset) except -1:
    """Add a key known to be absent."""
    cdef size_t index
    table_reserve(table)
    index = home_slot(hashed, table.capacity)
    while table.slots[index].offset != 0:
        index = next_slot(index, table.capacity)
    table_place(table, index, hashed, offset)
    return 0


cdef void table_remove(Table* table, Py_ssize_t slot) noexcept nogil:
    """Empty ``slot``, shifting back the entries after it that probed past it."""
    cdef size_t hole = slot
    cdef size_t index = slot
    cdef size_t home
    while True:
        index = next_slot(index, table.capacity)
        if table.slots[index].offset == 0:
            break
        home = home_slot(table.slots[index].hash, table.capacity)
        # Move the entry into the hole unless its home lies after the
        # hole (cyclically) and at or before its own place.
        if (index > hole and (home <= hole or home > index)) or (
            index < hole and (home <= hole and home > index)
        ):
            table.slots[hole] = table.slots[index]
            hole = index
    table.slots[hole].offset = 0
    table.slots[hole].hash = 0
    table.count -= 1
    table.version += 1


# --- Sizing ---

cdef void touch_pages(void* data, size_t size) noexcept nogil:
    """Write a zero to each page of the zeroed memory ``data``, so that it is mapped writable now.

    A fresh page that is read first is mapped to the system's shared page
    of zeros and copied at its first write; the copy makes every other
    processor running this process (the index rebuild's parsing thread)
    drop its address translations, an interrupt for each page. A table's
    slots are read before they are written.
    """
    cdef volatile char* bytes = <volatile char*>data
    cdef size_t at = 0
    while at < size:
        bytes[at] = 0
        at += PAGE_SIZE


ctypedef fused KeyCount:
    size_t  # keys counted
    double  # keys the index rebuild expects (``projected_keys``)


cdef inline bint table_fits(KeyCount keys, size_t capacity) noexcept nogil:
    """Whether ``keys`` keys fill at most three quarters of ``capacity`` slots.

    The private table's rule, so that probes stay short: it grows past
    it. (An index file's table is sized by ``_index_file.capacity_for``.)
    """
    return keys * 4 <= capacity * 3


cdef inline bint table_has_room(const Table* table, size_t waiting) noexcept nogil:
    """Whether the table fits one more key besides ``waiting`` others (``table_fits``)."""
    return table_fits(table.count + waiting + 1, table.capacity)


cdef size_t table_capacity_for(size_t capacity, double keys) noexcept nogil:
    """``capacity`` doubled until it fits ``keys`` keys (``table_fits``)."""
    while not table_fits(keys, capacity):
        capacity *= 2
    return capacity


cdef bint table_resize(Table* table, size_t capacity) noexcept nogil:
    """Move the keys to new slots, ``capacity`` of them (room for them all).

    False, and the table left as it was, if the memory cannot be had. A
    large table asks for huge pages, since its lookups land anywhere in it.
    """
    cdef size_t old
    cdef Slot* slots = <Slot*>calloc(capacity, sizeof(Slot))
    if slots == NULL:
        return False
    semidbm_advise_huge(slots, capacity * sizeof(Slot))
    touch_pages(slots, capacity * sizeof(Slot))
    for old in range(table.capacity):
        if table.slots[old].offset != 0:
            slots_place(slots, capacity, table.slots[old])
    free(table.slots)
    table.slots = slots
    table.capacity = capacity
    table.version += 1
    return True


cdef inline void slots_place(Slot* slots, size_t capacity, Slot entry) noexcept nogil:
    """Put ``entry``, a key not among ``slots``, at the end of its probe (with room left)."""
    cdef size_t index = home_slot(entry.hash, capacity)
    while slots[index].offset != 0:
        index = next_slot(index, capacity)
    slots[index] = entry


cdef int table_grow(Table* table, double keys) except -1:
    """Move the keys to a table at least twice as large, with room for ``keys`` keys.

    MemoryError if the memory cannot be had.
    """
    cdef size_t capacity = table_capacity_for(
        table.capacity * 2 if table.capacity else MIN_CAPACITY, keys)
    if not table_resize(table, capacity):
        raise MemoryError("cannot grow the semidbm index to %d slots" % capacity)
    return 0


cdef int table_reserve(Table* table) except -1:
    """Make room for one more key besides the pending ones (``table_has_room``)."""
    if table_has_room(table, table.pending_count):
        return 0
    return table_grow(table, table.count + table.pending_count + 1)


cdef void table_fit(Table* table) noexcept nogil:
    """Shrink the table to the capacity that adding its keys one at a time gives.

    That is the smallest power of two (at least ``MIN_CAPACITY``) that
    fits them (``table_fits``): at most 32 bytes of slots per key. Only
    an index rebuild that expected more keys than the log holds (see
    ``projected_keys``) or a log that deleted many of its keys
    leaves a larger table. Without the memory for the smaller table
    the larger one stays: it works as well.
    """
    cdef size_t capacity
    if table.capacity <= MIN_CAPACITY:
        return
    capacity = table_capacity_for(MIN_CAPACITY, table.count)
    if capacity < table.capacity:
        table_resize(table, capacity)
