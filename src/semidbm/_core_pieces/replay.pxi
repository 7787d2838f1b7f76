# The index rebuild of the compiled kernel (included by _core.pyx): the
# log's records, parsed in blocks (LogParser, parse_block), are applied
# to an Index (replay). With another processor free, a long log is parsed
# in a second thread (pure C, no Python) that hands its blocks over
# through a ring (ParseRing) while this one updates the table; the result
# is the same as parsing in one. Every length read from the log is
# checked before use: a damaged file raises DBMLoadError, never reads out
# of bounds. Checksums are read only where a power cut may have left
# zeros (``lost_data``, ``sound_record``), as ``_records.walk`` does, and
# a batch record's always: its records count only if its checksum matches.
# An expiry record (format 2.1, in a batch, after its put) is stepped over:
# reads find it after the put (``log_expiry``); the parse notes that one exists.

cdef enum:
    # Records the index rebuild parses at a time (a block).
    REPLAY_BLOCK = 256
    # Blocks the parsing thread of the index rebuild may be ahead of its updates.
    REPLAY_RING = 64
    # Bytes of the log the index rebuild asks the processor for ahead of its parsing.
    REPLAY_PREFETCH = 2048
    # Bytes in a processor's cache line (the usual size).
    CACHE_LINE = 64
    # Records whose slot the index rebuild asks the processor for ahead of their update.
    SLOT_PREFETCH = 16
    # Nanoseconds the index rebuild waits for a block from its parsing
    # thread before it parses the rest itself.
    REPLAY_PATIENCE = 1000000
    # ParseRing.started: the parsing thread has not started yet, has
    # started, or will find on starting that the rebuild is over.
    NOT_STARTED = 0
    STARTED = 1
    ABANDONED = 2
    # Pauses a waiting thread of the index rebuild spins before it yields the processor.
    SPINS = 64
    # Logs at least this long are parsed in a thread of their own during the index rebuild.
    THREADED_REPLAY_MIN = 1 << 22
    # The index rebuild sizes its table from the log's size once it has
    # read this fraction of the log (one part in so many).
    PROJECTION_SAMPLE = 16


# --- Parsing the log ---

cdef struct Parsed:
    uint64_t offset
    uint32_t hash
    bint deleted


cdef struct LogParser:
    # Where a parse of the mapped log stands. Parsing reads the mapping
    # and writes here and to its blocks, nothing else: a thread of its
    # own can run it.
    # Positions count from map[0], which is the file's offset base.
    const char* map       # the log from offset base on
    uint64_t base
    uint64_t seed         # of the key hash
    uint64_t position     # of the next record, from map[0]
    uint64_t size         # where the log ends, from map[0]
    uint64_t ahead        # the log is prefetched up to here
    uint64_t followed     # empty records before here are followed by a sound record
    bint batches          # the log may hold batch records (format 2)
    bint expirable        # their bodies may hold expiry records (format 2.1)
    bint expiring         # the parse stepped over an expiry record
    bint mapped           # map is the file's mapping, not a copy: checks let go of its pages
    uint64_t batch_end    # records before here are in a batch whose checksum matched
    bint corrupt          # stopped at a record with impossible lengths (at position):
    int32_t key_size      # its lengths
    int32_t value_size


cdef uint64_t first_non_zero(const char* data, uint64_t start, uint64_t end) noexcept nogil:
    """Where the first byte other than zero lies from ``start`` on (``end`` if none)."""
    cdef uint64_t word
    while start < end and (start & 7):
        if data[start]:
            return start
        start += 1
    while end - start >= 8:
        memcpy(&word, data + start, 8)
        if word:
            break
        start += 8
    while start < end and not data[start]:
        start += 1
    return start


cdef uint64_t zero_run_end(const char* data, uint64_t position, uint64_t size) noexcept nogil:
    """Where the run of empty records (twelve zero bytes each) from ``position`` ends."""
    cdef uint64_t stop = first_non_zero(data, position, size)
    return position + (stop - position) // RECORD_OVERHEAD * RECORD_OVERHEAD


