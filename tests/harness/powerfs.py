"""A FUSE file system that records every operation that changes what a disk would hold.

The power-loss harness (``tests/harness/powerloss.py``) runs a workload
on this file system, then rebuilds, from the recorded trace, the trees a
power cut after any of its operations may leave
(``tests/harness/powermodel.py`` says what may survive). The file system
keeps its files in the memory of its own process, the server: a
``powermodel.Disk`` that each operation is applied to as it is recorded.
The workload must run in another process: semidbm reads its data file
through a memory map, and a page fault there holds the reading
process's interpreter lock while the kernel waits for the server.

Recorded, in the order the kernel sends them: file creation, ``mkdir``,
writes, size changes (``ftruncate``, ``O_TRUNC``), renames, removals,
and ``fsync``/``fdatasync`` of files and of directories. Reads, lookups
and attribute queries change nothing a disk holds and are not recorded.
The workload writes notes to the file ``/.powerloss-marks``: each write
there is one ``("mark", text)`` in the trace, in order with the
operations around it, and that file is no part of the tree.

The server speaks the kernel's FUSE protocol on ``/dev/fuse`` itself
(``linux/fuse.h``, protocol 7.31, a version every kernel since 5.4
speaks) and mounts with ``mount(2)``: nothing to install, but it must
run as root on Linux. It is inode-based, as the kernel is: a file
removed or renamed over while open stays readable and ``fstat``-able
through its descriptor (a reader's data file after a compaction). It
answers one request at a time and asks the kernel for:

- the page cache on (no ``direct_io``), so that ``mmap`` works;
- no ``writeback_cache``: the cache is write-through, each ``write()``
  reaches the server before it returns, in requests of at most
  ``MAX_WRITE`` bytes (``big_writes``), so no write is ever hidden in
  the kernel's memory;
- no attribute or name caching (every ``stat`` and lookup asks), and the
  cache of a file dropped at each open;
- locks handled by the kernel (``flock`` works as on any local file).

Run as a script, it is the server: ``powerfs.py MOUNTPOINT TRACE
[INITIAL]`` serves until unmounted, then writes the trace (a pickle) to
``TRACE``. ``INITIAL`` is a pickled tree (``powermodel.read_tree``) the
file system starts with, all of it durable.
"""

import ctypes
import ctypes.util
import errno
import os
import pickle
import select
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import time
import traceback

if __package__ in (None, ""):  # run as a script: the server
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from tests.harness import powermodel

#: The file whose writes are the workload's notes in the trace.
MARKS_NAME = ".powerloss-marks"
#: The largest write request the kernel sends.
MAX_WRITE = 128 * 1024
#: Seconds to wait for a mount, or for the server to end after unmounting.
TIMEOUT = 20

_MARKS_INO = 1 << 40
_BLOCK = 4096

# --- the protocol (linux/fuse.h) ---

_MAJOR, _MINOR = 7, 31
_IN_HEADER = struct.Struct("=IIQQIIIHH")  # len, opcode, unique, nodeid, uid, gid, pid, ...
_OUT_HEADER = struct.Struct("=IiQ")  # len, error, unique
_ATTR = struct.Struct("=QQQQQQIIIIIIIIII")  # fuse_attr, 88 bytes
_ENTRY_OUT = struct.Struct("=QQQQII")  # nodeid, generation, entry and attr validity: + attr
_ATTR_OUT = struct.Struct("=QII")  # attr validity, dummy: + attr
_OPEN_OUT = struct.Struct("=QII")  # fh, open flags, padding
_INIT_IN = struct.Struct("=IIII")  # major, minor, max_readahead, flags
_INIT_OUT = struct.Struct("=IIIIHHIIHHI7I")  # fuse_init_out, 64 bytes
_SETATTR_IN = struct.Struct("=IIQQQQQQIIIIIIII")  # valid, padding, fh, size, ... mode ...
_CREATE_IN = struct.Struct("=IIII")  # flags, mode, umask, open flags
_MKDIR_IN = struct.Struct("=II")  # mode, umask
_OPEN_IN = struct.Struct("=II")  # flags, open flags
_FH_IN = struct.Struct("=Q")  # the fh that read, write, release, fsync, flush... start with
_READ_IN = struct.Struct("=QQII")  # fh, offset, size, flags (then more this server ignores)
_WRITE_IN = struct.Struct("=QQIIQII")  # fuse_write_in, 40 bytes: the data follows
_WRITE_OUT = struct.Struct("=II")
_RENAME_IN = struct.Struct("=Q")  # newdir: the two names follow
_RENAME2_IN = struct.Struct("=QII")  # newdir, flags, padding
_DIRENT = struct.Struct("=QQII")  # ino, next offset, name length, type: the name follows
_STATFS_OUT = struct.Struct("=QQQQQIIII6I")

