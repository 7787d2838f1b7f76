"""No tracked file names a directory of the machine it was made on.

A committed file that carries the absolute path of the checkout (say
``/home/someone/semidbm/``) or of the home directory tells nothing to
anyone else and leaks how one machine is laid out; the benchmark reports
used to end their command line with the directory they ran in. These
tests read every text file that git tracks, in the checkout they run
from, and fail naming each ``file:line`` that holds such a path; a
generic temporary directory in an example (``/tmp/example.db``) is fine.
The check runs on a made-up repository too, to show that it can fail,
and the benchmark report's command line is checked on its own.

Without git, or outside a git checkout (the suite run from an installed
wheel or an sdist, as ``scripts/test_installed.py`` does under
cibuildwheel), there are no tracked files to read: the repository tests
are skipped, saying why.
"""

import argparse
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from . import benchmark_scripts

#: The top directory of the checkout these tests run from.
ROOT = Path(__file__).resolve().parent.parent

#: The shortest home directory worth looking for: root's five characters count, ``/`` does not.
SHORTEST_HOME = 5

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def machine_directories(root):
    """The absolute paths no tracked file of ``root`` may hold: ``root`` and the home directory."""
    directories = [str(root)]
    home = os.path.expanduser("~")
    if home != "/" and len(home) >= SHORTEST_HOME:
        directories.append(home)
    return directories


def machine_path_pattern(directories):
    """A regular expression matching any of ``directories`` as a whole path.

    It must start a path (not follow a name character or a slash, as a
    home directory's name in the path of a URL does) and end where a name
    ends: at a path separator, or at a character that cannot continue
    the name, as the backquote in "(in `/home/someone/semidbm`)".
    """
    alternatives = "|".join(re.escape(directory) for directory in directories)
    return re.compile(r"(?<![\w./-])(?:%s)(?![\w-])" % alternatives)


def text_lines(path):
    """The lines of the file at ``path``, or none if it is not UTF-8 text."""
    data = path.read_bytes()
    if b"\0" in data:
        return []
    try:
        return data.decode("utf-8").split("\n")
    except UnicodeDecodeError:
        return []


def find_machine_paths(root):
    """Return ``file:line: text`` for each line of a tracked text file of ``root`` naming it.

    The files are those ``git ls-files`` lists, as they are in the
    working tree (a tracked file deleted there is left out); binary ones
    are skipped. A line is reported if it holds the absolute path of
    ``root`` or of the home directory (see ``machine_path_pattern``).
    """
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z"], capture_output=True, check=True
    ).stdout
    pattern = machine_path_pattern(machine_directories(root))
    found = []
    for name in os.fsdecode(listed).split("\0"):
        path = Path(root) / name
        if not name or not path.is_file():
            continue
        for number, line in enumerate(text_lines(path), 1):
            if pattern.search(line):
                found.append("%s:%d: %s" % (name, number, line.strip()))
    return found


@needs_git
@pytest.mark.skipif(
    not (ROOT / ".git").exists(),
    reason="not a git checkout (no %s): e.g. the suite runs from an installed wheel or sdist"
    % (ROOT / ".git"),
)
def test_no_tracked_file_names_the_checkout_or_home_directory():
    found = find_machine_paths(ROOT)
    assert not found, "tracked files name a directory of this machine:\n" + "\n".join(found)


def git(repository, *arguments):
    """Run git in ``repository``, with an identity and no signing, as a commit needs."""
    subprocess.run(
        [
            "git",
            "-C",
            str(repository),
            "-c",
            "user.name=test",
            "-c",
            "user.email=test@example.com",
            "-c",
            "commit.gpgsign=false",
            *arguments,
        ],
        check=True,
        capture_output=True,
    )


@needs_git
def test_a_repository_naming_its_own_directory_is_reported(tmp_path):
    repository = (tmp_path / "repository").resolve()
    repository.mkdir()
    (repository / "notes.md").write_text(
        "# Notes\n\nThe data is in %s/data, so to speak.\n" % repository
    )
    (repository / "example.md").write_text("db = semidbm.open('/tmp/example.db', 'c')\n")
    (repository / "blob.bin").write_bytes(b"\0%s/data\0" % os.fsencode(repository))
    git(repository, "init", "-q")
    git(repository, "add", ".")
    git(repository, "commit", "-q", "-m", "a file naming the repository's own directory")

    assert find_machine_paths(repository) == [
        "notes.md:3: The data is in %s/data, so to speak." % repository
    ]


def test_the_pattern_takes_whole_paths_only():
    pattern = machine_path_pattern(["/home/someone/semidbm"])
    assert pattern.search("ran (in `/home/someone/semidbm`)")
    assert pattern.search("see /home/someone/semidbm/docs")
    assert not pattern.search("see /home/someone/semidbm2/docs")
    assert not pattern.search("https://example.com/home/someone/semidbm/")


def load_compare():
    """``benchmarks/compare.py`` as a module (it is a script, not part of the package)."""
    return benchmark_scripts.load("compare")


def test_the_benchmark_report_quotes_its_command_from_the_top_directory(monkeypatch, tmp_path):
    # The command as typed with absolute paths, from another directory: the
    # report must quote it relative to the repository's top directory.
    compare = load_compare()
    compare_report = benchmark_scripts.load("_compare_report")
    top = Path(compare.REPO)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(
        compare.sys,
        "orig_argv",
        [
            str(top / ".venv" / "bin" / "python"),
            str(top / "benchmarks" / "compare.py"),
            "--preset",
            "a",
            "--out-dir=%s" % (top / "docs" / "bench"),
        ],
        raising=False,
    )
    settings = argparse.Namespace(keys=10, key_size=16, value_size=100, quick=True, repeat=1)

    lines = compare_report.header(compare.PRESETS["a"], settings, "0000000")

    command = [line for line in lines if line.startswith("- Command:")]
    assert command == [
        "- Command: `.venv/bin/python benchmarks/compare.py --preset a --out-dir=docs/bench` "
        "(run from the repository's top directory)"
    ]