cdef bint checksum_matches(const char* data, uint64_t position, int32_t key_size,
                           uint64_t record_end) noexcept nogil:
    """Whether the complete record at ``position`` ends in the CRC-32 of its key and value."""
    return crc32(0, data + position + LENGTHS_SIZE,
                 record_end - position - RECORD_OVERHEAD) == load_be32(data + record_end - 4)


cdef bint mapped_checksum_matches(const char* data, uint64_t position,
                                  uint64_t record_end) noexcept nogil:
    """``checksum_matches`` for a record in the data file's mapping (never a copy).

    As ``_records.checksum_matches``: read ``CHECK_CHUNK`` bytes at a
    time, each chunk's whole pages let go once read (``semidbm_release``),
    so that a value of gigabytes does not stay resident.
    """
    cdef uint64_t start = position + LENGTHS_SIZE
    cdef uint64_t end = record_end - 4
    cdef uint64_t stop
    cdef uint32_t found = 0
    while True:
        stop = end if end - start <= CHECK_CHUNK else start + CHECK_CHUNK
        found = crc32(found, data + start, stop - start)
        semidbm_release(data + start, stop - start)
        start = stop
        if start == end:
            return found == load_be32(data + end)


cdef void parser_start(LogParser* parser, const char* data, uint64_t base, uint64_t seed,
                       uint64_t position, uint64_t size, bint batches, bint expirable,
                       bint mapped) noexcept nogil:
    """Set ``parser`` to parse ``data`` (the file from offset ``base``) from ``position`` to
    ``size``, offsets of the file; ``batches``: the file is of format 2; ``expirable``: of
    2.1; ``mapped``: ``data`` is the data file's mapping (``semidbm_map``), whose pages a
    check may let go of."""
    parser.map = data
    parser.mapped = mapped
    parser.base = base
    parser.seed = seed
    parser.position = position - base
    parser.size = size - base
    parser.ahead = position - base
    parser.followed = position - base
    parser.batches = batches
    parser.expirable = expirable
    parser.expiring = False
    parser.batch_end = position - base
    parser.corrupt = False


cdef bint whole_batch(const char* data, uint64_t position, int32_t body_size,
                      uint64_t size) noexcept nogil:
    """True if the batch record at ``position`` ends by ``size`` and its body's checksum matches.

    As ``_records.whole_batch``: the body follows the lengths and its
    CRC-32 (docs/FORMAT.md, "Batches").
    """
    if body_size <= 0 or size - position < RECORD_OVERHEAD or (
        <uint64_t>body_size > size - position - RECORD_OVERHEAD
    ):
        return False
    return crc32(0, data + position + RECORD_OVERHEAD, <size_t>body_size) == load_be32(
        data + position + LENGTHS_SIZE)


cdef bint parser_batch_fits(const char* data, uint64_t position, uint64_t end,
                            bint expirable) noexcept nogil:
    """True if the bytes from ``position`` to ``end`` are sound records back to back, none a batch.

    A batch's body, checked once before its records are parsed, so that
    they need no check of their own: their lengths are possible, none
    crosses the body's end, and each one's checksum matches, so that a
    compaction that copies them out of the batch copies sound records
    (outside a batch, a record with zeros and a failing checksum would
    read as lost data). An expiry record is one only with ``expirable``
    (format 2.1) and right after a put of its key (``_records._batch_fits``).
    """
    cdef int32_t key_size, value_size
    cdef uint64_t record_size
    cdef uint64_t put = end  # where the record before starts, if it was a put
    while end - position >= LENGTHS_SIZE:
        key_size = <int32_t>load_be32(data + position)
        value_size = <int32_t>load_be32(data + position + 4)
        if key_size < 0 or value_size < EXPIRES or value_size == BATCH:
            return False
        record_size = RECORD_OVERHEAD + <uint64_t>key_size
        if value_size > 0:
            record_size += <uint64_t>value_size
        elif value_size == EXPIRES:
            record_size += EXPIRY_TIME_SIZE
        if record_size > end - position:
            return False
        if not checksum_matches(data, position, key_size, position + record_size):
            return False
        if value_size == EXPIRES and not (
            expirable and put != end and <int32_t>load_be32(data + put) == key_size
            and memcmp(data + put + LENGTHS_SIZE, data + position + LENGTHS_SIZE,
                       <size_t>key_size) == 0
        ):
            return False
        put = position if value_size >= 0 else end
        position += record_size
    return position == end


