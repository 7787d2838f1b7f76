# The keys in byte order, as lines of text, for ``semidbm keys`` and dumps
# (included by _core.pyx): ``Store._sorted_lines``; and as lists of a range
# of keys, for ``Database.iter_sorted`` and ``keys(prefix=...)``: ``Store._sorted``.
# The live keys' records are gathered from the index, sorted in place by
# their bytes (an MSD radix sort on the key's first eight bytes, kept
# beside each record's offset, then on the bytes in the log), and turned
# into chunks of lines in C, each key and value encoded as a dump field
# where the form asks for it (``_fields``: printable ASCII but space, "%"
# and "#" as is, every other byte as %XX).

cdef enum:
    # Keys a group must hold to be sorted by its bytes rather than by comparisons.
    SMALL_SORT = 24
    # Byte positions at which groups split before a group is sorted by comparisons
    # (bounds the recursion, whatever the keys).
    SORT_LEVELS = 16
    # Keys from which the gathering and the sort share their work with a second thread.
    SHARED_SORT = 1 << 16
    # Entries in each share of the gathering's reads.
    READ_SHARE = 4096
    # What the two threads share: the gathering's reads, or the groups of the sort's first split.
    READ_RECORDS = 0
    SORT_GROUPS = 1
    # Bytes of lines SortedLines collects in a chunk (a longer line makes a chunk of its own).
    LINES_CHUNK = 1 << 20
    # The forms of ``_sorted_lines``: raw keys, keys as dump fields, dump lines.
    KEY_LINES = 0
    ENCODED_KEY_LINES = 1
    DUMP_LINES = 2


# Marks the prefix of an entry that holds, during ``sort_gather_keys``, the mapped slot its
# record has yet to be checked against.
cdef uint64_t MAPPED_SLOT = <uint64_t>1 << 63
# The code of each of ``_fields.LINE_FORMS``.
cdef dict LINE_FORMS = {"keys": KEY_LINES, "encoded keys": ENCODED_KEY_LINES,
                        "dump": DUMP_LINES}
cdef const char* HEX_DIGITS = b"0123456789ABCDEF"


cdef bint lines_literal_byte(unsigned char byte) noexcept nogil:
    """Whether ``byte`` stands for itself in a dump field: printable ASCII but space, % and #."""
    return 0x21 <= byte <= 0x7E and byte != 0x25 and byte != 0x23


cdef struct KeyEntry:
    # Eight bytes of the key, big-endian, zeros past its end: its first eight, and
    # during the sort those from the depth it is at, rounded down to a multiple of
    # eight (``sort_shift_prefixes``), so that the bytes it examines are at hand.
    uint64_t prefix
    uint64_t place      # its record's offset, and in the top byte its length up to 255


cdef inline uint64_t entry_offset(const KeyEntry* entry) noexcept nogil:
    """The offset of the entry's record (below 2**56: a data file is smaller)."""
    return entry.place & ((<uint64_t>1 << 56) - 1)


cdef inline const char* entry_key(const Log* log, const KeyEntry* entry,
                                  size_t* size) noexcept nogil:
    """The entry's key in the log, its length in ``size``."""
    cdef const char* record = log_record(log, entry_offset(entry))
    size[0] = load_be32(record)
    return record + LENGTHS_SIZE


cdef inline void entry_prefetch(const Log* log, const KeyEntry* entries, size_t at,
                                size_t count) noexcept nogil:
    """Ask the processor for the record of the entry ``RECORD_PREFETCH`` places after ``at``.

    Only for an offset the mapped log may hold (a mapped slot may be
    unchecked yet): a hint, never a read.
    """
    cdef uint64_t ahead
    if at + RECORD_PREFETCH < count:
        ahead = entry_offset(&entries[at + RECORD_PREFETCH])
        if HEADER_SIZE <= ahead < log.disk_end:
            semidbm_prefetch(log.map + ahead)


cdef inline int entry_bucket(const Log* log, const KeyEntry* entry, size_t depth) noexcept nogil:
    """The group of ``entry`` at byte ``depth``: 0 if its key ends before, else that byte + 1.

    The byte is the prefix's: it holds the key's eight bytes from ``depth``
    rounded down to a multiple of eight. A key of 255 bytes or more has
    its length read in the log, past that depth.
    """
    cdef size_t short_size = entry.place >> 56
    cdef size_t size
    if short_size < 255:
        if depth >= short_size:
            return 0
    elif depth >= 255:
        entry_key(log, entry, &size)
        if depth >= size:
            return 0
    return <int>((entry.prefix >> (56 - 8 * (depth & 7))) & 0xFF) + 1


