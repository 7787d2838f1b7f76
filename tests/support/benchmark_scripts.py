"""The scripts of ``benchmarks/`` (and ``scripts/``) as modules, for the tests of their logic.

They are scripts, not a package: each imports its neighbours by their
plain names, as it does when run with its folder on ``sys.path``.
"""

import importlib.util
import os
import pathlib
import subprocess
import sys

import semidbm

#: The benchmarks' directory.
BENCHMARKS = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"
#: The project's own tools (CI, packaging, the build's inputs).
SCRIPTS = BENCHMARKS.parent / "scripts"


def load(name, module_name=None, folder=BENCHMARKS):
    """``FOLDER/NAME.py`` as a module (named ``module_name``, by default ``name``).

    Its folder is on ``sys.path`` while it loads, as when it runs as a
    script, so that it imports its neighbours (the underscore modules).
    """
    spec = importlib.util.spec_from_file_location(module_name or name, folder / (name + ".py"))
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(folder))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(folder))
    return module


def run(script, *arguments, cwd):
    """Run ``benchmarks/SCRIPT`` with ``arguments`` in ``cwd``; return the finished process.

    It runs on this Python, with the semidbm under test first on its path
    wherever ``cwd`` is, for at most two minutes; its output is captured
    as text.
    """
    here = os.path.dirname(os.path.dirname(os.path.abspath(semidbm.__file__)))
    path = os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *arguments],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env=dict(os.environ, PYTHONPATH=path),
    )