cdef bint sound_record(const char* data, uint64_t position, uint64_t size,
                       bint batches) noexcept nogil:
    """True if a whole record, of possible lengths and matching checksum, is at ``position``.

    With ``batches`` (format 2), a whole batch record (``whole_batch``) is one too.
    """
    cdef int32_t key_size, value_size
    cdef uint64_t record_end
    if size - position < LENGTHS_SIZE:
        return False
    key_size = <int32_t>load_be32(data + position)
    value_size = <int32_t>load_be32(data + position + 4)
    if batches and value_size == BATCH:
        return whole_batch(data, position, key_size, size)
    if key_size < 0 or value_size < DELETED:
        return False
    record_end = position + RECORD_OVERHEAD + <uint64_t>key_size
    if value_size != DELETED:
        record_end += <uint64_t>value_size
    return record_end <= size and checksum_matches(data, position, key_size, record_end)


cdef uint64_t sound_live_size(const char* data, uint64_t position, int32_t key_size,
                              int32_t value_size, uint64_t end, bint batches,
                              bint in_batch) noexcept nogil:
    """The size of the put at ``position`` (lengths as read, key within ``end``) if its own
    bytes are sound, else 0: the compaction's judge of a live record (``_records.sound_live``).

    Sound is within ``end`` with a matching CRC-32; for the empty record
    (twelve zero bytes, whose CRC-32 of nothing always matches), also a
    run of them followed by a sound record, as the replay reads zero runs
    (docs/FORMAT.md, "Zero runs"): zeros a lost page or sector left over
    a record's lengths read as one, and the log never ends in one. But
    not ``in_batch`` (inside a batch whose body's checksum matches), where
    the replay reads no zero run either: a batch may end in the empty
    record, and the log in that batch.
    """
    cdef uint64_t size
    if value_size < 0:
        return 0
    size = RECORD_OVERHEAD + <uint64_t>key_size + <uint64_t>value_size
    if size > end - position or not checksum_matches(data, position, key_size,
                                                     position + size):
        return 0
    # Checked, twelve bytes are zeros: the CRC-32 of nothing is 0.
    if size == RECORD_OVERHEAD and not in_batch and not sound_record(
        data, zero_run_end(data, position, end), end, batches
    ):
        return 0
    return size


cdef bint lost_data(const char* data, uint64_t base, uint64_t position, int32_t key_size,
                    uint64_t record_end, bint mapped) noexcept nogil:
    """True if the record at ``position`` holds zeros a power cut left, by its checksum.

    As ``_records._lost_data``: the checksum is read when the record's
    last byte is zero or a page boundary inside it has a zero byte on
    either side, and must fail. Pages count from the start of the file
    (``data`` holds it from offset ``base`` on). In the file's mapping
    (``mapped``), the check of a record longer than ``CHECK_CHUNK`` lets
    go of the pages it reads.
    """
    cdef bint suspect = data[record_end - 1] == 0
    # The first boundary after the record's first byte, in the file's offsets, then in data's.
    cdef uint64_t boundary = (base + position + DISK_PAGE) // DISK_PAGE * DISK_PAGE - base
    while not suspect and boundary < record_end:
        suspect = data[boundary - 1] == 0 or data[boundary] == 0
        boundary += DISK_PAGE
    if not suspect:
        return False
    if mapped and record_end - position > CHECK_CHUNK:
        return not mapped_checksum_matches(data, position, record_end)
    return not checksum_matches(data, position, key_size, record_end)


cdef inline void stop_at_corrupt(LogParser* parser, int32_t key_size,
                                 int32_t value_size) noexcept nogil:
    """Mark the parse as stopped at a corrupt record, of these lengths (at ``position``)."""
    parser.corrupt = True
    parser.key_size = key_size
    parser.value_size = value_size


