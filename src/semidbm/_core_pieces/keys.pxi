# How a Store finds its keys (included by _core.pyx): the index file,
# mapped and checked (docs/FORMAT.md, "Trusting an index file"), the private
# table for the log past it, dropping an index file that fails a check,
# switching to a newer one on a reader's refresh, and writing a new one.
# The structures and lookups are index.pxi's; these functions are the
# Store's use of them, kept out of the class.


cdef uint64_t keys_replay_log(Store store, uint64_t size) except? 0:
    """Replay the mapped log from where the keys end (index file's end, or header) to ``size``.

    Returns where the replay stopped. A mapped index file that proves
    damaged, or under which the log past it is corrupt, is dropped,
    and the log replayed whole.
    """
    cdef uint64_t end
    try:
        end = replay(&store.index, store.log.map, 0,
                     store.index.base.covered or HEADER_SIZE, size, store.path)
    except DBMLoadError:
        if store.index.base.map == NULL:
            raise
        end = 0
    if end == 0:
        keys_forget(store)
        end = replay(&store.index, store.log.map, 0, HEADER_SIZE, size, store.path)
    return end


cdef void keys_forget(Store store) noexcept:
    """Drop every key: no mapped index file, an empty private table."""
    table_clear(&store.index.table)
    base_clear(&store.index.base)
    store.index_identity = None
    store.index_written = 0


cdef int keys_attach(Store store, IndexHeader* header, object identity) except -1:
    """Map the trusted index file that ``header`` describes, open as ``header.fd``
    (``index_file_load``, which gave its ``identity``), and close ``header.fd``.

    Without one (``identity`` None), or one that cannot be mapped (no
    room, or larger than this machine's addresses reach), there is no
    base, and the key hash gets a new seed, which the next index file
    keeps. The caller has forgotten the keys (``keys_forget``).
    """
    cdef const char* mapped
    cdef int error = 0
    cdef size_t size
    cdef Base* base = &store.index.base
    if identity is None:
        store.index.seed = random_seed()
        return 0
    if index_file_size(header.capacity) > <uint64_t>PY_SSIZE_T_MAX:
        semidbm_close(header.fd)
        store.index.seed = random_seed()
        return 0
    size = index_file_size(header.capacity)
    try:
        mapped = semidbm_map(header.fd, size, &error)
    finally:
        semidbm_close(header.fd)
    if mapped == NULL:  # no room to map it: do without
        store.index.seed = random_seed()
        return 0
    base.verified = <uint8_t*>calloc(index_blocks(header.capacity) or 1, 1)
    if base.verified == NULL:
        semidbm_unmap(mapped, size)
        raise MemoryError("cannot allocate the index's checks")
    base.map = mapped
    base.map_size = size
    base.table.slots = <Slot*>(mapped + INDEX_HEADER_SIZE)
    base.table.capacity = header.capacity
    base.table.count = header.keys
    base.checksums = mapped + INDEX_HEADER_SIZE + sizeof(Slot) * <size_t>header.capacity
    base.covered = header.covered
    base.seed = header.seed
    store.index.seed = header.seed
    store.index.table.version += 1
    store.index_identity = identity
    store.index_written = header.covered
    return 0


cdef int keys_drop(Store store) except -1:
    """Do without the mapped index file: replay the log whole, the unwritten buffer too.

    Called when a check of the index file fails (docs/FORMAT.md,
    "Trusting an index file"); the pending updates are records of the
    buffer, so its replay applies them. The next index file written
    covers everything again.
    """
    cdef uint64_t end
    keys_forget(store)  # which also tells iterators (the table's version)
    store.index.table.pending_count = 0
    end = replay(&store.index, store.log.map, 0, HEADER_SIZE, store.log.disk_end, store.path)
    if end != store.log.disk_end:
        raise DBMError(CHANGED_UNDER % (store.path, end))
    if store.buffer_used:
        replay(&store.index, store.log.buffer, store.log.disk_end, store.log.disk_end,
               store.log.disk_end + store.buffer_used, store.path)
    table_reserve(&store.index.table)  # what the operation under way had reserved
    return 0


