"""Where a benchmark's reports go: the directory given, or a new one named for the run's start.

Shared by ``compare.py`` and ``dask_bench.py``: by default each run gets
a directory of its own under ``results/`` (ignored by git), so that no
run writes over another's, nor over a committed file.
"""

import datetime
import os
import sys


def new_directory(parent, name):
    """Make and return a new directory ``parent/name``, or ``name-2``, ``name-3``... if taken."""
    os.makedirs(parent, exist_ok=True)
    for attempt in range(1, 1000):
        path = os.path.join(parent, name if attempt == 1 else "%s-%d" % (name, attempt))
        try:
            os.mkdir(path)
        except FileExistsError:
            continue
        return path
    raise FileExistsError("no free name like %s in %s" % (name, parent))


def results_directory(out_dir, parent):
    """Return the directory the reports go to, made if need be; exit if it cannot be made.

    ``out_dir`` if given; else a new directory under ``parent`` named for
    the date and time. Made before the run, so that a place where nothing
    can be written fails at once, not after the benchmark.
    """
    try:
        if out_dir:
            os.makedirs(out_dir, exist_ok=True)
            return out_dir
        return new_directory(parent, datetime.datetime.now().strftime("%Y-%m-%d-%H%M%S"))
    except OSError as error:
        sys.exit("cannot make the directory for the reports: %s (--out-dir chooses one)" % error)
