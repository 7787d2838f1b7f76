"""The JSON shelf's contract: a value is stored only if it reads back as it was.

docs/shelves.md: None, bools, ints, finite floats, str, lists and
dicts with str keys, nested, are stored as standard JSON (tuples come
back as lists); anything else is a TypeError when stored, and nothing is
written. Entries that other JSON writers stored with NaN or infinities
still read back.
"""

import collections
import enum
import json
import math
import os
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from semidbm.shelf import Shelf


def storable(value):
    """What the contract stores: JSON's types, str keys, finite floats (the test's own oracle)."""
    if value is None or isinstance(value, (bool, int)):
        return True
    if isinstance(value, str):
        return not any("\ud800" <= char <= "\udfff" for char in value)  # UTF-8 has no surrogates
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, (list, tuple)):
        return all(storable(item) for item in value)
    if isinstance(value, dict):
        return all(isinstance(key, str) and storable(key) and storable(item)
                   for key, item in value.items())
    return False


def as_read(value):
    """``value`` as the contract says it reads back: tuples as lists."""
    if isinstance(value, (list, tuple)):
        return [as_read(item) for item in value]
    if isinstance(value, dict):
        return {key: as_read(item) for key, item in value.items()}
    return value


def same(got, expected):
    """Equal, and of the same types all through: 1, 1.0 and True differ, so do 0.0 and -0.0."""
    if type(got) is not type(expected):
        return False
    if isinstance(got, float):
        return got == expected and math.copysign(1, got) == math.copysign(1, expected)
    if isinstance(got, list):
        return len(got) == len(expected) and all(map(same, got, expected))
    if isinstance(got, dict):
        return list(got) == list(expected) and all(map(same, got.values(), expected.values()))
    return got == expected


def refuse_constant(name):
    raise ValueError("not standard JSON: %s" % name)


def strict_json(data):
    """The value of ``data``, which must be UTF-8 standard JSON (no NaN, no Infinity)."""
    return json.loads(data.decode("utf-8"), parse_constant=refuse_constant)


# Lone surrogates included: st.text() leaves them out.
text = st.lists(st.characters() | st.integers(0xD800, 0xDFFF).map(chr), max_size=6).map("".join)
# Bounded: ints of thousands of digits are test_an_int_too_long_to_write_is_refused's.
integers = st.integers(-(10**30), 10**30) | st.integers()
json_scalars = st.none() | st.booleans() | integers | st.floats(allow_nan=False) | text
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=12,
)
hashables = st.none() | st.booleans() | integers | st.floats() | text | st.binary(max_size=3)
any_values = st.recursive(
    hashables | st.frozensets(hashables, max_size=3) | st.sets(hashables, max_size=3),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(text | hashables | st.tuples(integers), inner, max_size=4)
    ),
    max_leaves=12,
)


@pytest.mark.parametrize("writeback", [False, True], ids=["plain", "writeback"])
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(values=st.lists(json_values | any_values, min_size=1, max_size=4))
def test_a_value_is_stored_as_it_reads_back_or_refused_with_nothing_written(
    dbopen, tmp_path_factory, writeback, values
):
    path = tmp_path_factory.mktemp("shelf") / "s.db"
    database = dbopen(path, "c", buffer_size=0)  # every write reaches the file at once
    stored = {}
    seen = {}  # what the shelf gives before closing: with writeback, the cached object itself
    with Shelf(database, writeback=writeback, serializer="json") as shelf:
        for value in values:
            before = (dict(database.items()), os.path.getsize(path / "data"))
            if storable(value):
                shelf["k"] = value
                stored["k"] = as_read(value)
                seen["k"] = value if writeback else stored["k"]
                assert same(strict_json(database[b"k"]), stored["k"])
            else:
                with pytest.raises(TypeError):
                    shelf["k"] = value
                assert (dict(database.items()), os.path.getsize(path / "data")) == before
            assert same(shelf.get("k"), seen.get("k"))
    with Shelf(dbopen(path, "r"), serializer="json") as reader:
        assert same(dict(reader), stored)


@pytest.mark.parametrize(
    "value",
    [
        {1: 2},
        {"a": [{None: 1}]},
        {True: "yes"},
        {1.5: "x"},
        {enum.IntEnum("Level", "LOW").LOW: 1},
        float("nan"),
        [float("inf")],
        {"low": -math.inf},
        {1, 2},
        b"bytes",
        [1, (2, {3})],
    ],
    ids=repr,
)
def test_refused_values_raise_type_error_and_write_nothing(dbopen, dbpath, value):
    database = dbopen(dbpath, "c", buffer_size=0)
    with Shelf(database, serializer="json") as shelf:
        shelf["k"] = "old"
        size = os.path.getsize(dbpath / "data")
        with pytest.raises(TypeError, match="JSON"):
            shelf["k"] = value
        assert os.path.getsize(dbpath / "data") == size
        assert shelf["k"] == "old"


def test_the_key_message_says_what_json_would_have_done(dbopen, dbpath):
    with Shelf(dbopen(dbpath, "c"), serializer="json") as shelf:
        with pytest.raises(TypeError, match="dict key 1 is of type int.*read back as a string"):
            shelf["k"] = {"ok": {1: 2}}


def test_a_cycle_is_refused_with_type_error(dbopen, dbpath):
    cycle = []
    cycle.append(cycle)
    with Shelf(dbopen(dbpath, "c"), serializer="json") as shelf:
        with pytest.raises(TypeError, match="Circular reference"):
            shelf["k"] = {"a": cycle}
        assert "k" not in shelf


def nested(depth):
    """A list nested ``depth`` deep."""
    value = []
    for _ in range(depth):
        value = [value]
    return value