cdef int keys_apply_pending(Store store) except -1:
    """Apply every pending update, oldest first (dropping the index file if it proves damaged)."""
    while store.index.table.pending_count:
        if index_apply_oldest(&store.index) == DAMAGED:
            keys_drop(store)
    return 0


cdef Py_ssize_t keys_find(Store store, const char* key, Py_ssize_t size, uint32_t hashed,
                          uint64_t* offset) except -2:
    """Where the key's last record is: 1 and ``offset`` set, or 0 if it is not live.

    The private table first, then the mapped index file (dropped if a
    check fails: the private table then holds every key).
    """
    cdef Py_ssize_t found = keys_find_kept(store, key, size, hashed, offset)
    if found == DAMAGED:
        keys_drop(store)
        return keys_find(store, key, size, hashed, offset)
    return found


cdef inline Py_ssize_t keys_find_kept(Store store, const char* key, Py_ssize_t size,
                                      uint32_t hashed, uint64_t* offset) noexcept nogil:
    """``keys_find`` that never drops the mapped index file: DAMAGED where a check fails.

    For the compaction, which judges the log by the index it holds: a
    slot whose record no longer reads as its key is a damaged record
    there, and dropping the index file would rebuild the keys from the
    damaged log (bringing dead values back, losing the records after it).
    """
    cdef Py_ssize_t slot = table_find(&store.index.table, key, size, hashed)
    if slot >= 0:
        offset[0] = store.index.table.slots[slot].offset
        return 1
    if store.index.base.table.capacity:
        return keys_find_in_base_kept(store, key, size, hashed, offset)
    return 0


cdef inline Py_ssize_t keys_find_in_base_kept(Store store, const char* key, Py_ssize_t size,
                                              uint32_t hashed, uint64_t* offset) noexcept nogil:
    """The mapped index file's part of ``keys_find_kept``: 1, 0 or DAMAGED."""
    cdef int32_t value_size
    cdef Py_ssize_t slot = base_find(&store.index.base, key, size, hashed, offset, &value_size)
    if slot >= 0:
        return not base_is_shadowed(&store.index.base, slot)
    return DAMAGED if slot == DAMAGED else 0


cdef Py_ssize_t keys_find_in_base(Store store, const char* key, Py_ssize_t size,
                                  uint32_t hashed, uint64_t* offset) except -2:
    """``keys_find`` for a key the private table does not hold."""
    cdef Py_ssize_t found = keys_find_in_base_kept(store, key, size, hashed, offset)
    if found == DAMAGED:
        keys_drop(store)
        return keys_find(store, key, size, hashed, offset)
    return found


cdef int keys_verify(Store store) except -1:
    """Check every block of the mapped index file now (dropping it if one fails).

    Before a pass over the whole table: iteration, a compaction, a new
    index file.
    """
    if store.index.base.table.capacity and not base_verify_all(&store.index.base):
        keys_drop(store)
    return 0


cdef int keys_write(Store store, uint64_t checkpoint, object data_durable=None) except -1:
    """Write an index file for the whole log, which the caller has flushed.

    The index file names the checkpoint at offset ``checkpoint``, which the
    caller wrote after every other byte of the log (docs/FORMAT.md,
    "Checkpoints"). The data file is fsynced already, or
    ``data_durable()`` waits for that (see ``_index_file.install``). Failure
    to write it is not an error (docs/FORMAT.md, "Writing an index file"):
    the old file stays, or none.
    """
    cdef size_t capacity
    cdef Slot* slots
    cdef uint64_t live
    cdef int merged
    if sys.byteorder != "little":
        return 0
    keys_verify(store)
    live = index_live(&store.index)
    capacity = _index_file.capacity_for(live)
    slots = <Slot*>calloc(capacity, sizeof(Slot))
    if slots == NULL:
        return 0
    try:
        merged = index_merge(&store.index, slots, capacity)
        if merged == DAMAGED:
            keys_drop(store)  # then no base: the next try cannot meet it
            return keys_write(store, checkpoint, data_durable)
        if merged == OVERFULL:  # more keys than counted: write no index file rather than loop
            return 0
        try:
            header = _index_file.encode_header(store.index.seed, store.log.disk_end, live,
                                               capacity, store.fd, checkpoint)
        except OSError:
            return 0
        if header is None:  # no checkpoint there: the caller's mistake, but only a cache's
            return 0
        body = IndexFileBody()
        body.slots = slots
        body.capacity = capacity
        if _index_file.install(store.directory, store.fd, header, body, data_durable):
            store.index_written = store.log.disk_end
    finally:
        free(slots)
    return 0


