"""File-system helpers shared by the API layer and both kernels.

They hide the differences between POSIX and Windows (binary mode,
positional reads, flushing a directory, a directory held open), turn the
operating system's errors into :class:`~semidbm.errors.DBMError` with the
errno kept, and read a log that grows (a reader's ``refresh``). What to
do with a torn tail is in ``_tail``; the compaction's file swap in
``_compaction``.
"""

import os
import threading

from . import _messages
from .errors import DBMError
from .format import DATA_NAME

#: Flags that keep Windows from translating line endings.
BINARY = getattr(os, "O_BINARY", 0)


def os_error(exc, action):
    """Return a DBMError for the OSError ``exc`` raised while doing ``action``."""
    return DBMError(exc.errno, "%s: %s" % (action, exc.strerror), exc.filename)


def restated(exc, cls, say):
    """The OSError ``exc`` as an error of class ``cls`` whose message is ``say(its message)``.

    One with an errno keeps it and its file name, which callers test (an
    ENOSPC stays one); one without is restated whole.
    """
    if exc.errno is None:
        return cls(say(str(exc)))
    return cls(exc.errno, say(exc.strerror), exc.filename)


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
        raise DBMError(_messages.ENDED_EARLY % (path, size, offset, len(data)))
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


class BackgroundFsync:
    """An fsync of a file in a thread of its own, so that the caller can write meanwhile.

    The writer's ``sync()`` and ``close()`` flush the data file this way
    while they write a new index file beside it (docs/FORMAT.md,
    "Writing an index file"): the two reach the disk together instead of one
    after the other.
    """

    def __init__(self, fd):
        self._fd = fd
        self._failure = None
        self._thread = threading.Thread(target=self._run, name="semidbm fsync", daemon=True)
        self._thread.start()

    def _run(self):
        try:
            os.fsync(self._fd)
        except OSError as exc:
            self._failure = exc

    def wait(self):
        """Wait for the fsync to end; return its OSError, or None if the file is on disk."""
        self._thread.join()
        return self._failure


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


def writer_position(directory, identity):
    """For a shared writer's turn: whether ``data`` is now another file than the one it has
    open, whose ``file_identity`` is ``identity``, and else its size. Errors as DBMError.

    One ``stat`` of the name, where a reader's refresh makes two: the
    file the writer has open is known by its identity. (Its link count
    alone would not do: a compaction leaves a file that has a second name,
    a backup's hard link, with one link, as if it were still ``data``.)
    """
    try:
        current = directory.stat(DATA_NAME)
    except OSError as exc:
        raise os_error(exc, "cannot catch up with %s" % directory.data_path) from None
    if (current.st_dev, current.st_ino) != identity:
        return True, 0
    return False, current.st_size


def file_identity(fd):
    """What tells the open file ``fd`` from others: ``(st_dev, st_ino)``."""
    opened = os.fstat(fd)
    return opened.st_dev, opened.st_ino


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

    def link(self, source, target):
        """Give the file ``source`` the name ``target`` too: FileExistsError if it is taken.

        Unlike a rename, which replaces what has the name, so that two
        processes creating the same file never replace each other's.
        """
        os.link(
            self._name(source), self._name(target), src_dir_fd=self.fd, dst_dir_fd=self.fd
        )

    def remove(self, name):
        """Remove the file ``name``."""
        os.remove(self._name(name), dir_fd=self.fd)

    def discard(self, name):
        """Remove the file ``name`` left by a step that failed; that failure is what is reported.

        So an error removing it (the file never made, say) is ignored.
        """
        try:
            self.remove(name)
        except OSError:
            pass

    def chmod(self, fd, name, mode):
        """Give the file ``name``, open as ``fd``, the permissions ``mode`` (no umask)."""
        if hasattr(os, "fchmod"):
            os.fchmod(fd, mode)
        else:
            os.chmod(self._name(name), mode)

    def create_like(self, name, fd):
        """Create (or truncate) ``name`` for writing with the permissions of the file ``fd``.

        For the files that take the data file's place or stand beside it
        (a compaction's copy, an index file): whoever may read the data may
        read them, and no one else. Returns the new file's descriptor.
        """
        mode = os.fstat(fd).st_mode & 0o7777
        out = self.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | BINARY, mode)
        try:
            self.chmod(out, name, mode)
        except BaseException:
            os.close(out)
            raise
        return out

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

