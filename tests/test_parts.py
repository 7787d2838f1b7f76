"""Parts of the keys (``Store._part``, ``key_seed``, ``log_state``), on both kernels.

The model of a part is the rule of ``semidbm._parts`` computed from the
format document's hash (``support.index_format.hash_key``): part ``i`` of
``n`` holds the live keys whose hash times ``n``, shifted right by 32, is
``i``. Each kernel must list exactly those keys, under the seed of its
index (the compiled kernel's range of slots) and under any other, and
their values as a lookup reads them (the same bytes, the same errors).
"""

import os

import pytest

from semidbm import _kernel, _parts, db
from semidbm.errors import DBMChecksumError

from .conftest import IMPLEMENTATIONS, compiled_only
from .support.index_format import hash_key
from .support.states import copied_data, logs_of_one_length

#: A seed that no index draws: parts under it are listed by hashing every key.
OTHER_SEED = 0x0123456789ABCDEF
#: A key that ``build`` writes once and never changes: its one record lies in the
#: log the index file covers.
UNCHANGED_KEY = b"key 2222"


def model_parts(model, parts, seed):
    """The keys of each part by the rule, from the model's keys."""
    listed = [set() for _ in range(parts)]
    for key in model:
        listed[(hash_key(seed, key) * parts) >> 32].add(key)
    return listed


def build(dbopen, path):
    """A database whose keys lie in an index file and in the log past it; returns its model.

    The compaction writes the index file; the writes after it overwrite
    and delete keys it holds (marked in the compiled kernel's mapped
    table) and add new ones (its private table).
    """
    model = {}
    with dbopen(path, "c") as database:
        for number in range(6000):
            model[b"key %d" % number] = database[b"key %d" % number] = b"value %d" % number
        database.compact()
    with dbopen(path, "w") as database:
        for number in range(0, 6000, 5):
            del database[b"key %d" % number]
            del model[b"key %d" % number]
        for number in range(1, 6000, 7):
            model[b"key %d" % number] = database[b"key %d" % number] = b"new %d" % number
        for number in range(6000, 6500):
            model[b"key %d" % number] = database[b"key %d" % number] = b"tail %d" % number
    return model


@pytest.mark.parametrize("parts", [1, 2, 7, 64])
def test_parts_hold_each_live_key_once(dbopen, tmp_path, parts):
    model = build(dbopen, tmp_path / "db")
    with dbopen(tmp_path / "db", "r") as reader:
        for seed in (reader.key_seed, OTHER_SEED):
            listed = [reader._part(part, parts, seed, "keys") for part in range(parts)]
            assert sum(map(len, listed)) == len(model)
            assert [set(keys) for keys in listed] == model_parts(model, parts, seed)


def check_values_and_items(reader, model, parts, seed):
    """Each part's values, and its pairs, are its keys' in ``model``, in its keys' order."""
    listed = []
    for part in range(parts):
        keys = reader._part(part, parts, seed, "keys")
        values = reader._part(part, parts, seed, "values")
        assert values == [model[key] for key in keys]
        assert all(type(value) is bytes for value in values)
        assert reader._part(part, parts, seed, "items") == list(zip(keys, values))
        listed.extend(keys)
    assert sorted(listed) == sorted(model)


@pytest.mark.parametrize("parts", [1, 7])
def test_parts_list_the_values_and_items_of_their_keys(dbopen, tmp_path, parts):
    model = build(dbopen, tmp_path / "db")
    with dbopen(tmp_path / "db", "r") as reader:
        for seed in (reader.key_seed, OTHER_SEED):
            check_values_and_items(reader, model, parts, seed)


def test_a_writers_parts_read_its_buffered_values(dbopen, tmp_path):
    """Records still in the append buffer (past the end of the file) are read from there."""
    model = build(dbopen, tmp_path / "db")
    with dbopen(tmp_path / "db", "w") as writer:
        for number in range(5990, 6100):
            model[b"key %d" % number] = writer[b"key %d" % number] = b"buffered %d" % number
        for seed in (writer.key_seed, OTHER_SEED):
            check_values_and_items(writer, model, 3, seed)


