# Whether to trust an index file, in C (included by _core.pyx): the checks
# 1 and 2 of docs/FORMAT.md, "Trusting an index file", which every open and
# every reader's refresh that finds an index file makes. They are
# _index_file.load's, made here without a Python call, an object or an
# exception per step: its 32 samples of the log alone took 32 calls of
# Python and as many bytes objects, some 40% of the time of an open, a read
# and a close of a database with an index file, and in a process just
# forked every Python object touched costs a page copied.
# _index_file.load stays the pure kernel's and Windows' (no openat there),
# and tests/test_index_file.py holds both to every case. The sizes and
# offsets come from _index_file and _checkpoint, read once at import.

cdef extern from "Python.h":
    enum: PY_LITTLE_ENDIAN
    const Py_ssize_t PY_SSIZE_T_MAX

from libc.errno cimport ENOSYS
from libc.stdint cimport UINT64_MAX

cdef enum:
    # Where _index_file._FIELDS puts the header's fields (little-endian): the
    # magic, then these.
    FIELD_VERSION = 8
    FIELD_HEADER_SIZE = 12
    FIELD_SEED = 16
    FIELD_COVERED = 24
    FIELD_KEYS = 32
    FIELD_CAPACITY = 40
    FIELD_SIZES = 48
    # _index_file._SAMPLE: a sample's offset (8 bytes), length (4), CRC-32 (4).
    SAMPLE_FIELDS = 16
    # index_file_trusted's answer where the checks cannot be made in C.
    TRUST_IN_PYTHON = -2

cdef bytes INDEX_MAGIC = _index_file.MAGIC
cdef uint32_t INDEX_VERSION = _index_file.VERSION
cdef uint32_t INDEX_SIZES[4]
INDEX_SIZES[:] = _index_file._SIZES
cdef uint64_t INDEX_SAMPLES = _index_file.SAMPLES
cdef uint64_t EDGE_SAMPLE = _index_file._EDGE_SAMPLE
cdef uint64_t MIDDLE_SAMPLE = _index_file._MIDDLE_SAMPLE
cdef size_t SAMPLES_AT = _index_file._SAMPLES_START
cdef size_t CHECKPOINT_AT = _index_file._SAMPLES_END
cdef size_t HEADER_CRC_AT = _index_file._CRC_OFFSET
cdef bytes CHECKPOINT_PREFIX = _checkpoint.PREFIX
cdef size_t NONCE_SIZE = _checkpoint.NONCE_SIZE
cdef uint64_t CHECKPOINT_SIZE = _checkpoint.SIZE
cdef uint64_t CHECKPOINT_MAX_SIZE = _checkpoint.MAX_SIZE
cdef uint64_t LOG_START_SIZE = _checkpoint.START_SIZE
# Every range read here fits a buffer of a header's size, and every field lies before the
# header's CRC-32.
assert max(EDGE_SAMPLE, MIDDLE_SAMPLE, CHECKPOINT_MAX_SIZE) <= INDEX_HEADER_SIZE
assert CHECKPOINT_AT + 8 + NONCE_SIZE <= HEADER_CRC_AT


cdef struct IndexHeader:
    # A trusted index file, open read-only; what its header says
    # (_index_file.Header); its identity and size when it was checked.
    int fd
    uint64_t seed
    uint64_t covered
    uint64_t keys
    uint64_t capacity
    semidbm_info info


cdef inline uint64_t header_u64(const char* raw, size_t at) noexcept:
    """The little-endian 64-bit field at ``at`` (only read on a little-endian machine)."""
    cdef uint64_t value
    memcpy(&value, raw + at, 8)
    return value


cdef inline uint32_t header_u32(const char* raw, size_t at) noexcept:
    """The little-endian 32-bit field at ``at`` (only read on a little-endian machine)."""
    cdef uint32_t value
    memcpy(&value, raw + at, 4)
    return value


cdef inline uint64_t index_blocks(uint64_t capacity) noexcept:
    """``_index_file.blocks``: the blocks of slots, each with its checksum, of ``capacity``."""
    return (capacity + BLOCK_SLOTS - 1) // BLOCK_SLOTS


cdef inline uint64_t index_file_size(uint64_t capacity) noexcept:
    """``_index_file.file_size``: an index file's size, for a ``capacity`` whose sum does not
    overflow (``index_header_trusted`` takes none other)."""
    return INDEX_HEADER_SIZE + sizeof(Slot) * capacity + CHECKSUM_SIZE * index_blocks(capacity)