cdef size_t parse_block(LogParser* parser, Parsed* block) noexcept nogil:
    """Parse up to ``REPLAY_BLOCK`` records into ``block``; return how many.

    Fewer than ``REPLAY_BLOCK`` means the parse is over: ``position`` is
    then the log's size, the start of an incomplete last record, that of
    a corrupt record (``corrupt`` set), or where a power cut left zeros
    (docs/FORMAT.md, "Zero runs" and "Lost pages": a run of empty records
    no sound record follows, a record holding zeros the disk did not
    write), as in ``_records.walk``. A batch record (``parser.batches``)
    yields its body's records once its checksum matches, and is where the
    parse stops if it does not; one whose body is not sound records back
    to back (``parser_batch_fits``) is corrupt. Every length is checked before use.
    The log is a stream, but the processor's own prefetching stops at
    each page, so the next ``REPLAY_PREFETCH`` bytes are requested ahead
    of the parsing.
    """
    cdef const char* data = parser.map
    cdef uint64_t base = parser.base
    cdef uint64_t position = parser.position
    cdef uint64_t size = parser.size
    cdef uint64_t ahead = parser.ahead
    cdef uint64_t batch_end = parser.batch_end
    cdef uint64_t record_end
    cdef int32_t key_size, value_size
    cdef size_t parsed = 0
    while parsed < REPLAY_BLOCK and size - position >= LENGTHS_SIZE:
        if ahead < position:
            ahead = position
        while ahead < size and ahead - position < REPLAY_PREFETCH:
            semidbm_prefetch(data + ahead)
            ahead += CACHE_LINE
        key_size = <int32_t>load_be32(data + position)
        value_size = <int32_t>load_be32(data + position + 4)
        if value_size == BATCH and parser.batches and position >= batch_end and (
            key_size > 0
        ):
            if not whole_batch(data, position, key_size, size):
                break  # running past the end, or lost data
            if not parser_batch_fits(data, position + RECORD_OVERHEAD,
                                     position + RECORD_OVERHEAD + <uint64_t>key_size,
                                     parser.expirable):
                stop_at_corrupt(parser, key_size, value_size)
                break
            position += RECORD_OVERHEAD
            batch_end = position + <uint64_t>key_size
            continue
        if key_size < 0 or value_size < DELETED:
            if value_size == EXPIRES and position < batch_end:
                # An expiry record, in a body that parser_batch_fits checked.
                parser.expiring = True
                position += EXPIRY_OVERHEAD + <uint64_t>key_size
                continue
            stop_at_corrupt(parser, key_size, value_size)
            break
        record_end = position + RECORD_OVERHEAD + <uint64_t>key_size
        if value_size != DELETED:
            record_end += <uint64_t>value_size
        # A batch's records are whole and sound (whole_batch, parser_batch_fits).
        if position >= batch_end and record_end > size:
            break
        if position >= batch_end and position >= parser.followed and (
            data[record_end - 1] == 0
            or (base + position) // DISK_PAGE != (base + record_end - 1) // DISK_PAGE
        ):
            if record_end - position == RECORD_OVERHEAD and (
                first_non_zero(data, position, record_end) == record_end
            ):
                parser.followed = zero_run_end(data, position, size)
                if not sound_record(data, parser.followed, size, parser.batches):
                    break
            elif lost_data(data, base, position, key_size, record_end, parser.mapped):
                break
        block[parsed].offset = base + position
        block[parsed].hash = hash_key(parser.seed, data + position + LENGTHS_SIZE, key_size)
        block[parsed].deleted = value_size == DELETED
        parsed += 1
        position = record_end
    parser.position = position
    parser.ahead = ahead
    parser.batch_end = batch_end
    return parsed


# --- The parsing thread ---

cdef struct ParseRing:
    # A parsing thread and the index rebuild, sharing blocks of records.
    # The rebuild parses the first blocks itself, until the thread has
    # started (``started``); it then hands its parser over (``parser``,
    # then ``handed_over``). Block n goes in blocks[n % REPLAY_RING], with
    # the parser as it was after it in states[n % REPLAY_RING]. The thread
    # writes a block, then counts it in ``parsed``; the rebuild applies
    # it, then counts it in ``applied``, and the thread may reuse its place.
    LogParser parser
    Parsed blocks[REPLAY_RING * REPLAY_BLOCK]
    size_t sizes[REPLAY_RING]
    LogParser states[REPLAY_RING]
    uint64_t started
    uint64_t handed_over
    uint64_t parsed
    uint64_t applied
    uint64_t stop                   # the rebuild asks the thread to stop
    uint64_t finished               # the thread has stopped and lets go of the ring


