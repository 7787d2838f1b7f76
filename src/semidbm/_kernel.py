"""Picks the storage kernel that ``semidbm.open`` uses: the one place that does.

The compiled ``semidbm._core`` is the product and is used whenever it
can be imported. Setting the environment variable
``SEMIDBM_PURE_PYTHON`` to a non-empty value other than ``0`` forces the
pure-Python reference in ``semidbm._pure``. ``semidbm.implementation``
names the choice: ``"cython"`` or ``"python"``.
"""

import importlib
import os
from types import ModuleType

#: Kernel module for each implementation name.
MODULES = {"cython": "semidbm._core", "python": "semidbm._pure"}
#: Each kernel module :func:`load` imported, by name: a pickled handle loads its kernel
#: again in every process it reaches, and the import system's own look-up of a module it
#: holds runs many times the Python (and in a process just forked, touches many pages).
_LOADED: dict[str, ModuleType] = {}


def load(name):
    """Import and return the kernel module called ``name`` ("cython" or "python")."""
    kernel = _LOADED.get(name)
    if kernel is None:
        kernel = _LOADED[name] = importlib.import_module(MODULES[name])
    return kernel


def name_of(kernel):
    """The implementation name ("cython" or "python") of the kernel module ``kernel``."""
    return next(name for name, module in MODULES.items() if module == kernel.__name__)


def choose():
    """Return ``(name, module)`` of the kernel this process uses."""
    if os.environ.get("SEMIDBM_PURE_PYTHON", "") not in ("", "0"):
        return "python", load("python")
    try:
        return "cython", load("cython")
    except ImportError:
        return "python", load("python")
