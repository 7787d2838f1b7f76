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

from . import _messages
from .errors import DBMError, DBMLoadError, TornTailWarning
from .format import (
    CHECKSUM_SIZE,
    COMPACT_NAME,
    DATA_NAME,
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


def read_up_to(fd, size, offset):
    """Read ``size`` bytes at ``offset``, fewer only where the file ends.

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
                break
            parts.append(part)
            done += len(part)
        data = b"".join(parts)
    return data


#: Bytes of new log a reader's ``refresh()`` reads at a time (more for a
#: record larger than that): its memory does not grow with what it catches up on.
CATCH_UP_CHUNK = 64 << 20


def catch_up(fd, start, size, replay):
    """Feed the log of ``fd`` from ``start`` to ``size`` to ``replay``, a chunk at a time.

    The log is read with ``pread``, not through a map (docs/FORMAT.md,
    "Readers"). ``replay(data, base)`` applies the complete records of
    ``data`` (the file from offset ``base``) and returns where it stopped.
    A chunk that holds no complete record is read again twice as large,
    unless it already reached the end of the file: then the last record
    is incomplete, and the replay waits for it. Returns where it stopped.
    """
    chunk = CATCH_UP_CHUNK
    while start < size:
        wanted = min(size - start, chunk)
        data = read_up_to(fd, wanted, start)
        end = replay(data, start)
        if end == start:
            if len(data) < wanted or wanted == size - start:
                break
            chunk *= 2
        start = end
    return start


def written_beyond(fd, end, pending):
    """How many of ``pending`` buffered bytes a failed flush already put in the file ``fd``.

    The file is the writer's alone and its log is known to end at
    ``end``: whatever lies past that is the first part of the buffer
    (docs/FORMAT.md, "Writing"), and the next flush resumes after it.
    """
    return min(max(os.fstat(fd).st_size - end, 0), pending)


def read_exactly(fd, size, offset, path):
    """Read exactly ``size`` bytes at ``offset``; DBMError if the file ends first."""
    data = read_up_to(fd, size, offset)
    if len(data) < size:
        raise DBMError(
            "%s: expected %d bytes at offset %d, the file ended after %d"
            % (path, size, offset, len(data))
        )
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


def cut_torn_tail(fd, directory, offset):
    """Cut the data file (open as ``fd``) back to ``offset``, keeping the cut bytes.

    The bytes from ``offset`` to the end go to ``data.torn-OFFSET`` in the
    database's ``directory`` (``.1``, ``.2`` ... added if that name is
    taken), flushed to disk before the data file is truncated, so a wrong
    guess about what is torn never destroys anything; if they cannot be
    kept, nothing is cut. Returns the name of the kept file.
    """
    end = os.fstat(fd).st_size
    keep_fd, keep_name = directory.create_unused("%s%d" % (TORN_PREFIX, offset))
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
            directory.remove(keep_name)
        except OSError:
            pass
        raise
    directory.fsync()
    os.ftruncate(fd, offset)
    os.fsync(fd)
    return keep_name


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


def settle_tail(fd, directory, end, size, writable, buffer_size, recover, stacklevel):
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
    path = directory.data_path
    tail = size - end
    if tail > torn_tail_limit(buffer_size) and not recover and log_goes_on(fd, end, size):
        raise DBMLoadError(_messages.DAMAGED_LENGTH % (path, tail, end, TORN_PREFIX, end))
    warnings.warn(
        _messages.TORN_TAIL % (path, tail, end),
        TornTailWarning,
        stacklevel=stacklevel,
    )
    if writable:
        try:
            cut_torn_tail(fd, directory, end)
        except OSError as exc:
            raise os_error(exc, "cannot cut the torn tail of %s" % path) from None


def open_data(path, writable, dir_fd=None):
    """Open the data file: read-only, or for appending; errors as DBMError."""
    flags = (os.O_RDWR | os.O_APPEND) if writable else os.O_RDONLY
    try:
        return os.open(path, flags | BINARY, dir_fd=dir_fd)
    except OSError as exc:
        raise os_error(exc, "cannot open semidbm data file") from None


def reader_position(directory, fd):
    """For a reader's refresh: whether ``data`` is now another file than ``fd`` (a
    compaction swapped it), and ``fd``'s size. Errors as DBMError."""
    try:
        current = directory.stat(DATA_NAME)
        opened = os.fstat(fd)
    except OSError as exc:
        raise os_error(exc, "cannot refresh %s" % directory.data_path) from None
    replaced = (current.st_dev, current.st_ino) != (opened.st_dev, opened.st_ino)
    return replaced, opened.st_size