_LOOKUP, _FORGET, _GETATTR, _SETATTR = 1, 2, 3, 4
_MKDIR, _UNLINK, _RMDIR, _RENAME = 9, 10, 11, 12
_OPEN, _READ, _WRITE, _STATFS, _RELEASE, _FSYNC, _FLUSH, _INIT = 14, 15, 16, 17, 18, 20, 25, 26
_OPENDIR, _READDIR, _RELEASEDIR, _FSYNCDIR, _ACCESS, _CREATE = 27, 28, 29, 30, 34, 35
_INTERRUPT, _DESTROY, _BATCH_FORGET, _RENAME2 = 36, 38, 42, 45
_NO_REPLY = (_FORGET, _BATCH_FORGET, _INTERRUPT)

_FATTR_MODE, _FATTR_SIZE = 1 << 0, 1 << 3
_FUSE_BIG_WRITES = 1 << 5
_FOPEN_DIRECT_IO = 1 << 0
_MS_NOSUID, _MS_NODEV = 2, 4


class _Error(Exception):
    """An errno to answer a request with."""

    def __init__(self, number):
        super().__init__(number)
        self.errno = number


def _name(data):
    """The first NUL-terminated name in ``data``, and the rest after it."""
    end = data.index(b"\0")
    return os.fsdecode(data[:end]), data[end + 1 :]


