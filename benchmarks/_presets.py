"""The benchmark presets: each one's worker, contenders, workloads, data set and targets.

``compare.py`` runs them (see its docstring for what each preset
measures); ``bulk.py``, ``views.py`` and ``versus.py`` take their data
sets from them, so that every script times the same data under the same
name.
"""

import os

HERE = os.path.dirname(os.path.abspath(__file__))

#: Bytes per key of the classic presets (``compare.py``'s ``--key-size`` default).
KEY_SIZE = 16

#: The presets that ``--preset all`` runs, in order.
ALL_PRESETS = ["small", "a", "b", "c", "d", "e"]

CLASSIC_CONTENDERS = [
    "semidbm",
    "semidbm-python",
    "semidbm-0.5.1",
    "dbm.gnu",
    "dbm.dumb",
    "lmdb",
    "diskcache",
    "rocksdict",
    "dbm.sqlite3",
    "dict",
]
SHELF_CONTENDERS = [
    "semidbm",
    "semidbm-python",
    "semidbm-0.5.1",
    "dbm.gnu",
    "dbm.dumb",
    "sqlitedict",
    "diskcache",
    "rocksdict",
    "dbm.sqlite3",
    "dict",
]

#: Preset c's: the shelf contenders and zerodep's persistdict, whose JSON
#: values hold preset c's dicts but not preset d's bytes.
SMALL_SHELF_CONTENDERS = [name for name in SHELF_CONTENDERS if name != "dict"] + [
    "persistdict-json",
    "persistdict-sqlite",
    "dict",
]

#: Preset e: the stores several processes can write, then those that cannot.
PROCESS_CONTENDERS = [
    "semidbm",
    "semidbm-python",
    "lmdb",
    "diskcache",
    "dbm.sqlite3",
    "dbm.gnu",
    "rocksdict",
    "dbm.dumb",
    "semidbm-0.5.1",
]

#: Preset e's workloads, run by four processes on one store.
PROCESS_WORKLOADS = ["fill_4_writers", "mixed_4_processes"]

#: Preset e's sizes, full and under ``--quick``: keys filled (so also the
#: mixed workload's keys), operations per process in the mixed workload,
#: keys written alone, keys read by the pool.
PROCESS_SIZES = {
    False: {"fill": 200_000, "mixed": 50_000, "alone": 200_000, "pool": 1_000_000},
    True: {"fill": 4_000, "mixed": 2_000, "alone": 5_000, "pool": 20_000},
}

#: Preset e's slow contenders run the fill and the mixed workload on this
#: fraction (one in N) of the keys and operations.
PROCESS_SLOW = {"diskcache": 10, "dbm.sqlite3": 100}

#: Preset e, a writer alone: the least shared/exclusive ratio wanted, single
#: puts and updates of 1,000 items (issue 30).
ALONE_TARGETS = {"single": 0.25, "update": 0.9}

#: Preset e, a pickled handle: the least ratio of two pool workers to one
#: process, and the most seconds a worker's open may take (issue 30).
POOL_TARGET = 1.7
OPEN_TARGET_SECONDS = 0.001

#: In the order the classic worker runs them.
CLASSIC_WORKLOADS = [
    "fill_sequential",
    "read_cold",
    "read_sequential",
    "read_random",
    "read_hot",
    "delete_sequential",
    "fill_random",
]


def each_read(rows, other, factor):
    """Targets: ``factor`` times ``other`` on each of the read workloads in ``rows``."""
    return [(row, other, factor) for row in rows if row.startswith("read")]


class Preset:
    """One benchmark setting: its worker, contenders, workloads and targets.

    ``targets`` lists ``(workload, other contender, factor)``: semidbm's
    median ratio to that contender must be at least ``factor`` (for
    ``reopen``, the contender's time over ours). ``strict`` targets
    ("ahead of") need more than ``factor``. A classic preset also has
    its number of ``keys`` (``quick_keys`` under ``--quick``), its
    ``value_size``, the ``key_limits`` of its slow contenders (at most
    that many keys each) and the ``min_read_seconds`` its workers time
    each read workload for (None: the worker's own default). ``repeat``
    is its number of repetitions unless ``--repeat`` says otherwise.
    """

    def __init__(
        self,
        name,
        title,
        worker,
        contenders,
        workloads,
        targets,
        strict=False,
        keys=None,
        value_size=None,
        quick_keys=None,
        key_limits=None,
        repeat=5,
        min_read_seconds=None,
    ):
        self.name = name
        self.title = title
        self.worker = os.path.join(HERE, worker)
        self.classic = worker == "_worker.py"
        self.contenders = contenders
        self.workloads = workloads
        self.targets = targets
        self.strict = strict
        self.keys = keys
        self.value_size = value_size
        self.quick_keys = quick_keys
        self.key_limits = key_limits or {}
        self.repeat = repeat
        self.min_read_seconds = min_read_seconds