cdef void sort_shift_prefixes(const Log* log, KeyEntry* entries, size_t count,
                              size_t depth) noexcept nogil:
    """Keep in each entry's prefix its key's eight bytes from ``depth`` on, a multiple of eight.

    Once the sort has gone past the eight bytes beside each entry, it
    reads the next eight of each key from the log at once, in order
    (``entry_prefetch``), rather than a byte of each at every depth.
    """
    cdef size_t at, size
    cdef const char* key
    for at in range(count):
        entry_prefetch(log, entries, at, count)
        key = entry_key(log, &entries[at], &size)
        entries[at].prefix = key_prefix(key + depth, size - depth) if size > depth else 0


cdef inline uint64_t key_prefix(const char* key, size_t size) noexcept nogil:
    """A key's first eight bytes, big-endian, zeros past its end (``KeyEntry.prefix``).

    Two keys' prefixes, where they differ, are in the order of the keys.
    """
    cdef uint64_t prefix = 0
    cdef size_t byte
    for byte in range(8):
        prefix <<= 8
        if byte < size:
            prefix |= <unsigned char>key[byte]
    return prefix


cdef inline int bytes_order(const char* a, size_t a_size, const char* b,
                            size_t b_size) noexcept nogil:
    """Compare two byte strings as bytes objects compare: < 0, 0 or > 0."""
    cdef int order = memcmp(a, b, a_size if a_size < b_size else b_size)
    if order:
        return order
    return (a_size > b_size) - (a_size < b_size)


cdef int sort_compare(const Log* log, const KeyEntry* a, const KeyEntry* b) noexcept nogil:
    """Compare two keys by their bytes, as bytes objects compare: < 0, 0 or > 0."""
    cdef size_t a_size, b_size
    cdef const char* a_key
    cdef const char* b_key
    if a.prefix != b.prefix:
        return -1 if a.prefix < b.prefix else 1
    a_key = entry_key(log, a, &a_size)
    b_key = entry_key(log, b, &b_size)
    return bytes_order(a_key, a_size, b_key, b_size)


cdef int sort_bound_compare(const Log* log, const KeyEntry* entry, uint64_t bound_prefix,
                            const char* bound, size_t bound_size) noexcept nogil:
    """Compare an entry's key with ``bound`` (its ``key_prefix``, then its bytes): < 0, 0 or > 0."""
    cdef size_t size
    cdef const char* key
    if entry.prefix != bound_prefix:
        return -1 if entry.prefix < bound_prefix else 1
    key = entry_key(log, entry, &size)
    return bytes_order(key, size, bound, bound_size)


cdef size_t sort_keep_range(const Log* log, KeyEntry* entries, size_t count,
                            const char* low, size_t low_size,
                            const char* high, size_t high_size) noexcept nogil:
    """Keep the entries whose keys lie from ``low`` up to ``high``, left out; return how many.

    ``high`` NULL: no end. The kept entries move to the front, in their
    order, before the sort: keys out of the range are never sorted.
    """
    cdef uint64_t low_prefix = key_prefix(low, low_size)
    cdef uint64_t high_prefix = key_prefix(high, high_size) if high != NULL else 0
    cdef size_t at
    cdef size_t kept = 0
    for at in range(count):
        if low_size and sort_bound_compare(log, &entries[at], low_prefix, low, low_size) < 0:
            continue
        if high != NULL and sort_bound_compare(log, &entries[at], high_prefix, high,
                                               high_size) >= 0:
            continue
        entries[kept] = entries[at]
        kept += 1
    return kept


cdef void sort_by_insertion(const Log* log, KeyEntry* entries, size_t count) noexcept nogil:
    """Sort a few entries by comparisons."""
    cdef size_t at, place
    cdef KeyEntry moving
    for at in range(1, count):
        moving = entries[at]
        place = at
        while place and sort_compare(log, &moving, &entries[place - 1]) < 0:
            entries[place] = entries[place - 1]
            place -= 1
        entries[place] = moving


cdef void sort_sift_down(const Log* log, KeyEntry* entries, size_t root,
                         size_t count) noexcept nogil:
    """Restore the heap order below ``root`` in the first ``count`` entries."""
    cdef size_t child
    cdef KeyEntry moving = entries[root]
    while 2 * root + 1 < count:
        child = 2 * root + 1
        if child + 1 < count and sort_compare(log, &entries[child], &entries[child + 1]) < 0:
            child += 1
        if sort_compare(log, &moving, &entries[child]) >= 0:
            break
        entries[root] = entries[child]
        root = child
    entries[root] = moving