cdef bint several_processors():
    """True if this process may run on more than one processor."""
    try:
        return len(os.sched_getaffinity(0)) > 1
    except AttributeError:  # no sched_getaffinity: not Linux
        return (os.cpu_count() or 1) > 1


# Whether a long log is parsed in a thread of its own during the index rebuild.
cdef bint threaded_replay = several_processors()


cdef ParseRing* replay_start_parsing() noexcept:
    """Start a parsing thread with a new ring; NULL if none can be had."""
    cdef ParseRing* ring = <ParseRing*>malloc(sizeof(ParseRing))
    if ring == NULL:
        return NULL
    ring.started = NOT_STARTED
    ring.handed_over = False
    ring.parsed = 0
    ring.applied = 0
    ring.stop = False
    ring.finished = False
    if PyThread_start_new_thread(parse_in_thread, ring) == PYTHREAD_INVALID_THREAD_ID:
        free(ring)
        return NULL
    return ring


cdef inline void replay_pause(int* spins) noexcept nogil:
    """One step of a wait for the other thread: spin a little, then give the processor away."""
    if spins[0] < SPINS:
        spins[0] += 1
        semidbm_pause()
    else:
        semidbm_yield()


# A helper thread's hand-over of the work its owner shares with it (ParseRing
# here, SortShare in sorted.pxi): the thread may start late, after the owner is
# done. Whichever of the two comes second to ``started`` frees the work.

cdef bint replay_helper_starts(volatile uint64_t* started) noexcept nogil:
    """The helper thread's first step: False if its owner gave up on it before it started.

    Then the helper frees the work and returns at once. Otherwise it does
    its part and, last, sets the work's ``finished``.
    """
    return semidbm_exchange(started, STARTED) != ABANDONED


cdef bint replay_owner_abandons(volatile uint64_t* started) noexcept nogil:
    """The owner's last step: True if the helper has started, False if it will free the work.

    After True, the owner waits for the helper (``replay_wait_until_finished``)
    and frees the work.
    """
    return semidbm_exchange(started, ABANDONED) != NOT_STARTED


cdef void replay_wait_until_finished(volatile uint64_t* finished) noexcept nogil:
    """Wait for the helper thread to set ``finished``, its last touch of the shared work."""
    cdef int spins = 0
    while not semidbm_load_acquire(finished):
        replay_pause(&spins)


cdef void parse_in_thread(void* argument) noexcept nogil:
    """The body of the parsing thread: take over the parser, fill the ring block by block.

    Goes on until the parse is over or the rebuild asks it to ``stop``.
    Once it has set ``finished`` it touches the ring and the log no more.
    If the rebuild was over before the thread started, the thread frees
    the ring instead.
    """
    cdef ParseRing* ring = <ParseRing*>argument
    cdef uint64_t block = 0
    cdef size_t parsed = REPLAY_BLOCK
    cdef int spins = 0
    if not replay_helper_starts(&ring.started):
        free(ring)
        return
    while not semidbm_load_acquire(&ring.handed_over) and not semidbm_load_acquire(&ring.stop):
        replay_pause(&spins)
    while parsed == REPLAY_BLOCK and not semidbm_load_acquire(&ring.stop):
        if block - semidbm_load_acquire(&ring.applied) == REPLAY_RING:
            # The ring is full: the rebuild is busy (growing the table, say).
            replay_pause(&spins)
            continue
        spins = 0
        parsed = parse_block(&ring.parser, ring.blocks + (block % REPLAY_RING) * REPLAY_BLOCK)
        ring.sizes[block % REPLAY_RING] = parsed
        ring.states[block % REPLAY_RING] = ring.parser
        block += 1
        semidbm_store_release(&ring.parsed, block)
    semidbm_store_release(&ring.finished, True)


