"""The index file of docs/FORMAT.md ("The index file"), read and written from the document alone.

The tests of the index file (test_index.py, harness/fuzz.py,
harness/crash.py) use this module to check the index files the compiled
kernel writes against the document, and to make index files of their
own: valid ones, and hostile ones whose checksums are all right. It
imports no semidbm and only the standard library, so that it is an
independent reading of the format, and so that the interpreter with
semidbm 0.5.1 can import it too (for the workloads at the end).

Integers in the index file are little-endian; in the data file they are
big-endian.
"""

import hashlib
import os
import random
import struct
import zlib

INDEX_NAME = "index"
INDEX_TEMP_NAME = "index.new"

MAGIC = b"SEMIINDX"
VERSION = 2
HEADER_SIZE = 4096
SLOT_SIZE = 12
BLOCK_SLOTS = 1024
SAMPLE_COUNT = 32
#: Longest sample in the middle of the covered log, and the size of the first and last.
MIDDLE_SAMPLE = 256
EDGE_SAMPLE = 4096
MIN_CAPACITY = 16
#: Where the header's CRC-32 is (it covers the bytes before it).
HEADER_CRC_AT = HEADER_SIZE - 4

#: magic, version, header size, seed, covered, count, capacity, slot size,
#: slots per block, number of samples, zero.
FIELDS = struct.Struct("<8sIIQQQQIIII")
SAMPLE = struct.Struct("<QII")
SAMPLES_AT = FIELDS.size  # 64
#: After the samples: the offset in the data file (8 bytes) and the nonce (16) of the
#: checkpoint the index file names.
CHECKPOINT_AT = SAMPLES_AT + SAMPLE.size * SAMPLE_COUNT
CHECKPOINT_FIELD = struct.Struct("<Q16s")
SLOT = struct.Struct("<QI")
CHECKSUM = struct.Struct("<I")

#: Where each header field starts, for tests that damage one.
FIELD_AT = {
    "magic": 0,
    "version": 8,
    "header size": 12,
    "seed": 16,
    "covered": 24,
    "count": 32,
    "capacity": 40,
    "slot size": 48,
    "slots per block": 52,
    "number of samples": 56,
    "zero": 60,
    "first sample": SAMPLES_AT,
    "last sample": SAMPLES_AT + SAMPLE.size * (SAMPLE_COUNT - 1),
    "checkpoint offset": CHECKPOINT_AT,
    "checkpoint nonce": CHECKPOINT_AT + 8,
    "zeros after the checkpoint": CHECKPOINT_AT + 100,
    "header crc": HEADER_CRC_AT,
}

#: The data file's header: magic, major and minor version.
DATA_HEADER = b"SEMI" + struct.pack("!HH", 1, 1)
#: A checkpoint's key: these bytes, then its nonce, then fewer than 512 zero bytes; a put of
#: it with an empty value, then its delete.
CHECKPOINT_PREFIX = b"\0semidbm checkpt"
NONCE_SIZE = 16
#: Size of a checkpoint's two records without padding (a new log's first checkpoint).
CHECKPOINT_SIZE = 2 * (12 + len(CHECKPOINT_PREFIX) + NONCE_SIZE)
#: Size of a new log's start, its header and first checkpoint: where its records begin.
LOG_START = len(DATA_HEADER) + CHECKPOINT_SIZE

_MASK64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_MIX = 0xD6E8FEB86659FD93


def crc32(data):
    return zlib.crc32(data) & 0xFFFFFFFF


def blocks(capacity):
    """Number of blocks of slots (and of their checksums)."""
    return (capacity + BLOCK_SLOTS - 1) // BLOCK_SLOTS


def file_size(capacity):
    """The size an index file of ``capacity`` slots has, by the layout."""
    return HEADER_SIZE + SLOT_SIZE * capacity + 4 * blocks(capacity)


