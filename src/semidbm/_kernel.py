"""Picks the storage kernel that ``semidbm.open`` uses: the one place that does.

The compiled ``semidbm._core`` is the product and is used whenever it
can be imported. Setting the environment variable
``SEMIDBM_PURE_PYTHON`` to a non-empty value other than ``0`` forces the
pure-Python reference in ``semidbm._pure``. ``semidbm.implementation``
names the choice: ``"cython"`` or ``"python"``.
"""

import importlib
import os

#: Kernel module for each implementation name.
MODULES = {"cython": "semidbm._core", "python": "semidbm._pure"}


def load(name):
    """Import and return the kernel module called ``name`` ("cython" or "python")."""
    return importlib.import_module(MODULES[name])


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
