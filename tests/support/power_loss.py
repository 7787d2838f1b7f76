"""What the tests that cut the power share: the FUSE file system's marker and their cleanup.

The power-loss harness (``tests/harness/powerloss.py``) records a
workload on its FUSE file system, which needs Linux, root and
``/dev/fuse``; elsewhere the tests that use it skip, saying why.
"""

import shutil

import pytest

from ..harness import powerfs

_UNAVAILABLE = powerfs.unavailable()

#: Marks a test that runs the power-loss harness: skipped where its file system cannot run.
needs_fuse = pytest.mark.skipif(
    _UNAVAILABLE is not None,
    reason="needs the power-loss FUSE file system: %s" % _UNAVAILABLE,
)


def remove_scratch(path):
    """Remove the scratch directory ``path`` a harness ``Checker`` built its trees in."""
    shutil.rmtree(path, ignore_errors=True)