cdef uint64_t keys_next_live(Store store, size_t* position, bint check=True) except? 0:
    """The record of the next live key at or after ``position``, which is moved past it.

    Positions run over the mapped slots (those not marked), then the
    private slots. 0 at the end, and also if a mapped slot fails its
    check: the index file is then dropped, which the table's version shows.
    Without ``check``, a mapped slot is returned unchecked: the caller
    must check it (``base_slot_sound`` on slot ``position - 1``) before
    it reads its record, as ``sort_gather_keys`` does.
    """
    cdef Index* index = &store.index
    cdef size_t at
    cdef uint64_t offset
    while position[0] < index.base.table.capacity:
        at = position[0]
        position[0] += 1
        offset = index.base.table.slots[at].offset
        if offset == 0 or base_is_shadowed(&index.base, at):
            continue
        if check and not base_slot_sound(&index.base, at):
            keys_drop(store)
            return 0
        return offset
    while position[0] - index.base.table.capacity < index.table.capacity:
        at = position[0] - index.base.table.capacity
        position[0] += 1
        offset = index.table.slots[at].offset
        if offset != 0:
            return offset
    return 0


cdef inline const Slot* keys_slot(Store store, size_t position) noexcept nogil:
    """The slot at ``position`` as ``keys_next_live`` counts them (mapped, then private)."""
    if position < store.index.base.table.capacity:
        return &store.index.base.table.slots[position]
    return &store.index.table.slots[position - store.index.base.table.capacity]


cdef int keys_switch(Store store, uint64_t size) except -1:
    """A reader's refresh: map the index file a writer has installed since, if it is newer.

    The new index file must pass the checks for the data file as it is now
    (``size`` bytes) and cover more than the mapped one; the private
    table then starts again from its end. Records the reader had read
    are complete, so they are replayed through the mapping.
    """
    cdef uint64_t end = store.log.disk_end
    cdef IndexHeader header
    identity = _index_file.identity(store.directory)
    if identity is None or identity == store.index_identity:
        return 0
    trusted = index_file_load(store, size, False, &header)
    if trusted is None or header.covered <= store.index.base.covered:
        if trusted is not None:
            semidbm_close(header.fd)
        store.index_identity = identity  # not worth a look again until it changes
        return 0
    keys_forget(store)
    keys_attach(store, &header, trusted)
    if store.index.base.covered > end:
        store.map_file(store.index.base.covered)
        end = store.index.base.covered
    store.log.disk_end = end
    store.log.disk_end = keys_replay_log(store, end)
    return 0


cdef int keys_check_unchanged(Store store, uint64_t version) except -1:
    """Raise if ``store`` was closed, or its keys changed, since ``version`` of its table.

    Each step of an iteration over the keys (``KeyIterator``, ``SortedLines``)
    checks this first: offsets into a log a compaction replaced are never read.
    """
    if store.busy:
        store.check_open()
    if store.fd < 0:
        raise DBMError(_messages.CLOSED_DURING_ITERATION % store.path)
    if store.index.table.pending_count:
        keys_apply_pending(store)
    if store.index.table.version != version:
        raise RuntimeError(CHANGED_DURING_ITERATION % store.path)
    return 0
