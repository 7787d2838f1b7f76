"""semidbm.dask: databases read and written as Dask collections, checked against models.

The fast cases run on Dask's synchronous scheduler, on both kernels (a
reader or shared writer of the kernel under test is the source, and the
tasks' handles keep its kernel). The rest run on one real cluster of two
worker processes, shared by the module (``client``): partitions read by
the workers, a database changed after planning, and a worker killed in
the middle of writing a partition.
"""

import os
import pickle

import pytest

dask = pytest.importorskip("dask", reason="semidbm.dask needs Dask: pip install 'semidbm[dask]'")
dask_bag = pytest.importorskip("dask.bag", reason="Dask lacks its bag: pip install 'dask[bag]'")
dask_dataframe = pytest.importorskip(
    "dask.dataframe", reason="Dask lacks its DataFrame: pip install 'dask[dataframe]'"
)
distributed = pytest.importorskip(
    "dask.distributed", reason="Dask lacks distributed: pip install 'dask[distributed]'"
)
pandas = pytest.importorskip("pandas", reason="dask.dataframe needs pandas")
numpy = pytest.importorskip("numpy", reason="pandas needs NumPy")

from dask.delayed import Delayed  # noqa: E402

import semidbm  # noqa: E402 (after the skips: the module imports Dask)
import semidbm.dask as sdask  # noqa: E402
from semidbm import _kernel, db, sharded  # noqa: E402

from .conftest import compiled_only  # noqa: E402
from .support.planted import RunsCode  # noqa: E402
from .support.states import copied_data, logs_of_one_length  # noqa: E402

#: The synchronous scheduler: the tasks run in the test's own process.
SYNC = {"scheduler": "sync"}

#: What a value written by the first, killed, attempt at a partition carries.
FIRST_ATTEMPT = b" (first attempt)"


@pytest.fixture(scope="module")
def client():
    """A client of a cluster of two worker processes, one thread each, for the whole module."""
    cluster = distributed.LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0",
        silence_logs=50,
    )
    with cluster, distributed.Client(cluster) as connected:
        yield connected


def fill(dbopen, path, count=3000):
    """A database of format 2 whose keys lie in an index file and in the log past it; its model."""
    model = {}
    with dbopen(path, "c", format=2) as database:
        for number in range(count):
            model[b"key %d" % number] = database[b"key %d" % number] = b"value %d" % number
        database.compact()
        for number in range(0, count, 4):
            del database[b"key %d" % number]
            del model[b"key %d" % number]
        for number in range(count, count + 200):
            model[b"key %d" % number] = database[b"key %d" % number] = b"tail %d" % number
    return model


def partitions(collection, **scheduler):
    """The computed partitions of a bag (each a list) or a DataFrame (each a pandas one)."""
    return list(dask.compute(*collection.to_delayed(), **scheduler))


def assert_disjoint_and_covering(parts, model):
    """Each pair of ``model`` in exactly one partition, and nothing else."""
    listed = [pair for part in parts for pair in part]
    assert len(listed) == len(model)
    assert dict(listed) == model


@pytest.mark.parametrize("npartitions", [1, 5])
def test_a_bag_of_items_holds_each_record_once(dbopen, tmp_path, npartitions):
    model = fill(dbopen, tmp_path / "db")
    with dbopen(tmp_path / "db", "r") as reader:
        bag = sdask.read_bag(reader, npartitions=npartitions)
        assert bag.npartitions == npartitions
        parts = partitions(bag, **SYNC)
    assert_disjoint_and_covering(parts, model)
    assert all(parts) or npartitions > len(model)


def test_bags_of_keys_and_values_and_decoded_values(dbopen, tmp_path):
    model = fill(dbopen, tmp_path / "db")
    with dbopen(tmp_path / "db", "r") as reader:
        keys = sdask.read_bag(reader, what="keys", npartitions=3).compute(**SYNC)
        values = sdask.read_bag(reader, what="values", npartitions=3).compute(**SYNC)
        total = sdask.read_bag(reader, what="values", decode=len).sum().compute(**SYNC)
        decoded = sdask.read_bag(reader, decode=lambda view: view.tobytes().upper())
        upper = dict(decoded.compute(**SYNC))
    assert sorted(keys) == sorted(model)
    assert sorted(values) == sorted(model.values())
    assert total == sum(map(len, model.values()))
    assert upper == {key: value.upper() for key, value in model.items()}


