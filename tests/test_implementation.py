"""Which kernel runs: ``semidbm.implementation``, the override, the interface."""

import importlib.util
import inspect
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import semidbm
from semidbm import db
from semidbm._interface import Store

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


def test_without_the_compiled_kernel_the_pure_one_runs(tmp_path):
    # The package as its sources have it, every folder in it too, less the
    # compiled kernel: no folder may import in its place (an empty folder
    # named _core would, as a namespace package, and the fallback to the
    # pure kernel would never come).
    package = Path(semidbm.__file__).parent
    copy = tmp_path / "semidbm"
    built = shutil.ignore_patterns("*.so", "*.pyd", "*.c", "__pycache__")
    shutil.copytree(package, copy, ignore=built)
    result = subprocess.run(
        [sys.executable, "-c",
         "import semidbm; print(semidbm.__file__); print(semidbm.implementation)"],
        env={**os.environ, "PYTHONPATH": str(tmp_path), "SEMIDBM_PURE_PYTHON": ""},
        capture_output=True, text=True, check=True,
    )
    assert result.stdout.split() == [str(copy / "__init__.py"), "python"]


def test_open_uses_the_named_implementation(tmp_path):
    with semidbm.open(tmp_path / "x.db", "c") as database:
        kernels = [cls.__module__ for cls in type(database).__mro__ if cls.__name__ == "Store"]
    assert kernels == ["semidbm._core" if semidbm.implementation == "cython" else "semidbm._pure"]


def test_fixture_runs_the_kernel_it_names(request, kernel, dbopen, dbpath):
    assert kernel_name(kernel) in request.node.name
    with dbopen(dbpath, "c") as database:
        assert isinstance(database, kernel.Store)


#: Parameter kinds that take an argument by position, and by keyword.
BY_POSITION = {inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD}
BY_KEYWORD = {inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY}


def interface_members(protocol):
    """The functions and properties written in the body of ``protocol``, by name.

    ``typing.Protocol`` adds functions of its own to the class (such as
    ``__subclasshook__``); those are not the interface, and their
    qualified names say they were made elsewhere.
    """
    members = {}
    for name, member in vars(protocol).items():
        function = member.fget if isinstance(member, property) else member
        made_here = protocol.__qualname__ + "." + name
        if inspect.isfunction(function) and function.__qualname__ == made_here:
            members[name] = member
    return members


def accepts(wanted, found):
    """Whether parameter ``found`` takes what the interface's ``wanted`` allows.

    Same name and default, and every way of passing it that ``wanted``
    permits: a compiled kernel's slot takes its arguments by position
    only, which an interface method with positional-only parameters
    allows.
    """
    return (
        found.name == wanted.name
        and found.default == wanted.default
        and (wanted.kind not in BY_POSITION or found.kind in BY_POSITION)
        and (wanted.kind not in BY_KEYWORD or found.kind in BY_KEYWORD)
    )


def signature_problem(wanted, found):
    """Why the kernel's ``found`` cannot be called as the interface's ``wanted``; None if it can.

    Also None when the kernel's signature cannot be read: a compiled
    ``__init__`` shows only ``(*args, **kwargs)``. ``self`` is skipped,
    as slots take it by position only.
    """
    try:
        found_signature = inspect.signature(found)
    except (TypeError, ValueError):
        return None
    found_parameters = list(found_signature.parameters.values())[1:]
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in found_parameters):
        return None
    wanted_signature = inspect.signature(wanted)
    wanted_parameters = list(wanted_signature.parameters.values())[1:]
    if len(found_parameters) == len(wanted_parameters) and all(
        map(accepts, wanted_parameters, found_parameters)
    ):
        return None
    return "takes %s, the interface %s" % (found_signature, wanted_signature)


def interface_problems(protocol, store_class):
    """How ``store_class`` departs from ``protocol``: a message per problem, none if it conforms.

    Every member of the interface must be on the class (not merely
    inherited from ``object``): a property as a data attribute, a method
    as a callable that takes the same parameters. Every public name of
    the class must be in the interface, so that neither kernel grows
    one the other lacks and the interface does not describe.
    """
    members = interface_members(protocol)
    problems = []
    for name, wanted in members.items():
        found = inspect.getattr_static(store_class, name, None)
        if found is None or found is inspect.getattr_static(object, name, None):
            problems.append("%s: missing" % name)
        elif isinstance(wanted, property):
            if not inspect.isdatadescriptor(found):
                problems.append("%s: a property in the interface, not a data attribute" % name)
        elif not callable(found):
            problems.append("%s: a method in the interface, not callable" % name)
        else:
            problem = signature_problem(wanted, found)
            if problem is not None:
                problems.append("%s: %s" % (name, problem))
    for name in dir(store_class):
        if not name.startswith("_") and name not in members:
            problems.append("%s: public, but not in the interface" % name)
    return problems


def test_kernel_matches_interface(kernel):
    assert interface_problems(Store, kernel.Store) == []


def test_interface_check_finds_missing_extra_and_changed_members():
    members = interface_members(Store)
    del members["refresh"]
    members["defragment"] = lambda self: None
    members["compact"] = lambda self, callback=None: None
    problems = interface_problems(Store, type("Defective", (), members))
    assert problems[0].startswith(
        "compact: takes (self, callback=None), the interface (self, progress"
    )
    assert problems[1:] == ["refresh: missing", "defragment: public, but not in the interface"]


def test_db_class_is_made_once_per_kernel(kernel):
    assert db.database_class(kernel) is db.database_class(kernel)


def test_the_database_object_is_a_database_on_either_kernel(kernel, dbopen, dbpath):
    assert issubclass(db.database_class(kernel), semidbm.Database)
    assert not db.database_class(kernel).__abstractmethods__
    with dbopen(dbpath, "c") as database:
        assert isinstance(database, semidbm.Database)
        assert type(database).__mro__.index(kernel.Store) < type(database).__mro__.index(
            semidbm.Database
        ), "the kernel's item access must come first"


def test_database_is_not_made_directly():
    with pytest.raises(TypeError, match="abstract"):
        semidbm.Database()


def test_what_database_leaves_to_the_kernel_is_in_the_kernel_interface():
    assert set(semidbm.Database.__abstractmethods__) <= set(interface_members(Store))


@pytest.mark.skipif(NO_EXTENSIONS, reason="SEMIDBM_NO_EXTENSIONS: the compiled kernel is not built")
def test_compiled_docstrings_start_with_their_signatures():
    from semidbm import _core

    # Cython's embedsignature: help() and the API reference show the parameters.
    signature = "Store.compact(self, progress=None, format=None, recover=False)\n"
    assert _core.Store.compact.__doc__.startswith(signature)
    assert _core.summarize_log.__doc__.startswith("summarize_log(data, ")
