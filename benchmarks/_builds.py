"""Two commits checked out and built, for the benchmarks that set one build against another.

``instructions.py`` (instruction counts), ``versus.py`` (wall clock)
and ``commands.py`` (the ``semidbm`` command) each take the commits
OLD [NEW] (``commits_parser``) and run with each one's compiled kernel
(``builds``): a worktree of the commit in a temporary directory, built
in place.
"""

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile

from _provenance import REPO


def checkout(commit, place):
    """A worktree of ``commit`` in ``place`` with the compiled kernel built in place."""
    subprocess.run(
        ["git", "-C", REPO, "worktree", "add", "--detach", "-f", place, commit],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [sys.executable, "setup.py", "build_ext", "--inplace"],
        cwd=place,
        check=True,
        capture_output=True,
    )
    return os.path.join(place, "src")


def remove_worktrees(place):
    """Remove the worktrees ``checkout`` made in ``place`` (``old``, ``new``), and ``place``."""
    for name in ("old", "new"):
        if os.path.exists(os.path.join(place, name)):
            subprocess.run(
                ["git", "-C", REPO, "worktree", "remove", "--force",
                 os.path.join(place, name)],
                capture_output=True,
            )
    shutil.rmtree(place, ignore_errors=True)


def commits_parser(description):
    """An argument parser with the two commits every benchmark of two builds takes."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("old", help="the commit to compare against")
    parser.add_argument("new", nargs="?", default="HEAD", help="the commit measured (HEAD)")
    return parser


@contextlib.contextmanager
def builds(old, new):
    """The commits ``old`` and ``new`` checked out and built in a temporary directory.

    Yields ``(place, sources)``: the directory, for scratch files too,
    and each build's ``src`` by name ("old", "new"). The worktrees and
    the directory are removed at the end.
    """
    with tempfile.TemporaryDirectory() as place:
        try:
            yield place, {
                name: checkout(commit, os.path.join(place, name))
                for name, commit in (("old", old), ("new", new))
            }
        finally:
            remove_worktrees(place)