class Server:
    """The file system: answers the kernel's requests from a ``Disk``, records the changes."""

    def __init__(self, disk):
        self.disk = disk
        self.trace = []
        #: True once a request raised an unexpected exception (the server then exits with 1).
        self.broken = False
        self._handles = {}  # fh -> (inode, directory listing or None)
        self._next_handle = 1
        self._next_ino = disk.next_ino()
        self._modes = {}

    def _do(self, *op):
        self.disk.apply(op)
        self.trace.append(op)

    def _node(self, ino):
        try:
            return self.disk.nodes[ino]
        except KeyError:
            raise _Error(errno.ENOENT) from None

    def _directory(self, ino):
        node = self._node(ino)
        if not isinstance(node, powermodel.Directory):
            raise _Error(errno.ENOTDIR)
        return node

    def _attr(self, ino):
        now = time.time_ns()
        seconds, nanoseconds = divmod(now, 10**9)
        if ino == _MARKS_INO:
            mode, nlink, size = stat.S_IFREG | 0o666, 1, 0
        else:
            node = self._node(ino)
            if isinstance(node, powermodel.Directory):
                mode, nlink, size = stat.S_IFDIR | self._modes.get(ino, 0o755), 2, _BLOCK
            else:
                mode, nlink, size = stat.S_IFREG | self._modes.get(ino, 0o644), 1, len(node.data)
        return _ATTR.pack(ino, size, (size + 511) // 512, seconds, seconds, seconds,
                          nanoseconds, nanoseconds, nanoseconds, mode, nlink, 0, 0, 0, _BLOCK, 0)

    def _entry(self, ino):
        return _ENTRY_OUT.pack(ino, 0, 0, 0, 0, 0) + self._attr(ino)

    def _handle(self, ino, listing=None):
        handle = self._next_handle
        self._next_handle += 1
        self._handles[handle] = (ino, listing)
        return handle

    def _new_ino(self, mode):
        ino = self._next_ino
        self._next_ino += 1
        self._modes[ino] = mode & 0o7777
        return ino

    # --- requests: each takes (node id, the request's body) and returns the reply's body ---

    def init(self, nodeid, body):
        major, minor, readahead, _ = _INIT_IN.unpack_from(body)
        if major != _MAJOR:
            raise _Error(errno.EPROTO)
        return _INIT_OUT.pack(_MAJOR, min(minor, _MINOR), readahead, _FUSE_BIG_WRITES, 12, 9,
                              MAX_WRITE, 1, MAX_WRITE // 4096, 0, 0, *[0] * 7)

    def lookup(self, nodeid, body):
        name, _ = _name(body)
        if nodeid == powermodel.ROOT and name == MARKS_NAME:
            return self._entry(_MARKS_INO)
        try:
            return self._entry(self._directory(nodeid).entries[name])
        except KeyError:
            raise _Error(errno.ENOENT) from None

    def getattr(self, nodeid, body):
        return _ATTR_OUT.pack(0, 0, 0) + self._attr(nodeid)

    def setattr(self, nodeid, body):
        fields = _SETATTR_IN.unpack_from(body)
        valid, size, mode = fields[0], fields[3], fields[11]
        if valid & _FATTR_SIZE and nodeid != _MARKS_INO:
            if isinstance(self._node(nodeid), powermodel.Directory):
                raise _Error(errno.EISDIR)
            self._do("truncate", nodeid, size)
        if valid & _FATTR_MODE:
            self._modes[nodeid] = mode & 0o7777
        return self.getattr(nodeid, b"")

    def mkdir(self, nodeid, body):
        mode, _ = _MKDIR_IN.unpack_from(body)
        name, _ = _name(body[_MKDIR_IN.size :])
        if name in self._directory(nodeid).entries:
            raise _Error(errno.EEXIST)
        ino = self._new_ino(mode)
        self._do("mkdir", nodeid, name, ino)
        return self._entry(ino)

    def create(self, nodeid, body):
        flags, mode, _, _ = _CREATE_IN.unpack_from(body)
        name, _ = _name(body[_CREATE_IN.size :])
        if nodeid == powermodel.ROOT and name == MARKS_NAME:
            ino, open_flags = _MARKS_INO, _FOPEN_DIRECT_IO
        else:
            if name in self._directory(nodeid).entries:
                raise _Error(errno.EEXIST)
            ino, open_flags = self._new_ino(mode), 0
            self._do("create", nodeid, name, ino)
        return self._entry(ino) + _OPEN_OUT.pack(self._handle(ino), open_flags, 0)

    def unlink(self, nodeid, body):
        name, _ = _name(body)
        entries = self._directory(nodeid).entries
        if name not in entries:
            raise _Error(errno.ENOENT)
        if isinstance(self._node(entries[name]), powermodel.Directory):
            raise _Error(errno.EISDIR)
        self._do("unlink", nodeid, name)
        return b""

    def rmdir(self, nodeid, body):
        name, _ = _name(body)
        entries = self._directory(nodeid).entries
        if name not in entries:
            raise _Error(errno.ENOENT)
        if self._directory(entries[name]).entries:
            raise _Error(errno.ENOTEMPTY)
        self._do("rmdir", nodeid, name)
        return b""

    def rename(self, nodeid, body):
        (new_parent,) = _RENAME_IN.unpack_from(body)
        return self._rename(nodeid, new_parent, body[_RENAME_IN.size :])

    def rename2(self, nodeid, body):
        new_parent, flags, _ = _RENAME2_IN.unpack_from(body)
        if flags:
            raise _Error(errno.EINVAL)
        return self._rename(nodeid, new_parent, body[_RENAME2_IN.size :])

    def _rename(self, parent, new_parent, names):
        name, rest = _name(names)
        new_name, _ = _name(rest)
        if name not in self._directory(parent).entries:
            raise _Error(errno.ENOENT)
        target = self._directory(new_parent).entries.get(new_name)
        moved = self._node(self.disk.nodes[parent].entries[name])
        if target is not None:
            replaced = self._node(target)
            if isinstance(replaced, powermodel.Directory) != isinstance(
                moved, powermodel.Directory
            ):
                raise _Error(errno.EISDIR if isinstance(replaced, powermodel.Directory)
                             else errno.ENOTDIR)
            if isinstance(replaced, powermodel.Directory) and replaced.entries:
                raise _Error(errno.ENOTEMPTY)
        self._do("rename", parent, name, new_parent, new_name)
        return b""

    def open(self, nodeid, body):
        flags, _ = _OPEN_IN.unpack_from(body)
        if nodeid == _MARKS_INO:
            return _OPEN_OUT.pack(self._handle(nodeid), _FOPEN_DIRECT_IO, 0)
        node = self._node(nodeid)
        if isinstance(node, powermodel.Directory):
            raise _Error(errno.EISDIR)
        if flags & os.O_TRUNC and node.data:
            self._do("truncate", nodeid, 0)
        return _OPEN_OUT.pack(self._handle(nodeid), 0, 0)

    def read(self, nodeid, body):
        _, offset, size, _ = _READ_IN.unpack_from(body)
        if nodeid == _MARKS_INO:
            return b""
        return bytes(self._node(nodeid).data[offset : offset + size])

    def write(self, nodeid, body):
        _, offset, size, _, _, _, _ = _WRITE_IN.unpack_from(body)
        data = bytes(body[_WRITE_IN.size : _WRITE_IN.size + size])
        if nodeid == _MARKS_INO:
            self._do("mark", data.decode("utf-8"))
        else:
            self._do("write", nodeid, offset, data)
        return _WRITE_OUT.pack(size, 0)

    def fsync(self, nodeid, body):
        if nodeid != _MARKS_INO:
            self._do("fsync", nodeid)
        return b""

    fsyncdir = fsync

    def opendir(self, nodeid, body):
        entries = self._directory(nodeid).entries
        listing = [(".", nodeid), ("..", nodeid)] + sorted(entries.items())
        return _OPEN_OUT.pack(self._handle(nodeid, listing), 0, 0)

    def readdir(self, nodeid, body):
        handle, offset, size, _ = _READ_IN.unpack_from(body)
        listing = self._handles[handle][1]
        out = bytearray()
        for position in range(offset, len(listing)):
            name, ino = listing[position]
            raw = os.fsencode(name)
            kind = 4 if isinstance(self.disk.nodes.get(ino), powermodel.Directory) else 8
            record = _DIRENT.pack(ino, position + 1, len(raw), kind) + raw
            record += bytes(-len(record) % 8)
            if len(out) + len(record) > size:
                break
            out += record
        return bytes(out)

    def release(self, nodeid, body):
        (handle,) = _FH_IN.unpack_from(body)
        self._handles.pop(handle, None)
        return b""

    releasedir = release

    def flush(self, nodeid, body):
        return b""

    def access(self, nodeid, body):
        self._node(nodeid)
        return b""

    def statfs(self, nodeid, body):
        return _STATFS_OUT.pack(1 << 20, 1 << 19, 1 << 19, 1 << 16, 1 << 15, _BLOCK, 255,
                                _BLOCK, 0, *[0] * 6)

    def destroy(self, nodeid, body):
        return b""

    _OPERATIONS = {
        _INIT: "init", _LOOKUP: "lookup", _GETATTR: "getattr", _SETATTR: "setattr",
        _MKDIR: "mkdir", _UNLINK: "unlink", _RMDIR: "rmdir", _RENAME: "rename",
        _RENAME2: "rename2", _OPEN: "open", _READ: "read", _WRITE: "write",
        _STATFS: "statfs", _RELEASE: "release", _FSYNC: "fsync", _FLUSH: "flush",
        _OPENDIR: "opendir", _READDIR: "readdir", _RELEASEDIR: "releasedir",
        _FSYNCDIR: "fsyncdir", _ACCESS: "access", _CREATE: "create", _DESTROY: "destroy",
    }

    def answer(self, request):
        """The reply to one request read from ``/dev/fuse`` (bytes), or None if it has none."""
        _, opcode, unique, nodeid, _, _, _, _, _ = _IN_HEADER.unpack_from(request)
        if opcode in _NO_REPLY:
            return None
        body = request[_IN_HEADER.size :]
        name = self._OPERATIONS.get(opcode)
        error, reply = 0, b""
        if name is None:
            error = -errno.ENOSYS  # the kernel stops asking (xattrs) or says the call fails
        else:
            try:
                reply = getattr(self, name)(nodeid, body)
            except _Error as exc:
                error = -exc.errno
            except Exception:  # noqa: BLE001 - a bug here: answer, and fail at the end
                traceback.print_exc()
                self.broken = True
                error = -errno.EIO
        return _OUT_HEADER.pack(_OUT_HEADER.size + len(reply), error, unique) + reply

    def serve(self, fd, ready):
        """Answer requests on the FUSE device ``fd`` until the file system is unmounted.

        ``ready()`` is called once the kernel's first request (INIT) is answered.
        """
        size = MAX_WRITE + 64 * 1024
        initialized = False
        while True:
            try:
                request = os.read(fd, size)
            except OSError as exc:
                if exc.errno == errno.ENODEV:  # unmounted
                    return
                if exc.errno in (errno.EINTR, errno.EAGAIN, errno.ENOENT):
                    continue  # an interrupted or withdrawn request
                raise
            reply = self.answer(request)
            if reply is not None:
                try:
                    os.write(fd, reply)
                except OSError as exc:
                    if exc.errno != errno.ENOENT:  # the request was interrupted meanwhile
                        raise
            if not initialized:
                initialized = True
                ready()


def _libc():
    return ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def _check(result, what):
    if result != 0:
        number = ctypes.get_errno()
        raise OSError(number, "%s: %s" % (what, os.strerror(number)))


def serve(mountpoint, trace_path, initial_path=None):
    """Mount the file system at ``mountpoint``, serve until unmounted, save the trace."""
    initial = {}
    if initial_path:
        with open(initial_path, "rb") as stream:
            initial = pickle.load(stream)
    server = Server(powermodel.Disk.from_tree(initial))
    fd = os.open("/dev/fuse", os.O_RDWR | os.O_CLOEXEC)
    options = "fd=%d,rootmode=%o,user_id=%d,group_id=%d,max_read=%d" % (
        fd, stat.S_IFDIR | 0o755, os.getuid(), os.getgid(), MAX_WRITE)
    _check(_libc().mount(b"powerloss", os.fsencode(mountpoint), b"fuse.powerloss",
                         _MS_NOSUID | _MS_NODEV, options.encode("ascii")), "mount")

    def ready():
        sys.stdout.write("ready\n")
        sys.stdout.flush()

    server.serve(fd, ready)
    os.close(fd)
    with open(trace_path + ".part", "wb") as stream:
        pickle.dump(server.trace, stream)
    os.replace(trace_path + ".part", trace_path)
    if server.broken:
        sys.exit("the server met an unexpected error (above)")


# --- the client: mounting, unmounting, getting the trace ---


def _unmount(path, wait=1.0):
    """Unmount ``path``; if it stays busy for ``wait`` seconds, detach it. True if detached."""
    libc = _libc()
    target = os.fsencode(path)
    deadline = time.monotonic() + wait
    while True:
        if libc.umount2(target, 0) == 0:
            return False
        number = ctypes.get_errno()
        if number != errno.EBUSY:
            raise OSError(number, "umount: %s" % os.strerror(number), path)
        if time.monotonic() > deadline:
            _check(libc.umount2(target, 2), "umount")  # MNT_DETACH
            return True
        time.sleep(0.01)


class Mount:
    """A recording file system mounted at ``mountpoint`` by a server process.

    ``with Mount(...) as mount:`` mounts it and waits until it serves;
    leaving the block unmounts it, and ``mount.trace`` (a list of
    operations) is then the recording. ``initial`` is the tree
    (``powermodel.read_tree``) to start from, all of it durable. Files
    still open on it when the block ends make that an error.
    """

    def __init__(self, mountpoint, initial=None):
        self.mountpoint = os.fspath(mountpoint)
        self.initial = initial or {}
        self.trace = None
        self._process = None
        self._scratch = None

    @property
    def marks_path(self):
        """The file whose writes become marks in the trace."""
        return os.path.join(self.mountpoint, MARKS_NAME)

    def __enter__(self):
        os.makedirs(self.mountpoint, exist_ok=True)
        self._scratch = tempfile.mkdtemp(prefix="powerfs-")
        initial_path = os.path.join(self._scratch, "initial")
        with open(initial_path, "wb") as stream:
            pickle.dump(self.initial, stream)
        self._process = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), self.mountpoint,
             os.path.join(self._scratch, "trace"), initial_path],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        ready, _, _ = select.select([self._process.stdout], [], [], TIMEOUT)
        line = self._process.stdout.readline() if ready else b""
        if line != b"ready\n":
            self._stop()
            raise OSError("the FUSE server did not mount %s: %s" % (
                self.mountpoint, self._stderr()))
        return self

    def __exit__(self, *exc_info):
        try:
            if _unmount(self.mountpoint):
                self._stop()
                if exc_info[0] is None:
                    raise OSError("files were left open on %s" % self.mountpoint)
                return
            self._process.wait(TIMEOUT)
            if self._process.returncode != 0:
                raise OSError("the FUSE server failed: %s" % self._stderr())
            with open(os.path.join(self._scratch, "trace"), "rb") as stream:
                self.trace = pickle.load(stream)
        finally:
            self._stop()

    def _stderr(self):
        try:
            return self._process.stderr.read().decode("utf-8", "replace").strip()[-2000:]
        except (OSError, ValueError):
            return ""

    def _stop(self):
        """End the server (killing it aborts the connection: calls on the mount then fail)."""
        if self._process is not None:
            if self._process.poll() is None:
                self._process.kill()
                self._process.wait()
            for stream in (self._process.stdout, self._process.stderr):
                stream.close()
            self._process = None
        if os.path.ismount(self.mountpoint):
            try:
                _unmount(self.mountpoint, wait=0)
            except OSError:
                pass
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None


