"""Every kernel under test, loaded, for the tests that run them side by side.

Loaded when a module that compares the kernels is imported, not by
``conftest.py``: a missing compiled kernel then fails those modules,
while ``test_implementation`` says why.
"""

from semidbm import _kernel

from ..conftest import IMPLEMENTATIONS

#: Each kernel under test by its name: both, or only "python" when testing an install
#: built without the extension (``SEMIDBM_NO_EXTENSIONS``, see ``conftest.py``).
KERNELS = {name: _kernel.load(name) for name in IMPLEMENTATIONS}