def damage_value(path, key):
    """Flip a byte of the value of the one record of ``key`` in the data file of ``path``."""
    data = bytearray((path / "data").read_bytes())
    at = data.find(key + b"value ")
    assert at > 0 and data.find(key + b"value ", at + 1) < 0
    data[at + len(key) + 1] ^= 0xFF
    (path / "data").write_bytes(bytes(data))


def test_a_damaged_value_raises_in_its_part_as_a_lookup_raises(kernel, dbopen, tmp_path):
    """With ``verify_checksums``, the value's part raises the lookup's error; its keys list."""
    model = build(dbopen, tmp_path / "db")
    damage_value(tmp_path / "db", UNCHANGED_KEY)
    with dbopen(tmp_path / "db", "r", verify_checksums=True) as reader:
        # The compiled kernel still maps the index file: the record's slot is a mapped one.
        assert (reader.index_covered > 0) == (kernel.__name__ == "semidbm._core")
        with pytest.raises(DBMChecksumError) as expected:
            reader[UNCHANGED_KEY]
        for seed in (reader.key_seed, OTHER_SEED):
            part = _parts.part_of(hash_key(seed, UNCHANGED_KEY), 4)
            assert UNCHANGED_KEY in reader._part(part, 4, seed, "keys")
            for what in ("values", "items"):
                with pytest.raises(DBMChecksumError) as raised:
                    reader._part(part, 4, seed, what)
                assert str(raised.value) == str(expected.value)
    with dbopen(tmp_path / "db", "r") as reader:  # unverified: the bytes as the lookup has them
        model[UNCHANGED_KEY] = reader[UNCHANGED_KEY]
        assert model[UNCHANGED_KEY] != b"value 2222"
        check_values_and_items(reader, model, 4, reader.key_seed)


@compiled_only
def test_compiled_parts_read_the_mapped_index_file(tmp_path):
    """The compiled reader lists its parts from the index file that the compaction wrote."""
    compiled = _kernel.load("cython")
    model = build(lambda *arguments: db.open_with(compiled, *arguments), tmp_path / "db")
    with db.open_with(compiled, tmp_path / "db", "r") as reader:
        assert reader.index_covered > 0
        listed = [set(reader._part(part, 3, reader.key_seed, "keys")) for part in range(3)]
        assert listed == model_parts(model, 3, reader.key_seed)
        check_values_and_items(reader, model, 3, reader.key_seed)


@compiled_only
def test_both_kernels_list_the_same_parts_of_one_state(tmp_path):
    model = build(lambda *arguments: db.open_with(_kernel.load("cython"), *arguments),
                  tmp_path / "db")
    readers = [db.open_with(_kernel.load(name), tmp_path / "db", "r")
               for name in IMPLEMENTATIONS]
    try:
        compiled, pure = readers[1], readers[0]
        assert compiled.log_state == pure.log_state
        seed = compiled.key_seed
        for part in range(5):
            for what in ("keys", "items"):
                assert sorted(pure._part(part, 5, seed, what)) == sorted(
                    compiled._part(part, 5, seed, what)
                )
        assert pure.key_seed == 0
        listed = [key for part in range(2) for key in pure._part(part, 2, 0, "keys")]
        assert sorted(listed) == sorted(model)
    finally:
        for reader in readers:
            reader.close()


def test_parts_of_an_empty_database_are_empty(dbopen, tmp_path):
    with dbopen(tmp_path / "db", "c"):
        pass
    with dbopen(tmp_path / "db", "r") as reader:
        for what in _parts.WHAT:
            assert [reader._part(part, 3, reader.key_seed, what) for part in range(3)] == [[]] * 3


def test_a_write_changes_the_log_state(dbopen, tmp_path):
    with dbopen(tmp_path / "db", "c") as writer:
        writer[b"a"] = b"1"
        writer.sync()
        reader = dbopen(tmp_path / "db", "r")
        before = reader.log_state
        writer[b"b"] = b"2"
        assert writer.log_state[0] > before[0]  # buffered records count
        writer.sync()
        assert reader.log_state == before  # a reader's state moves at refresh only
        reader.refresh()
        assert reader.log_state != before
        reader.close()


def test_a_compaction_changes_the_log_state(dbopen, tmp_path):
    with dbopen(tmp_path / "db", "c") as writer:
        writer[b"a"] = b"1"
        writer.compact()
        before = writer.log_state
        writer.compact()  # the same live records, a new file with a new checkpoint
        after = writer.log_state
    assert after[0] == before[0] and after != before