cdef int index_file_trusted(int directory_fd, int data_fd, uint64_t data_size,
                            IndexHeader* header) noexcept:
    """``_index_file.load`` in C, without the removal: the index file's descriptor, or -1.

    The index file named in the open directory ``directory_fd`` is
    trusted if it passes the checks 1 and 2 against the data file
    ``data_fd``, whose log the caller has seen up to ``data_size``: its
    descriptor is returned, open read-only, and ``header`` filled in.
    -1 if there is none, it fails a check or cannot be read, or the
    machine is big-endian; ``TRUST_IN_PYTHON`` where C cannot open it
    (Windows).
    """
    cdef int fd
    cdef char raw[INDEX_HEADER_SIZE]
    if not PY_LITTLE_ENDIAN:
        return -1
    fd = semidbm_open_index(directory_fd, INDEX_FILE_NAME)
    if fd < 0:
        return TRUST_IN_PYTHON if errno == ENOSYS else -1
    if (index_header_trusted(fd, data_size, raw, header)
            and checkpoint_trusted(data_fd, raw, header.covered)
            and samples_trusted(data_fd, raw, header.covered)):
        return fd
    semidbm_close(fd)
    return -1


cdef bint index_header_trusted(int fd, uint64_t data_size, char* raw,
                               IndexHeader* header) noexcept:
    """Check 1 (``_index_file._check_header``): read the header of the index file ``fd`` into
    ``raw`` and fill ``header``; False if it is not one this version writes for a log of at
    least ``data_size`` bytes."""
    cdef uint64_t capacity, keys, covered
    cdef int field
    if semidbm_file_info(fd, &header.info) or not header.info.regular:
        return False
    if header.info.size < INDEX_HEADER_SIZE:
        return False
    if semidbm_read_at(fd, raw, INDEX_HEADER_SIZE, 0) != INDEX_HEADER_SIZE:
        return False
    if header_u32(raw, HEADER_CRC_AT) != crc32(0, raw, HEADER_CRC_AT):
        return False
    if (memcmp(raw, <const char*>INDEX_MAGIC, len(INDEX_MAGIC))
            or header_u32(raw, FIELD_VERSION) != INDEX_VERSION
            or header_u32(raw, FIELD_HEADER_SIZE) != INDEX_HEADER_SIZE):
        return False
    for field in range(4):
        if header_u32(raw, FIELD_SIZES + 4 * field) != INDEX_SIZES[field]:
            return False
    capacity = header_u64(raw, FIELD_CAPACITY)
    keys = header_u64(raw, FIELD_KEYS)
    covered = header_u64(raw, FIELD_COVERED)
    # A capacity past this has a file size over 2**64 bytes: no file's. Below it,
    # _index_file.file_size's sum cannot overflow.
    if capacity < MIN_CAPACITY or capacity > (UINT64_MAX - INDEX_HEADER_SIZE) // 13:
        return False
    if header.info.size != index_file_size(capacity):
        return False
    if keys >= capacity or not LOG_START_SIZE <= covered <= data_size:
        return False
    header.seed = header_u64(raw, FIELD_SEED)
    header.covered = covered
    header.keys = keys
    header.capacity = capacity
    return True


cdef bint checkpoint_trusted(int data_fd, const char* raw, uint64_t covered) noexcept:
    """Check 2, first part (``_index_file._check_checkpoint``): the data file ``data_fd`` holds
    the checkpoint that the header ``raw`` names, where it says, within the ``covered`` log.

    A checkpoint is exactly ``_checkpoint``'s pair: the put of its key
    (the prefix, the nonce, zeros short of a sector) with an empty value,
    then the delete of that key, both checksums right.
    """
    cdef char found[INDEX_HEADER_SIZE]
    cdef uint64_t offset = header_u64(raw, CHECKPOINT_AT)
    cdef uint64_t key_size, at
    cdef ptrdiff_t length
    cdef const char* key = found + LENGTHS_SIZE
    cdef const char* delete
    cdef size_t prefix = len(CHECKPOINT_PREFIX)
    cdef size_t key_start = prefix + NONCE_SIZE
    cdef uint32_t crc
    if offset < HEADER_SIZE or offset > covered - CHECKPOINT_SIZE:
        return False
    length = semidbm_read_at(data_fd, found, min(CHECKPOINT_MAX_SIZE, covered - offset), offset)
    if length < LENGTHS_SIZE:
        return False
    key_size = load_be32(found)
    if (load_be32(found + 4) != 0 or key_size < key_start
            or key_size >= key_start + DISK_SECTOR
            or <uint64_t>length < 2 * (RECORD_OVERHEAD + key_size)):
        return False
    if memcmp(key, <const char*>CHECKPOINT_PREFIX, prefix):
        return False
    if memcmp(key + prefix, raw + CHECKPOINT_AT + 8, NONCE_SIZE):
        return False
    for at in range(key_start, key_size):
        if key[at]:
            return False
    crc = crc32(0, key, key_size)
    delete = key + key_size + CHECKSUM_SIZE
    return (load_be32(key + key_size) == crc
            and load_be32(delete) == key_size
            and load_be32(delete + 4) == <uint32_t>DELETED
            and not memcmp(delete + LENGTHS_SIZE, key, key_size)
            and load_be32(delete + LENGTHS_SIZE + key_size) == crc)