cdef void sort_by_heap(const Log* log, KeyEntry* entries, size_t count) noexcept nogil:
    """Sort entries by comparisons in O(n log n), in place: for groups deep in shared bytes."""
    cdef size_t at = count // 2
    cdef KeyEntry largest
    while at:
        at -= 1
        sort_sift_down(log, entries, at, count)
    while count > 1:
        count -= 1
        largest = entries[0]
        entries[0] = entries[count]
        entries[count] = largest
        sort_sift_down(log, entries, 0, count)


cdef size_t sort_shared_bytes(const KeyEntry* entries, size_t count, size_t depth) noexcept nogil:
    """The first depth from ``depth`` at which the keys may part, within their prefixes' bytes.

    That is the first byte where two prefixes differ, or where a key
    ends (its group there is 0, a byte 0's is 1), and at most the end of
    the prefixes' eight bytes: one pass over the entries instead of one
    for each byte that every key shares. A key of 255 bytes or more may
    end at 255, where its length is read. Never past the shortest key's
    end, where ``sort_partition`` counts the groups: so its loop ends
    there at the latest, whatever the keys (equal ones included).
    """
    cdef uint64_t first = entries[0].prefix
    cdef uint64_t differ = 0
    cdef size_t shortest = 255
    cdef size_t end = (depth | 7) + 1
    cdef size_t at, size
    for at in range(count):
        differ |= entries[at].prefix ^ first
        size = entries[at].place >> 56
        if size < shortest:
            shortest = size
    at = depth & 7
    while at < 8 and not (differ >> (56 - 8 * at)) & 0xFF:
        at += 1
    end = min(end, (depth & ~(<size_t>7)) + at, shortest)
    return end if end > depth else depth


cdef size_t sort_partition(const Log* log, KeyEntry* entries, size_t count, size_t depth,
                           size_t* counts) noexcept nogil:
    """Group the entries by their byte at ``depth`` or further on; return that depth.

    Depths where every key has the same byte are skipped. The groups,
    in byte order (keys that end first), are in place afterwards, with
    their sizes in ``counts`` (257 of them). Keys are distinct, so the
    bytes differ somewhere for two or more: an American flag sort pass.
    At a depth that is a multiple of eight the prefixes move on to the
    next eight bytes (the entries share their first ``depth`` bytes, so
    prefixes from the same depth order them as their keys).
    """
    cdef size_t ends[257]
    cdef size_t next_place[257]
    cdef size_t at, start
    cdef int group, moving_group
    cdef KeyEntry moving, taken
    while True:
        if depth and depth & 7 == 0:
            sort_shift_prefixes(log, entries, count, depth)
        start = sort_shared_bytes(entries, count, depth)
        if start != depth:
            depth = start
            if depth & 7 == 0:
                continue  # past the prefixes' bytes: the next eight first
        memset(counts, 0, 257 * sizeof(size_t))
        for at in range(count):
            counts[entry_bucket(log, &entries[at], depth)] += 1
        group = entry_bucket(log, &entries[0], depth)
        if counts[group] != count:
            break
        if group == 0:  # equal keys (a forged index file): nothing to order
            return depth
        depth += 1
    start = 0
    for group in range(257):
        next_place[group] = start
        start += counts[group]
        ends[group] = start
    for group in range(257):
        while next_place[group] < ends[group]:
            moving = entries[next_place[group]]
            moving_group = entry_bucket(log, &moving, depth)
            while moving_group != group:
                taken = entries[next_place[moving_group]]
                entries[next_place[moving_group]] = moving
                next_place[moving_group] += 1
                moving = taken
                moving_group = entry_bucket(log, &moving, depth)
            entries[next_place[group]] = moving
            next_place[group] += 1
    return depth


cdef void sort_entries(const Log* log, KeyEntry* entries, size_t count, size_t depth,
                       int level) noexcept nogil:
    """Sort entries whose keys share their first ``depth`` bytes, by the bytes of their keys."""
    cdef size_t counts[257]
    cdef size_t start
    cdef int group
    if count <= SMALL_SORT:
        sort_by_insertion(log, entries, count)
        return
    if level >= SORT_LEVELS:
        sort_by_heap(log, entries, count)
        return
    depth = sort_partition(log, entries, count, depth, counts)
    start = counts[0]
    for group in range(1, 257):
        if counts[group] > 1:
            sort_entries(log, entries + start, counts[group], depth + 1, level + 1)
        start += counts[group]


