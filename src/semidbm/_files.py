"""File-system helpers shared by the API layer and both kernels.

They hide the differences between POSIX and Windows (binary mode,
positional reads, flushing a directory) and turn the operating system's
errors into :class:`~semidbm.errors.DBMError` with the errno kept.
"""

import os
import re
import struct
import warnings
import zlib

from .errors import DBMError, DBMLoadError, TornTailWarning
from .format import (
    CHECKSUM_SIZE,
    COMPACT_NAME,
    HEADER,
    LENGTHS_SIZE,
    TORN_PREFIX,
    torn_tail_limit,
)

#: How far back from the end of the file ``log_goes_on`` looks for a last record.
LAST_RECORD_SEARCH = 1 << 20
_LENGTHS = struct.Struct("!ii")
_CHECKSUM = struct.Struct("!I")
_ZERO_RUNS = re.compile(b"\\0+")

#: Flags that keep Windows from translating line endings.
BINARY = getattr(os, "O_BINARY", 0)


def os_error(exc, action):
    """Return a DBMError for the OSError ``exc`` raised while doing ``action``."""
    return DBMError(exc.errno, "%s: %s" % (action, exc.strerror), exc.filename)


if hasattr(os, "pread"):
    read_at = os.pread
else:  # Windows has no pread; nothing else moves this descriptor's offset.

    def read_at(fd, size, offset):
        """Read up to ``size`` bytes at ``offset`` of ``fd``."""
        os.lseek(fd, offset, os.SEEK_SET)
        return os.read(fd, size)


def read_exactly(fd, size, offset, path):
    """Read exactly ``size`` bytes at ``offset``; only the end of the file stops it short.

    One read may return less than asked without being at the end (Linux
    moves at most about 2 GiB per call, Windows at most 2**31 - 1 bytes),
    so short reads are continued.
    """
    data = read_at(fd, size, offset)
    if len(data) < size:
        parts = [data]
        done = len(data)
        while done < size:
            part = read_at(fd, size - done, offset + done)
            if not part:
                raise DBMError(
                    "%s: expected %d bytes at offset %d, the file ended after %d"
                    % (path, size, offset, done)
                )
            parts.append(part)
            done += len(part)
        data = b"".join(parts)
    return data


def write_all(fd, data):
    """Write all of ``data`` to ``fd``, looping over short writes."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def fsync_directory(path):
    """Flush a directory's entries to disk, so a new or renamed file survives a crash.

    Windows cannot open a directory for this and flushes the metadata of
    a rename itself, so there it does nothing.
    """
    if os.name == "nt":
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def create_file(path, contents, mode):
    """Create ``path`` holding ``contents`` with permissions ``mode`` (minus umask), flushed to disk.

    An existing file is truncated.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | BINARY, mode)
    try:
        write_all(fd, contents)
        os.fsync(fd)
    finally:
        os.close(fd)


def unused_name(path):
    """Return ``path``, or ``path.1``, ``path.2`` ... whichever names no existing file."""
    candidate = path
    number = 0
    while os.path.lexists(candidate):
        number += 1
        candidate = "%s.%d" % (path, number)
    return candidate


def cut_torn_tail(fd, data_path, offset):
    """Cut ``data_path`` (open as ``fd``) back to ``offset``, keeping the cut bytes.

    The bytes from ``offset`` to the end go to ``data.torn-OFFSET`` beside
    the data file (a free name is found if that one is taken), flushed to
    disk before the data file is truncated, so a wrong guess about what
    is torn never destroys anything; if they cannot be kept, nothing is
    cut. Returns the path of the kept bytes.
    """
    directory = os.path.dirname(data_path)
    keep_path = unused_name(os.path.join(directory, "%s%d" % (TORN_PREFIX, offset)))
    end = os.fstat(fd).st_size
    keep_fd = os.open(keep_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | BINARY, 0o666)
    try:
        try:
            position = offset
            while position < end:
                chunk = read_at(fd, min(end - position, 1 << 20), position)
                if not chunk:
                    break
                write_all(keep_fd, chunk)
                position += len(chunk)
            os.fsync(keep_fd)
        finally:
            os.close(keep_fd)
    except BaseException:
        # A partial copy (the disk is full, say) keeps nothing: remove it.
        try:
            os.remove(keep_path)
        except OSError:
            pass
        raise
    fsync_directory(directory)
    os.ftruncate(fd, offset)
    os.fsync(fd)
    return keep_path


