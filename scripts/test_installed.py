"""Run the test suite against the installed semidbm, not the source tree.

cibuildwheel's test command runs it on every wheel it builds, and
``scripts/check_packaging.py`` on the wheel and sdist installs it makes.
Run it with the interpreter that has semidbm installed; extra arguments
go to pytest. It:

1. checks that ``semidbm`` comes from outside ``src/`` (an install, not
   the sources) and which kernel it has: ``semidbm.implementation`` must
   be ``"cython"``; with ``SEMIDBM_NO_EXTENSIONS=1`` (an install built
   without the extension) the compiled kernel must be absent instead;
2. finds semidbm 0.5.1 for the compatibility tests: the interpreter that
   ``SEMIDBM_V051_PYTHON`` names, or else a virtual environment made for
   the run with ``pip install semidbm==0.5.1``;
3. runs pytest on ``tests/`` beside this script's folder, in the same
   mode (``tests/conftest.py`` reads ``SEMIDBM_NO_EXTENSIONS`` too); or,
   given ``--tests FILE,FILE...`` first (``tests/test_cli.py``, relative
   to the project), on those alone. The other arguments go to pytest.
"""

import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent


def no_extensions():
    """True when testing an install built with ``SEMIDBM_NO_EXTENSIONS`` set."""
    return os.environ.get("SEMIDBM_NO_EXTENSIONS", "") not in ("", "0")


def check_installed_kernel():
    """Fail unless semidbm is installed (not the sources) with the expected kernel."""
    if os.environ.get("SEMIDBM_PURE_PYTHON", "") not in ("", "0"):
        sys.exit("test_installed: unset SEMIDBM_PURE_PYTHON; it hides the compiled kernel")
    import semidbm

    location = Path(semidbm.__file__).resolve()
    if (PROJECT / "src") in location.parents:
        sys.exit(
            "test_installed: semidbm comes from the source tree (%s), not an install" % location
        )
    compiled = importlib.util.find_spec("semidbm._core") is not None
    if no_extensions():
        if compiled or semidbm.implementation != "python":
            sys.exit(
                "test_installed: SEMIDBM_NO_EXTENSIONS is set, yet the compiled kernel is installed"
            )
    elif semidbm.implementation != "cython":
        sys.exit(
            "test_installed: semidbm.implementation is %r, not 'cython' (compiled kernel %s)"
            % (semidbm.implementation, "present but not importable" if compiled else "missing")
        )
    print("test_installed: semidbm %s from %s, implementation %s"
          % (semidbm.__version__, location.parent, semidbm.implementation), flush=True)


def venv_python(directory):
    """The interpreter of the virtual environment in ``directory``."""
    if os.name == "nt":
        return directory / "Scripts" / "python.exe"
    return directory / "bin" / "python"


def make_v051_environment(directory):
    """Make a virtual environment with semidbm 0.5.1 in ``directory``; return its interpreter."""
    subprocess.run([sys.executable, "-m", "venv", str(directory)], check=True)
    python = venv_python(directory)
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "semidbm==0.5.1"],
        check=True,
    )
    return python


def main(pytest_arguments):
    check_installed_kernel()
    env = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="semidbm-v051-") as place:
        if not env.get("SEMIDBM_V051_PYTHON"):
            env["SEMIDBM_V051_PYTHON"] = str(make_v051_environment(Path(place) / "venv"))
        chosen = [PROJECT / "tests"]
        if pytest_arguments[:1] == ["--tests"]:
            chosen = [PROJECT / name for name in pytest_arguments[1].split(",")]
            pytest_arguments = pytest_arguments[2:]
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                   *map(str, chosen), *pytest_arguments]
        return subprocess.run(command, env=env).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
