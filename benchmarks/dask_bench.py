"""semidbm on Dask: the targets of issue 31, measured on a LocalCluster of 2 worker processes.

Usage (the nox session ``bench_dask`` sets up the environment and runs
this with the arguments after ``--``)::

    bash scripts/nox.sh -s bench_dask -- [--records N] [--lookups K] [--repeat R]
        [--partitions P] [--out-dir DIR]

The data: N records (10,000,000 by default) of 16-byte keys (the record's
number, in decimal) and 100-byte values (the key, then 84 bytes of one
random block from a place the number gives, neighbours' places far
apart), made again the same in any process from the numbers alone. No
two values are alike and neighbours share no bytes, as in the data sets
this stands for: a reader that makes one object per distinct value
(pyarrow's ``to_pandas`` does) gains nothing from repeats, nor a
compressed file from overlaps. The cluster:
``dask.distributed.LocalCluster(n_workers=2, processes=True,
threads_per_worker=1)``. Each repetition runs every pair of a
measurement one after the other (which goes first alternates); a ratio
is the median of the per-repetition ratios. The measurements:

- read: every value into a count and a sum of value lengths; a bag of
  values (``semidbm.dask.read_bag``, P partitions) on the cluster,
  against one process reading every key's value in a plain loop, and
  against the same records as Parquet files (P of them, written by
  pyarrow) read with ``dask.dataframe.read_parquet`` on the cluster;
- write: the N records as a bag of P partitions made on the workers,
  written by ``semidbm.dask.to_semidbm(bag, path, shards=8)``, against one
  process writing them into one database with ``update``;
- lookups: K random keys (1,000,000 by default), each ``db[key]`` in a
  loop, and all of them with one ``get_many``, through an 8-shard
  database (``semidbm.open_sharded``) against one database, in this
  process;
- memory: one partition of ``read_bag``'s items (``semidbm.dask.read_part``,
  what a task of the bag runs) read in a worker, while a thread of that
  worker samples its anonymous resident memory (``RssAnon`` of
  /proc/self/status, every millisecond it gets the interpreter); the
  peak over the level before, against the size of the partition's results
  (``sys.getsizeof`` of the list, the pairs, the keys and the values).
  The peak of all its resident memory (``VmHWM``, reset first through
  /proc/self/clear_refs) is given too: it counts the data file's pages the
  read maps, which are the page cache's, shared, not the worker's own.

Every job's answer is checked (the counts, the sum of lengths, the
values looked up, the records written). The report, a Markdown file
``dask.md`` with the targets met or not, and a chart ``dask.png`` of the
ratios (where matplotlib is installed), go to a new directory
``results/dask/DATE-TIME/`` (ignored by git) or to ``--out-dir``; the
report is printed too.
"""

import argparse
import importlib.util
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from time import perf_counter

import _charts
from _provenance import REPO, cpu_model, filesystem_type, quoted_command, run_date, source_version
from _report import format_number, format_ratio, markdown_table, significant, spread_cell, verdict
from _results import results_directory

import semidbm

#: Where the reports go unless ``--out-dir`` says otherwise (ignored by git).
RESULTS = os.path.join(REPO, "results", "dask")

#: The size of a key and of a value, in bytes.
KEY_SIZE = 16
VALUE_SIZE = 100

#: The records a process makes, or a database takes, at once.
CHUNK = 100_000

#: The cluster's worker processes, and the shards the write and the lookups use.
WORKERS = 2
SHARDS = 8

#: The issue's targets: (measurement, comparison, at least this speed-up or at most this slowdown).
READ_VS_LOOP = 1.7
READ_VS_PARQUET = 1.0
WRITE_VS_ONE = 1.5
LOOKUP_SLOWDOWN = 1.2
#: The memory target: what a worker may add over its partition's results.
MEMORY_OVER_RESULTS = 4 * 2**20

#: What the report says where matplotlib (the ``bench`` extra) is missing.
NO_CHART = "No chart: matplotlib is not installed (the bench extra has it)."

#: The random block the values are cut from (the same in every process: a fixed seed).
BLOCK = random.Random(31).randbytes(1 << 16)


def records(start, stop):
    """The records numbered ``start`` to ``stop - 1``: ``(key, value)`` pairs of bytes, each
    value its key and then the bytes of BLOCK from ``place(number)`` on."""
    tail = VALUE_SIZE - KEY_SIZE
    numbers = range(start, stop)
    return [
        (key, key + BLOCK[at:at + tail])
        for at, key in zip(map(place, numbers), [b"%016d" % number for number in numbers])
    ]


