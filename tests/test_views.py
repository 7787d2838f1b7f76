"""Zero-copy reads: ``Database.view`` (docs/views.md).

A view must show the bytes of the value it was made for for as long as
it is held: through writes, remaps, compactions, refreshes, close, the
database's collection and fork(). The compiled kernel's views point into
the memory map of the data file, which they keep; where the tests can
see it (Linux's ``/proc/self/maps``) they check that a view's bytes are
in that map, and that the map goes once the last view of it is released.
The pure-Python kernel's views, and the compiled kernel's of a value
still in the append buffer, are views of copies.
"""

import ctypes
import gc
import os
import threading
import weakref

import pytest

import semidbm
from semidbm import _checkpoint, _compaction
from semidbm.format import COMPACT_NAME

from .conftest import kernel_name
from .support.child import run

posix_only = pytest.mark.skipif(os.name != "posix", reason="fork is POSIX")
#: Larger than the default append buffer (1 MiB): written straight to the file.
LARGE = 2 << 20

linux_maps = pytest.mark.skipif(
    not os.path.exists("/proc/self/maps"), reason="needs Linux's /proc/self/maps"
)


def compiled(kernel):
    return kernel_name(kernel) == "cython"


def large(mark, size=LARGE):
    """A value of ``size`` bytes, all ``mark``: a view of another value cannot pass for it."""
    return bytes([mark]) * size


def data_inode(dbpath):
    return os.stat(dbpath / "data").st_ino


def maps_of(dbpath, inode):
    """The address ranges this process maps of the data file of ``dbpath`` with ``inode``.

    The file may since have been renamed over (a compaction): the line then
    says ``(deleted)`` after the path.
    """
    ranges = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and int(fields[4]) == inode:
                if fields[5].startswith(str(dbpath / "data")):
                    start, end = (int(part, 16) for part in fields[0].split("-"))
                    ranges.append((start, end))
    return ranges


def address_of(view):
    """Where the bytes of ``view`` are in this process's memory (the buffer protocol's ``buf``)."""
    api = ctypes.PyDLL(None)
    api.PyObject_GetBuffer.argtypes = [ctypes.py_object, ctypes.c_void_p, ctypes.c_int]
    api.PyBuffer_Release.argtypes = [ctypes.c_void_p]
    buffer = (ctypes.c_char * 256)()  # room for a Py_buffer, whose first field is buf
    if api.PyObject_GetBuffer(view, buffer, 0) != 0:
        raise AssertionError("no buffer")
    try:
        return ctypes.c_void_p.from_buffer(buffer).value
    finally:
        api.PyBuffer_Release(buffer)


def in_map(view, dbpath, inode):
    """Whether ``view``'s bytes lie inside a map of the data file ``inode`` of ``dbpath``."""
    address = address_of(view)
    return any(start <= address and address + len(view) <= end
               for start, end in maps_of(dbpath, inode))


# --- What a view is ---


def test_a_view_holds_the_value_and_is_read_only(dbopen, dbpath):
    with dbopen(dbpath, "c") as db:
        db[b"small"] = b"a small value"
        db["large"] = large(7)
        db[b"empty"] = b""
        for key in (b"small", "large", bytearray(b"empty"), memoryview(b"large")):
            view = db.view(key)
            assert isinstance(view, memoryview)
            assert view.readonly and view.format == "B" and view.ndim == 1
            assert view == db[key] and bytes(view) == db[key]
            if len(view):
                with pytest.raises(TypeError):
                    view[0] = 1
            for exporter in (view, view.obj):
                with pytest.raises(TypeError, match="not writable"):
                    ctypes.c_char.from_buffer(exporter)


def test_missing_keys_wrong_types_and_a_closed_database_fail_as_reads_do(dbopen, dbpath):
    db = dbopen(dbpath, "c")
    db[b"k"] = b"v"
    with pytest.raises(KeyError) as raised:
        db.view("absent")
    assert raised.value.args == ("absent",)
    for wrong in (1, None, 2.5):
        with pytest.raises(TypeError) as read_error:
            db[wrong]
        with pytest.raises(TypeError) as view_error:
            db.view(wrong)
        assert str(view_error.value) == str(read_error.value)
    db.close()
    with pytest.raises(semidbm.error, match="is closed"):
        db.view(b"k")


def test_a_view_is_refused_from_a_compactions_progress_callback(dbopen, dbpath):
    with dbopen(dbpath, "c") as db:
        db[b"k"] = b"v"
        with pytest.raises(semidbm.error):
            db.compact(progress=lambda done, total: db.view(b"k"))
        assert bytes(db.view(b"k")) == b"v"


def test_a_reader_views_values(dbopen, dbpath):
    with dbopen(dbpath, "c") as db:
        db[b"k"] = large(3)
    with dbopen(dbpath, "r") as reader:
        assert reader.view(b"k") == large(3)