def write_compacted(directory, fd, write_records):
    """Write a compacted copy of the data file (open as ``fd``) beside it, flushed to disk.

    The copy, ``data.compact`` in ``directory``, gets the data file's
    permissions and header; ``write_records(out_fd)`` writes the live
    records after the header. Returns what ``write_records`` returned.
    On failure the copy is removed and the error raised as a DBMError.
    """
    try:
        mode = os.fstat(fd).st_mode & 0o7777
        out = directory.open(COMPACT_NAME, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | BINARY, mode)
        try:
            directory.chmod(out, COMPACT_NAME, mode)
            write_all(out, HEADER)
            result = write_records(out)
            os.fsync(out)
        finally:
            os.close(out)
    except BaseException as exc:
        try:
            directory.remove(COMPACT_NAME)
        except OSError:
            pass
        if isinstance(exc, OSError) and not isinstance(exc, DBMError):
            raise os_error(exc, "cannot compact %s" % directory.data_path) from None
        raise
    return result


def install_compacted(directory):
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
        directory.replace(COMPACT_NAME, DATA_NAME)
        replaced = True
        directory.fsync()
    except OSError as exc:
        if not replaced:
            try:
                directory.remove(COMPACT_NAME)
            except OSError:
                pass
        return replaced, os_error(exc, "cannot compact %s" % directory.data_path)
    return replaced, None


class Directory:
    """A database directory, held open so that renaming it redirects nothing.

    Every file operation after opening goes through the open directory
    (the POSIX ``*at`` calls, Python's ``dir_fd=``): a database whose
    directory is renamed while it is open keeps working on its own files,
    and never touches whatever is later made at its old path. Windows has
    no ``dir_fd``, and refuses to rename a directory with open files in
    it; there ``fd`` is None and the operations take the path
    (docs/FORMAT.md, "The directory").

    ``path`` is the directory's path when it was opened (for messages).
    """

    def __init__(self, path):
        self.path = path
        self.data_path = os.path.join(path, DATA_NAME)
        self.fd = None
        if os.name != "nt":
            directory = getattr(os, "O_DIRECTORY", 0)
            try:
                self.fd = os.open(path, os.O_RDONLY | directory)
            except PermissionError:
                # Search permission alone (--x) lets a reader open the data
                # file by name; Linux's O_PATH needs no more.
                if not hasattr(os, "O_PATH"):
                    raise
                self.fd = os.open(path, os.O_PATH | directory)

    def _name(self, name):
        """What to pass for ``name`` with ``dir_fd=self.fd``."""
        return name if self.fd is not None else os.path.join(self.path, name)

    def open(self, name, flags, mode=0o777):
        """``os.open`` of the file ``name`` in the directory."""
        return os.open(self._name(name), flags, mode, dir_fd=self.fd)

    def open_data(self, writable):
        """Open the data file: read-only, or for appending; errors as DBMError."""
        return open_data(self._name(DATA_NAME), writable, self.fd)

    def stat(self, name):
        """``os.stat`` of ``name`` in the directory (the link itself, not a target)."""
        return os.stat(self._name(name), dir_fd=self.fd, follow_symlinks=False)

    def exists(self, name):
        """True if ``name`` exists in the directory (a dangling link counts)."""
        try:
            self.stat(name)
        except FileNotFoundError:
            return False
        return True

    def listdir(self):
        """The names in the directory."""
        return os.listdir(self.fd if self.fd is not None else self.path)

    def replace(self, source, target):
        """Rename ``source`` over ``target``, both in the directory."""
        os.replace(
            self._name(source), self._name(target), src_dir_fd=self.fd, dst_dir_fd=self.fd
        )

    def remove(self, name):
        """Remove the file ``name``."""
        os.remove(self._name(name), dir_fd=self.fd)

    def chmod(self, fd, name, mode):
        """Give the file ``name``, open as ``fd``, the permissions ``mode`` (no umask)."""
        if hasattr(os, "fchmod"):
            os.fchmod(fd, mode)
        else:
            os.chmod(self._name(name), mode)

    def create_unused(self, name):
        """Create a new file ``name``, or ``name.1``, ``name.2`` ... if taken; return (fd, name)."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | BINARY
        candidate, number = name, 0
        while True:
            try:
                return self.open(candidate, flags, 0o666), candidate
            except FileExistsError:
                number += 1
                candidate = "%s.%d" % (name, number)

    def create_file(self, name, contents, mode):
        """Create ``name`` holding ``contents`` (``mode`` less the umask), flushed to disk.

        An existing file is truncated.
        """
        fd = self.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | BINARY, mode)
        try:
            write_all(fd, contents)
            os.fsync(fd)
        finally:
            os.close(fd)

    def fsync(self):
        """Flush the directory's entries to disk, so a new or renamed file survives a crash.

        Windows cannot open a directory for this and flushes the metadata
        of a rename itself, so there it does nothing.
        """
        if self.fd is not None:
            os.fsync(self.fd)

    def close(self):
        """Close the directory; closing again does nothing.

        Later operations fail (a closed descriptor); they never fall back
        to the path.
        """
        fd = self.fd
        if fd is not None and fd >= 0:
            self.fd = -1
            os.close(fd)

    def __del__(self):
        self.close()