def test_an_identical_copy_has_the_same_log_state(dbopen, tmp_path):
    """The state is the log's bytes: another file, another directory (another machine's) alike."""
    build(dbopen, tmp_path / "db")
    copy = copied_data(tmp_path / "db", tmp_path / "copy")
    with dbopen(tmp_path / "db", "r") as original, dbopen(copy, "r") as copied:
        assert os.stat(tmp_path / "db" / "data").st_ino != os.stat(copy / "data").st_ino
        assert copied.log_state == original.log_state


def test_a_log_restored_in_place_to_another_of_its_length_changes_the_log_state(dbopen,
                                                                                tmp_path):
    """A backup restored over the file (the same inode, length and first 4 KiB) is another
    state: the last sample holds the record where the two logs differ."""
    first, second = logs_of_one_length(dbopen, tmp_path / "db")
    assert len(first) == len(second) > 2 * 4096 and first[:4096] == second[:4096]
    (tmp_path / "db" / "data").write_bytes(first)  # in place: the same inode
    with dbopen(tmp_path / "db", "r") as reader:
        before = reader.log_state
    (tmp_path / "db" / "data").write_bytes(second)
    with dbopen(tmp_path / "db", "r") as reader:
        assert reader.log_state[0] == before[0]
        assert reader.log_state != before


@pytest.mark.parametrize(
    "part, parts, seed, what, error",
    [
        (0, 0, 0, "keys", ValueError),
        (3, 3, 0, "keys", ValueError),
        (-1, 3, 0, "keys", ValueError),
        (0, 2**32 + 1, 0, "keys", ValueError),
        (0, 1, -1, "keys", ValueError),
        (0, 1, 2**64, "keys", ValueError),
        (0.0, 1, 0, "keys", TypeError),
        (0, True, 0, "keys", TypeError),
        (0, 1, 0, "key", ValueError),
        (0, 1, 0, b"keys", ValueError),
        (0, 1, 0, None, ValueError),
    ],
)
def test_part_arguments_are_checked(dbopen, tmp_path, part, parts, seed, what, error):
    with dbopen(tmp_path / "db", "c") as writer:
        with pytest.raises(error):
            writer._part(part, parts, seed, what)


def test_the_last_of_2_to_the_32_parts(dbopen, tmp_path):
    """The largest number of parts: each part is one hash, the last ends at 2**32 - 1."""
    with dbopen(tmp_path / "db", "c") as writer:
        writer[b"k"] = b"v"
        hashed = hash_key(OTHER_SEED, b"k")
        assert writer._part(hashed, 2**32, OTHER_SEED, "keys") == [b"k"]
        assert writer._part(2**32 - 1, 2**32, OTHER_SEED, "keys") == (
            [b"k"] if hashed == 2**32 - 1 else []
        )


def test_the_python_hash_is_the_format_documents():
    for key in (b"", b"a", b"12345678", b"123456789", bytes(range(200))):
        for seed in (0, OTHER_SEED, 2**64 - 1):
            assert _parts.key_hash(seed, key) == hash_key(seed, key)


@compiled_only
def test_a_damaged_index_file_is_dropped_not_listed(tmp_path):
    """A slot of the index file pointed at another key's record: its block's checksum fails.

    The part is listed again from the log replayed whole, so no key is
    listed twice or missed, as a lookup that meets the damage does.
    """
    compiled = _kernel.load("cython")
    with db.open_with(compiled, tmp_path / "db", "c") as writer:
        writer.update((b"key %d" % number, b"value") for number in range(3000))
        writer.compact()  # an index file for the whole log: no replay past it meets the damage
        model = writer.keys()
    index = tmp_path / "db" / "index"
    table = bytearray(index.read_bytes())
    used = [at for at in range(4096, 4096 + 12 * 1024, 12) if table[at:at + 8] != bytes(8)]
    table[used[0]:used[0] + 8] = table[used[1]:used[1] + 8]
    index.write_bytes(bytes(table))
    with db.open_with(compiled, tmp_path / "db", "r") as reader:
        assert reader.index_covered > 0
        listed = [reader._part(part, 1, reader.key_seed, "keys") for part in range(1)]
        assert reader.index_covered == 0
    assert sorted(listed[0]) == sorted(model)