def test_nesting_too_deep_to_encode_is_refused_with_type_error(dbopen, dbpath):
    with Shelf(dbopen(dbpath, "c"), serializer="json") as shelf:
        with pytest.raises(TypeError, match="nested too deeply to encode"):
            shelf["k"] = nested(100_000)
        assert "k" not in shelf


@pytest.mark.skipif(
    not hasattr(sys, "set_int_max_str_digits"), reason="this Python writes ints of any length"
)
def test_an_int_too_long_to_write_is_refused(dbopen, dbpath):
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(640)
    try:
        with Shelf(dbopen(dbpath, "c"), serializer="json") as shelf:
            shelf["short"] = 10**639
            with pytest.raises(TypeError, match="JSON"):
                shelf["long"] = [10**640]
            assert list(shelf) == ["short"]
    finally:
        sys.set_int_max_str_digits(limit)


def test_subclasses_are_stored_as_their_json_type(dbopen, dbpath):
    colour = enum.Enum("Colour", {"RED": "red"}, type=str)
    value = collections.OrderedDict([(colour.RED, enum.IntEnum("Level", "LOW").LOW)])
    with Shelf(dbopen(dbpath, "c"), serializer="json") as shelf:
        shelf["k"] = value
        assert same(shelf["k"], {"red": 1})


@pytest.mark.parametrize("value", ["a\udcff", {"\ud800\udc00": 1}], ids=["lone", "pair"])
def test_a_str_holding_surrogates_is_refused(dbopen, dbpath, value):
    with Shelf(dbopen(dbpath, "c"), serializer="json") as shelf:
        with pytest.raises(TypeError, match="surrogate"):
            shelf["k"] = value
        assert "k" not in shelf


def test_negative_zero_and_exact_types_read_back(dbopen, dbpath):
    with Shelf(dbopen(dbpath, "c"), serializer="json") as shelf:
        shelf["k"] = [-0.0, 1, 1.0, True, 10**40, 1e308]
        assert same(shelf["k"], [-0.0, 1, 1.0, True, 10**40, 1e308])


# --- entries from other JSON writers, which may hold NaN and infinities ---

LEGACY = json.dumps({"x": math.nan, "y": [math.inf, -math.inf], "z": 1}).encode()


def legacy_database(dbopen, dbpath):
    """A database with an entry as ``json.dumps`` writes it by default (NaN, infinities)."""
    with dbopen(dbpath, "c") as database:
        database[b"legacy"] = LEGACY
        database[b"plain"] = b"[]"


def test_entries_holding_nan_and_infinities_read_back(dbopen, dbpath):
    legacy_database(dbopen, dbpath)
    with Shelf(dbopen(dbpath, "r"), serializer="json") as shelf:
        value = shelf["legacy"]
    assert math.isnan(value["x"]) and value["y"] == [math.inf, -math.inf] and value["z"] == 1


def test_rewriting_a_nan_entry_is_refused(dbopen, dbpath):
    legacy_database(dbopen, dbpath)
    with Shelf(dbopen(dbpath, "w"), serializer="json") as shelf:
        with pytest.raises(TypeError, match="Out of range float"):
            shelf["copy"] = shelf["legacy"]
        assert "copy" not in shelf


def test_writeback_leaves_a_nan_entry_read_and_unchanged_as_it_is(dbopen, dbpath):
    legacy_database(dbopen, dbpath)
    with Shelf(dbopen(dbpath, "w"), writeback=True, serializer="json") as shelf:
        assert shelf["legacy"]["z"] == 1
        shelf["plain"].append(1)
        shelf.sync()  # no error: the NaN entry needs no writing
    with dbopen(dbpath, "r") as database:
        assert database[b"legacy"] == LEGACY
        assert database[b"plain"] == b"[1]"


def change_a_number(value):
    """A plain change of the cached NaN entry."""
    value["1"] = 2


def swap_a_key_for_an_int(value):
    """The str key "1" swapped for the int 1: the same text for a lenient JSON writer."""
    value[1] = value.pop("1")


@pytest.mark.parametrize("mutate", [change_a_number, swap_a_key_for_an_int])
def test_writeback_refuses_a_nan_entry_changed_and_keeps_it_as_stored(dbopen, dbpath, mutate):
    legacy_database(dbopen, dbpath)
    stored = json.dumps({"x": math.nan, "1": 1}).encode()
    with dbopen(dbpath, "w") as database:
        database[b"legacy"] = stored
    shelf = Shelf(dbopen(dbpath, "w"), writeback=True, serializer="json")
    mutate(shelf["legacy"])
    shelf["plain"].append("kept")
    with pytest.raises(TypeError):
        shelf.close()
    with dbopen(dbpath, "r") as database:
        assert database[b"legacy"] == stored
        assert database[b"plain"] == b'["kept"]'


@pytest.mark.parametrize("spoil", [{1: "x"}, math.nan], ids=["int key", "nan"])
def test_writeback_sync_refuses_an_entry_mutated_out_of_json(dbopen, dbpath, spoil):
    with Shelf(dbopen(dbpath, "c"), writeback=True, serializer="json") as shelf:
        shelf["spoiled"] = []
        shelf["list"] = []
        shelf["spoiled"].append(spoil)
        shelf["list"].append("kept")
        with pytest.raises(TypeError):
            shelf.sync()
        assert shelf["spoiled"] == [] and shelf["list"] == ["kept"]


def test_json_nested_too_deep_to_read_is_a_value_error_naming_the_key(dbopen, dbpath):
    with dbopen(dbpath, "c") as database:
        database[b"deep"] = b"[" * 100_000 + b"]" * 100_000
    with Shelf(dbopen(dbpath, "r"), serializer="json") as shelf:
        with pytest.raises(ValueError, match="'deep' with the json serializer"):
            shelf["deep"]
