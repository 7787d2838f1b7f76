"""The records of the log: their encoding, and the one walk over them that Python code makes.

A record is its key length and value length (``LENGTHS``), the key, the
value and the CRC-32 of key and value (``CHECKSUM``); a delete record has
the value length ``DELETED`` and no value (docs/FORMAT.md, "The data
file"). In format 2, a batch record holds records that count all or not
at all ("Batches"), and in format 2.1 an expiry record in a batch gives
the put before it a time at which it expires ("Expiry"). The pure
kernel encodes its records here and walks the log with :func:`walk` to
rebuild its index and to copy the live records when it compacts; the
tools walk it to examine a data file (``_examine``), and the
torn-tail policy (``_tail``) to look for a record that ends the file. The
compiled kernel parses the log in C, by the same rules. The checks of the
arguments that Python code takes as keys and values (``as_bytes``, ``as_pair``,
``key_list``) are here too: the pure kernel's and the sharded database's.

The constants stay in ``format``, which every module imports (``_messages``
among them); this module raises an error with a message from
``_messages``, so it could not live there without an import cycle.
"""

import mmap
import re
import struct
from collections import namedtuple
from zlib import crc32

from . import _expiry, _messages
from ._settings import CHECK_CHUNK, PROGRESS_STEP
from .errors import DBMLoadError
from .format import (
    BATCH,
    BATCH_FORMAT,
    BATCH_HEAD_SIZE,
    CHECKSUM_SIZE,
    DELETED,
    DISK_PAGE,
    DISK_SECTOR,
    EMPTY_RECORD_SIZE,
    EXPIRES,
    EXPIRY_TIME_SIZE,
    EXPIRY_VERSION,
    HEADER_SIZE,
    LENGTHS_SIZE,
    MAX_LENGTH,
    check_header,
)

#: A record's key length and value length: big-endian signed 32-bit.
LENGTHS = struct.Struct("!ii")
#: A record's trailing CRC-32: big-endian unsigned 32-bit.
CHECKSUM = struct.Struct("!I")
#: An expiry record's time, milliseconds since the Unix epoch: big-endian unsigned 64-bit.
EXPIRY_TIME = struct.Struct("!Q")
#: The bytes an expiry record adds to its key: the lengths, the time and the checksum.
EXPIRY_OVERHEAD = EMPTY_RECORD_SIZE + EXPIRY_TIME_SIZE
_NON_ZERO = re.compile(b"[^\\0]")


def checksum(key, value=b""):
    """The CRC-32 a record of ``key`` and ``value`` ends with (a delete record's: no value)."""
    return crc32(value, crc32(key))


def encode_put(key, value):
    """The bytes of a record giving the bytes ``key`` the bytes ``value``."""
    return LENGTHS.pack(len(key), len(value)) + key + value + CHECKSUM.pack(checksum(key, value))


def encode_delete(key):
    """The bytes of a record deleting the bytes ``key``."""
    return LENGTHS.pack(len(key), DELETED) + key + CHECKSUM.pack(checksum(key))


def encode_expiry(key, expires_at):
    """The bytes of an expiry record: the put of ``key`` before it expires at ``expires_at``.

    ``expires_at`` is milliseconds since the Unix epoch (docs/FORMAT.md, "Expiry").
    """
    time = EXPIRY_TIME.pack(expires_at)
    return LENGTHS.pack(len(key), EXPIRES) + key + time + CHECKSUM.pack(checksum(key, time))


def encode_expiring(key, value, expires_at):
    """The batch record of a put of ``key`` and its expiry record: ``value`` until ``expires_at``.

    Both bytes; ``expires_at`` in milliseconds since the Unix epoch. One
    batch, so that no replay holds the put without its expiry
    (docs/FORMAT.md, "Expiry"). A body over ``MAX_LENGTH`` bytes raises
    ValueError.
    """
    body = encode_put(key, value) + encode_expiry(key, expires_at)
    if len(body) > MAX_LENGTH:
        raise ValueError(_messages.BATCH_TOO_LONG % MAX_LENGTH)
    return _batch_of(body)


