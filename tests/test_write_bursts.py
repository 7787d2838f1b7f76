"""Every operation right after a burst of assignments sees all of them.

The compiled kernel applies an assignment's index update a few
assignments later (its slot prefetched meanwhile), and any other
operation applies the waiting ones first. These tests run on both
kernels and check the result of each kind of operation straight after
bursts longer and shorter than that queue, with keys repeated inside it.
"""

import random

import pytest

#: Longer than the compiled kernel's queue of waiting index updates (16).
BURST = 40


def burst(database, model, rng, size):
    """Assign ``size`` values to keys drawn from a small set (so some repeat within the burst)."""
    for _ in range(size):
        key = b"k%d" % rng.randrange(60)
        value = b"v%d" % rng.randrange(10**6)
        database[key] = value
        model[key] = value


OPERATIONS = {
    "read": lambda database, model: all(database[key] == value for key, value in model.items()),
    "contains": lambda database, model: all(key in database for key in model),
    "length": lambda database, model: len(database) == len(model),
    "keys": lambda database, model: sorted(database.keys()) == sorted(model),
    "iterate": lambda database, model: sorted(database) == sorted(model),
    "items": lambda database, model: dict(database.items()) == model,
}


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
@pytest.mark.parametrize("size", [1, 5, 16, 17, BURST])
def test_operation_after_a_burst_sees_it(dbopen, dbpath, operation, size):
    rng = random.Random(size)
    model = {}
    with dbopen(dbpath, "c") as database:
        for _ in range(5):
            burst(database, model, rng, size)
            assert OPERATIONS[operation](database, model)


@pytest.mark.parametrize("size", [1, 16, BURST])
def test_delete_after_a_burst(dbopen, dbpath, size):
    rng = random.Random(size)
    model = {}
    with dbopen(dbpath, "c") as database:
        for _ in range(10):
            burst(database, model, rng, size)
            key = rng.choice(sorted(model))
            del database[key]
            del model[key]
            with pytest.raises(KeyError):
                del database[b"never set"]
            assert dict(database.items()) == model
    with dbopen(dbpath) as database:
        assert dict(database.items()) == model


@pytest.mark.parametrize("buffer_size", [0, 64, 1 << 20])
def test_records_larger_than_the_buffer_keep_their_order(dbopen, dbpath, buffer_size):
    large = b"L" * 200
    with dbopen(dbpath, "c", buffer_size=buffer_size) as database:
        for round_ in range(20):
            database[b"a"] = b"small %d" % round_
            database[b"a"] = large + b"%d" % round_
            database[b"b"] = large + b"%d" % round_
            database[b"b"] = b"small %d" % round_
        assert database[b"a"] == large + b"19"
        assert database[b"b"] == b"small 19"
        assert len(database) == 2
    with dbopen(dbpath) as database:
        assert database[b"a"] == large + b"19"
        assert database[b"b"] == b"small 19"


def test_overwriting_keys_while_iterating_is_fine(dbopen, dbpath):
    with dbopen(dbpath, "c") as database:
        for i in range(100):
            database[b"k%d" % i] = b"old"
        for key in database:
            database[key] = b"new " + key
        assert all(database[b"k%d" % i] == b"new k%d" % i for i in range(100))


def test_adding_a_key_while_iterating_is_noticed_at_the_next_step(dbopen, dbpath):
    with dbopen(dbpath, "c") as database:
        for i in range(100):
            database[b"k%d" % i] = b"v"
        keys = iter(database)
        next(keys)
        for i in range(3):
            database[b"k%d" % i] = b"overwritten"
        next(keys)
        database[b"brand new"] = b"v"
        with pytest.raises(RuntimeError):
            next(keys)


def test_growing_index_with_waiting_updates(dbopen, dbpath):
    rng = random.Random(3)
    model = {}
    with dbopen(dbpath, "c", buffer_size=1 << 12) as database:
        for i in range(30_000):
            key = b"%d" % rng.randrange(20_000)
            database[key] = key + b"!"
            model[key] = key + b"!"
            if i % 997 == 0:
                assert len(database) == len(model)
        assert dict(database.items()) == model
    with dbopen(dbpath) as database:
        assert dict(database.items()) == model