def capacity_for(count):
    """The capacity a writer gives an index file of ``count`` keys."""
    return max(MIN_CAPACITY, count * 3 // 2 + 1)


def _mix(value):
    value ^= value >> 32
    value = (value * _MIX) & _MASK64
    value ^= value >> 32
    value = (value * _MIX) & _MASK64
    return value ^ (value >> 32)


def hash_key(seed, key):
    """``hash_key(seed, key)``: multiply-xorshift over the key's 8-byte little-endian words."""
    size = len(key)
    state = seed ^ ((size * _GOLDEN) & _MASK64)
    position = 0
    while size - position >= 8:
        (word,) = struct.unpack_from("<Q", key, position)
        state = ((state ^ word) * _GOLDEN) & _MASK64
        state ^= state >> 29
        position += 8
    if position < size:
        word = int.from_bytes(key[position:], "little")
        state = ((state ^ word) * _GOLDEN) & _MASK64
    return _mix(state) & 0xFFFFFFFF


def probe_start(hashed, capacity):
    """The slot where a key's probe starts."""
    return (hashed * capacity) >> 32


def sample_ranges(covered):
    """The 32 ``(offset, length)`` data file ranges that an index file of ``covered`` samples."""
    edge = min(EDGE_SAMPLE, covered)
    ranges = [(0, edge)]
    for i in range(1, SAMPLE_COUNT - 1):
        start = covered * i // (SAMPLE_COUNT - 1)
        ranges.append((start, min(MIDDLE_SAMPLE, covered - start)))
    ranges.append((covered - edge, edge))
    return ranges


# --- the data file ---


def put_record(key, value):
    """A put record: lengths, key, value, and the CRC-32 of key and value."""
    return struct.pack("!ii", len(key), len(value)) + key + value + struct.pack(
        "!I", crc32(key + value))


def delete_record(key):
    """A delete record: lengths (value length -1), key, and the CRC-32 of the key."""
    return struct.pack("!ii", len(key), -1) + key + struct.pack("!I", crc32(key))


def checkpoint(nonce, padding=0):
    """The two records of the checkpoint of ``nonce``: a put of its key, empty, then its delete."""
    key = CHECKPOINT_PREFIX + nonce + bytes(padding)
    return put_record(key, b"") + delete_record(key)


def new_log(nonce=None, header=DATA_HEADER):
    """The start of a new log: ``header`` and a checkpoint (of a random nonce if None)."""
    return header + checkpoint(os.urandom(NONCE_SIZE) if nonce is None else nonce)


def checkpoint_size(data, offset):
    """The size of the checkpoint at ``offset`` of the data file ``data``, or None if none is.

    Only the exact pair counts.
    """
    if len(data) < offset + 8:
        return None
    key_length, value_length = struct.unpack_from("!ii", data, offset)
    padding = key_length - len(CHECKPOINT_PREFIX) - NONCE_SIZE
    if value_length != 0 or not 0 <= padding < 512:
        return None
    start = offset + 8 + len(CHECKPOINT_PREFIX)  # after the put's lengths and the prefix
    pair = checkpoint(bytes(data[start : start + NONCE_SIZE]), padding)
    return len(pair) if bytes(data[offset : offset + len(pair)]) == pair else None


def checkpoint_at(data, offset):
    """The nonce of the checkpoint at ``offset`` of the data file ``data``, or None."""
    if checkpoint_size(data, offset) is None:
        return None
    start = offset + 8 + len(CHECKPOINT_PREFIX)
    return bytes(data[start : start + NONCE_SIZE])


def last_checkpoint(data, end):
    """The offset of the last checkpoint in the log ``data`` that ends by ``end``, or None."""
    found = None
    for offset, _, _, _ in records(data, end=end):
        size = checkpoint_size(data, offset)
        if size is not None and offset + size <= end:
            found = offset
    return found


def records(data, start=8, end=None):
    """``(offset, key, value or None, size)`` of each whole record in ``data[start:end]``."""
    end = len(data) if end is None else end
    position = start
    while end - position >= 12:
        key_length, value_length = struct.unpack_from("!ii", data, position)
        if key_length < 0 or value_length < -1:
            raise ValueError("corrupt record at %d" % position)
        size = 12 + key_length + max(value_length, 0)
        if position + size > end:
            break
        key = bytes(data[position + 8 : position + 8 + key_length])
        value = None
        if value_length >= 0:
            at = position + 8 + key_length
            value = bytes(data[at : at + value_length])
        yield position, key, value, size
        position += size


def live_records(data, end=None):
    """Replay the log of ``data`` up to ``end``: each live key's last put offset, and the end.

    Returns ``({key: offset}, {key: value}, where the replay stopped)``.
    """
    offsets, values = {}, {}
    stop = len(DATA_HEADER)
    for offset, key, value, size in records(data, end=end):
        if value is None:
            offsets.pop(key, None)
            values.pop(key, None)
        else:
            offsets[key] = offset
            values[key] = value
        stop = offset + size
    return offsets, values, stop


def boundaries(data):
    """Every record boundary of the log of ``data`` (the header's end included)."""
    found = [len(DATA_HEADER)]
    for offset, _, _, size in records(data):
        found.append(offset + size)
    return found


# --- the index file ---


class Index:
    """An index file's fields, samples and slots, as parsed or to be encoded."""

    def __init__(self, seed, covered, count, capacity, samples, slots, checkpoint, **fields):
        self.seed = seed
        self.covered = covered
        self.count = count
        self.capacity = capacity
        self.samples = list(samples)  # (offset, length, crc)
        self.slots = list(slots)  # (offset, hash); offset 0: empty
        self.checkpoint = checkpoint  # (offset in the data file, nonce)
        self.magic = fields.get("magic", MAGIC)
        self.version = fields.get("version", VERSION)
        self.header_size = fields.get("header_size", HEADER_SIZE)
        self.slot_size = fields.get("slot_size", SLOT_SIZE)
        self.block_slots = fields.get("block_slots", BLOCK_SLOTS)
        self.sample_count = fields.get("sample_count", SAMPLE_COUNT)
        self.zero = fields.get("zero", 0)

    @classmethod
    def parse(cls, data):
        """Read an index file that has the layout's size (nothing else is checked)."""
        (magic, version, header_size, seed, covered, count, capacity, slot_size, block_slots,
         sample_count, zero) = FIELDS.unpack_from(data, 0)
        samples = [SAMPLE.unpack_from(data, SAMPLES_AT + SAMPLE.size * i)
                   for i in range(SAMPLE_COUNT)]
        slots = [SLOT.unpack_from(data, HEADER_SIZE + SLOT_SIZE * i) for i in range(capacity)]
        named = CHECKPOINT_FIELD.unpack_from(data, CHECKPOINT_AT)
        return cls(seed, covered, count, capacity, samples, slots, named, magic=magic,
                   version=version, header_size=header_size, slot_size=slot_size,
                   block_slots=block_slots, sample_count=sample_count, zero=zero)

    def header(self):
        """The 4,096-byte header, its CRC-32 computed."""
        head = bytearray(HEADER_SIZE)
        FIELDS.pack_into(head, 0, self.magic, self.version, self.header_size, self.seed,
                         self.covered, self.count, self.capacity, self.slot_size,
                         self.block_slots, self.sample_count, self.zero)
        for i, sample in enumerate(self.samples[:SAMPLE_COUNT]):
            SAMPLE.pack_into(head, SAMPLES_AT + SAMPLE.size * i, *sample)
        CHECKPOINT_FIELD.pack_into(head, CHECKPOINT_AT, *self.checkpoint)
        struct.pack_into("<I", head, HEADER_CRC_AT, crc32(bytes(head[:HEADER_CRC_AT])))
        return bytes(head)

    def slot_bytes(self):
        return b"".join(SLOT.pack(offset, hashed) for offset, hashed in self.slots)

    def encode(self):
        """The whole file, every CRC-32 computed (header and blocks of slots)."""
        table = self.slot_bytes()
        block_size = BLOCK_SLOTS * SLOT_SIZE
        checksums = b"".join(
            CHECKSUM.pack(crc32(table[start : start + block_size]))
            for start in range(0, len(table), block_size)
        )
        return self.header() + table + checksums

    def find(self, data, key):
        """The slot of ``key`` by the file's probe, reading keys from ``data``; None if absent."""
        hashed = hash_key(self.seed, key)
        at = probe_start(hashed, self.capacity)
        for _ in range(self.capacity):
            offset, slot_hash = self.slots[at]
            if offset == 0:
                return None
            if slot_hash == hashed and 8 <= offset <= len(data) - 8:
                (key_length,) = struct.unpack_from("!i", data, offset)
                if bytes(data[offset + 8 : offset + 8 + key_length]) == key:
                    return at
            at = (at + 1) % self.capacity
        return None


def place(slots, capacity, hashed, offset):
    """Put ``(offset, hashed)`` into the first empty slot of its probe."""
    at = probe_start(hashed, capacity)
    while slots[at][0] != 0:
        at = (at + 1) % capacity
    slots[at] = (offset, hashed)
    return at


def build(data, covered=None, seed=0x5EED5EED5EED5EED, capacity=None):
    """A valid index file of the first ``covered`` bytes (a record boundary) of the log ``data``.

    It names the last checkpoint of the covered log, as the kernel's
    would: no index file is valid for a log without one.
    """
    covered = len(data) if covered is None else covered
    named = last_checkpoint(data, covered)
    if named is None:
        raise ValueError("the covered log holds no checkpoint: no index can be valid for it")
    offsets, _, stop = live_records(data, end=covered)
    if stop != covered:
        raise ValueError("%d is not a record boundary (the log's records end at %d)"
                         % (covered, stop))
    capacity = capacity_for(len(offsets)) if capacity is None else capacity
    slots = [(0, 0)] * capacity
    for key, offset in offsets.items():
        place(slots, capacity, hash_key(seed, key), offset)
    return Index(seed, covered, len(offsets), capacity, samples_of(data, covered), slots,
                 (named, checkpoint_at(data, named)))


def samples_of(data, covered):
    return [(offset, length, crc32(data[offset : offset + length]))
            for offset, length in sample_ranges(covered)]


def problems(index_data, data):
    """What an index file breaks of the document, for the log of the data file ``data``.

    Checks the layout, every CRC-32, the checkpoint named, the samples, and that
    the slots are exactly the live keys of the covered log, each at its
    last put and found by the probe. An empty list means a valid index file.
    """
    found = []
    if len(index_data) < HEADER_SIZE:
        return ["shorter than the header (%d bytes)" % len(index_data)]
    (magic, version, header_size, seed, covered, count, capacity, slot_size, block_slots,
     sample_count, zero) = FIELDS.unpack_from(index_data, 0)
    expected = (MAGIC, VERSION, HEADER_SIZE, SLOT_SIZE, BLOCK_SLOTS, SAMPLE_COUNT, 0)
    actual = (magic, version, header_size, slot_size, block_slots, sample_count, zero)
    if actual != expected:
        found.append("header fields %r, not %r" % (actual, expected))
    (header_crc,) = struct.unpack_from("<I", index_data, HEADER_CRC_AT)
    if header_crc != crc32(index_data[:HEADER_CRC_AT]):
        found.append("header CRC")
    if index_data[CHECKPOINT_AT + CHECKPOINT_FIELD.size : HEADER_CRC_AT].strip(b"\0"):
        found.append("bytes after the checkpoint are not zeros")
    named_at, nonce = CHECKPOINT_FIELD.unpack_from(index_data, CHECKPOINT_AT)
    size = checkpoint_size(data[:covered], named_at) if named_at >= len(DATA_HEADER) else None
    if size is None or checkpoint_at(data, named_at) != nonce:
        found.append("the data file holds no checkpoint of that nonce there")
    if not (MIN_CAPACITY <= capacity and count < capacity and LOG_START <= covered <= len(data)):
        return found + ["capacity %d, count %d, covered %d (data file %d bytes)"
                        % (capacity, count, covered, len(data))]
    if len(index_data) != file_size(capacity):
        return found + ["%d bytes, not %d" % (len(index_data), file_size(capacity))]
    index = Index.parse(index_data)
    if index.samples != samples_of(data, covered):
        found.append("samples")
    table = index_data[HEADER_SIZE : HEADER_SIZE + SLOT_SIZE * capacity]
    sums = index_data[HEADER_SIZE + SLOT_SIZE * capacity :]
    for block in range(blocks(capacity)):
        part = table[block * BLOCK_SLOTS * SLOT_SIZE : (block + 1) * BLOCK_SLOTS * SLOT_SIZE]
        if CHECKSUM.unpack_from(sums, 4 * block)[0] != crc32(part):
            found.append("CRC of block %d" % block)
    offsets, _, stop = live_records(data, end=covered)
    if stop != covered:
        found.append("covered %d is not a record boundary" % covered)
    if count != len(offsets):
        found.append("count %d, the covered log has %d live keys" % (count, len(offsets)))
    used = {at: slot for at, slot in enumerate(index.slots) if slot[0] != 0}
    if sorted(offset for offset, _ in used.values()) != sorted(offsets.values()):
        found.append("the slots are not the live keys' last puts")
    for key, offset in offsets.items():
        at = index.find(data, key)
        if at is None or index.slots[at][0] != offset:
            found.append("the probe for %r does not find its record" % key)
            break
    return found


# --- workloads (both interpreters) ---


def value_of(key, generation, size):
    """``size`` bytes for ``key``'s value number ``generation``, that say whose they are."""
    head = b"%s|%d|" % (key, generation)
    if size < len(head):
        return hashlib.sha256(head).digest()[:size]
    unit = hashlib.sha256(head).digest()
    return head + (unit * ((size - len(head)) // len(unit) + 1))[: size - len(head)]


def apply_ops(contents, ops):
    """Apply operations ``("set", key, value)``, ``("del", key)`` to the dict ``contents``."""
    for op in ops:
        if op[0] == "set":
            contents[op[1]] = op[2]
        elif op[0] == "del":
            del contents[op[1]]
        elif op[0] == "del_missing":
            assert op[1] not in contents, op
    return contents


def to_json(ops):
    """``ops`` with keys and values as hex, for a JSON file."""
    return [[op[0]] + [part.hex() for part in op[1:]] for op in ops]


def from_json(items):
    return [tuple([item[0]] + [bytes.fromhex(part) for part in item[1:]]) for item in items]


#: New keys each round of ``round_ops`` writes first: about 4.7 MB, past a writer's bound.
ROUND_NEW_KEYS = 15_000


def round_ops(model, number):
    """Round ``number`` of a workload over ``model``: new keys, then overwrites and deletes.

    The first ``ROUND_NEW_KEYS`` operations are the new keys (see
    ``round_split``). Values are at least 40 bytes, so each names its key
    and generation (``value_of``).
    """
    rng = random.Random(number)
    ops = []
    for i in range(ROUND_NEW_KEYS):
        key = b"round%d-%05d" % (number, i)
        ops.append(("set", key, value_of(key, number, rng.randrange(200, 420))))
    old = sorted(model)
    for key in rng.sample(old, min(300, len(old))):
        ops.append(("set", key, value_of(key, number, rng.randrange(40, 500))))
    for key in rng.sample(old, min(300, len(old))):
        ops.append(("del", key))
    return ops


def round_split(ops):
    """Where the new keys of a ``round_ops`` round end."""
    return ROUND_NEW_KEYS