cdef size_t lines_encoded_size(const char* data, size_t size) noexcept nogil:
    """The length of ``size`` bytes as a dump field."""
    cdef size_t result = size
    cdef size_t at
    for at in range(size):
        if not lines_literal_byte(<unsigned char>data[at]):
            result += 2
    return result


cdef char* lines_encode_into(char* out, const char* data, size_t size) noexcept nogil:
    """Write ``size`` bytes as a dump field at ``out``; return where it ends."""
    cdef size_t at
    cdef unsigned char byte
    for at in range(size):
        byte = <unsigned char>data[at]
        if lines_literal_byte(byte):
            out[0] = <char>byte
            out += 1
        else:
            out[0] = b'%'
            out[1] = HEX_DIGITS[byte >> 4]
            out[2] = HEX_DIGITS[byte & 15]
            out += 3
    return out


cdef class SortedLines:
    """The chunks of ``Store._sorted_lines``: ``(lines, bytes)``, made as they are asked for.

    Holds the sorted records' offsets (a snapshot of the live keys). Each
    step first checks that the store is open and that its keys are the
    same set (the table's version), as ``KeyIterator`` does: offsets into
    a log that a compaction replaced are never read.
    """

    cdef Store store
    cdef KeyEntry* entries
    cdef size_t count
    cdef size_t position
    cdef uint64_t version
    cdef int form

    def __dealloc__(self):
        free(self.entries)

    def __iter__(self):
        return self

    def __next__(self):
        cdef size_t end, size, line, lines
        cdef bytes chunk
        cdef char* out
        keys_check_unchanged(self.store, self.version)
        if self.position == self.count:
            raise StopIteration
        end = self.position
        size = 0
        while end < self.count:
            entry_prefetch(&self.store.log, self.entries, end, self.count)
            line = self.line_size(&self.entries[end])
            if size and size + line > LINES_CHUNK:
                break
            size += line
            end += 1
        chunk = PyBytes_FromStringAndSize(NULL, size)
        out = PyBytes_AS_STRING(chunk)
        lines = end - self.position
        while self.position < end:
            out = self.write_line(out, &self.entries[self.position])
            self.position += 1
        return lines, chunk

    cdef size_t line_size(self, const KeyEntry* entry) except? 0:
        """The length of ``entry``'s line, newline included."""
        cdef size_t key_size, size
        cdef const char* key = entry_key(&self.store.log, entry, &key_size)
        cdef const char* value
        cdef Py_ssize_t value_size
        if self.form == KEY_LINES:
            return key_size + 1
        size = lines_encoded_size(key, key_size) + 1
        if self.form == DUMP_LINES:
            value = self.store.value_at(entry_offset(entry), &value_size)
            size += 1 + lines_encoded_size(value, value_size)
        return size

    cdef char* write_line(self, char* out, const KeyEntry* entry) except NULL:
        """Write ``entry``'s line at ``out``; return where it ends."""
        cdef size_t key_size
        cdef const char* key = entry_key(&self.store.log, entry, &key_size)
        cdef const char* value
        cdef Py_ssize_t value_size
        if self.form == KEY_LINES:
            memcpy(out, key, key_size)
            out += key_size
        else:
            out = lines_encode_into(out, key, key_size)
            if self.form == DUMP_LINES:
                value = self.store.value_at(entry_offset(entry), &value_size)
                out[0] = b' '
                out = lines_encode_into(out + 1, value, value_size)
        out[0] = b'\n'
        return out + 1


