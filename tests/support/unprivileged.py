"""Python run as an unprivileged user, for the permission tests.

Root bypasses permission bits, so when the suite runs as root each
permission test does its part in a child process run as user 65534
(nobody). That child needs an interpreter the user may execute, of this
Python version, and this very semidbm to import. Neither is a given: an
interpreter kept in root's home directory (pyenv's, say) is out of that
user's reach, and so is a semidbm installed under a directory only root
may enter (as in cibuildwheel's test environments on Linux).

``run`` tries this interpreter first, then one of the same version in
the system's directories, with semidbm's directory on ``PYTHONPATH``; if
none can import this semidbm with every kernel under test, it skips the
calling test, naming what it tried and why each failed. When the suite
does not run as root, the child is an ordinary one, run by this
interpreter.
"""

import functools
import os
import subprocess
import sys

import pytest

import semidbm

from ..conftest import IMPLEMENTATIONS

#: The unprivileged user's id (nobody).
NOBODY = 65534

#: Where an interpreter other than this one may be found.
SYSTEM_DIRECTORIES = ["/usr/local/bin", "/usr/bin"]

#: Run by each candidate: load every kernel under test, then say where semidbm came from.
CHECK = (
    "import sys, semidbm\n"
    "from semidbm import _kernel\n"
    "for name in sys.argv[1:]:\n"
    "    _kernel.load(name)\n"
    "print(semidbm.__file__)\n"
)


def as_root():
    """True if the suite runs as root, so that permission checks need another user."""
    return hasattr(os, "geteuid") and os.geteuid() == 0


def environment():
    """This environment, with the directory semidbm was imported from first on ``PYTHONPATH``."""
    place = os.path.dirname(os.path.dirname(os.path.abspath(semidbm.__file__)))
    paths = [place] + [path for path in os.environ.get("PYTHONPATH", "").split(os.pathsep) if path]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(paths))


def candidates():
    """This interpreter, then any of the same version in the system's directories."""
    name = "python%d.%d" % sys.version_info[:2]
    found = [sys.executable]
    for directory in SYSTEM_DIRECTORIES:
        path = os.path.join(directory, name)
        if os.access(path, os.X_OK) and path not in found:
            found.append(path)
    return found


@functools.lru_cache(maxsize=None)
def unprivileged_python():
    """The first candidate user NOBODY can use, or None and the reason none would do."""
    failures = []
    for python in candidates():
        shown = python
        if os.path.realpath(python) != python:
            shown = "%s (%s)" % (python, os.path.realpath(python))
        try:
            result = subprocess.run(
                [python, "-c", CHECK, *IMPLEMENTATIONS],
                capture_output=True,
                text=True,
                timeout=120,
                env=environment(),
                user=NOBODY,
            )
        except OSError as exc:
            failures.append("%s: %s" % (shown, exc.strerror))
            continue
        if result.returncode != 0:
            last_line = (result.stderr.strip().splitlines() or ["no message"])[-1]
            failures.append("%s: %s" % (shown, last_line))
        elif os.path.abspath(result.stdout.strip()) != os.path.abspath(semidbm.__file__):
            failures.append("%s: imports another semidbm, %s" % (shown, result.stdout.strip()))
        else:
            return python, None
    reason = "user %d can run no Python %d.%d that imports this semidbm (%s): %s" % (
        NOBODY,
        *sys.version_info[:2],
        semidbm.__file__,
        "; ".join(failures),
    )
    return None, reason


def run(arguments, **options):
    """Run Python with ``arguments`` as user NOBODY if we are root; skip the test if none can.

    ``options`` go to ``subprocess.run``. Without root, this interpreter
    runs them as the current user.
    """
    if not as_root():
        return subprocess.run([sys.executable, *arguments], **options)
    python, reason = unprivileged_python()
    if python is None:
        pytest.skip(reason)
    return subprocess.run([python, *arguments], env=environment(), user=NOBODY, **options)
