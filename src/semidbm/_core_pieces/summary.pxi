# The tools' examination of a data file, in the compiled kernel (included
# by _core.pyx): what ``semidbm stats`` and ``semidbm verify`` report,
# from one pass over a mapped data file in C. The records are parsed by
# the index rebuild's own parser (``parse_block``: the same rules, every
# length checked) and applied to a private table, which then knows each
# key's live record.


def summarize_log(data, bint check_checksums, progress, path):
    """``_interface.summarize_log``: one walk in C over the data file in ``data``."""
    cdef const unsigned char[::1] mapped = data  # held until the walk is over
    if mapped.shape[0] < HEADER_SIZE:
        raise ValueError(_messages.SHORTER_THAN_HEADER % HEADER_SIZE)
    return summarize_mapped(<const char*>&mapped[0], <uint64_t>mapped.shape[0], check_checksums,
                            progress, path)


cdef object summarize_mapped(const char* data, uint64_t size, bint check_checksums,
                             object progress, object path):
    """``summarize_log`` over the ``size`` bytes at ``data``, a whole data file (its header
    at least)."""
    cdef Log log
    cdef Index index
    cdef LogParser parser
    cdef Parsed block[REPLAY_BLOCK]
    cdef size_t parsed = REPLAY_BLOCK
    cdef size_t at
    cdef uint64_t records = 0
    cdef uint64_t kept = 0
    cdef uint64_t next_report = PROGRESS_STEP
    cdef list bad = []
    cdef object corrupt_at = None
    log.map = data
    log.disk_end = size
    log.buffer = NULL
    memset(&index, 0, sizeof(Index))
    index.table.log = &log
    index.seed = random_seed()
    version = check_header(PyBytes_FromStringAndSize(data, HEADER_SIZE), path)
    log.batches = version[0] >= _BATCH_FORMAT
    log.expirable = version >= _EXPIRY_VERSION
    log.expiring = False
    # Not mapped: summarize_log takes any buffer, which may be memory of its own.
    parser_start(&parser, data, 0, index.seed, HEADER_SIZE, size, log.batches, log.expirable,
                 False)
    try:
        while parsed == REPLAY_BLOCK:
            parsed = parse_block(&parser, block)
            records += parsed
            if check_checksums:
                for at in range(parsed):
                    # A record parse_block found is whole: sound but for its checksum.
                    if not sound_record(data, block[at].offset, size, False):
                        bad.append(block[at].offset)
            replay_apply_block(&index, block, parsed, size)
            if progress is not None and parser.position >= next_report:
                next_report = parser.position + PROGRESS_STEP
                progress(parser.position, size)
        if parser.corrupt:
            corrupt_at = parser.position
        if progress is not None:
            progress(parser.position, size)
        return LogSummary(
            records=records,
            end=parser.position,
            corrupt_at=corrupt_at,
            keys=index.table.count,
            live_bytes=live_record_bytes(&index.table),
            bad_checksums=[(offset, record_is_live(&index, offset)) for offset in bad],
            expired_bytes=expiring_record_bytes(&index.table, clock_now(), &kept)
            if parser.expiring else 0,
            expiry_bytes=kept,
        )
    finally:
        table_clear(&index.table)


cdef uint64_t live_record_bytes(const Table* table) noexcept nogil:
    """The bytes of the records the table points at, lengths and checksum included.

    The records lie all over the log: each is asked of the processor
    ``RECORD_PREFETCH`` slots ahead, so that their reads overlap.
    """
    cdef uint64_t total = 0
    cdef size_t at
    cdef const char* record
    for at in range(table.capacity):
        if at + RECORD_PREFETCH < table.capacity and table.slots[at + RECORD_PREFETCH].offset:
            semidbm_prefetch(log_record(table.log, table.slots[at + RECORD_PREFETCH].offset))
        if table.slots[at].offset:
            record = log_record(table.log, table.slots[at].offset)
            total += <uint64_t>RECORD_OVERHEAD + load_be32(record) + <uint64_t>load_be32(record + 4)
    return total


cdef uint64_t expiring_record_bytes(const Table* table, uint64_t now,
                                    uint64_t* kept) noexcept nogil:
    """The bytes of the records the table points at (as ``live_record_bytes`` counts them) whose
    expiry record (``log_expiry``) says that they expired by ``now``; in ``kept``, the bytes
    a compaction adds to copy the others that have one (``_records.LogSummary``)."""
    cdef uint64_t total = 0
    cdef size_t at
    cdef const char* record
    cdef int32_t key_size
    cdef uint64_t size, expires_at
    for at in range(table.capacity):
        if table.slots[at].offset:
            record = log_record(table.log, table.slots[at].offset)
            key_size = <int32_t>load_be32(record)
            size = <uint64_t>RECORD_OVERHEAD + <uint64_t>key_size + load_be32(record + 4)
            if log_expiry(table.log, table.log.disk_end, table.slots[at].offset + size,
                          record + LENGTHS_SIZE, key_size, &expires_at):
                if expires_at <= now:
                    total += size
                else:
                    kept[0] += RECORD_OVERHEAD + EXPIRY_OVERHEAD + <uint64_t>key_size
    return total


cdef bint record_is_live(const Index* index, uint64_t offset) noexcept:
    """Whether the record at ``offset`` holds the current value of its key in ``index``."""
    cdef const char* record = log_record(index.table.log, offset)
    cdef int32_t key_size = <int32_t>load_be32(record)
    cdef Py_ssize_t slot = table_find(&index.table, record + LENGTHS_SIZE, key_size,
                                      hash_key(index.seed, record + LENGTHS_SIZE, key_size))
    return slot >= 0 and index.table.slots[slot].offset == offset
