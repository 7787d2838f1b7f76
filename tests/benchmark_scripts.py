"""The scripts of ``benchmarks/`` as modules, for the tests of their arithmetic and reports.

They are scripts, not a package: each imports its neighbours by their
plain names, as it does when run with ``benchmarks/`` on ``sys.path``.
"""

import importlib.util
import pathlib

#: The benchmarks' directory.
BENCHMARKS = pathlib.Path(__file__).resolve().parent.parent / "benchmarks"


def load(name, module_name=None):
    """``benchmarks/NAME.py`` as a module (named ``module_name``, by default ``name``).

    A script that imports its neighbours needs ``BENCHMARKS`` on ``sys.path``
    first (``monkeypatch.syspath_prepend``).
    """
    spec = importlib.util.spec_from_file_location(module_name or name, BENCHMARKS / (name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
