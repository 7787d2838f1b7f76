"""Which kernel runs: ``semidbm.implementation``, the override, the interface."""

import importlib.util
import os
import subprocess
import sys

import pytest

import semidbm
from semidbm import db

from .conftest import NO_EXTENSIONS, kernel_name


def implementation_in_subprocess(**environment):
    env = {k: v for k, v in os.environ.items() if k != "SEMIDBM_PURE_PYTHON"}
    env.update(environment)
    result = subprocess.run(
        [sys.executable, "-c", "import semidbm; print(semidbm.implementation)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.strip()


@pytest.mark.parametrize("value", ["1", "yes"])
def test_environment_variable_forces_pure_python(value):
    assert implementation_in_subprocess(SEMIDBM_PURE_PYTHON=value) == "python"


@pytest.mark.parametrize("value", ["", "0"])
def test_compiled_core_is_built_and_used(value):
    compiled = importlib.util.find_spec("semidbm._core") is not None
    if NO_EXTENSIONS:
        assert not compiled, "SEMIDBM_NO_EXTENSIONS is set, yet the compiled kernel is installed"
        assert implementation_in_subprocess(SEMIDBM_PURE_PYTHON=value) == "python"
    else:
        assert compiled, (
            "the extension was not built (to test an install without it, "
            "set SEMIDBM_NO_EXTENSIONS=1)"
        )
        assert implementation_in_subprocess(SEMIDBM_PURE_PYTHON=value) == "cython"


def test_open_uses_the_named_implementation(tmp_path):
    with semidbm.open(tmp_path / "x.db", "c") as database:
        kernels = [cls.__module__ for cls in type(database).__mro__ if cls.__name__ == "Store"]
    assert kernels == ["semidbm._core" if semidbm.implementation == "cython" else "semidbm._pure"]


def test_fixture_runs_the_kernel_it_names(request, kernel, dbopen, dbpath):
    assert kernel_name(kernel) in request.node.name
    with dbopen(dbpath, "c") as database:
        assert isinstance(database, kernel.Store)


@pytest.mark.parametrize(
    "name",
    ["__getitem__", "__setitem__", "__delitem__", "__contains__", "__len__", "__iter__",
     "keys", "values", "items", "sync", "compact", "refresh", "close", "closed", "writable",
     "path", "_disown"],
)
def test_kernel_interface(kernel, name):
    assert hasattr(kernel.Store, name)


def test_db_class_is_made_once_per_kernel(kernel):
    assert db.database_class(kernel) is db.database_class(kernel)