#: The step between the places in BLOCK of two records' values: a prime, so that each of
#: the block's places comes once before any comes again.
STEP = 7919


def place(number):
    """Where in BLOCK the value of record ``number`` takes its bytes after the key: a step
    apart from its neighbour's, so that neighbouring values share no bytes for a compressor to
    find."""
    return number * STEP % (len(BLOCK) - (VALUE_SIZE - KEY_SIZE))


def chunks(count):
    """The ``(start, stop)`` ranges of CHUNK records that make up ``count`` records."""
    return [(start, min(start + CHUNK, count)) for start in range(0, count, CHUNK)]


def ranges(count, parts):
    """``count`` records cut into ``parts`` consecutive ``(start, stop)`` ranges."""
    return [(count * part // parts, count * (part + 1) // parts) for part in range(parts)]


def fill(database, count):
    """Write ``count`` records into the open ``database`` (one or sharded), a chunk at a time."""
    for start, stop in chunks(count):
        database.update(records(start, stop))


def make_parquet(directory, count, parts):
    """Write the records as ``parts`` Parquet files (binary key and value) in ``directory``."""
    import pyarrow
    import pyarrow.parquet

    os.mkdir(directory)
    for part, (start, stop) in enumerate(ranges(count, parts)):
        keys, values = zip(*records(start, stop))
        table = pyarrow.table({"key": pyarrow.array(keys, pyarrow.binary()),
                               "value": pyarrow.array(values, pyarrow.binary())})
        pyarrow.parquet.write_table(table, os.path.join(directory, "part-%04d.parquet" % part))


def size_of(directory):
    """The bytes of the files in ``directory`` and below."""
    return sum(
        os.path.getsize(os.path.join(folder, name))
        for folder, _, names in os.walk(directory)
        for name in names
    )


def timed(job):
    """``(seconds, answer)`` of ``job()``."""
    start = perf_counter()
    answer = job()
    return perf_counter() - start, answer


def read_loop(path):
    """One process: the count of the values and the sum of their lengths, in a plain loop."""
    count = total = 0
    with semidbm.open(path, "r") as db:
        for key in db:
            total += len(db[key])
            count += 1
    return count, total


def read_bag_job(path, parts):
    """The cluster: the count and the sum of lengths of a bag of the values (``read_bag``)."""
    import dask

    import semidbm.dask

    lengths = semidbm.dask.read_bag(path, "values", npartitions=parts).map(len)
    return dask.compute(lengths.count(), lengths.sum())


def read_parquet_job(directory):
    """The cluster: the count and the sum of lengths of the Parquet files' value column."""
    import dask
    import dask.dataframe

    values = dask.dataframe.read_parquet(directory, columns=["value"])["value"]
    lengths = values.map(len, meta=("value", "int64"))
    return dask.compute(lengths.count(), lengths.sum())


def write_one(path, count):
    """One process: make the records and write them into one new database."""
    with semidbm.open(path, "n") as db:
        fill(db, count)


def write_shards_job(path, count, parts):
    """The cluster: a bag of the records made on the workers, written into SHARDS shards."""
    import dask
    import dask.bag

    import semidbm.dask

    bag = dask.bag.from_delayed([dask.delayed(records)(start, stop)
                                 for start, stop in ranges(count, parts)])
    return semidbm.dask.to_semidbm(bag, path, shards=SHARDS)


def check_written(database, count):
    """Exit unless ``database`` (open) holds the ``count`` records, sampled a thousand apart."""
    if len(database) != count:
        sys.exit("wrote %d records, not %d" % (len(database), count))
    for start in range(0, count, 1000):
        if database[b"%016d" % start] != records(start, start + 1)[0][1]:
            sys.exit("record %d was written wrong" % start)


def lookup_keys(count, lookups):
    """``lookups`` keys of the ``count`` records, drawn at random (a fixed seed)."""
    rng = random.Random(1)
    return [b"%016d" % rng.randrange(count) for _ in range(lookups)]


def lookup_loop(database, keys):
    """Seconds to read each of ``keys`` from the open ``database`` with ``database[key]``."""
    start = perf_counter()
    for key in keys:
        database[key]
    return perf_counter() - start


def lookup_many(database, keys):
    """Seconds to read all of ``keys`` from the open ``database`` with one ``get_many``."""
    start = perf_counter()
    database.get_many(keys)
    return perf_counter() - start


def check_lookups(databases, keys):
    """Exit unless each of ``databases`` reads the right value of a sample of ``keys``."""
    for key in keys[:1000]:
        expected = records(int(key), int(key) + 1)[0][1]
        if any(database[key] != expected for database in databases):
            sys.exit("read a wrong value for %r" % key)


def status_bytes(field):
    """A ``kB`` field of /proc/self/status (``RssAnon``, ``VmHWM``...) in bytes."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


def results_size(pairs):
    """The bytes of a partition's results: the list, its pairs, their keys and values."""
    return sys.getsizeof(pairs) + sum(
        sys.getsizeof(pair) + sys.getsizeof(pair[0]) + sys.getsizeof(pair[1]) for pair in pairs
    )


def partition_memory(path, part, parts):
    """In a worker: ``(peak anonymous added, peak resident added, results' size)`` of a read.

    The read is ``read_part`` of partition ``part`` of ``parts`` of the
    database at ``path``'s items, as a task of ``read_bag`` runs it; a
    thread samples ``RssAnon`` meanwhile, and ``VmHWM`` is reset before.
    """
    import semidbm.dask

    planned = semidbm.dask.plan(path, parts)
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")  # VmHWM becomes the resident size now
    anonymous, resident = status_bytes("RssAnon"), status_bytes("VmHWM")
    peak = [anonymous]
    done = threading.Event()

    def sample():
        while not done.wait(0.001):
            peak[0] = max(peak[0], status_bytes("RssAnon"))

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        pairs = semidbm.dask.read_part(planned, part, "items", None)
        peak[0] = max(peak[0], status_bytes("RssAnon"))
    finally:
        done.set()
        sampler.join()
    return peak[0] - anonymous, status_bytes("VmHWM") - resident, results_size(pairs)


class Places:
    """The paths of the data sets in the temporary directory ``root``."""

    def __init__(self, root):
        self.single = os.path.join(root, "single")
        self.sharded = os.path.join(root, "sharded")
        self.parquet = os.path.join(root, "parquet")
        self.written_one = os.path.join(root, "written-one")
        self.written_shards = os.path.join(root, "written-shards")


def prepare(places, count, parts):
    """Make the data sets: one database, the same records in SHARDS shards and as Parquet."""
    with semidbm.open(places.single, "n") as db:
        fill(db, count)
    with semidbm.open_sharded(places.sharded, "n", shards=SHARDS) as db:
        fill(db, count)
    make_parquet(places.parquet, count, parts)


def expect(answer, count, what):
    """Exit unless a read's ``answer`` is ``(count, count * VALUE_SIZE)``."""
    if tuple(answer) != (count, count * VALUE_SIZE):
        sys.exit("%s answered %r, not %r" % (what, answer, (count, count * VALUE_SIZE)))


def read_pairs(places, count, parts, first):
    """One repetition of the reads: ``{name: (baseline seconds, semidbm seconds)}``."""
    jobs = {
        "loop": lambda: read_loop(places.single),
        "bag": lambda: read_bag_job(places.single, parts),
        "parquet": lambda: read_parquet_job(places.parquet),
    }
    order = ["bag", "loop", "parquet"] if first else ["loop", "parquet", "bag"]
    seconds = {}
    for name in order:
        seconds[name], answer = timed(jobs[name])
        expect(answer, count, name)
    return {"read vs loop": (seconds["loop"], seconds["bag"]),
            "read vs Parquet": (seconds["parquet"], seconds["bag"])}


def write_pair(places, count, parts, first):
    """One repetition of the write: ``{"write": (one process, the cluster into shards)}``."""
    jobs = {
        "one": lambda: write_one(places.written_one, count),
        "shards": lambda: write_shards_job(places.written_shards, count, parts),
    }
    seconds = {}
    for name in (["shards", "one"] if first else ["one", "shards"]):
        seconds[name], _ = timed(jobs[name])
    with semidbm.open(places.written_one, "r") as db:
        check_written(db, count)
    with semidbm.open_sharded(places.written_shards, "r") as db:
        check_written(db, count)
    for path in (places.written_one, places.written_shards):
        shutil.rmtree(path)
    return {"write": (seconds["one"], seconds["shards"])}


def lookup_pairs(places, keys, first):
    """One repetition of the lookups: ``{name: (one database's seconds, the shards')}``."""
    pairs = {}
    with semidbm.open(places.single, "r") as one, \
            semidbm.open_sharded(places.sharded, "r") as sharded:
        check_lookups((one, sharded), keys)
        for name, way in (("lookups", lookup_loop), ("get_many", lookup_many)):
            if first:
                theirs = way(sharded, keys)
                pairs[name] = (way(one, keys), theirs)
            else:
                pairs[name] = (way(one, keys), way(sharded, keys))
    return pairs


def run(places, settings, client):
    """Every repetition: ``{name: [(baseline seconds, semidbm seconds), ...]}``, and the memory."""
    keys = lookup_keys(settings.records, settings.lookups)
    times = {}
    for repetition in range(settings.repeat):
        first = repetition % 2 == 0
        found = read_pairs(places, settings.records, settings.partitions, first)
        found.update(write_pair(places, settings.records, settings.partitions, first))
        found.update(lookup_pairs(places, keys, first))
        for name, pair in found.items():
            times.setdefault(name, []).append(pair)
        print("repetition %d/%d done" % (repetition + 1, settings.repeat), file=sys.stderr)
    memory = client.submit(partition_memory, places.single, 0, settings.partitions,
                           pure=False).result()
    return times, memory


#: The rows of the report: name, what it compares, the target's text, and the test of a ratio.
ROWS = [
    ("read vs loop", "2 workers (read_bag) / one process's loop", "at least %gx" % READ_VS_LOOP,
     lambda ratio: ratio >= READ_VS_LOOP),
    ("read vs Parquet", "2 workers (read_bag) / read_parquet on 2 workers",
     "at least %gx" % READ_VS_PARQUET, lambda ratio: ratio >= READ_VS_PARQUET),
    ("write", "2 workers into %d shards / one process into one database" % SHARDS,
     "at least %gx" % WRITE_VS_ONE, lambda ratio: ratio >= WRITE_VS_ONE),
    ("lookups", "%d shards / one database (db[key], time a key)" % SHARDS,
     "at most %gx" % LOOKUP_SLOWDOWN, lambda ratio: ratio <= LOOKUP_SLOWDOWN),
    ("get_many", "%d shards / one database (get_many, time a key)" % SHARDS, "none", None),
]

#: The rows whose ratio is a slowdown (semidbm's time over the baseline's), not a speed-up.
SLOWDOWNS = ("lookups", "get_many")


def repetition_ratios(times):
    """Per measurement, the ratio of each repetition (see SLOWDOWNS for which way)."""
    return {
        name: [ours / baseline if name in SLOWDOWNS else baseline / ours
               for baseline, ours in pairs]
        for name, pairs in times.items()
    }


def ratios(times):
    """Per measurement, the median of its per-repetition ratios."""
    return {name: statistics.median(each) for name, each in repetition_ratios(times).items()}


def target_rows(times, lookups):
    """The report's table: a row per measurement, with the medians, the ratio and the target."""
    found = ratios(times)
    spreads = repetition_ratios(times)
    rows = []
    for name, compared, target, met in ROWS:
        pairs = times[name]
        per_key = lookups if name in SLOWDOWNS else 1
        unit = 1e9 / per_key if name in SLOWDOWNS else 1
        rows.append([
            name, compared,
            significant(statistics.median(pair[0] for pair in pairs) * unit),
            significant(statistics.median(pair[1] for pair in pairs) * unit),
            spread_cell(spreads[name]), target,
            "" if met is None else verdict(met(found[name])),
        ])
    return rows


def memory_lines(memory, parts):
    """The memory section: what one worker added reading one partition, and the target."""
    anonymous, resident, results = memory
    over = anonymous - results
    mib = 2**20
    return [
        "## Memory",
        "",
        "One worker read the first of %d partitions of the items "
        "(`semidbm.dask.read_part`, as a task of `read_bag`) while a thread of it sampled its "
        "anonymous resident memory (`RssAnon` of /proc/self/status, every millisecond it got "
        "the interpreter). Its peak rose by %s MiB, for results of %s MiB (`sys.getsizeof` of "
        "the list, the pairs, the keys and the values): %s MiB over them. Target: at most %d "
        "MiB over the results (no copy of the index per worker): %s. The peak of all its "
        "resident memory (`VmHWM`, reset first) rose by %s MiB: that counts the data file's "
        "pages the read mapped, the page cache's, shared by every process that reads the file."
        % (parts, significant(anonymous / mib), significant(results / mib),
           significant(over / mib), MEMORY_OVER_RESULTS // mib,
           verdict(over <= MEMORY_OVER_RESULTS), significant(resident / mib)),
    ]


def report(times, memory, settings, sizes, directory, charted):
    """The Markdown report (a title, how it ran, the targets table, the memory, the chart if
    ``charted``)."""
    return "\n".join([
        "# semidbm on Dask: the targets of issue 31",
        "",
        "- Command: `%s` (run from the repository's top directory)" % quoted_command(),
        "- Date: %s" % run_date(),
        "- Machine: %s, %d CPUs, %s" % (cpu_model(), os.cpu_count(), platform.platform()),
        "- semidbm source: commit %s, %s kernel" % (source_version(), semidbm.implementation),
        "- Databases in: %s (%s)" % (directory, filesystem_type(directory)),
        "- Cluster: `LocalCluster(n_workers=%d, processes=True, threads_per_worker=1)`" % WORKERS,
        "- Parameters: %s records, keys of %d bytes, values of %d bytes; %d partitions; "
        "%s random lookups; %d repetitions, each pair run one after the other (which first "
        "alternates); a ratio is the median of the per-repetition ratios"
        % (format_number(settings.records), KEY_SIZE, VALUE_SIZE, settings.partitions,
           format_number(settings.lookups), settings.repeat),
        "- Sizes: the database %s MiB (data and index files), the Parquet files %s MiB"
        % (significant(sizes[0] / 2**20), significant(sizes[1] / 2**20)),
        "",
        "## Targets",
        "",
        "Times in seconds (medians), the lookups' in nanoseconds a key; the ratio of a read or a "
        "write is the baseline's time over semidbm's (above 1: semidbm faster), of a lookup the "
        "shards' time over one database's: the median of the repetitions' ratios, and their "
        "range.",
        "",
        markdown_table(
            ["measurement", "compared", "baseline", "semidbm", "ratio", "target", "met"],
            target_rows(times, settings.lookups),
        ),
        "",
        *memory_lines(memory, settings.partitions),
        "",
        "![the ratios](dask.png)" if charted else NO_CHART,
        "",
    ])


def chart(path, times):
    """The ratios as bars: each semidbm's speed over its baseline's (a lookup's, below 1, too)."""
    found = ratios(times)
    bars = [(name, 1 / found[name] if name in SLOWDOWNS else found[name]) for name in found]
    _charts.ratio_chart(path, "semidbm on Dask (issue 31)", bars,
                        "semidbm's speed / the baseline's", format_ratio)


def parse_arguments(argv):
    """The command line, checked."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=10_000_000, help="records (10,000,000)")
    parser.add_argument("--lookups", type=int, default=1_000_000, help="lookups (1,000,000)")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions (3)")
    parser.add_argument("--partitions", type=int, default=8, help="partitions of a bag (8)")
    parser.add_argument("--out-dir", help="where the report goes (a new results/dask/DATE-TIME)")
    settings = parser.parse_args(argv)
    if min(settings.records, settings.lookups, settings.repeat, settings.partitions) < 1:
        parser.error("--records, --lookups, --repeat and --partitions must be at least 1")
    return settings


def main(argv=None):
    settings = parse_arguments(argv)
    from dask.distributed import Client, LocalCluster

    out = results_directory(settings.out_dir, RESULTS)
    with tempfile.TemporaryDirectory() as root:
        places = Places(root)
        started = time.monotonic()
        prepare(places, settings.records, settings.partitions)
        print("data made in %.1f s" % (time.monotonic() - started), file=sys.stderr)
        sizes = (size_of(places.single), size_of(places.parquet))
        with LocalCluster(n_workers=WORKERS, processes=True, threads_per_worker=1,
                          dashboard_address=None) as cluster, Client(cluster) as client:
            times, memory = run(places, settings, client)
        charted = importlib.util.find_spec("matplotlib") is not None
        text = report(times, memory, settings, sizes, tempfile.gettempdir(), charted)
    with open(os.path.join(out, "dask.md"), "w") as handle:
        handle.write(text)
    if charted:
        chart(os.path.join(out, "dask.png"), times)
    print(text)


if __name__ == "__main__":
    main()