cdef bint replay_wait_for_block(ParseRing* ring, uint64_t block) noexcept nogil:
    """Wait until the thread has parsed ``block``; False if that takes ``REPLAY_PATIENCE``.

    A block takes microseconds. Past a short spin the wait yields the
    processor, which the thread may be waiting for: a new thread often
    starts on its parent's processor, until the system moves it to an
    idle one. A wait longer than the patience means that the thread
    has no processor (the machine is busy), and is not waited out.
    """
    cdef int64_t deadline = 0
    cdef int spins = 0
    while semidbm_load_acquire(&ring.parsed) == block:
        if spins < SPINS:
            spins += 1
            semidbm_pause()
        elif deadline == 0:
            deadline = semidbm_clock_ns() + REPLAY_PATIENCE
        elif semidbm_clock_ns() > deadline:
            return False
        else:
            semidbm_yield()
    return True


cdef void replay_stop_parsing(ParseRing* ring) noexcept nogil:
    """End the parsing thread's part: stop it and free the ring.

    If the thread has not started yet, it frees the ring when it does.
    """
    if not replay_owner_abandons(&ring.started):
        return
    semidbm_store_release(&ring.stop, True)
    replay_wait_until_finished(&ring.finished)
    free(ring)


# --- Applying the records to the table ---

cdef uint64_t replay(Index* index, const char* data, uint64_t base,
                     uint64_t position, uint64_t size, object path) except? 0:
    """Apply the log's records from ``position`` to ``size`` to ``index``.

    ``data`` holds the file from offset ``base`` to ``size``: the
    mapping (``base`` 0), or a copy. Returns where parsing stopped:
    ``size``, or the start of an incomplete last record; a corrupt
    record raises DBMLoadError (naming ``path``); 0 means that the
    mapped index file proved damaged (the private table is then part-way:
    the caller drops the index file and replays the log whole). Keys are
    compared through the table's Log: the mapping or, during a refresh,
    the copy standing in for the buffer.
    Records are parsed in blocks (``parse_block``), then applied
    (``replay_apply_block``). Parsing waits on the log's memory and the
    updates on the table's, about as long each: when this process
    may use another processor, a long log is parsed in a thread of
    its own, blocks ahead of the updates (``replay_apply_parsed``): here
    until it has started, there until the end, or until it falls
    behind. The table ends at the size that adding its keys one by
    one gives (see ``table_fit``).
    """
    cdef LogParser parser
    cdef Parsed block[REPLAY_BLOCK]
    cdef size_t parsed = REPLAY_BLOCK
    cdef ParseRing* ring = NULL
    cdef bint handed_over = False
    cdef Table* table = &index.table
    parser_start(&parser, data, base, index.seed, position, size, table.log.batches,
                 table.log.expirable, data == table.log.map)
    if threaded_replay and size - position >= THREADED_REPLAY_MIN:
        ring = replay_start_parsing()
    try:
        while parsed == REPLAY_BLOCK:
            if ring != NULL and not handed_over and semidbm_load_acquire(&ring.started):
                ring.parser = parser
                semidbm_store_release(&ring.handed_over, True)
                handed_over = True
                parsed = replay_apply_parsed(index, ring, &parser)
            else:
                parsed = parse_block(&parser, block)
                if replay_apply_block(index, block, parsed, size) == DAMAGED:
                    return 0
    finally:
        if ring != NULL:
            replay_stop_parsing(ring)
    if parsed == <size_t>DAMAGED:
        return 0
    if parser.corrupt:
        raise DBMLoadError(
            _messages.CORRUPT_RECORD
            % (path, base + parser.position, parser.key_size, parser.value_size)
        )
    table_fit(table)
    if parser.expiring:
        # The one field of the Store's Log that a replay sets (the table reads the rest).
        (<Log*>table.log).expiring = True
    return base + parser.position


