"""Fixtures shared by the tests: every db test runs once per kernel.

A test that takes ``dbopen`` is collected once per implementation, with
the implementation's name in its id (``test_x[python]``,
``test_x[cython]``), so the report shows which kernel each run used.
"""

import functools

import pytest

from semidbm import _kernel, db

#: The kernels every test runs against.
IMPLEMENTATIONS = ["python", "cython"]


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


def kernel_name(kernel):
    """The implementation name ("python" or "cython") of a kernel module."""
    return next(name for name, module in _kernel.MODULES.items() if module == kernel.__name__)