cdef SortedLines sort_gather_keys(Store store):
    """The live keys' entries, unsorted: their records' offsets, then their prefixes.

    The records lie all over the log, in the order of the index's slots:
    they are read in a second pass (``sort_read_entries``, by two threads
    for many keys). So the slots of the mapped index file are checked there
    (``base_slot_sound``), before their record is read: meanwhile an
    entry's prefix holds its mapped slot, marked by ``MAPPED_SLOT``.
    """
    cdef SortedLines lines = SortedLines.__new__(SortedLines)
    cdef Base* base = &store.index.base
    cdef size_t position = 0
    cdef size_t room
    cdef uint64_t offset
    cdef KeyEntry* grown
    store.check_open()
    if store.index.table.pending_count:
        keys_apply_pending(store)
    keys_verify(store)
    lines.store = store
    lines.version = store.index.table.version
    room = index_live(&store.index) + 1
    lines.entries = <KeyEntry*>malloc(room * sizeof(KeyEntry))
    if lines.entries == NULL:
        raise MemoryError("cannot allocate the sort of %d keys" % room)
    while True:
        offset = keys_next_live(store, &position, False)
        if offset == 0:
            break
        if lines.count == room:  # more keys than the index counts (a damaged count)
            room *= 2
            grown = <KeyEntry*>realloc(lines.entries, room * sizeof(KeyEntry))
            if grown == NULL:
                raise MemoryError("cannot allocate the sort of %d keys" % room)
            lines.entries = grown
        lines.entries[lines.count].place = offset
        lines.entries[lines.count].prefix = (
            MAPPED_SLOT | (position - 1) if position <= base.table.capacity else 0
        )
        lines.count += 1
    if sort_share_out(READ_RECORDS, &store.log, base, lines.entries, lines.count, NULL, 0):
        keys_drop(store)
        return sort_gather_keys(store)
    return lines


cdef object sorted_lines(Store store, object form, object progress, bytes low, bytes high):
    """``_interface.Store._sorted_lines``: the keys of the range gathered, sorted, as lines."""
    cdef SortedLines lines
    if form not in LINE_FORMS:
        raise ValueError(_messages.NO_LINE_FORM % (form, ", ".join(_fields.LINE_FORMS)))
    lines = sort_gather_range(store, low, high)
    lines.form = LINE_FORMS[form]
    sort_lines(lines, progress)
    return lines.count, lines


cdef SortedLines sort_gather_range(Store store, bytes low, bytes high):
    """The entries of the live keys from ``low`` up to ``high`` (left out; None: no end), unsorted.

    Those out of the range are left out before the sort (``sort_keep_range``).
    """
    cdef SortedLines gathered = sort_gather_keys(store)
    if low or high is not None:
        gathered.count = sort_keep_range(
            &store.log, gathered.entries, gathered.count, low, len(low),
            NULL if high is None else <const char*>high, 0 if high is None else len(high))
    return gathered


cdef list sorted_range(Store store, bytes low, bytes high, object what):
    """``_interface.Store._sorted``: the keys gathered, those out of the range left out, sorted.

    The keys and values are copied into bytes objects first (no object the
    garbage collector tracks is made, so no finalizer runs and no other
    thread takes the GIL between two reads); the pairs are made after.
    """
    cdef SortedLines gathered = sort_gather_range(store, low, high)
    cdef list keys_made = []
    cdef list values_made = []
    cdef const KeyEntry* entry
    cdef const char* key
    cdef const char* value
    cdef size_t at, key_size
    cdef Py_ssize_t value_size
    cdef bint keys = what != "values"
    cdef bint values = what != "keys"
    sort_lines(gathered, None)
    keys_check_unchanged(store, gathered.version)
    for at in range(gathered.count):
        entry_prefetch(&store.log, gathered.entries, at, gathered.count)
        entry = &gathered.entries[at]
        if keys:
            key = entry_key(&store.log, entry, &key_size)
            keys_made.append(PyBytes_FromStringAndSize(key, key_size))
        if values:
            value = store.value_at(entry_offset(entry), &value_size)
            values_made.append(PyBytes_FromStringAndSize(value, value_size))
    return _parts.shaped(keys_made, values_made, what)


cdef int sort_lines(SortedLines lines, object progress) except -1:
    """Sort the entries; ``progress(done, total)`` after the first split and at the end.

    The groups of the first split are sorted by two threads for many
    keys, with no Python code running meanwhile (the GIL is held): the
    callback is called only between, and each call is followed by the
    check of every step, since another thread may change the store then.
    """
    cdef size_t counts[257]
    cdef size_t depth
    cdef Log* log = &lines.store.log
    if lines.count <= SMALL_SORT:
        sort_by_insertion(log, lines.entries, lines.count)
    else:
        depth = sort_partition(log, lines.entries, lines.count, 0, counts)
        if progress is not None:
            progress(counts[0], lines.count)
            keys_check_unchanged(lines.store, lines.version)
        sort_share_out(SORT_GROUPS, log, NULL, lines.entries, lines.count, counts, depth + 1)
    if progress is not None:
        progress(lines.count, lines.count)
        keys_check_unchanged(lines.store, lines.version)
    return 0


# --- Two threads ---