def _batch_of(body):
    """The batch record of the records ``body`` (bytes): its lengths, its CRC-32, the body."""
    return LENGTHS.pack(len(body), BATCH) + CHECKSUM.pack(crc32(body)) + body


def as_bytes(item, what):
    """Return the key or value ``item`` as bytes: str is encoded as UTF-8, bytes-like is copied.

    ``what`` ("keys" or "values") names what it is in the errors.
    """
    if type(item) is bytes:
        return item
    if isinstance(item, str):
        return item.encode("utf-8")
    try:
        view = memoryview(item)
    except TypeError:
        raise TypeError(_messages.WRONG_TYPE % (what, type(item).__name__)) from None
    if view.nbytes > MAX_LENGTH:
        raise ValueError(_messages.TOO_LONG % what)
    return view.tobytes()


def as_pair(item, number):
    """Item ``number`` of ``update``'s iterable as a tuple of two, as ``dict.update`` takes it.

    TypeError if it is not a sequence, ValueError if its length is not 2.
    """
    if type(item) is not tuple:
        try:
            item = tuple(item)
        except TypeError:
            raise TypeError(_messages.NOT_A_PAIR % (number, type(item).__name__)) from None
    if len(item) != 2:
        raise ValueError(_messages.NOT_TWO % (number, len(item)))
    return item


def key_list(keys, method):
    """The iterable ``keys`` of ``method`` (get_many, delete_many) as a list; one key is refused.

    A str or bytes-like object would give its characters or bytes as keys.
    """
    if isinstance(keys, (str, bytes, bytearray, memoryview)):
        raise TypeError(_messages.ONE_KEY % (method, type(keys).__name__))
    return list(keys)


def encode_batch(changes, expires_at=0):
    """The batch record of ``changes``, and where its records put values.

    ``changes`` is a list of ``(key, value)`` pairs of bytes, ``value``
    None for a delete; each put is followed by its expiry record
    (``encode_expiry``) if ``expires_at`` is not 0. Returns the record's
    bytes and, for each change in order, ``(key, value_start,
    value_length)``: where its value starts
    in the record and its length (``DELETED`` for a delete), as a
    kernel's index takes them. docs/FORMAT.md, "Batches": the body's
    length, ``BATCH``, the body's CRC-32, then the body, the records back
    to back. A body over ``MAX_LENGTH`` bytes raises ValueError.
    """
    body = bytearray()
    placed = []
    for key, value in changes:
        start = BATCH_HEAD_SIZE + len(body) + LENGTHS_SIZE + len(key)
        if value is None:
            body += encode_delete(key)
            placed.append((key, start, DELETED))
        else:
            body += encode_put(key, value)
            placed.append((key, start, len(value)))
            if expires_at:
                body += encode_expiry(key, expires_at)
    if len(body) > MAX_LENGTH:
        raise ValueError(_messages.BATCH_TOO_LONG % MAX_LENGTH)
    return _batch_of(body), placed


def batch_puts(record, expirable):
    """Where the puts of the batch record ``record`` (bytes) put values, as ``encode_batch`` says,
    and whether it holds an expiry record.

    ``record`` may come from any code: ValueError (``_messages.NOT_A_BATCH``)
    unless it is one whole batch record (``whole_batch``) whose body is
    sound records back to back (``_batch_fits``), as a replay requires,
    all of them puts, or with ``expirable`` (a file of format 2.1) expiry
    records of the put before them, which are no change of their own.
    """
    size = len(record)
    if size < BATCH_HEAD_SIZE:
        raise ValueError(_messages.NOT_A_BATCH)
    body_length, kind = LENGTHS.unpack_from(record)
    if kind != BATCH or body_length <= 0 or BATCH_HEAD_SIZE + body_length != size or not (
        whole_batch(record, 0, body_length, size)
        and _batch_fits(record, BATCH_HEAD_SIZE, body_length, expirable)
    ):
        raise ValueError(_messages.NOT_A_BATCH)
    placed = []
    expiring = False
    position = BATCH_HEAD_SIZE
    while position < size:
        key_length, value_length = LENGTHS.unpack_from(record, position)
        if value_length == DELETED:
            raise ValueError(_messages.NOT_A_BATCH)
        start = position + LENGTHS_SIZE + key_length
        if value_length == EXPIRES:
            expiring = True
            position = start + EXPIRY_TIME_SIZE + CHECKSUM_SIZE
            continue
        placed.append((record[position + LENGTHS_SIZE:start], start, value_length))
        position = start + value_length + CHECKSUM_SIZE
    return placed, expiring