def log_goes_on(fd, start, size):
    """True if a complete record with a valid checksum ends exactly at the end of the file.

    The unreadable tail from ``start`` is one record that claims to
    reach past the end of the file. If a write was cut short, the file
    ends inside that record; if instead its length field was damaged,
    the records written after it are still there and the last of them
    ends where the file ends. Only the last ``LAST_RECORD_SEARCH`` bytes
    are searched, and a record with neither key nor value bytes (its
    checksum is 0, and any run of zero bytes reads as such records) is
    no evidence.
    """
    first = max(start + 1, size - LAST_RECORD_SEARCH)
    data = read_at(fd, size - first, first)
    unpack = _LENGTHS.unpack_from
    overhead = LENGTHS_SIZE + CHECKSUM_SIZE
    value_end = len(data) - CHECKSUM_SIZE
    (expected,) = _CHECKSUM.unpack_from(data, value_end) if value_end >= 0 else (None,)
    for run in _ZERO_RUNS.finditer(data, 0, len(data) - overhead + 1):
        # A key length below 2**24 starts with a zero byte; from eight zero
        # bytes on, lengths read (0, 0): only a run's last bytes can start one.
        for position in range(max(run.start(), run.end() - LENGTHS_SIZE), run.end()):
            key_length, value_length = unpack(data, position)
            covered = key_length + max(value_length, 0)
            if value_length < -1 or covered == 0 or position + overhead + covered != len(data):
                continue  # no record ending here, or one with nothing checksummed
            key_end = position + LENGTHS_SIZE + key_length
            key_crc = zlib.crc32(data[position + LENGTHS_SIZE : key_end])
            if zlib.crc32(data[key_end:value_end], key_crc) == expected:
                return True
    return False


def settle_tail(fd, path, end, size, writable, buffer_size, recover, stacklevel):
    """Deal with the bytes from ``end`` to ``size`` that the index rebuild could not parse.

    The tail is torn, left out with a TornTailWarning, when it is no
    longer than one write buffer, or when the file ends inside the
    tail's one record (a record larger than the buffer is written
    straight to the file, so a killed writer can leave any part of it).
    A writer cuts a torn tail off at once, keeping its bytes beside the
    data file. A longer tail after which a complete record ends the
    file means a damaged length inside the log: DBMLoadError, unless
    ``recover``. ``stacklevel`` makes the warning point at the caller of
    ``semidbm.open``.
    """
    if end == size:
        return
    tail = size - end
    if tail > torn_tail_limit(buffer_size) and not recover and log_goes_on(fd, end, size):
        raise DBMLoadError(
            "%s: %d unreadable bytes at offset %d, a record whose length runs "
            "past records that follow it; open with recover=True to drop them "
            "(a writer keeps them in %s%d)" % (path, tail, end, TORN_PREFIX, end)
        )
    warnings.warn(
        "%s: dropped a torn tail of %d bytes at offset %d" % (path, tail, end),
        TornTailWarning,
        stacklevel=stacklevel,
    )
    if writable:
        try:
            cut_torn_tail(fd, path, end)
        except OSError as exc:
            raise os_error(exc, "cannot cut the torn tail of %s" % path) from None


def open_data(path, writable):
    """Open the data file: read-only, or for appending."""
    flags = (os.O_RDWR | os.O_APPEND) if writable else os.O_RDONLY
    try:
        return os.open(path, flags | BINARY)
    except OSError as exc:
        raise os_error(exc, "cannot open semidbm data file") from None


def write_compacted(data_path, fd, write_records):
    """Write a compacted copy of ``data_path`` (open as ``fd``) beside it, flushed to disk.

    The copy gets the data file's permissions and header;
    ``write_records(out_fd)`` writes the live records after the header.
    Returns the copy's path and what ``write_records`` returned. On
    failure the copy is removed and the error raised as a DBMError.
    """
    temporary = os.path.join(os.path.dirname(data_path), COMPACT_NAME)
    try:
        mode = os.fstat(fd).st_mode & 0o7777
        out = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | BINARY, mode)
        try:
            os.chmod(temporary, mode)
            write_all(out, HEADER)
            result = write_records(out)
            os.fsync(out)
        finally:
            os.close(out)
    except BaseException as exc:
        try:
            os.remove(temporary)
        except OSError:
            pass
        if isinstance(exc, OSError) and not isinstance(exc, DBMError):
            raise os_error(exc, "cannot compact %s" % data_path) from None
        raise
    return temporary, result


def install_compacted(temporary, data_path):
    """Rename the compacted copy over the data file, then flush the directory.

    The caller has closed the data file first: Windows cannot rename over
    a file that is open, and so refuses while any other process (a
    reader) has it open; the copy is then removed and the data file left
    as it was. Returns ``(replaced, failure)``: whether the rename
    happened, and the DBMError to raise once the caller has reopened the
    data file, or None.
    """
    replaced = False
    try:
        os.replace(temporary, data_path)
        replaced = True
        fsync_directory(os.path.dirname(data_path))
    except OSError as exc:
        if not replaced:
            try:
                os.remove(temporary)
            except OSError:
                pass
        return replaced, os_error(exc, "cannot compact %s" % data_path)
    return replaced, None
