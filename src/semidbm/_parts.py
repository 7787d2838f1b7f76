"""Parts of a database's keys, for readers that share the keys out (``semidbm.dask``).

Part ``i`` of ``n`` under a ``seed`` holds the live keys whose 32-bit
hash ``key_hash(seed, key)`` falls in the ``i``-th of ``n`` equal ranges
of hashes: ``part_of(hashed, n) == i``. The rule names no kernel and no
table, so the parts of one state of a database are disjoint and cover
every key whichever kernel lists them. It is the compiled kernel's slot
rule too (``home_slot`` in ``_core_pieces/table.pxi``: a key's probe
starts at ``(hash * capacity) >> 32``), so with the seed of its index,
each part is a range of slots of the mapped index file and of the
private table (``_core_pieces/parts.pxi``): a worker lists its part
without a pass over every key. The pure kernel hashes each of its keys
here (``_pure.Store._part``). A part is listed as its keys, its values
or its ``(key, value)`` pairs (``WHAT``), each value read as a lookup
reads it.

``log_state`` is what tells one state of a database's log from another,
so that a part listed in another state (written since, compacted,
replaced) is refused rather than overlapping or missing keys. It reads
the log's bytes, not the file's identity, so an identical copy of the
log (another machine's, another inode) is the same state.
"""

import struct

from ._index_file import sample_crc, sample_ranges

#: The multiplier of ``key_hash``'s rounds (table.pxi's ``hash_key``).
ROUND = 0x9E3779B97F4A7C15
#: The multiplier of ``key_hash``'s final mix (table.pxi's ``hash_mix``).
MIX = 0xD6E8FEB86659FD93
#: 64-bit arithmetic.
MASK = (1 << 64) - 1
#: Hashes are 32-bit: part ``i`` of ``n`` is a range of ``HASHES // n`` or so of them.
HASHES = 1 << 32
WORD = struct.Struct("<Q")
#: What a part is listed as (``Store._part``'s ``what``): ``(key, value)`` pairs, keys or values.
WHAT = ("items", "keys", "values")


def key_hash(seed, key):
    """The 32-bit hash of the bytes ``key`` under ``seed``: the compiled kernel's ``hash_key``.

    docs/FORMAT.md, "The index file", describes it; the compiled kernel
    computes it in C, and this twin lets the pure kernel list the same parts.
    """
    size = len(key)
    state = seed ^ ((size * ROUND) & MASK)
    whole = size - size % 8
    for (word,) in WORD.iter_unpack(key[:whole]):
        state = ((state ^ word) * ROUND) & MASK
        state ^= state >> 29
    if whole < size:
        state = ((state ^ int.from_bytes(key[whole:], "little")) * ROUND) & MASK
    return mix(state) & 0xFFFFFFFF


def mix(value):
    """The final mix of ``key_hash`` (table.pxi's ``hash_mix``), on 64 bits."""
    value ^= value >> 32
    value = (value * MIX) & MASK
    value ^= value >> 32
    value = (value * MIX) & MASK
    return value ^ (value >> 32)


def part_of(hashed, parts):
    """The part, of ``parts``, that a key of hash ``hashed`` belongs to."""
    return (hashed * parts) >> 32


def check_what(what):
    """Refuse a ``what`` that names none of :data:`WHAT` (ValueError)."""
    if what not in WHAT:
        raise ValueError("what must be one of %s, not %r" % (", ".join(WHAT), what))


def shaped(keys, values, what):
    """A part as ``what`` (one of :data:`WHAT`) asks for it, from its keys and their values."""
    if what == "keys":
        return keys
    return values if what == "values" else list(zip(keys, values))


def check_part(part, parts, seed, what):
    """Refuse a part that is not one of ``parts`` (1 to 2**32), a seed that is not 64-bit,
    or a ``what`` that ``check_what`` refuses."""
    for name, number in (("part", part), ("parts", parts), ("seed", seed)):
        if not isinstance(number, int) or isinstance(number, bool):
            raise TypeError("%s must be an int, not %s" % (name, type(number).__name__))
    if not 1 <= parts <= HASHES:
        raise ValueError("parts must be from 1 to 2**32, not %d" % parts)
    if not 0 <= part < parts:
        raise ValueError("part must be from 0 to %d, not %d" % (parts - 1, part))
    if not 0 <= seed <= MASK:
        raise ValueError("seed must be from 0 to 2**64 - 1, not %d" % seed)
    check_what(what)


def log_state(fd, end, disk_end):
    """The state of a log: ``(end, CRC-32s of the sampled ranges of its bytes in the file)``.

    ``fd`` is the open data file, ``end`` the end of the log the index
    holds (a writer's buffered records included), ``disk_end`` the bytes of
    it in the file, sampled as an index file's header samples the log it
    covers (``_index_file.sample_ranges``: the first and last 4 KiB, and 30
    ranges between). A write changes ``end`` and the last bytes; a
    compaction gives a new file whose first bytes hold a new checkpoint's
    random nonce; another log of the same length differs in its last
    record or elsewhere sampled. Only the bytes count: a copy of the log
    has its state. docs/FORMAT.md, "Parts of the keys", says what this
    cannot see.
    """
    return end, tuple(sample_crc(fd, offset, length) for offset, length in sample_ranges(disk_end))