cdef bint samples_trusted(int data_fd, const char* raw, uint64_t covered) noexcept:
    """Check 2, second part (``_index_file._check_samples``): the header ``raw`` samples the
    ranges ``_index_file.sample_ranges(covered)`` gives, and the data file ``data_fd`` holds
    them. Every range is compared before any is read."""
    cdef char sample[INDEX_HEADER_SIZE]
    cdef uint64_t number, start, length, edge = min(EDGE_SAMPLE, covered)
    cdef uint64_t spans = INDEX_SAMPLES - 1
    cdef const char* field
    for number in range(INDEX_SAMPLES):
        if number == 0:
            start, length = 0, edge
        elif number == spans:
            start, length = covered - edge, edge
        else:  # covered * number // spans, which could overflow as it is
            start = covered // spans * number + covered % spans * number // spans
            length = min(MIDDLE_SAMPLE, covered - start)
        field = raw + SAMPLES_AT + SAMPLE_FIELDS * number
        if header_u64(field, 0) != start or header_u32(field, 8) != length:
            return False
    for number in range(INDEX_SAMPLES):
        field = raw + SAMPLES_AT + SAMPLE_FIELDS * number
        start = header_u64(field, 0)
        length = header_u32(field, 8)
        if <uint64_t>semidbm_read_at(data_fd, sample, length, start) != length:
            return False
        if crc32(0, sample, length) != header_u32(field, 12):
            return False
    return True


cdef object index_file_load(Store store, uint64_t data_size, bint writer, IndexHeader* header):
    """``_index_file.load`` for ``store``: the identity of the index file to trust
    (``_index_file.Header.identity``), its descriptor in ``header.fd`` and ``header`` filled
    in; or None if none is to be trusted, which a ``writer`` then removes (as there).

    In Python where C cannot make the checks (Windows): the identity is
    then Python's own, whatever its integers' size.
    """
    cdef int fd = TRUST_IN_PYTHON
    if store.directory_fd >= 0:
        fd = index_file_trusted(store.directory_fd, store.fd, data_size, header)
    if fd == TRUST_IN_PYTHON:
        found = _index_file.load(store.directory, store.fd, data_size, writer)
        if found is None:
            return None
        header.fd = found[0]
        try:
            header.seed, header.covered, header.keys, header.capacity, identity = found[1]
        except BaseException:
            os.close(found[0])
            raise
        return identity
    if fd < 0:
        if writer:
            _index_file.remove_quietly(store.directory)
        return None
    header.fd = fd
    return index_identity(header)


cdef tuple index_identity(IndexHeader* header):
    """``_index_file.Header.identity`` of the index file that ``index_file_trusted`` checked:
    ``st_dev`` signed where the system's ``dev_t`` is, as Python gives it."""
    return (<int64_t>header.info.device if header.info.device_signed else header.info.device,
            header.info.inode, header.info.size,
            header.info.mtime_seconds * 1000000000 + header.info.mtime_nanoseconds)


def _index_file_load(int directory_fd, int data_fd, uint64_t data_size):
    """The checks of ``index_file_trusted`` as ``_index_file.load`` answers (without the
    removal): ``(fd, _index_file.Header)``, or None. For tests/test_index_file.py, which
    holds the two to the same cases."""
    cdef IndexHeader header
    cdef int fd = index_file_trusted(directory_fd, data_fd, data_size, &header)
    if fd == TRUST_IN_PYTHON:
        raise OSError(ENOSYS, "the index file's checks are not made in C here")
    if fd < 0:
        return None
    return fd, _index_file.Header(header.seed, header.covered, header.keys, header.capacity,
                                  index_identity(&header))