def holds_batches(data, path):
    """Whether the data file whose first bytes are ``data`` may hold batch records, and expiry
    records (both bools)."""
    version = check_header(data[:HEADER_SIZE], path)
    return version[0] >= BATCH_FORMAT, version >= EXPIRY_VERSION


def expiry_after(data, start, end, key):
    """The time of the expiry record of ``key`` at ``start`` in ``data``, or None if none is there.

    ``start`` is where a put of ``key`` ends, ``end`` where ``data``'s log
    does. An expiry record lies only right after the put of its key, in
    the same batch (docs/FORMAT.md, "Expiry"), so its lengths, its key
    and ``end`` are all that tell it; the batch's checksum vouched for it.
    """
    stop = start + EXPIRY_OVERHEAD + len(key)
    if stop > end or LENGTHS.unpack_from(data, start) != (len(key), EXPIRES):
        return None
    time_start = start + LENGTHS_SIZE + len(key)
    if data[start + LENGTHS_SIZE : time_start] != key:
        return None
    return EXPIRY_TIME.unpack_from(data, time_start)[0]


def checksum_matches(data, key, value_start, end):
    """Whether the CRC-32 that ends the record of ``key`` at ``end`` matches key and value.

    The record is as :func:`walk` yields it: its value (none for a delete)
    lies in ``data`` from ``value_start`` to the checksum. A value longer
    than ``CHECK_CHUNK`` is read in place, a chunk at a time, and when
    ``data`` is a memory map each chunk's whole pages are let go once read.
    """
    value_end = end - CHECKSUM_SIZE
    (stored,) = CHECKSUM.unpack_from(data, value_end)
    if value_end - value_start <= CHECK_CHUNK:  # nearly every value: one copy, small
        return checksum(key, data[value_start:value_end]) == stored
    found = crc32(key)
    with memoryview(data) as view:
        for start in range(value_start, value_end, CHECK_CHUNK):
            stop = min(start + CHECK_CHUNK, value_end)
            found = crc32(view[start:stop], found)
            _release(data, start, stop)
    return found == stored


