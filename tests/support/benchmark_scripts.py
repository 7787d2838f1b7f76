"""The scripts of ``benchmarks/`` (and ``scripts/``) as modules, for the tests of their logic.

They are scripts, not a package: each imports its neighbours by their
plain names, as it does when run with its folder on ``sys.path``.
"""

import importlib.util
import pathlib

#: The benchmarks' directory.
BENCHMARKS = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"
#: The project's own tools (CI, packaging, the build's inputs).
SCRIPTS = BENCHMARKS.parent / "scripts"


def load(name, module_name=None, folder=BENCHMARKS):
    """``FOLDER/NAME.py`` as a module (named ``module_name``, by default ``name``).

    A script that imports its neighbours needs its folder on ``sys.path``
    first (``monkeypatch.syspath_prepend``).
    """
    spec = importlib.util.spec_from_file_location(module_name or name, folder / (name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