@linux_maps
def test_a_value_in_the_file_is_viewed_in_the_map_without_a_copy(kernel, dbopen, dbpath):
    with dbopen(dbpath, "c") as db:
        db[b"k"] = large(5)
        view = db.view(b"k")
        assert view == large(5)
        assert in_map(view, dbpath, data_inode(dbpath)) == compiled(kernel)
        # Twice the same bytes: no copy either time.
        assert (address_of(db.view(b"k")) == address_of(view)) == compiled(kernel)


def test_a_value_in_the_append_buffer_is_viewed_in_a_copy(dbopen, dbpath):
    with dbopen(dbpath, "c") as db:
        db[b"k"] = b"buffered"
        view = db.view(b"k")
        assert type(view.obj) is bytes
        db[b"k"] = b"replaced"
        db.sync()
        assert view == b"buffered" and db[b"k"] == b"replaced"


@linux_maps
def test_without_a_buffer_every_value_is_in_the_map(kernel, dbopen, dbpath):
    with dbopen(dbpath, "c", buffer_size=0) as db:
        db[b"k"] = b"small"
        assert in_map(db.view(b"k"), dbpath, data_inode(dbpath)) == compiled(kernel)


# --- A view stays as it was made ---


def test_a_view_survives_an_overwrite_of_its_key(dbopen, dbpath):
    with dbopen(dbpath, "c") as db:
        db[b"k"] = large(1)
        view = db.view(b"k")
        db[b"k"] = large(2)
        del db[b"k"]
        db[b"k"] = b"small"
        db.sync()
        assert view == large(1)


@linux_maps
def test_a_view_survives_the_remaps_of_a_growing_file(kernel, dbopen, dbpath):
    # A writer maps 64 MiB past a small file (MAP_HEADROOM): 64 MiB of
    # values later, it has mapped the file again.
    chunk = 32 << 20
    with dbopen(dbpath, "c") as db:
        db[b"first"] = large(1)
        view = db.view(b"first")
        for mark in (2, 3):
            db[b"k%d" % mark] = large(mark, chunk)
        inode = data_inode(dbpath)
        assert view == large(1)
        if compiled(kernel):
            assert len(maps_of(dbpath, inode)) == 2  # the view's and the store's
            assert in_map(view, dbpath, inode)
        assert db.view(b"k3") == large(3, chunk)
        view.release()
        if compiled(kernel):
            assert len(maps_of(dbpath, inode)) == 1