def test_the_default_partitions_follow_the_number_of_keys(dbopen, tmp_path, monkeypatch):
    model = fill(dbopen, tmp_path / "db")
    monkeypatch.setattr(sdask, "KEYS_PER_PARTITION", 1000)
    with dbopen(tmp_path / "db", "r") as reader:
        bag = sdask.read_bag(reader)
    assert bag.npartitions == -(-len(model) // 1000)


@compiled_only
def test_a_plan_of_one_kernel_is_read_by_the_other(tmp_path):
    """The parts follow the keys' hashes, not a table's layout: the other kernel lists them."""
    compiled, pure = _kernel.load("cython"), _kernel.load("python")
    model = fill(lambda *arguments, **options: db.open_with(compiled, *arguments, **options),
                 tmp_path / "db")
    planned = sdask.plan(db.open_with(compiled, tmp_path / "db", "r"), 4)
    with db.open_with(pure, tmp_path / "db", "r") as reader:
        other = sdask.Plan(sdask.handle(reader), planned.parts, planned.seed, planned.state)
    parts = [sdask.read_part(other, part, "items", None) for part in range(4)]
    assert_disjoint_and_covering(parts, model)
    assert [sorted(part) for part in parts] == [
        sorted(sdask.read_part(planned, part, "items", None)) for part in range(4)
    ]


@pytest.mark.parametrize("change", ["write", "compact"])
def test_a_database_changed_after_planning_is_refused(dbopen, tmp_path, change):
    fill(dbopen, tmp_path / "db")
    with dbopen(tmp_path / "db", "r") as reader:
        bag = sdask.read_bag(reader, npartitions=2)
    with dbopen(tmp_path / "db", "w") as writer:
        if change == "write":
            writer[b"late"] = b"value"
        else:
            writer.compact()
    with pytest.raises(sdask.DatabaseChanged, match="changed since its partitions were planned"):
        bag.compute(**SYNC)


def test_read_keys_gives_the_default_for_a_missing_key(dbopen, tmp_path):
    model = fill(dbopen, tmp_path / "db")
    wanted = [b"key 1", b"missing", b"key 4", b"key 3100", "key 2", b"also missing"]
    expected = [(key, model.get(key.encode() if isinstance(key, str) else key, b"-"))
                for key in wanted]
    with dbopen(tmp_path / "db", "r") as reader:
        found = sdask.read_keys(reader, wanted, npartitions=4, default=b"-").compute(**SYNC)
        from_bag = sdask.read_keys(
            reader, dask_bag.from_sequence(wanted, npartitions=2), decode=len
        ).compute(**SYNC)
    assert found == expected
    assert from_bag == [(key, None if value == b"-" else len(value)) for key, value in expected]


def test_a_value_that_does_not_decode_is_named(dbopen, tmp_path):
    with dbopen(tmp_path / "db", "c", format=2) as writer:
        writer[b"good"] = pickle.dumps({"x": 1})
        writer[b"bad"] = b"not a pickle"
    with dbopen(tmp_path / "db", "r") as reader:
        frame = sdask.read_dataframe(reader, meta={"x": "f8"}, npartitions=1)
        with pytest.raises(ValueError, match=r"cannot decode the value of b'bad' in .*: "
                                             r"UnpicklingError"):
            frame.compute(**SYNC)


def test_an_empty_database_reads_as_empty_collections(dbopen, tmp_path):
    with dbopen(tmp_path / "db", "c", format=2):
        pass
    with dbopen(tmp_path / "db", "r") as reader:
        assert sdask.read_bag(reader).compute(**SYNC) == []
        assert partitions(sdask.read_bag(reader, npartitions=3), **SYNC) == [[], [], []]
        assert sdask.read_keys(reader, [b"a"], default=0).compute(**SYNC) == [(b"a", 0)]
        frame = sdask.read_dataframe(reader, meta={"value": "f8"}, npartitions=2).compute(**SYNC)
        with pytest.raises(ValueError, match="has no key, no value to learn the DataFrame's "
                                             "columns from: pass meta"):
            sdask.read_dataframe(reader)
    assert len(frame) == 0 and dict(frame.dtypes) == {"value": numpy.dtype("f8")}


def json_articles(dbopen, path, count):
    """A database of ``count`` JSON documents of two fields, written as a shelf writes them."""
    with dbopen(path, "c", format=2) as writer:
        for number in range(count):
            writer["article %d" % number] = '{"words": %d, "language": "en"}' % number


def test_a_dataframe_whose_first_partitions_are_empty_has_the_columns(dbopen, tmp_path):
    """Five rows in sixteen partitions: the columns come from a value, not partition 0, and an
    empty partition has them too, with their dtypes."""
    json_articles(dbopen, tmp_path / "db", 5)
    with dbopen(tmp_path / "db", "r") as reader:
        frame = sdask.read_dataframe(reader, serializer="json", npartitions=16)
        chosen = sdask.read_dataframe(reader, serializer="json", npartitions=16,
                                      columns=["language"])
        given = sdask.read_dataframe(reader, serializer="json", npartitions=16,
                                     meta={"words": "f8", "language": "object"})
        pieces = partitions(frame, **SYNC)
        assert not all(len(piece) for piece in pieces)
        assert list(frame.columns) == ["words", "language"]
        assert frame["words"].dtype == numpy.dtype("int64")
        for piece in pieces:
            assert list(piece.columns) == ["words", "language"]
            assert piece["words"].dtype == numpy.dtype("int64")
        assert frame["words"].sum().compute(**SYNC) == 10
        assert frame.groupby("language")["words"].sum().compute(**SYNC).to_dict() == {"en": 10}
        assert list(chosen.columns) == ["language"]
        assert all(list(piece.columns) == ["language"] for piece in partitions(chosen, **SYNC))
        empty = [piece for piece in partitions(given, **SYNC) if not len(piece)]
        assert empty and given["words"].dtype == numpy.dtype("f8")
        assert all(dict(piece.dtypes) == dict(given.dtypes) for piece in empty)


def test_a_key_that_is_not_utf8_is_named_by_read_dataframe(dbopen, tmp_path):
    with dbopen(tmp_path / "db", "c", format=2) as writer:
        writer[b"\xffkey"] = pickle.dumps({"x": 2})
    named = r"the key b'\\xffkey' in .*db.data is not UTF-8 text, which read_dataframe indexes"
    with dbopen(tmp_path / "db", "r") as reader:
        with pytest.raises(ValueError, match=named):  # the one value read for the columns
            sdask.read_dataframe(reader)
        frame = sdask.read_dataframe(reader, meta={"x": "i8"}, npartitions=1)
        with pytest.raises(ValueError, match=named):  # a partition's
            frame.compute(**SYNC)


def test_a_huge_value(dbopen, tmp_path):
    huge = os.urandom(1 << 16) * 256  # 16 MiB
    with dbopen(tmp_path / "db", "c", format=2) as writer:
        writer[b"huge"] = huge
        writer[b"small"] = b"s"
    with dbopen(tmp_path / "db", "r") as reader:
        assert dict(sdask.read_bag(reader, npartitions=2).compute(**SYNC)) == {
            b"huge": huge, b"small": b"s"
        }
        sizes = sdask.read_bag(reader, what="values", decode=len).compute(**SYNC)
    assert sorted(sizes) == [1, len(huge)]


@pytest.mark.parametrize("serializer", ["pickle", "json"])
def test_a_dataframe_written_and_read_back(dbopen, tmp_path, serializer):
    frame = pandas.DataFrame(
        {"number": range(50), "name": ["row %d" % at for at in range(50)]},
        index=pandas.Index(["id%02d" % at for at in range(50)], name="key"),
    )
    collection = dask_dataframe.from_pandas(frame, npartitions=3)
    with dbopen(tmp_path / "db", "cm", format=2) as target:
        assert sdask.to_semidbm(collection, target, serializer=serializer, **SYNC) == 50
    with semidbm.open_shelf(str(tmp_path / "db"), "r", serializer=serializer) as shelf:
        assert shelf["id07"] == {"number": 7, "name": "row 7"}
    with dbopen(tmp_path / "db", "r") as reader:
        read = sdask.read_dataframe(reader, serializer=serializer, npartitions=4).compute(**SYNC)
        names = sdask.read_dataframe(reader, serializer=serializer, columns=["name"])
        assert list(names.compute(**SYNC).columns) == ["name"]
    pandas.testing.assert_frame_equal(read.sort_index(), frame, check_dtype=False,
                                      check_index_type=False)


def test_a_bag_written_into_a_database(dbopen, tmp_path):
    pairs = [(b"k%d" % at, b"v%d" % at) for at in range(300)] + [("text key", "text value")]
    with dbopen(tmp_path / "db", "cm", format=2) as target:
        written = sdask.to_semidbm(dask_bag.from_sequence(pairs, npartitions=4), target,
                                   compute=False)
        assert isinstance(written, Delayed)
        assert written.compute(**SYNC) == len(pairs)
        encoded = sdask.to_semidbm(dask_bag.from_sequence([(b"n", 5)]), target,
                                   encode=lambda value: b"%d" % value, **SYNC)
        assert encoded == 1
    with dbopen(tmp_path / "db", "r") as reader:
        assert dict(reader.items()) == dict(
            [(k if isinstance(k, bytes) else k.encode(), v if isinstance(v, bytes) else v.encode())
             for k, v in pairs] + [(b"n", b"5")]
        )


def test_only_a_bag_or_a_dataframe_is_written(dbopen, tmp_path):
    """A Dask Series (neither) is refused before anything is written; its pairs as a bag are
    written."""
    series = dask_dataframe.from_pandas(pandas.Series(["ab", "cd"], index=["x", "y"]),
                                        npartitions=1)
    for wrong, name in ((series, "Series"), ([(b"k", b"v")], "list")):
        with pytest.raises(TypeError, match=r"to_semidbm writes a dask.bag.Bag of \(key, value\) "
                                            r"pairs or a dask.dataframe.DataFrame, not %s " % name):
            sdask.to_semidbm(wrong, str(tmp_path / "db"), **SYNC)
        with pytest.raises(TypeError, match="not %s " % name):
            sdask.to_semidbm(wrong, str(tmp_path / "sharded"), shards=2, **SYNC)
    assert not os.path.exists(tmp_path / "db") and not os.path.exists(tmp_path / "sharded")
    with dbopen(tmp_path / "db", "cm", format=2) as target:
        assert sdask.to_semidbm(series.to_bag(index=True), target, **SYNC) == 2
    with dbopen(tmp_path / "db", "r") as reader:
        assert dict(reader.items()) == {b"x": b"ab", b"y": b"cd"}


def test_writing_into_format_1_is_refused(dbopen, tmp_path):
    with dbopen(tmp_path / "db", "c", format=1):
        pass
    with dbopen(tmp_path / "db", "cm") as target:
        with pytest.raises(semidbm.error, match="which has no batches: upgrade it"):
            sdask.to_semidbm(dask_bag.from_sequence([(b"a", b"b")]), target, **SYNC)
    with dbopen(tmp_path / "db", "r") as reader:
        assert len(reader) == 0


def test_a_handle_with_a_lifetime_is_refused_as_a_target(dbopen, tmp_path):
    """The tasks append records encoded beforehand, whose values would never expire: a handle,
    or a sharded database's shards, opened with ``expire=`` are refused before anything is
    written. Caught without the refusal: the values are stored, for good."""
    bag = dask_bag.from_sequence([(b"a", b"b")])
    with dbopen(tmp_path / "db", "cm", format=2, expire=60) as target:
        with pytest.raises(ValueError, match="writes values that never expire"):
            sdask.to_semidbm(bag, target, **SYNC)
        assert len(target) == 0
    with semidbm.open_sharded(tmp_path / "sharded", "cm", shards=2, format=2,
                              expire=60) as target:
        with pytest.raises(ValueError, match="writes values that never expire"):
            sdask.to_semidbm(bag, target, **SYNC)
        assert len(target) == 0


def test_sources_of_the_wrong_kind_are_refused(dbopen, tmp_path):
    with dbopen(tmp_path / "db", "cm", format=2) as shared:
        with pytest.raises(ValueError, match="reads through a reader"):
            sdask.read_bag(shared)
        with pytest.raises(ValueError, match="writes shards into a sharded database"):
            sdask.to_semidbm(dask_bag.from_sequence([(b"a", b"b")]), shared, shards=2)
        shared[b"k"] = b"v"
    assert sdask.read_bag(os.fsencode(tmp_path / "db")).compute(**SYNC) == [(b"k", b"v")]
    with dbopen(tmp_path / "db", "r") as reader:
        with pytest.raises(ValueError, match="writes through shared writers"):
            sdask.to_semidbm(dask_bag.from_sequence([(b"a", b"b")]), reader)
        with pytest.raises(ValueError, match="what must be one of"):
            sdask.read_bag(reader, what="rows")


def test_a_bag_of_values_decoded_by_a_shelf_serializer(dbopen, tmp_path):
    with dbopen(tmp_path / "db", "c", format=2) as writer:
        writer[b"a"] = b'{"n": 1}'
        writer[b"b"] = b"[2]"
    with dbopen(tmp_path / "db", "r") as reader:
        assert sorted(sdask.read_bag(reader, serializer="json").compute(**SYNC)) == [
            (b"a", {"n": 1}), (b"b", [2])
        ]
        with pytest.raises(ValueError, match="give serializer or decode, not both"):
            sdask.read_bag(reader, serializer="json", decode=len)


#: The signing key of the signed shelves read here.
SIGNING_KEY = bytes(range(32))


def signed_shelf_and_its_readers(dbopen, path):
    """A signed pickle shelf of two rows at ``path``; the rows, and the three readers with the
    shelf's key, by name, each a function of an open reader that returns its collection."""
    rows = {"a": {"n": 1}, "b": {"n": 2}}
    with semidbm.shelf.Shelf(dbopen(path, "c", format=2), key=SIGNING_KEY) as shelf:
        shelf.update(rows)
    readers = {
        "bag": lambda reader: sdask.read_bag(reader, serializer="pickle", key=SIGNING_KEY),
        "dataframe": lambda reader: sdask.read_dataframe(reader, key=SIGNING_KEY),
        "keys": lambda reader: sdask.read_keys(
            reader, [b"a", b"missing", b"b"], serializer="pickle", key=SIGNING_KEY
        ),
    }
    return rows, readers


def test_a_signed_shelf_is_read_with_its_key_and_a_planted_pickle_is_refused(dbopen, tmp_path):
    """read_bag, read_dataframe and read_keys with key=: signed values read back; a pickle
    planted without the key is refused before it is loaded, and runs nothing.

    Catches: the readers' key= ignored (value_decoder returning the bare
    loads: the planted pickle makes its directory), and a refusal turned
    into a decoding ValueError by ``decoded``.
    """
    path, marker = tmp_path / "s.db", tmp_path / "ran"
    rows, readers = signed_shelf_and_its_readers(dbopen, path)
    with dbopen(path, "r") as reader:
        assert dict(readers["bag"](reader).compute(**SYNC)) == {
            name.encode(): row for name, row in rows.items()
        }
        assert readers["dataframe"](reader).compute(**SYNC).sort_index()["n"].to_dict() == {
            "a": 1, "b": 2,
        }
        assert readers["keys"](reader).compute(**SYNC) == [
            (b"a", rows["a"]), (b"missing", None), (b"b", rows["b"]),
        ]
    with dbopen(path, "w") as writer:
        writer[b"a"] = pickle.dumps(RunsCode(marker))
    with dbopen(path, "r") as reader:
        for name, read in readers.items():
            with pytest.raises(semidbm.DBMSignatureError, match="b'a'.*it is unsigned"):
                read(reader).compute(**SYNC)
            assert not marker.exists(), name


def test_a_signing_key_goes_with_a_serializer_only(dbopen, tmp_path):
    """A decode of one's own would see signed values unchecked: key= with it is refused, and
    key= without a serializer to check for; a key that cannot serve, before any task."""
    with dbopen(tmp_path / "db", "c", format=2) as writer:
        writer[b"a"] = b"1"
    with dbopen(tmp_path / "db", "r") as reader:
        with pytest.raises(ValueError, match="key goes with serializer, not with decode"):
            sdask.read_bag(reader, decode=len, key=SIGNING_KEY)
        with pytest.raises(ValueError, match="key goes with serializer, not with decode"):
            sdask.read_dataframe(reader, decode=len, key=SIGNING_KEY)
        with pytest.raises(ValueError, match="give serializer too"):
            sdask.read_keys(reader, [b"a"], key=SIGNING_KEY)
        with pytest.raises(ValueError, match="at least 16 bytes"):
            sdask.read_bag(reader, serializer="json", key=b"short")


def test_the_signed_decoder_pickles_for_worker_processes_and_still_checks(dbopen, tmp_path):
    """What a worker process gets (the tasks pickled): a decoder that checks signatures.

    Catches: a decoder that cannot be pickled (the SigningSerializer's
    refusal: a processes or distributed scheduler would fail), or one
    that loses its key or its check on the way.
    """
    decoder = sdask.value_decoder("json", None, SIGNING_KEY)
    signing = semidbm.shelf.SigningSerializer("json", SIGNING_KEY)
    copied = pickle.loads(pickle.dumps(decoder))
    assert copied(b"k", memoryview(signing.dumps(b"k", [1]))) == [1]
    with pytest.raises(semidbm.DBMSignatureError, match="another key of the database"):
        copied(b"other", memoryview(signing.dumps(b"k", [1])))
    assert repr(copied) == "<semidbm.dask.SignedLoads for the 'json' serializer>"


def test_npartitions_is_an_integer_from_1_to_2_to_the_32(dbopen, tmp_path):
    model = fill(dbopen, tmp_path / "db", count=100)
    with dbopen(tmp_path / "db", "r") as reader:
        for wrong in (0, -2, 2**32 + 1, 2**33):
            with pytest.raises(ValueError, match=r"npartitions must be from 1 to 2\*\*32, not "):
                sdask.read_bag(reader, npartitions=wrong)
        for wrong, name in ((True, "bool"), (1.5, "float"), (2.0, "float"), ("2", "str")):
            with pytest.raises(TypeError, match="npartitions must be an int, not %s" % name):
                sdask.read_bag(reader, npartitions=wrong)
        with pytest.raises(TypeError, match="npartitions must be an int, not bool"):
            sdask.read_keys(reader, [b"key 1"], npartitions=True)
        numbered = sdask.read_bag(reader, npartitions=numpy.int64(2))
        assert numbered.npartitions == 2
        assert_disjoint_and_covering(partitions(numbered, **SYNC), model)
        assert type(sdask.plan(reader, numpy.int64(2)).parts) is int
        assert sdask.plan(reader, 2**32).parts == 2**32  # the most: no graph is built here


def test_a_plan_reads_an_identical_copy_and_refuses_a_restore(dbopen, tmp_path):
    """The planned state is the log's bytes: a copy under another inode (a worker's own, NFS)
    reads; a backup of the same length and first 4 KiB restored in place is refused."""
    first, second = logs_of_one_length(dbopen, tmp_path / "db")
    (tmp_path / "db" / "data").write_bytes(first)
    with dbopen(tmp_path / "db", "r") as reader:
        model = dict(reader.items())
        bag = sdask.read_bag(reader, npartitions=3)
    copied_data(tmp_path / "db", tmp_path / "copy")
    os.replace(tmp_path / "copy" / "data", tmp_path / "db" / "data")
    assert dict(bag.compute(**SYNC)) == model
    (tmp_path / "db" / "data").write_bytes(second)
    with pytest.raises(sdask.DatabaseChanged, match=r"was \d+ bytes, and is \d+ bytes now, "
                                                    r"other bytes\)"):
        bag.compute(**SYNC)


def test_importing_semidbm_imports_no_dask(tmp_path):
    import subprocess
    import sys

    probe = "import sys, semidbm; print('dask' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True).stdout == "False\n"


# --- On a cluster of two worker processes ---


def test_workers_read_their_own_partitions(client, tmp_path):
    model = fill(semidbm.open, tmp_path / "db")
    here = os.getpid()
    bag = sdask.read_bag(str(tmp_path / "db"), npartitions=6,
                         decode=lambda view: (os.getpid(), view.tobytes()))
    parts = partitions(bag)
    assert_disjoint_and_covering(
        [[(key, value) for key, (_, value) in part] for part in parts], model
    )
    readers = {pid for part in parts for _, (pid, _) in part}
    assert here not in readers and readers


def test_workers_refuse_a_database_changed_after_planning(client, tmp_path):
    fill(semidbm.open, tmp_path / "db")
    bag = sdask.read_bag(str(tmp_path / "db"), npartitions=2)
    with semidbm.open(str(tmp_path / "db"), "w") as writer:
        del writer[b"key 1"]
    with pytest.raises(sdask.DatabaseChanged):
        bag.count().compute()


def test_a_worker_killed_while_writing_leaves_no_half_partition(client, tmp_path):
    """The worker writing partition 2 dies halfway, once; Dask runs the task again elsewhere."""
    marker = str(tmp_path / "killed once")
    pairs = [(b"p%d %03d" % (at // 100, at % 100), b"value %d" % at) for at in range(400)]

    def encode(value):
        """The value; in the first attempt at partition 2, tagged, and the worker killed halfway."""
        if value.startswith(b"value 2") and len(value) == 9 and not os.path.exists(marker):
            if value == b"value 250":
                open(marker, "w").close()
                os._exit(1)
            return value + FIRST_ATTEMPT
        return value

    bag = dask_bag.from_sequence(pairs, npartitions=4)
    assert sdask.to_semidbm(bag, str(tmp_path / "db"), encode=encode) == len(pairs)
    assert os.path.exists(marker)
    with semidbm.open(str(tmp_path / "db")) as reader:
        assert dict(reader.items()) == dict(pairs)
    with open(tmp_path / "db" / "data", "rb") as data:
        assert FIRST_ATTEMPT not in data.read()


# --- Sharded databases ---


def fill_shards(kernel, path, count=2000, shards=3):
    """A sharded database of format 2 whose shards hold keys in an index file and in the log
    past it; its model."""
    model = {b"key %d" % number: b"value %d" % number for number in range(count)}
    with sharded.open_sharded_with(kernel, path, "c", shards=shards, format=2) as database:
        database.update(model)
        database.compact()
        gone = [b"key %d" % number for number in range(0, count, 4)]
        database.delete_many(gone)
        tail = {b"key %d" % number: b"tail %d" % number for number in range(count, count + 200)}
        database.update(tail)
    for key in gone:
        del model[key]
    model.update(tail)
    return model


def shard_contents(kernel, path, count):
    """What each shard of the sharded database ``path`` holds, each opened as the database it is."""
    return [
        dict(db.open_with(kernel, os.path.join(path, "shard-%04d" % number), "r").items())
        for number in range(count)
    ]


def split_model(model, count):
    """``model`` split as ``count`` shards hold it."""
    parts = [{} for _ in range(count)]
    for key, value in model.items():
        parts[semidbm.shard_of(key, count)][key] = value
    return parts


@pytest.mark.parametrize("npartitions, expected", [(None, [1, 1, 1]), (2, [1, 1, 1]),
                                                   (7, [3, 2, 2])])
def test_a_sharded_bag_has_partitions_of_one_shard_each(kernel, tmp_path, npartitions, expected):
    model = fill_shards(kernel, tmp_path / "db")
    with sharded.open_sharded_with(kernel, tmp_path / "db") as reader:
        bag = sdask.read_bag(reader, npartitions=npartitions)
        parts = partitions(bag, **SYNC)
    assert_disjoint_and_covering(parts, model)
    shard_of_part = [{semidbm.shard_of(key, 3) for key, _ in part} for part in parts]
    assert all(len(shards) == 1 for shards in shard_of_part)
    assert [shards.pop() for shards in shard_of_part] == [
        number for number, count in enumerate(expected) for _ in range(count)
    ]


def test_a_sharded_database_read_as_keys_values_lookups_and_a_dataframe(kernel, tmp_path):
    model = fill_shards(kernel, tmp_path / "db")
    wanted = [b"key 1", b"missing", b"key 4", b"key 2100", "key 2", b"key 7", b"also missing"]
    with sharded.open_sharded_with(kernel, tmp_path / "db") as reader:
        keys = sdask.read_bag(reader, what="keys", npartitions=4).compute(**SYNC)
        sizes = sdask.read_bag(reader, what="values", decode=len).compute(**SYNC)
        found = sdask.read_keys(reader, wanted, npartitions=3, default=b"-").compute(**SYNC)
        decoded = sdask.read_keys(reader, dask_bag.from_sequence(wanted, npartitions=2),
                                  decode=lambda view: view.tobytes().upper()).compute(**SYNC)
        frame = sdask.read_dataframe(reader, decode=len, npartitions=5).compute(**SYNC)
    assert sorted(keys) == sorted(model)
    assert sorted(sizes) == sorted(map(len, model.values()))
    expected = [model.get(key if isinstance(key, bytes) else key.encode()) for key in wanted]
    assert found == [(key, value or b"-") for key, value in zip(wanted, expected)]
    assert decoded == [(key, value and value.upper()) for key, value in zip(wanted, expected)]
    assert dict(zip(frame.index, frame["value"])) == {
        key.decode(): len(value) for key, value in model.items()
    }


def test_a_shard_changed_after_planning_is_refused_by_its_tasks(kernel, tmp_path):
    model = fill_shards(kernel, tmp_path / "db")
    with sharded.open_sharded_with(kernel, tmp_path / "db") as reader:
        bag = sdask.read_bag(reader, npartitions=3)
        lookups = sdask.read_keys(reader, [b"key 1"])
    changed = next(key for key in model if semidbm.shard_of(key, 3) == 1)
    with db.open_with(kernel, tmp_path / "db" / "shard-0001", "w") as shard:
        del shard[changed]
    first, second, third = bag.to_delayed()
    assert dict(first.compute(**SYNC) + third.compute(**SYNC)) == {
        key: value for key, value in model.items() if semidbm.shard_of(key, 3) != 1
    }
    with pytest.raises(sdask.DatabaseChanged, match=r"shard-0001.* changed since"):
        second.compute(**SYNC)
    with pytest.raises(sdask.DatabaseChanged, match=r"shard-0001.* changed since"):
        lookups.compute(**SYNC)


@pytest.mark.parametrize("into", ["open writer", "path with shards", "path with a manifest"])
def test_a_bag_written_into_shards(kernel, tmp_path, into):
    pairs = [(b"k%d" % at, b"v%d" % at) for at in range(500)] + [("text key", "text value")]
    pairs += [(b"k7", b"later"), (b"twice", b"first"), (b"twice", b"last")]
    model = {(key if isinstance(key, bytes) else key.encode()):
             (value if isinstance(value, bytes) else value.encode()) for key, value in pairs}
    bag = dask_bag.from_sequence(pairs, npartitions=4)  # k7 in the first and the last
    if into == "path with a manifest":
        sharded.open_sharded_with(kernel, tmp_path / "db", "c", shards=3, format=2).close()
    if into == "open writer":
        with sharded.open_sharded_with(kernel, tmp_path / "db", "cm", shards=3,
                                       format=2) as target:
            written = sdask.to_semidbm(bag, target, compute=False)
    else:
        given = 3 if into == "path with shards" else None
        written = sdask.to_semidbm(bag, str(tmp_path / "db"), shards=given, compute=False)
    assert sorted(os.listdir(tmp_path / "db")) == [
        "shard-0000", "shard-0001", "shard-0002", "shards.json"
    ]  # made by the client, before any task
    assert shard_contents(kernel, tmp_path / "db", 3) == [{}, {}, {}]
    assert written.compute(**SYNC) == len(pairs)
    # A key in two partitions keeps the later one's value; in one partition, its last.
    assert shard_contents(kernel, tmp_path / "db", 3) == split_model(model, 3)


def test_a_dataframe_written_into_shards_and_read_back(kernel, tmp_path):
    frame = pandas.DataFrame(
        {"number": range(60), "name": ["row %d" % at for at in range(60)]},
        index=pandas.Index(["id%02d" % at for at in range(60)], name="key"),
    )
    shards = ["inside", str(tmp_path / "outside")]
    with sharded.open_sharded_with(kernel, tmp_path / "db", "cm", shards=shards,
                                   format=2) as target:
        assert sdask.to_semidbm(dask_dataframe.from_pandas(frame, npartitions=3), target,
                                shards=shards, serializer="json", **SYNC) == 60
    with sharded.open_sharded_with(kernel, tmp_path / "db") as reader:
        assert len(reader.shards[1]) == sum(
            semidbm.shard_of(key.encode(), 2) for key in frame.index
        )
        read = sdask.read_dataframe(reader, serializer="json", npartitions=3).compute(**SYNC)
    pandas.testing.assert_frame_equal(read.sort_index(), frame, check_dtype=False,
                                      check_index_type=False)


@pytest.mark.parametrize("shards", [4, ["shard-0000", "shard-0001", "other"]])
def test_shards_that_contradict_the_manifest_are_refused_before_writing(kernel, tmp_path,
                                                                         shards):
    model = fill_shards(kernel, tmp_path / "db", count=100)
    bag = dask_bag.from_sequence([(b"new", b"value")])
    with sharded.open_sharded_with(kernel, tmp_path / "db", "wm") as target:
        with pytest.raises(semidbm.error, match="given, but its manifest names 3 shards"):
            sdask.to_semidbm(bag, target, shards=shards, **SYNC)
    with pytest.raises(semidbm.error, match="given, but its manifest names 3 shards"):
        sdask.to_semidbm(bag, str(tmp_path / "db"), shards=shards, **SYNC)
    assert sorted(os.listdir(tmp_path / "db")) == [
        "shard-0000", "shard-0001", "shard-0002", "shards.json"
    ]
    assert shard_contents(kernel, tmp_path / "db", 3) == split_model(model, 3)


def test_writing_into_shards_without_batches_is_refused(kernel, tmp_path):
    sharded.open_sharded_with(kernel, tmp_path / "db", "c", shards=2, format=1).close()
    with sharded.open_sharded_with(kernel, tmp_path / "db", "wm") as target:
        with pytest.raises(semidbm.error, match="which has no batches: upgrade it"):
            sdask.to_semidbm(dask_bag.from_sequence([(b"a", b"b")]), target, **SYNC)
        with pytest.raises(ValueError, match="reads through a reader"):
            sdask.read_bag(target)
    with sharded.open_sharded_with(kernel, tmp_path / "db") as reader:
        with pytest.raises(ValueError, match="writes through shared writers"):
            sdask.to_semidbm(dask_bag.from_sequence([(b"a", b"b")]), reader)
        assert len(reader) == 0


def test_workers_read_and_write_shards_through_pickled_handles(client, tmp_path):
    pairs = [(b"w%d" % at, b"v%d" % at) for at in range(600)]
    with semidbm.open_sharded(str(tmp_path / "db"), "cm", shards=3, format=2) as target:
        assert sdask.to_semidbm(dask_bag.from_sequence(pairs, npartitions=4), target) == 600
    here = os.getpid()
    with semidbm.open_sharded(str(tmp_path / "db")) as reader:
        read = partitions(sdask.read_bag(reader, npartitions=5,
                                         decode=lambda view: (os.getpid(), view.tobytes())))
        found = sdask.read_keys(reader, [b"w5", b"none", b"w599"]).compute()
        frame = sdask.read_dataframe(reader, decode=len).compute()
    assert_disjoint_and_covering([[(key, value) for key, (_, value) in part] for part in read],
                                 dict(pairs))
    assert here not in {pid for part in read for _, (pid, _) in part}
    assert found == [(b"w5", b"v5"), (b"none", None), (b"w599", b"v599")]
    assert dict(zip(frame.index, frame["value"])) == {
        key.decode(): len(value) for key, value in pairs
    }
    assert shard_contents(_kernel.load(semidbm.implementation), tmp_path / "db", 3) == (
        split_model(dict(pairs), 3)
    )


def kill_at_second_piece(marker):
    """In a worker: make the second batch record it appends kill it, before a byte of that
    record is written, once (``marker`` then exists)."""
    import semidbm.dask

    write_batch = semidbm.dask.write_batch
    pieces = []

    def dying(database, record):
        if record is not None and not os.path.exists(marker):
            pieces.append(record)
            if len(pieces) == 2:
                open(marker, "w").close()
                os._exit(1)
        write_batch(database, record)

    semidbm.dask.write_batch = dying


def test_a_worker_killed_between_its_pieces_is_retried_whole(client, tmp_path):
    """A worker dies between two partitions' pieces of a shard, once: the shard then holds
    some of them; Dask runs the shard's task again elsewhere, and the retry appends every
    piece again."""
    marker = str(tmp_path / "killed once")
    pairs = [(b"p%d %03d" % (at // 100, at % 100), b"value %d" % at) for at in range(400)]
    client.run(kill_at_second_piece, marker)
    bag = dask_bag.from_sequence(pairs, npartitions=4)
    assert sdask.to_semidbm(bag, str(tmp_path / "db"), shards=3) == len(pairs)
    assert os.path.exists(marker)
    kernel = _kernel.load(semidbm.implementation)
    assert shard_contents(kernel, tmp_path / "db", 3) == split_model(dict(pairs), 3)
    # The piece appended before the kill was appended again by the retry: the shards' logs
    # are longer than those of the same bag written without a kill.
    assert sdask.to_semidbm(bag, str(tmp_path / "again"), shards=3) == len(pairs)
    assert data_sizes(tmp_path / "db", 3) > data_sizes(tmp_path / "again", 3)


def data_sizes(path, count):
    """The bytes of the data files of the ``count`` shards of the sharded database ``path``."""
    return sum(os.path.getsize(os.path.join(path, "shard-%04d" % number, "data"))
               for number in range(count))


def test_a_shard_on_a_second_mount_is_read_and_written(client, tmp_path, small_disk):
    far = os.path.join(small_disk, "far-shard")
    pairs = [(b"m%d" % at, b"%d" % at * 10) for at in range(300)]
    written = sdask.to_semidbm(dask_bag.from_sequence(pairs, npartitions=3), str(tmp_path / "db"),
                               shards=["near", far])
    assert written == 300
    assert os.stat(far).st_dev != os.stat(tmp_path / "db" / "near").st_dev
    assert sorted(os.listdir(tmp_path / "db")) == ["near", "shards.json"]
    assert dict(sdask.read_bag(str(tmp_path / "db"), npartitions=4).compute()) == dict(pairs)
    with semidbm.open(far) as shard:
        assert dict(shard.items()) == split_model(dict(pairs), 2)[1]
