"""The classic dbm workloads as asv timing benchmarks, one result per store.

Each benchmark times one whole pass over ``KEYS`` records (dbm.dumb's
delete excepted, see ``Deletes``): asv reports seconds per pass, so
lower is better. The workloads, from the classic dbm benchmark:

- fill_sequential, fill_random: a new database, every key set in key
  order or in a random one, then ``close()`` (timed: it flushes, and for
  semidbm it fsyncs);
- read_sequential, read_random, read_hot: every key read in key order,
  in a random order, or reads of a random 1% of the keys over and over,
  as many reads as keys;
- delete_sequential: every key deleted in key order, then ``close()``.

No sample sees what another sample left: with ``number = 1`` a sample
is one call, asv runs ``teardown`` and ``setup`` again before each
sample after the first, and ``warmup_time = 0`` leaves out the untimed
warm-up calls, whose state the first sample would inherit. So a fill
always starts from nothing, and a delete always finds a full database,
made in its own temporary directory.

After a fill or a delete, ``teardown`` reopens the database and fails
the benchmark unless it holds what the pass should have left: a pass
that wrote or deleted nothing must not pass for a fast one.
"""

import os
import shutil
import tempfile

from . import stores

#: Records in every database (dbm.dumb's delete excepted).
KEYS = 100_000

#: Records that dbm.dumb's delete_sequential deletes (see ``Deletes``).
DUMB_DELETE_KEYS = 1_000


class Workload:
    """What every workload shares: the store parameter, the sampling and a scratch directory."""

    params = stores.STORES
    param_names = ["store"]
    #: One call per sample, with asv's setup before it (see the module docstring).
    number = 1
    #: Samples in each of asv's two rounds (each round is a fresh process).
    repeat = 5
    #: No untimed calls before the samples.
    warmup_time = 0
    #: Seconds one round of one store may take: ten times what the slowest
    #: (dbm.dumb's reads, about 12 s) takes on two busy cores.
    timeout = 120
    #: The scratch directory of the current sample; None until setup made one.
    directory = None

    def setup(self, store):
        """Pick the store's module (or skip it), and make an empty scratch directory."""
        self.dbm = stores.dbm_module(store)
        self.directory = tempfile.mkdtemp(prefix="semidbm-asv-")
        self.path = os.path.join(self.directory, "db")

    def teardown(self, store):
        """Remove the scratch directory, if setup got as far as making one."""
        if self.directory is not None:
            shutil.rmtree(self.directory)
            self.directory = None

    def fill(self, records):
        """Write ``records`` into a new database at ``self.path`` and close it."""
        db = self.dbm.open(self.path, "n")
        for key, value in records:
            db[key] = value
        db.close()

    def check(self, count):
        """Fail unless the database holds ``count`` keys, the last of ``records(count)`` intact."""
        with self.dbm.open(self.path, "r") as db:
            found = len(db)
            if found != count:
                raise RuntimeError("the pass left %d keys, not %d" % (found, count))
            for key, value in stores.records(count)[-1:]:
                if db[key] != value:
                    raise RuntimeError("the pass left a wrong value under %r" % key)


class Fills(Workload):
    """fill_sequential and fill_random: ``KEYS`` records into a new database, then close."""

    def setup(self, store):
        """Pick the store and make the scratch directory; the records are built here, untimed."""
        super().setup(store)
        self.in_order = stores.records(KEYS)
        self.shuffled = stores.shuffled_records(KEYS)

    def teardown(self, store):
        """Check that the fill wrote every record (unless the store was skipped), then clean up."""
        try:
            if self.directory is not None:
                self.check(KEYS)
        finally:
            super().teardown(store)

    def time_fill_sequential(self, store):
        """Set every key in key order in a new database, then close it."""
        self.fill(self.in_order)

    def time_fill_random(self, store):
        """Set every key in a random order in a new database, then close it."""
        self.fill(self.shuffled)


class Reads(Workload):
    """read_sequential, read_random and read_hot on a database of ``KEYS`` records.

    The database is written and opened read-only in setup, untimed
    (semidbm rebuilds its index when it opens), so its file is in the
    page cache: these are warm reads.
    """

    #: The database being read; None outside a sample.
    db = None

    def setup(self, store):
        """Write the database, open it read-only and build the three orders of keys."""
        super().setup(store)
        self.fill(stores.records(KEYS))
        self.db = self.dbm.open(self.path, "r")
        self.in_order = stores.keys(KEYS)
        self.shuffled = stores.shuffled_keys(KEYS)
        self.hot = stores.hot_keys(KEYS)

    def teardown(self, store):
        """Close the database, then remove it."""
        if self.db is not None:
            self.db.close()
            self.db = None
        super().teardown(store)

    def time_read_sequential(self, store):
        """Read every key in the order it was written."""
        db = self.db
        for key in self.in_order:
            db[key]

    def time_read_random(self, store):
        """Read every key in a random order."""
        db = self.db
        for key in self.shuffled:
            db[key]

    def time_read_hot(self, store):
        """Read a random 1% of the keys over and over, as many reads as there are keys."""
        db = self.db
        for key in self.hot:
            db[key]


class Deletes(Workload):
    """delete_sequential: every key of a full database deleted in key order, then close.

    ``KEYS`` records, except for dbm.dumb: it rewrites its whole index
    file on every delete, so deleting n keys takes O(n^2) time (over an
    hour for 100,000). Its database holds ``DUMB_DELETE_KEYS`` records,
    and its figure is for deleting those.
    """

    def setup(self, store):
        """Write a full database and open it for writing, untimed."""
        super().setup(store)
        count = DUMB_DELETE_KEYS if store == "dbm.dumb" else KEYS
        self.fill(stores.records(count))
        self.db = self.dbm.open(self.path, "w")
        self.in_order = stores.keys(count)

    def teardown(self, store):
        """Check that every key is gone (unless the store was skipped), then clean up."""
        try:
            if self.directory is not None:
                self.check(0)
        finally:
            super().teardown(store)

    def time_delete_sequential(self, store):
        """Delete every key in key order, then close the database."""
        db = self.db
        for key in self.in_order:
            del db[key]
        db.close()