@linux_maps
def test_a_view_keeps_a_compacted_away_file_until_it_is_released(kernel, dbopen, dbpath):
    with dbopen(dbpath, "c") as db:
        db[b"k"] = large(1)
        db[b"other"] = large(9)
        view = db.view(b"k")
        part = view[LARGE // 2 :]  # a slice holds the same map
        old = data_inode(dbpath)
        db[b"k"] = large(2)
        db.compact()
        assert data_inode(dbpath) != old
        assert view == large(1) and part == large(1, LARGE // 2)
        assert db[b"k"] == large(2) and db.view(b"k") == large(2)
        assert bool(maps_of(dbpath, old)) == compiled(kernel)
        view.release()
        assert bool(maps_of(dbpath, old)) == compiled(kernel)  # the slice is still held
        part.release()
        assert maps_of(dbpath, old) == []


@linux_maps
def test_a_view_outlives_close_and_the_map_goes_with_the_last_one(dbopen, dbpath):
    db = dbopen(dbpath, "c")
    db[b"a"] = large(1)
    db[b"b"] = large(2)
    first, second = db.view(b"a"), db.view(b"b")
    inode = data_inode(dbpath)
    db.close()
    assert first == large(1) and second == large(2)
    first.release()
    assert second == large(2)
    del second
    assert maps_of(dbpath, inode) == []


def test_a_view_outlives_the_collected_database(dbopen, dbpath):
    db = dbopen(dbpath, "c")
    db[b"k"] = large(6)
    db[b"buffered"] = b"written at collection"
    view = db.view(b"k")
    collected = weakref.ref(db)
    del db
    gc.collect()
    assert collected() is None
    assert view == large(6)
    with dbopen(dbpath, "r") as reader:
        assert reader[b"buffered"] == b"written at collection"


@linux_maps
def test_a_readers_view_survives_its_refresh_after_the_writer_compacts(kernel, dbopen, dbpath):
    with dbopen(dbpath, "c") as writer:
        writer[b"k"] = large(1)
        writer.sync()
        with dbopen(dbpath, "r") as reader:
            view = reader.view(b"k")
            old = data_inode(dbpath)
            writer[b"more"] = large(3)
            writer.sync()
            reader.refresh()  # the file grew: the reader maps it again
            assert view == large(1) and reader.view(b"more") == large(3)
            writer[b"k"] = large(2)
            writer.compact()
            reader.refresh()
            assert reader[b"k"] == large(2) and reader.view(b"k") == large(2)
            assert view == large(1)
            assert bool(maps_of(dbpath, old)) == compiled(kernel)
            view.release()
            assert maps_of(dbpath, old) == []


# --- Checksums ---


def test_with_verify_checksums_a_damaged_value_is_refused_when_viewed(dbopen, dbpath):
    with dbopen(dbpath, "c") as db:
        db[b"k"] = large(4)
        db[b"sound"] = large(8)
    # The first record after the first checkpoint: lengths (8), key (1), then the value.
    with open(dbpath / "data", "r+b") as data:
        data.seek(_checkpoint.START_SIZE + 8 + 1 + 1000)
        data.write(b"\x05")
    with dbopen(dbpath, "r", verify_checksums=True) as db:
        with pytest.raises(semidbm.DBMChecksumError, match="checksum mismatch"):
            db.view(b"k")
        assert db.view(b"sound") == large(8)
    with dbopen(dbpath, "r") as db:
        view = db.view(b"k")
        assert view == db[b"k"] and view[1000] == 5 and view[999] == 4


# --- Windows, where a mapped file cannot be renamed over ---


def test_where_a_mapped_file_cannot_be_replaced_compaction_waits_for_views(
    kernel, dbopen, dbpath, monkeypatch
):
    monkeypatch.setattr(_compaction, "RENAME_OVER_MAPPED_REFUSED", True)
    with dbopen(dbpath, "c") as db:
        db[b"k"] = large(1)
        db[b"buffered"] = b"x"
        buffered_view = db.view(b"buffered")  # of a copy: it holds no map
        view = db.view(b"k")
        before = (data_inode(dbpath), os.path.getsize(dbpath / "data"))
        if compiled(kernel):
            with pytest.raises(semidbm.error, match=r"while 1 view\(s\) of its values are alive"):
                db.compact()
            # Refused before anything was written: no copy, the file as it was.
            assert COMPACT_NAME not in os.listdir(dbpath)
            assert (data_inode(dbpath), os.path.getsize(dbpath / "data")) == before
            second = db.view(b"k")
            with pytest.raises(semidbm.error, match=r"while 2 view\(s\)"):
                db.compact()
            del second
            view.release()
        db.compact()  # the pure-Python kernel's views are of copies: they hold no file
        assert data_inode(dbpath) != before[0]
        assert buffered_view == b"x" and db[b"k"] == large(1) and db[b"buffered"] == b"x"
        if not compiled(kernel):
            assert view == large(1)


# --- Threads and fork ---


def test_views_taken_while_another_thread_writes_and_compacts_stay_whole(dbopen, dbpath):
    size, keys = 256 << 10, 8
    failures = []
    started, done = threading.Event(), threading.Event()

    def write(db):
        try:
            started.wait()
            for version in range(1, 121):
                db[b"%d" % (version % keys)] = large(version, size)
                if version % 30 == 0:
                    db.compact()
        except BaseException as exc:
            failures.append(exc)
        finally:
            done.set()

    def uniform(view):
        return len(view) == size and view.tobytes() == view[:1].tobytes() * size

    with dbopen(dbpath, "c", buffer_size=64 << 10) as db:
        for key in range(keys):
            db[b"%d" % key] = large(200, size)
        writer = threading.Thread(target=write, args=(db,))
        writer.start()
        held = []
        taken = 0
        while not done.is_set() or taken < 20:
            view = db.view(b"%d" % (taken % keys))
            assert uniform(view)
            held.append((view, view[0]))
            taken += 1
            started.set()
        writer.join()
        assert not failures, failures
        for view, mark in held:
            assert view[0] == mark and uniform(view)


FORK_VIEW_SCRIPT = """
db = semidbm.open(path, "c")
db[b"k"] = b"\\x01" * (2 << 20)
view = db.view(b"k")
ready, go = os.pipe()
child = os.fork()
if child == 0:
    os.read(ready, 1)  # the parent has overwritten the key and compacted
    assert view.tobytes() == b"\\x01" * (2 << 20)
    db.close()
    assert view.tobytes() == b"\\x01" * (2 << 20)
    sys.exit(0)
db[b"k"] = b"\\x02" * (2 << 20)
db.compact()
os.write(go, b"x")
_, status = os.waitpid(child, 0)
assert status == 0, status
assert view.tobytes() == b"\\x01" * (2 << 20) and db[b"k"] == b"\\x02" * (2 << 20)
db.close()
"""


@posix_only
def test_a_forked_childs_inherited_views_stay_valid(kernel, dbpath):
    run(kernel, FORK_VIEW_SCRIPT, dbpath)


def test_views_of_one_map_keep_it_until_the_last_goes(dbopen, dbpath):
    # Many views, each released at a different time, of values in one map.
    with dbopen(dbpath, "c", buffer_size=0) as db:
        for mark in range(10):
            db[b"%d" % mark] = large(mark, 4096)
        views = [db.view(b"%d" % mark) for mark in range(10)]
        db.compact()
        while views:
            views.pop(0)
            assert all(view == large(view[0], 4096) for view in views)
