"""The repository's own rules: no tracked file names a directory of the machine it was made
on, no module of the suite imports a test module, and no module of the package imports
itself through others.

A committed file that carries the absolute path of the checkout (say
``/home/someone/semidbm/``) or of the home directory tells nothing to
anyone else and leaks how one machine is laid out; the benchmark reports
used to end their command line with the directory they ran in. These
tests read every text file that git tracks, in the checkout they run
from, and fail naming each ``file:line`` that holds such a path; a
generic temporary directory in an example (``/tmp/example.db``) is fine.
The check runs on a made-up repository too, to show that it can fail,
and the benchmark report's command line is checked on its own.

The addresses the project gives for itself, in the package metadata
(``setup.cfg``) and in airspeed velocity's ``asv.conf.json``, are all on
the project's own site (``setup.cfg``'s ``url``): the original semidbm's
repository is not this project's, and a link to it sent readers of the
benchmark history there.

Without git, or outside a git checkout (the suite run from an installed
wheel or an sdist, as ``scripts/test_installed.py`` does under
cibuildwheel), there are no tracked files to read: the repository tests
are skipped, saying why.

A test module (``tests/test_*.py``) is no library: what several modules
share is in ``tests/support/`` (helpers) or ``tests/conftest.py``
(fixtures). The import check parses every module under ``tests/``,
resolves its relative imports, and fails naming each ``file:line`` that
imports a test module; a made-up suite shows that it can fail. The
package's modules import each other without a cycle, type checkers'
imports included (``_types`` names what a module would otherwise import
a module that imports it for); a made-up package shows that a cycle is
reported.
"""

import argparse
import ast
import configparser
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from .support import benchmark_scripts

pytestmark = pytest.mark.tooling

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


def foreign_addresses(root):
    """The addresses in ``root``'s setup.cfg and asv.conf.json that are not on setup.cfg's ``url``.

    setup.cfg's ``project_urls`` (one ``Name = address`` a line) and
    asv.conf.json's ``project_url`` and ``show_commit_url`` (its lines
    that start with ``//`` are comments, which JSON has not).
    """
    metadata = configparser.ConfigParser()
    metadata.read(root / "setup.cfg")
    home = metadata["metadata"]["url"]
    addresses = [
        line.partition("=")[2].strip()
        for line in metadata["metadata"].get("project_urls", "").splitlines()
        if line.strip()
    ]
    lines = (root / "asv.conf.json").read_text(encoding="utf-8").splitlines()
    asv = json.loads("\n".join(line for line in lines if not line.lstrip().startswith("//")))
    addresses += [asv[key] for key in ("project_url", "show_commit_url") if key in asv]
    return [address for address in addresses if not address.startswith(home)]


@pytest.mark.skipif(
    not (ROOT / "asv.conf.json").is_file(),
    reason="asv.conf.json is not beside tests/: this copy of the tests came without it",
)
def test_the_project_gives_only_its_own_addresses():
    assert foreign_addresses(ROOT) == []


def test_an_address_off_the_project_site_is_reported(tmp_path):
    (tmp_path / "setup.cfg").write_text(
        "[metadata]\nurl = https://docs.example/\nproject_urls =\n"
        "    Documentation = https://docs.example/\n    Source = https://elsewhere.example/\n"
    )
    (tmp_path / "asv.conf.json").write_text(
        '{\n    // a comment\n    "project_url": "https://docs.example/",\n'
        '    "show_commit_url": "https://elsewhere.example/commit/"\n}\n'
    )
    assert foreign_addresses(tmp_path) == [
        "https://elsewhere.example/",
        "https://elsewhere.example/commit/",
    ]


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


def dotted_name(path, top):
    """The dotted name of the module at ``path``, a file under the directory ``top``."""
    parts = path.relative_to(top).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(tree, package):
    """``(line, name)`` of each module the parsed module ``tree`` imports.

    Relative imports are resolved against ``package``, the dotted name of
    the package the module is in. ``from A import B`` yields ``A`` and
    ``A.B``, since B may be a module.
    """
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".")
            parts = parts[: len(parts) - node.level + 1] if node.level else []
            module = ".".join(parts + ([node.module] if node.module else []))
            yield node.lineno, module
            for alias in node.names:
                yield node.lineno, "%s.%s" % (module, alias.name)