def _release(data, start, stop):
    """Let go of the whole pages of the memory map ``data`` between ``start`` and ``stop``.

    Nothing for anything but a map, or where ``madvise`` is not offered.
    The maps read here are read-only and shared: a page let go is read
    again from the file if it is touched again. It is advice: where the
    system refuses it (locked pages, say), the pages stay, as in C.
    """
    if not isinstance(data, mmap.mmap) or not hasattr(mmap, "MADV_DONTNEED"):
        return
    first = -(-start // mmap.PAGESIZE) * mmap.PAGESIZE
    last = stop // mmap.PAGESIZE * mmap.PAGESIZE
    if last > first:
        try:
            data.madvise(mmap.MADV_DONTNEED, first, last - first)
        except OSError:
            pass


def corrupt_record(path, offset, key_length, value_length):
    """The error of a record at ``offset`` with a negative key length or a value length below -1.

    Nothing after it can be read: the lengths are what finds the next
    record. A DBMLoadError, as the compiled kernel raises for it, with
    ``offset`` kept on it for the tools.
    """
    error = DBMLoadError(_messages.CORRUPT_RECORD % (path, offset, key_length, value_length))
    error.offset = offset
    return error


def seal(offset, live):
    """The records that follow an empty one ending at ``offset`` in the file: a put and a delete.

    A log never ends in an empty record (twelve zero bytes: docs/FORMAT.md,
    "Zero runs"). After one, a writer appends, in the same write, a put
    of a key the database does not hold (``live(key)`` says whether it
    does) with an empty value and a delete of it: they change nothing,
    every reader (0.5.1 included) reads them, and they are not zeros. The
    key is zero bytes, as few as can be, so that the delete reaches no
    sector of the file (512 bytes, so no page either) that the put does
    not: a power cut that keeps the put whole keeps the delete, and never
    shows the key.
    """
    room = DISK_SECTOR - offset % DISK_SECTOR
    size = 1
    while live(b"\0" * size) or (
        2 * (EMPTY_RECORD_SIZE + size) > room >= EMPTY_RECORD_SIZE + size
    ):
        size += 1
    key = b"\0" * size
    return encode_put(key, b"") + encode_delete(key)


def _zeros(data, start, end):
    """True if ``data`` holds only zero bytes from ``start`` to ``end``."""
    return _NON_ZERO.search(data, start, end) is None


def _lost_data(data, position, key_start, value_start, record_end, base):
    """True if the record at ``position`` holds zeros a power cut left, by its checksum.

    What a disk did not write reads as zeros that reach a page boundary:
    a lost page, or a page kept as it was before the rest of it was
    written (docs/FORMAT.md, "Lost pages"). So the checksum is read when
    the record's last byte is zero or a page boundary inside it has a
    zero byte on either side, and must fail. Pages count from the start
    of the file (``data`` holds it from ``base`` on).
    """
    suspect = not data[record_end - 1]
    boundary = -(-(base + position + 1) // DISK_PAGE) * DISK_PAGE - base
    while not suspect and boundary < record_end:
        suspect = not data[boundary - 1] or not data[boundary]
        boundary += DISK_PAGE
    key = data[key_start:value_start]
    return suspect and not checksum_matches(data, key, value_start, record_end)


def _sound(data, position, end, batches):
    """True if a whole record, of possible lengths and matching checksum, is at ``position``.

    With ``batches`` (format 2), a batch record whose body's checksum
    matches is one too.
    """
    if end - position < LENGTHS_SIZE:
        return False
    key_length, value_length = LENGTHS.unpack_from(data, position)
    if batches and value_length == BATCH:
        return key_length > 0 and whole_batch(data, position, key_length, end)
    if key_length < 0 or value_length < DELETED:
        return False
    value_start = position + LENGTHS_SIZE + key_length
    record_end = value_start + max(value_length, 0) + CHECKSUM_SIZE
    return record_end <= end and checksum_matches(
        data, data[position + LENGTHS_SIZE : value_start], value_start, record_end
    )


def sound_live(data, start, key, value_start, value_length, end, batches, in_batch):
    """Where the put at ``start`` ends if its own bytes are sound, else None: the compaction's
    judge of a live record (the compiled kernel's ``sound_live_size``).

    ``key`` and ``value_start`` are the record's, read within ``end``.
    Sound is within ``end`` with a matching checksum; for the empty
    record (twelve zero bytes, whose checksum of nothing always matches),
    also a run of them followed by a sound record, as the replay reads
    zero runs (docs/FORMAT.md, "Zero runs"): zeros a lost page or sector
    left over a record's lengths read as one, and the log never ends in
    one. But not ``in_batch`` (inside a batch whose body's checksum
    matches), where the replay reads no zero run either: a batch may end
    in the empty record, and the log in that batch.
    """
    if value_length < 0:
        return None
    stop = value_start + value_length + CHECKSUM_SIZE
    if stop > end or not checksum_matches(data, key, value_start, stop):
        return None
    if stop - start == EMPTY_RECORD_SIZE and not in_batch and not _sound(
        data, _zero_run_end(data, start, end), end, batches
    ):
        return None
    return stop


def whole_batch(data, position, body_length, end):
    """True if the batch record at ``position`` ends by ``end`` and its body's checksum matches."""
    body_start = position + BATCH_HEAD_SIZE
    if body_start + body_length > end:
        return False
    (stored,) = CHECKSUM.unpack_from(data, position + LENGTHS_SIZE)
    with memoryview(data)[body_start : body_start + body_length] as body:
        return crc32(body) == stored


def kept_expiring(data, start, stop, end, key, now):
    """What a compaction writes of the live put of ``key`` from ``start`` to ``stop`` in ``data``
    (whose log ends at ``end``), if an expiry record follows it.

    None if none does (the put is copied as it is); False if one does
    whose checksum fails (damage: the put's expiry cannot be told); b""
    if it expired by ``now`` (the put is left out); else the batch record
    of the put and its expiry record, as ``encode_expiring`` writes it
    (docs/FORMAT.md, "Expiry").
    """
    expires_at = expiry_after(data, stop, end, key)
    if expires_at is None:
        return None
    time_start = stop + LENGTHS_SIZE + len(key)
    expiry_end = time_start + EXPIRY_TIME_SIZE + CHECKSUM_SIZE
    if not checksum_matches(data, key, time_start, expiry_end):
        return False
    if expires_at <= now:
        return b""
    return _batch_of(data[start:expiry_end])


def _batch_fits(data, position, length, expirable):
    """True if the ``length`` bytes at ``position`` are sound records back to back, none a batch.

    A batch's body, checked once before its records are walked, so that
    they need no check of their own: their lengths are possible, none
    crosses the body's end, and each one's checksum matches (a compaction
    copies them out of the batch, where a record with zeros and a failing
    checksum would read as lost data). An expiry record is one only with
    ``expirable`` (a file of format 2.1) and right after a put of its key.
    """
    end = position + length
    put_key = None  # the key of the record before, if it was a put
    with memoryview(data) as view:
        while end - position >= LENGTHS_SIZE:
            record_end = _body_record_end(view, position, end)
            if record_end is None:
                return False
            key_length, value_length = LENGTHS.unpack_from(view, position)
            key = bytes(view[position + LENGTHS_SIZE : position + LENGTHS_SIZE + key_length])
            if value_length == EXPIRES and (not expirable or key != put_key):
                return False
            put_key = key if value_length >= 0 else None
            position = record_end
    return position == end


def _body_record_end(view, position, end):
    """Where the record at ``position`` ends if a batch's body may hold it, else None.

    It may if its lengths are possible and not a batch's (an expiry
    record's are), it ends by ``end`` and its checksum matches. ``view``
    is a memoryview of the data, with at least the record's lengths from
    ``position``.
    """
    key_length, value_length = LENGTHS.unpack_from(view, position)
    if key_length < 0 or value_length < EXPIRES or value_length == BATCH:
        return None
    value_start = position + LENGTHS_SIZE + key_length
    record_end = value_start + _value_size(value_length) + CHECKSUM_SIZE
    if record_end > end:
        return None
    key = view[position + LENGTHS_SIZE : value_start]
    if not checksum_matches(view, key, value_start, record_end):
        return None
    return record_end


def cut_batch(data, position, end):
    """True if ``data`` from ``position`` to ``end`` is a batch record's write cut short.

    What a killed writer leaves of a batch written straight to the file:
    a batch's lengths that claim more than there is, its body's checksum,
    then records a batch's body may hold, back to back, the last one
    possibly cut (``end`` inside it). And no body ended sooner: if the
    records up to one of theirs have the CRC-32 the head gives, the batch
    was whole there and its length field is what is wrong (the test that
    makes a batch whole at every replay; docs/FORMAT.md, "Batches").
    ``data`` holds at least the record's lengths from ``position``.
    """
    body_length, value_length = LENGTHS.unpack_from(data, position)
    record = position + BATCH_HEAD_SIZE
    if value_length != BATCH or body_length <= 0 or record + body_length <= end:
        return False
    if record > end:
        return True  # cut inside the head's checksum
    (stored,) = CHECKSUM.unpack_from(data, position + LENGTHS_SIZE)
    found = 0
    with memoryview(data) as view:
        while end - record >= LENGTHS_SIZE:
            record_end = _body_record_end(view, record, end)
            if record_end is None:
                return _runs_past(view, record, end)
            found = crc32(view[record:record_end], found)
            if found == stored:
                return False
            record = record_end
    return True


def _value_size(value_length):
    """The bytes between the key and the checksum of a record of ``value_length``: its value's,
    none for a delete, an expiry record's time."""
    if value_length == EXPIRES:
        return EXPIRY_TIME_SIZE
    return max(value_length, 0)


def _runs_past(data, position, end):
    """True if the record at ``position``, of possible lengths and no batch, runs past ``end``.

    So are a record's lengths cut short (fewer than their bytes before ``end``).
    """
    if end - position < LENGTHS_SIZE:
        return True
    key_length, value_length = LENGTHS.unpack_from(data, position)
    if key_length < 0 or value_length < EXPIRES or value_length == BATCH:
        return False
    return position + EMPTY_RECORD_SIZE + key_length + _value_size(value_length) > end


def _zero_run_end(data, position, end):
    """Where the run of empty records (twelve zero bytes each) from ``position`` ends."""
    found = _NON_ZERO.search(data, position, end)
    stop = end if found is None else found.start()
    return position + (stop - position) // EMPTY_RECORD_SIZE * EMPTY_RECORD_SIZE


def walk(data, start, path, base=0, end=None, batches=False, expirable=False):
    """Yield the complete records of ``data`` from ``start`` on, in log order.

    ``data`` (bytes or a memory map) holds a data file from its offset
    ``base`` on; ``start``, ``end`` and what is yielded are positions in
    ``data``. Each record comes as ``(start, key, value_start,
    value_length, end)``: where it starts, its key (what slicing ``data``
    gives), where its value starts, its value length (``DELETED`` for a
    delete record, which has no value) and where it ends, after its
    checksum. Checksums are read only where a power cut may have left
    zeros (:func:`checksum_matches` checks one).

    With ``batches`` (a file of format 2), a batch record yields the
    records of its body, once its body's checksum matches; one whose
    checksum fails is treated as lost data. Its records end where the
    batch does, so the last one's end is the batch's. With ``expirable``
    (format 2.1), a body may hold expiry records: one is yielded with the
    value length ``EXPIRES``, its "value" the time's 8 bytes.

    Each record's lengths are checked before they are used: impossible
    ones raise :func:`corrupt_record`'s DBMLoadError, with the record's
    offset in the file, naming ``path``; so does a batch whose body is
    not records back to back. The walk stops at ``end`` (default:
    the end of ``data``), at the start of a record that runs past it
    (an incomplete last record), and where a power cut left zeros
    (docs/FORMAT.md, "Zero runs" and "Lost pages"): at a run of empty
    records that a sound record does not follow, and at a record
    holding zeros the disk did not write (:func:`_lost_data`). It stops
    where the last record yielded ends, or at ``start`` if none was.
    """
    if end is None:
        end = len(data)
    unpack_lengths = LENGTHS.unpack_from
    position = start
    followed = start  # empty records before this one are followed by a sound record
    batch_end = start  # records before this one are in a batch whose checksum matched
    # The loop of the pure kernel's replay: kept to the arithmetic it needs.
    while end - position >= LENGTHS_SIZE:
        key_length, value_length = unpack_lengths(data, position)
        if value_length == BATCH and batches and position >= batch_end and key_length > 0:
            if not whole_batch(data, position, key_length, end):
                return  # running past the end, or lost data
            if not _batch_fits(data, position + BATCH_HEAD_SIZE, key_length, expirable):
                raise corrupt_record(path, base + position, key_length, value_length)
            position += BATCH_HEAD_SIZE
            batch_end = position + key_length
            continue
        if key_length < 0 or value_length < DELETED:
            if value_length != EXPIRES or position >= batch_end:
                raise corrupt_record(path, base + position, key_length, value_length)
            # An expiry record, in a body that _batch_fits checked.
            key_start = position + LENGTHS_SIZE
            value_start = key_start + key_length
            record_end = value_start + EXPIRY_TIME_SIZE + CHECKSUM_SIZE
            yield position, data[key_start:value_start], value_start, EXPIRES, record_end
            position = record_end
            continue
        key_start = position + LENGTHS_SIZE
        value_start = key_start + key_length
        record_end = value_start + (value_length if value_length > 0 else 0) + CHECKSUM_SIZE
        # A batch's records are whole and sound (whole_batch, _batch_fits).
        if position >= batch_end and record_end > end:
            return
        if position >= batch_end and position >= followed and (
            not data[record_end - 1]
            or (base + position) // DISK_PAGE != (base + record_end - 1) // DISK_PAGE
        ):
            if record_end - position == EMPTY_RECORD_SIZE and _zeros(data, position, record_end):
                followed = _zero_run_end(data, position, end)
                if not _sound(data, followed, end, batches):
                    return
            elif _lost_data(data, position, key_start, value_start, record_end, base):
                return
        yield position, data[key_start:value_start], value_start, value_length, record_end
        position = record_end


#: What one walk over a whole data file finds (``_interface.summarize_log``). ``expiry_bytes``:
#: what a compaction adds to copy each live put that has an expiry record and has not expired
#: with it (a batch's head and the expiry record, docs/FORMAT.md "Expiry").
LogSummary = namedtuple(
    "LogSummary",
    "records end corrupt_at keys live_bytes bad_checksums expired_bytes expiry_bytes",
)


def summarize_log(data, check_checksums, progress, path):
    """``_interface.summarize_log`` in Python: :func:`walk`, a dict of live records.

    Checksums are read through a view, so that a large value is not copied.
    An expiry record counts with its put, not as a record of its own.
    """
    if len(data) < HEADER_SIZE:
        raise ValueError(_messages.SHORTER_THAN_HEADER % HEADER_SIZE)
    batches, expirable = holds_batches(data, path)
    live = {}
    expiries = {}  # key: where its live put starts, and when that expires
    records = 0
    end = HEADER_SIZE
    corrupt_at = None
    bad = []
    next_report = PROGRESS_STEP
    with memoryview(data) as view:
        try:
            for start, key, value_start, value_length, end in walk(
                data, HEADER_SIZE, path, batches=batches, expirable=expirable
            ):
                if check_checksums and not checksum_matches(view, key, value_start, end):
                    bad.append(start)
                if value_length == EXPIRES:
                    expiries[key] = (live[key][0], EXPIRY_TIME.unpack_from(data, value_start)[0])
                    continue
                records += 1
                if value_length == DELETED:
                    live.pop(key, None)
                else:
                    live[key] = (start, end - start)
                if progress is not None and end >= next_report:
                    next_report = end + PROGRESS_STEP
                    progress(end, len(data))
        except DBMLoadError as exc:  # a record of impossible lengths
            corrupt_at = end = exc.offset
    if progress is not None:
        progress(end, len(data))
    now = _expiry.now()
    live_starts = {start for start, _ in live.values()}
    expired_bytes = expiry_bytes = 0
    for key, (start, expires_at) in expiries.items():
        if key in live and live[key][0] == start:
            if expires_at <= now:
                expired_bytes += live[key][1]
            else:
                expiry_bytes += BATCH_HEAD_SIZE + EXPIRY_OVERHEAD + len(key)
    return LogSummary(
        records=records,
        end=end,
        corrupt_at=corrupt_at,
        keys=len(live),
        live_bytes=sum(size for _, size in live.values()),
        bad_checksums=[(offset, offset in live_starts) for offset in bad],
        expired_bytes=expired_bytes,
        expiry_bytes=expiry_bytes,
    )