cdef size_t replay_apply_parsed(Index* index, ParseRing* ring,
                                LogParser* parser) except? 0:
    """Apply the blocks the parsing thread delivers, and advance ``parser`` past them.

    Returns the size of the last block applied: less than
    ``REPLAY_BLOCK`` if that was the end of the parse. Otherwise the
    thread fell behind and was asked to stop: the caller parses the
    rest, from ``parser``. ``<size_t>DAMAGED`` if the mapped index file
    proved damaged.
    """
    cdef uint64_t block = 0
    cdef size_t parsed = REPLAY_BLOCK
    while parsed == REPLAY_BLOCK:
        if not replay_wait_for_block(ring, block):
            semidbm_store_release(&ring.stop, True)
            break
        parsed = ring.sizes[block % REPLAY_RING]
        if replay_apply_block(index, ring.blocks + (block % REPLAY_RING) * REPLAY_BLOCK, parsed,
                              parser.base + parser.size) == DAMAGED:
            return <size_t>DAMAGED
        parser[0] = ring.states[block % REPLAY_RING]
        block += 1
        semidbm_store_release(&ring.applied, block)
    return parsed


cdef int replay_apply_block(Index* index, Parsed* block, size_t parsed,
                            uint64_t size) except -1:
    """Apply ``parsed`` records of the log, in order, to ``index``; 0, or DAMAGED.

    The slots of the next ``SLOT_PREFETCH`` records are requested
    ahead, so that a large index costs no wait per record. ``size``
    is where the log being replayed ends: a full table grows at once
    to what the whole log is expected to need (see ``projected_keys``).
    """
    cdef Table* table = &index.table
    cdef size_t at
    cdef Py_ssize_t slot
    if index.base.table.capacity:
        return replay_apply_over_base(index, block, parsed)
    if table.capacity:
        for at in range(parsed if parsed < SLOT_PREFETCH else SLOT_PREFETCH):
            table_prefetch(table, block[at].hash)
    for at in range(parsed):
        if at + SLOT_PREFETCH < parsed and table.capacity:
            table_prefetch(table, block[at + SLOT_PREFETCH].hash)
        slot = table_find_record(table, block[at].offset, block[at].hash)
        if slot >= 0:
            if block[at].deleted:
                table_remove(table, slot)
            else:
                table.slots[slot].offset = block[at].offset
        elif not block[at].deleted:
            if table_has_room(table, 0):
                table_place(table, -1 - slot, block[at].hash, block[at].offset)
            else:
                table_grow(table, projected_keys(table, block[at].offset, size))
                table_insert(table, block[at].hash, block[at].offset)
    return 0


cdef int replay_apply_over_base(Index* index, Parsed* block, size_t parsed) except -1:
    """``replay_apply_block`` for the log past a mapped index file: each record checked against
    the base too.

    That log is short (see docs/FORMAT.md, "Writing an index file"), and
    its keys are looked up in the base, so it is not prefetched.
    """
    cdef size_t at
    cdef int result
    for at in range(parsed):
        table_reserve(&index.table)
        if block[at].deleted:
            result = index_delete(index, block[at].hash, block[at].offset)
        else:
            result = index_put(index, block[at].hash, block[at].offset)
        if result == DAMAGED:
            return DAMAGED
    return 0


cdef double projected_keys(const Table* table, uint64_t done, uint64_t size) noexcept nogil:
    """The keys to make room for when the rebuild, ``done`` bytes into a log of ``size``, fills
    the table.

    Doubling at each fill would move every key once more on average.
    Instead, once the rebuild has read ``1 / PROJECTION_SAMPLE`` of
    the log, the keys so far are scaled up by the log's size over
    the bytes read, and the table grows at once to the capacity for
    that many (``table_grow``). A log whose later records are smaller than its early
    ones just grows again; one whose later records are larger (or
    that deletes or overwrites keys) may end with a table too large,
    at most ``PROJECTION_SAMPLE`` times what its keys need, which
    ``table_fit`` then shrinks.
    """
    cdef double expected = table.count + 1
    cdef double projected
    if done > HEADER_SIZE and done - HEADER_SIZE >= (size - HEADER_SIZE) / PROJECTION_SAMPLE:
        projected = (<double>table.count * <double>(size - HEADER_SIZE)
                     / <double>(done - HEADER_SIZE))
        if projected > expected:
            expected = projected
    return expected