cdef struct SortShare:
    # Work that this thread and a second one share out in turns (``taken``):
    # the gathering's reads of the records (READ_RECORDS, in shares of
    # READ_SHARE entries), or the sort of the groups of the first split
    # (SORT_GROUPS, one group a share). ``started`` and ``finished`` hand it
    # over (replay_helper_starts, replay_owner_abandons); ``damaged`` says that a mapped
    # slot failed its check. Neither thread runs Python code: the GIL stays
    # with the caller.
    uint64_t started
    uint64_t taken
    uint64_t finished
    uint64_t damaged
    int task
    const Log* log
    const Base* base
    KeyEntry* entries
    size_t count
    size_t depth
    size_t starts[258]      # SORT_GROUPS: where each group starts, then the end


cdef int sort_share_out(int task, const Log* log, const Base* base, KeyEntry* entries, size_t count,
                        const size_t* counts, size_t depth) except -1:
    """Do ``task`` over ``entries``, with a second thread for many keys; 1 if ``damaged``, else 0.

    ``counts`` (the groups' sizes) and ``depth`` (where they part) are
    the first split's, for SORT_GROUPS. If the second thread has not
    started once every share is taken, it is not waited for: it frees
    the work when it starts.
    """
    cdef SortShare* shared = <SortShare*>calloc(1, sizeof(SortShare))
    cdef size_t group
    cdef int damaged
    if shared == NULL:
        raise MemoryError("cannot allocate the sort's shared work")
    shared.task = task
    shared.log = log
    shared.base = base
    shared.entries = entries
    shared.count = count
    shared.depth = depth
    if task == SORT_GROUPS:
        for group in range(257):
            shared.starts[group + 1] = shared.starts[group] + counts[group]
    # threaded_replay: this process may use another processor (see replay.pxi).
    if not (count >= SHARED_SORT and threaded_replay and PyThread_start_new_thread(
            sort_share_in_thread, shared) != PYTHREAD_INVALID_THREAD_ID):
        sort_do_shares(shared)
        damaged = shared.damaged
        free(shared)
        return damaged
    sort_do_shares(shared)
    damaged = semidbm_load_acquire(&shared.damaged)
    if not replay_owner_abandons(&shared.started):
        return damaged  # the second thread took no share; it frees the work
    replay_wait_until_finished(&shared.finished)
    damaged = semidbm_load_acquire(&shared.damaged)
    free(shared)
    return damaged


cdef void sort_share_in_thread(void* argument) noexcept nogil:
    """The second thread: take shares until none is left (or free the work, if abandoned)."""
    cdef SortShare* shared = <SortShare*>argument
    if not replay_helper_starts(&shared.started):
        free(shared)
        return
    sort_do_shares(shared)
    semidbm_store_release(&shared.finished, True)


cdef void sort_do_shares(SortShare* shared) noexcept nogil:
    """Take the next share and do it, until every share is taken."""
    cdef uint64_t share
    cdef uint64_t shares = 257 if shared.task == SORT_GROUPS else (
        (shared.count + READ_SHARE - 1) // READ_SHARE)
    cdef size_t start
    while True:
        share = semidbm_fetch_add(&shared.taken, 1)
        if share >= shares:
            return
        if shared.task == SORT_GROUPS:
            start = shared.starts[share]
            if share and shared.starts[share + 1] - start > 1:
                sort_entries(shared.log, shared.entries + start,
                             shared.starts[share + 1] - start, shared.depth, 1)
        else:
            start = share * READ_SHARE
            if not sort_read_entries(shared.log, shared.base, shared.entries + start,
                                     min(<size_t>READ_SHARE, shared.count - start)):
                semidbm_store_release(&shared.damaged, True)


cdef bint sort_read_entries(const Log* log, const Base* base, KeyEntry* entries,
                            size_t count) noexcept nogil:
    """Fill in the entries' prefixes from their records; False if a mapped slot fails its check.

    Each record is asked of the processor ahead (``entry_prefetch``).
    """
    cdef size_t at, size
    cdef const char* record
    cdef KeyEntry* entry
    for at in range(count):
        entry_prefetch(log, entries, at, count)
        entry = &entries[at]
        if entry.prefix & MAPPED_SLOT and not base_slot_sound(base, entry.prefix & ~MAPPED_SLOT):
            return False
        record = log_record(log, entry.place)
        size = load_be32(record)
        entry.place |= <uint64_t>(size if size < 255 else 255) << 56
        entry.prefix = key_prefix(record + LENGTHS_SIZE, size)
    return True
