"""Fixtures shared by the tests: every db test runs once per kernel.

A test that takes ``dbopen`` is collected once per implementation, with
the implementation's name in its id (``test_x[python]``,
``test_x[cython]``), so the report shows which kernel each run used.

The suite requires the compiled kernel, and fails without it, unless
the environment variable ``SEMIDBM_NO_EXTENSIONS`` is set (non-empty,
not ``0``): the same variable that makes the build skip the extension.
It then tests such an install: the pure-Python kernel only, with the
compiled one required to be absent.

``pytest --kernel cython`` leaves out the runs of the other kernel (and
``--kernel python`` those of the compiled one): the tests collected once
per kernel keep only that kernel's run; the tests of neither kernel, or
of both side by side, all stay.
"""

import functools
import mmap
import os
import subprocess
import sys
import tempfile

import pytest

import semidbm
from semidbm import _expiry, _kernel, db

from .support.cli import FILLED, SCRIPT

#: True when testing an install built without the compiled kernel.
NO_EXTENSIONS = os.environ.get("SEMIDBM_NO_EXTENSIONS", "") not in ("", "0")

#: The kernels every test runs against.
IMPLEMENTATIONS = ["python"] if NO_EXTENSIONS else ["python", "cython"]

#: Marks a test that needs the compiled kernel: skipped only when testing
#: an install built without it.
compiled_only = pytest.mark.skipif(
    NO_EXTENSIONS, reason="needs the compiled kernel; SEMIDBM_NO_EXTENSIONS says it was not built"
)


@pytest.fixture(params=IMPLEMENTATIONS)
def kernel(request):
    """The kernel module under test (``semidbm._pure`` or ``semidbm._core``)."""
    return _kernel.load(request.param)


@pytest.fixture
def dbopen(kernel):
    """``semidbm.open`` bound to the kernel under test."""
    return functools.partial(db.open_with, kernel)


@pytest.fixture
def dbpath(tmp_path):
    """A path where no database exists yet."""
    return tmp_path / "test.db"


@pytest.fixture
def database(dbopen, dbpath):
    """A new database at ``dbpath``, open for writing with the kernel under test; closed after."""
    opened = dbopen(dbpath, "c")
    yield opened
    opened.close()


@pytest.fixture(params=["script", "module"])
def tool(request):
    """The command line that starts the tool: the installed script, or the module."""
    if request.param == "script":
        assert os.path.isfile(SCRIPT), "the console script is not installed (pip install -e .)"
        return [SCRIPT]
    return [sys.executable, "-m", "semidbm"]


@pytest.fixture
def filled(tmp_path):
    """A database with a few keys, one binary."""
    path = tmp_path / "filled.db"
    with semidbm.open(path, "c") as database:
        database.update(FILLED)
    return path


@pytest.fixture
def two_gib_view(tmp_path):
    """A bytes-like object of exactly 2 GiB, backed by a sparse file (no RAM)."""
    path = tmp_path / "sparse"
    with open(path, "wb") as handle:
        handle.truncate(2**31)
    with open(path, "rb") as handle:
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    view = memoryview(mapped)
    yield view
    view.release()
    mapped.close()


#: Where the ``clock`` fixture starts the wall clock, in milliseconds since the Unix epoch.
CLOCK_START = 1_800_000_000_000


@pytest.fixture
def clock(monkeypatch):
    """The wall clock as semidbm reads it (``_expiry.now``: expiring values, docs/expiry.md),
    moved by the test: a list holding now, in milliseconds, from ``CLOCK_START``."""
    now = [CLOCK_START]
    monkeypatch.setattr(_expiry, "now", lambda: now[0])
    return now


@pytest.fixture
def small_disk():
    """A 4 MiB tmpfs mounted for the test (needs root on Linux)."""
    place = tempfile.mkdtemp(prefix="semidbm-disk-")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "semidbm-test", place], capture_output=True
    ) if sys.platform.startswith("linux") and os.geteuid() == 0 else None
    if mounted is None or mounted.returncode != 0:
        os.rmdir(place)
        pytest.skip("cannot mount a small tmpfs here: %s" % (mounted and mounted.stderr))
    try:
        yield place
    finally:
        subprocess.run(["umount", place], check=True)
        os.rmdir(place)


#: The implementation name ("python" or "cython") of a kernel module.
kernel_name = _kernel.name_of


def pytest_addoption(parser):
    parser.addoption(
        "--kernel",
        choices=["python", "cython"],
        help="run the tests collected once per kernel on this kernel only",
    )


def kernel_of(item):
    """The kernel a collected test runs, or None if it is not one of a test's per-kernel runs.

    That is the ``kernel`` parameter (``test_x[cython]``), or for the
    stateful tests the kernel that ends their class name
    (``TestDatabase_cython``, made once per kernel by test_stateful).
    """
    callspec = getattr(item, "callspec", None)
    if callspec is not None and "kernel" in callspec.params:
        return callspec.params["kernel"]
    if item.cls is not None:
        return next(
            (name for name in IMPLEMENTATIONS if item.parent.name.endswith("_" + name)), None
        )
    return None


def pytest_collection_modifyitems(config, items):
    """With ``--kernel``, deselect the per-kernel runs of the other kernel."""
    wanted = config.getoption("kernel")
    if wanted is None:
        return
    kept, other = [], []
    for item in items:
        (other if kernel_of(item) not in (None, wanted) else kept).append(item)
    if other:
        config.hook.pytest_deselected(items=other)
        items[:] = kept