SHELF_SMALL = [
    "%s_%d" % (work, count) for count in (50, 2000) for work in ("write", "read", "iterate")
]
SHELF_LARGE = ["write", "read_cold", "read_warm"]

PRESETS = {
    "small": Preset(
        "small",
        "the classic dbm workloads, a first look",
        "_worker.py",
        CLASSIC_CONTENDERS,
        CLASSIC_WORKLOADS,
        [],
        keys=100_000,
        value_size=100,
        quick_keys=5_000,
        key_limits={"dbm.dumb": 20_000, "diskcache": 10_000, "dbm.sqlite3": 2_000},
        repeat=3,
        min_read_seconds=0.1,
    ),
    "a": Preset(
        "a",
        "the classic dbm workloads, many small records",
        "_worker.py",
        CLASSIC_CONTENDERS,
        CLASSIC_WORKLOADS,
        [
            (fill, other, factor)
            for fill in ("fill_sequential", "fill_random")
            for other, factor in (("dbm.gnu", 15), ("lmdb", 1.2), ("dict", 0.6))
        ]
        + [
            ("read_hot", "dbm.gnu", 2),
            ("read_hot", "lmdb", 2),
            ("read_sequential", "dbm.gnu", 3),
            ("read_sequential", "lmdb", 1.2),
            ("read_sequential", "dict", 0.9),
            ("read_random", "dbm.gnu", 1.8),
            ("read_random", "lmdb", 1.8),
            ("read_random", "dict", 0.7),
            ("delete_sequential", "dbm.gnu", 15),
            ("delete_sequential", "lmdb", 1.5),
            ("reopen", "semidbm-0.5.1", 15),
        ],
        keys=1_000_000,
        value_size=100,
        quick_keys=20_000,
        key_limits={"dbm.dumb": 100_000, "diskcache": 100_000, "dbm.sqlite3": 20_000},
    ),
    "b": Preset(
        "b",
        "the classic dbm workloads, large values",
        "_worker.py",
        CLASSIC_CONTENDERS,
        CLASSIC_WORKLOADS,
        [
            (fill, other, factor)
            for fill in ("fill_sequential", "fill_random")
            for other, factor in (("dbm.gnu", 2), ("lmdb", 1.1))
        ]
        + each_read(CLASSIC_WORKLOADS, "dbm.gnu", 1.5)
        + each_read(CLASSIC_WORKLOADS, "lmdb", 1),
        keys=1_000,
        value_size=100_000,
        quick_keys=100,
    ),
    "c": Preset(
        "c",
        "shelves of small objects",
        "_shelf_worker.py",
        SMALL_SHELF_CONTENDERS,
        SHELF_SMALL,
        [(row, other, 1) for row in SHELF_SMALL for other in ("dbm.gnu", "sqlitedict")],
        strict=True,
    ),
    "d": Preset(
        "d",
        "a large-object cache through shelve",
        "_shelf_worker.py",
        [name for name in SHELF_CONTENDERS if name != "dict"],
        SHELF_LARGE,
        [(row, other, 1) for row in SHELF_LARGE for other in ("dbm.gnu", "sqlitedict")],
        strict=True,
    ),
    "e": Preset(
        "e",
        "several processes on one database",
        "_processes_worker.py",
        PROCESS_CONTENDERS,
        PROCESS_WORKLOADS,
        [
            ("fill_4_writers", "lmdb", 2),
            ("fill_4_writers", "diskcache", 20),
            ("mixed_4_processes", "lmdb", 1.5),
        ],
        repeat=3,
    ),
}