def imports_of_test_modules(top):
    """``file:line: name`` for each import of a test module by another module under ``top/tests``.

    A test module is ``tests/test_*.py``, named ``tests.test_x``, or
    ``test_x`` by a script that puts ``tests/`` on ``sys.path``.
    """
    suite = Path(top) / "tests"
    test_modules = {}
    for path in suite.glob("test_*.py"):
        test_modules["tests." + path.stem] = test_modules[path.stem] = "tests." + path.stem
    found = []
    for path in sorted(suite.rglob("*.py")):
        own = dotted_name(path, top)
        package = own if path.name == "__init__.py" else own.rpartition(".")[0]
        tree = ast.parse(path.read_bytes(), str(path))
        for line, name in imported_names(tree, package):
            if test_modules.get(name, own) != own:
                found.append("%s:%d: %s" % (path.relative_to(top).as_posix(), line, name))
    return found


def test_no_module_of_the_suite_imports_a_test_module():
    found = imports_of_test_modules(ROOT)
    assert not found, "test modules imported (move what they share to tests/support/):\n" + (
        "\n".join(found)
    )


def test_an_import_of_a_test_module_is_reported(tmp_path):
    modules = {
        "__init__.py": "",
        "conftest.py": "from .support import tools\n",
        "test_a.py": "import os\nfrom . import conftest\n\nSHARED = 1\n",
        "test_b.py": "from .test_a import SHARED\n",
        "test_c.py": "def later():\n    from tests import test_a\n",
        "test_d.py": "import tests.test_b\nfrom .conftest import tools\n",
        "support/__init__.py": "from . import tools\n",
        "support/tools.py": "from .. import test_c\nfrom ..test_d import x\n",
        "script.py": "import sys\nimport test_a\n",
    }
    for name, text in modules.items():
        path = tmp_path / "tests" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    assert imports_of_test_modules(tmp_path) == [
        "tests/script.py:2: test_a",
        "tests/support/tools.py:1: tests.test_c",
        "tests/support/tools.py:2: tests.test_d",
        "tests/test_b.py:1: tests.test_a",
        "tests/test_c.py:2: tests.test_a",
        "tests/test_d.py:1: tests.test_b",
    ]


def import_cycles(top, package):
    """The import cycles among the Python modules of ``top/src/package``: sorted lists of names.

    Every import counts, those under ``TYPE_CHECKING`` too: a type
    checker follows them. Each cycle is given once, as the sorted names
    of the modules that reach each other.
    """
    modules = sorted(path.stem for path in (Path(top) / "src" / package).glob("*.py"))
    graph = {}
    for module in modules:
        path = Path(top) / "src" / package / (module + ".py")
        tree = ast.parse(path.read_bytes(), str(path))
        names = {name for _, name in imported_names(tree, package)}
        graph[module] = {
            other for other in modules
            if other != module and "%s.%s" % (package, other) in names
        }
    reach = {}
    for module in graph:
        seen, todo = set(), [module]
        while todo:
            for other in graph[todo.pop()] - seen:
                seen.add(other)
                todo.append(other)
        reach[module] = seen
    cycles = {tuple(sorted(other for other in reach[module] if module in reach[other]))
              for module in graph if module in reach[module]}
    return sorted(list(cycle) for cycle in cycles)


@pytest.mark.skipif(not (ROOT / "src" / "semidbm").is_dir(),
                    reason="no src/semidbm here: the suite runs from an installed wheel")
def test_the_package_has_no_import_cycle():
    assert import_cycles(ROOT, "semidbm") == []


def test_an_import_cycle_is_reported(tmp_path):
    modules = {
        "__init__.py": "from .a import A\n",
        "a.py": "from . import b\n",
        "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import A\n",
        "c.py": "from .d import D\n",
        "d.py": "from . import c, a\n",
        "e.py": "from .a import A\nfrom .f import F\n",
        "f.py": "import os\n",
    }
    for name, text in modules.items():
        path = tmp_path / "src" / "package" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    assert import_cycles(tmp_path, "package") == [["a", "b"], ["c", "d"]]
