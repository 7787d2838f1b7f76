"""``semidbm.Cache``: objects that expire, ``memoize`` and its key scheme, the size limit."""

import hashlib
import os
import pickle
import subprocess
import sys

import pytest

import semidbm
from semidbm.cache import Cache, argument_key, encode_argument


@pytest.fixture
def cache(dbopen, dbpath):
    """A cache on a new database of the kernel under test; closed after."""
    opened = Cache(dbopen(dbpath, "c", format=2))
    yield opened
    opened.close()


def test_objects_are_kept_until_they_expire(cache, clock):
    cache.expire = 10
    cache["a"] = {"n": [1, 2]}
    cache.set(b"b", None, expire=1)
    cache.set("c", 3.5, expire=100)
    assert cache["a"] == {"n": [1, 2]} and cache.get(b"b", "x") is None and "c" in cache
    assert (cache.hits, cache.misses) == (2, 0)
    clock[0] += 1000
    assert cache.get("b", "gone") == "gone" and "b" not in cache
    with pytest.raises(KeyError):
        cache["b"]
    clock[0] += 9000
    assert cache.get("a") is None and cache["c"] == 3.5
    assert (cache.hits, cache.misses) == (3, 3)
    del cache["c"]
    assert "c" not in cache
    assert "hits" in repr(cache)


def test_memoize_calls_once_and_counts(cache, clock):
    calls = []

    @cache.memoize(expire=5, name="work")
    def work(x, y=1, *rest, **options):
        calls.append((x, y, rest, options))
        return None if x == "none" else (x, y)

    assert work(1) == work(1) == (1, 1)
    assert work("none") is None and work("none") is None  # None is a result, kept
    work(1.0)
    work(x=1)
    work(1, 2, 3, flag=True)
    work(1, 2, 3, flag=True)
    assert len(calls) == 5 and (cache.hits, cache.misses) == (3, 5)
    clock[0] += 5000
    work(1)
    assert len(calls) == 6
    with pytest.raises(TypeError, match="not object"):
        work(object())
    assert len(calls) == 6
    assert work.__name__ == "work"


def test_memoize_needs_a_name_where_the_qualified_name_is_shared(cache):
    """Every function made inside another, and every lambda, has one qualified name: by
    default they would share results. Caught by a memoize that takes such a name."""

    def make_adder(n):
        def add(x):
            return x + n

        return add

    for function in (make_adder(1), lambda x: x):
        with pytest.raises(ValueError, match="needs a name="):
            cache.memoize()(function)
    add1 = cache.memoize(name="add1")(make_adder(1))
    add100 = cache.memoize(name="add100")(make_adder(100))
    assert (add1(5), add100(5)) == (6, 105)


def test_the_key_scheme_is_the_documented_one(cache):
    """docs/cache.md, "The key of a call": these bytes are part of the interface."""
    assert encode_argument(((3, "é"), {"k": [None, True, 1.5, b"\0"]})) == (
        b"((i3;s2:\xc3\xa9){s1:k[NTf\x3f\xf8\x00\x00\x00\x00\x00\x00b1:\x00]})")
    assert encode_argument({2: 1, 1: 2}) == b"{i1;i2;i2;i1;}"
    assert encode_argument(frozenset({"b", "a"})) == encode_argument({"a", "b"}) == (
        b"<s1:as1:b>")
    assert encode_argument(True) != encode_argument(1) != encode_argument(1.0)
    assert argument_key((3,), {}) == b"=((i3;){})"
    long = ("x" * 100,)
    assert argument_key(long, {}) == b"#" + hashlib.blake2b(
        b"((s100:" + b"x" * 100 + b"){})", digest_size=20).digest()
    work = cache.memoize(name="work")(lambda *args: args)
    assert work.cache_key(3) == b"\0memoize\0work\0=((i3;){})"
    assert cache.memoize()(encode_argument).cache_key(3).startswith(
        b"\0memoize\0semidbm.cache.encode_argument\0")


def test_keys_agree_across_processes_and_hash_seeds(cache):
    """Python's ``hash`` is salted per process: a set's order, a dict's built from one, differ."""

    @cache.memoize(name="shared.work")
    def work(*args):
        return args

    arguments = ({"set": {"a", "b", "c", "d"}, 1: frozenset(range(20))}, "x" * 80)
    script = (
        "from semidbm.cache import Cache; import sys\n"
        "cache = Cache(sys.argv[1], 'cm')\n"
        "work = cache.memoize(name='shared.work')(lambda *args: args)\n"
        "sys.stdout.buffer.write(work.cache_key(%r, %r))\n" % arguments
    )
    found = subprocess.run(
        [sys.executable, "-c", script, os.fspath(cache.database.path) + ".other"],
        env=dict(os.environ, PYTHONHASHSEED="12345"), capture_output=True, check=True,
    ).stdout
    assert found == work.cache_key(*arguments)
    assert found.startswith(b"\0memoize\0shared.work\0#")


def test_the_size_limit_gives_up_the_oldest_written_first(cache):
    size = len(pickle.dumps(b"v" * 50, 5)) + 12 + 2  # a record: lengths, key, value, CRC
    for number in range(10):
        cache[b"k%d" % number] = b"v" * 50
    cache[b"k0"] = b"v" * 50  # written again: now the newest
    cache.size_limit = 4 * size
    cache.compact()
    assert sorted(cache.database.keys()) == [b"k0", b"k7", b"k8", b"k9"]
    cache.size_limit = 0
    cache.close(compact=True)
    with semidbm.open(os.path.dirname(cache.database.path), "r") as database:
        assert len(database) == 0


def test_refused_arguments(dbopen, dbpath):
    with pytest.raises(ValueError, match="open it with"):
        Cache(dbpath, "r")
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="size_limit"):
            Cache(dbpath, size_limit=bad)
    dbopen(dbpath, "c").close()  # format 1.1
    with pytest.raises(semidbm.error, match="format 1.1, not 2"):
        Cache(dbpath)


WRITER = """
import sys
from semidbm.cache import Cache
path, name = sys.argv[1], sys.argv[2]
with Cache(path, "cm", expire=60) as cache:
    square = cache.memoize(name="square")(lambda n: n * n)
    for n in range(40):
        square(n)
        cache[name + str(n)] = n
    print(cache.hits + cache.misses)
"""


def test_processes_share_a_cache(tmp_path):
    """Three processes through shared writers ('cm'): every value each kept is there."""
    path = tmp_path / "shared.cache"
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, path, name],
                                stdout=subprocess.PIPE) for name in "abc"]
    for writer in writers:
        out, _ = writer.communicate(timeout=60)
        assert writer.returncode == 0 and out.strip() == b"40"
    with Cache(path, "wm") as cache:
        square = cache.memoize(name="square")(lambda n: -1)
        assert [square(n) for n in range(40)] == [n * n for n in range(40)]
        assert all(cache[name + str(n)] == n for name in "abc" for n in range(40))
        assert cache.misses == 0