_availability = []


def unavailable():
    """Why the recording file system cannot run here (a sentence), or None if it can.

    Needs Linux, root (to mount) and ``/dev/fuse``; then mounts once and
    creates and fsyncs a file. The answer is kept for the process.
    """
    if not _availability:
        if not sys.platform.startswith("linux"):
            reason = "the power-loss file system needs Linux (FUSE)"
        elif os.geteuid() != 0:
            reason = "the power-loss file system mounts FUSE itself, which needs root"
        elif not os.access("/dev/fuse", os.R_OK | os.W_OK):
            reason = "/dev/fuse is missing or not usable (modprobe fuse; in a container, "
            reason += "--device /dev/fuse --cap-add SYS_ADMIN)"
        else:
            reason = _try_mount()
        _availability.append(reason)
    return _availability[0]


def _try_mount():
    """Mount once, create and fsync a file; None if that worked, else why not."""
    place = tempfile.mkdtemp(prefix="powerfs-probe-")
    try:
        mount = Mount(os.path.join(place, "mnt"))
        with mount:
            fd = os.open(os.path.join(mount.mountpoint, "probe"), os.O_CREAT | os.O_WRONLY)
            try:
                os.write(fd, b"probe")
                os.fsync(fd)
            finally:
                os.close(fd)
        expected = ["create", "write", "fsync"]
        if [op[0] for op in mount.trace] != expected:
            return "the FUSE probe recorded %r, not %r" % (mount.trace, expected)
    except OSError as exc:
        return "cannot mount a FUSE file system here: %s" % exc
    finally:
        shutil.rmtree(place, ignore_errors=True)
    return None


if __name__ == "__main__":
    serve(*sys.argv[1:])
