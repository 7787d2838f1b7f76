"""The documents' code blocks, run as a reader would run them, so an example that fails fails CI.

The documents are README.md and the Markdown pages of the documentation
site (``docs/``, the reports of ``docs/bench`` included). Every fenced
block of them is one test (``test_block[KERNEL-PATH:N]``, N the line
of its opening fence), run once per kernel: the pure-Python one through
``SEMIDBM_PURE_PYTHON=1``, the compiled one without it. The docstrings'
examples (``>>>``) run in the site's doctest build instead (``nox -s
docs``).

- Each block runs alone, in an empty directory of its own (its working
  directory): a block must make what it uses, as a reader starting from
  nothing would, so no block depends on another or on their order.
- README.md's and Getting started's blocks also run all in order, each
  page's in one directory (``test_read_top_to_bottom``), as a reader who
  follows it from the top would run them: no block may break a later one
  (a database name taken twice, a later command reporting on an earlier
  block's database).
- README.md's install commands (``pip install .``) build and install,
  which no test of the suite does: the packaging session runs them in a
  fresh environment, then README's version check on what they installed
  (scripts/check_packaging.py, ``readme_install``); the tests here check
  that it finds them, and that the version README shows is this one.
- ``python`` blocks run as a script with this interpreter.
- ``sh`` blocks run as a script with ``bash -e -o pipefail``: a command
  that fails fails the block.
- ``console`` blocks are terminal transcripts. A line ``$ COMMAND`` is a
  command, the lines ``> ...`` right after it continue it (bash's own
  prompt for a here-document or an open quote), and the lines up to the
  next command are what it prints, stdout and stderr together, compared
  exactly with what it does print when run with ``bash -c`` (in the
  block's one directory, in order), except that process IDs
  (``process 1234``) may differ and a missing final newline is no
  difference (``semidbm get`` adds one only on a terminal). The exit
  status is not compared: a transcript shows it only by printing it.
- Shell blocks find first on ``PATH`` the directory of this interpreter,
  where its ``python``, ``python3`` and the installed ``semidbm`` command
  are; they are skipped, saying so, where there is no bash (Windows,
  Alpine).
- A block whose first or last line is ``# not run by the tests: REASON``
  is never run (the last line for a block whose first lines must stay
  commands, as the README's first one): the report lists it as skipped with its reason. That line
  shows in the rendered page too, so a reader knows which examples
  are not checked. Every other block must be of a language above
  (``test_every_block_runs_or_says_why_not``), or be no code: ``text``
  (output, a diagram) or a directive of the site's Markdown (MyST:
  ``{toctree}``, ``{include}`` and the like, whose language is in braces).
- A block that imports a module of ``OPTIONAL_MODULES`` (``import
  dbm.gnu``, in Python or in a shell command) is skipped when this
  interpreter cannot import it, and run wherever it can; one that calls
  ``os.fork()`` is skipped where there is none (Windows).
- A block has ``BLOCK_SECONDS`` in all; one that runs longer (a server
  that never exits) fails, and its processes are killed.
"""

import dataclasses
import importlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import semidbm

from .conftest import kernel_name
from .support import benchmark_scripts

ROOT = Path(__file__).resolve().parent.parent


def documents():
    """README.md and the site's Markdown pages that this copy of the tests came with, sorted.

    The built site (``docs/_build``) is left out.
    """
    found = [ROOT / "README.md"] if (ROOT / "README.md").is_file() else []
    if (ROOT / "docs").is_dir():
        found += sorted(
            path for path in (ROOT / "docs").rglob("*.md") if "_build" not in path.parts
        )
    return found


#: The first or last line that keeps a block from running, followed by the reason.
SKIP_MARKER = "# not run by the tests: "

#: Blocks that are no code: output or diagrams, and the site's directives (``{toctree}``).
NOT_CODE = re.compile(r"text|\{.*\}")

#: Modules some Pythons lack: a block that imports one runs only where it imports.
OPTIONAL_MODULES = ("dbm.gnu", "dbm.ndbm", "dbm.sqlite3", "lmdb", "semidbm.dask")

#: Time for all of a block's processes together.
BLOCK_SECONDS = 60

#: The directory of this interpreter, with its scripts: put first on the blocks' PATH.
BIN = os.path.dirname(sys.executable)

OPENING_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})\s*([^\s`]*)[^`]*")
HEADING = re.compile(r"#{1,6}\s+(.*)")
IMPORTS = re.compile(r"\bimport\s+([\w.]+(?:\s*,\s*[\w.]+)*)|\bfrom\s+([\w.]+)\s+import\b")
PROCESS_ID = re.compile(r"process \d+")


@dataclasses.dataclass(frozen=True)
class Block:
    """One fenced code block: its document, where it opens, its language, text and section."""

    document: str
    line: int
    language: str
    text: str
    section: str

    @property
    def skip_reason(self):
        """The reason its first or last line gives for not running it, or None."""
        lines = self.text.strip("\n").split("\n")
        for line in (lines[0], lines[-1]):
            if line.startswith(SKIP_MARKER):
                return line[len(SKIP_MARKER):]
        return None

    def __str__(self):
        return "%s line %d (%s, in %r)" % (self.document, self.line,
                                           self.language or "no language", self.section)


def fenced_blocks(markdown, document="sample"):
    """The fenced code blocks of a Markdown text, in order; ``document`` names the text.

    A block opens with three or more backticks or tildes and closes with
    at least as many of the same character; its section is the last
    heading before it. An unclosed block is a ValueError.
    """
    blocks, section, fence = [], "", None
    for number, line in enumerate(markdown.splitlines(), 1):
        if fence is None:
            heading, opening = HEADING.fullmatch(line), OPENING_FENCE.fullmatch(line)
            if heading:
                section = heading.group(1).strip()
            elif opening:
                fence, language, start, body = opening.group(1), opening.group(2), number, []
        elif re.fullmatch(r" {0,3}%s{%d,}\s*" % (re.escape(fence[0]), len(fence)), line):
            text = "".join(row + "\n" for row in body)
            blocks.append(Block(document, start, language, text, section))
            fence = None
        else:
            body.append(line)
    if fence is not None:
        raise ValueError("the code block opened at line %d is never closed" % start)
    return blocks


def blocks_without_a_way_to_run(blocks):
    """The blocks that have no language the tests run, no reason not to run, and are code."""
    return [block for block in blocks
            if block.skip_reason is None and block.language not in RUNNERS
            and not NOT_CODE.fullmatch(block.language)]


def imported_modules(text):
    """The names of the modules that ``import`` and ``from ... import`` lines of a text name."""
    names = set()
    for plain, source in IMPORTS.findall(text):
        names.update(name.strip() for name in plain.split(",") if name.strip())
        if source:
            names.add(source)
    return names


def skip_unless_importable(block):
    """Skip the test when the block uses an optional module or function this interpreter lacks."""
    for module in sorted(imported_modules(block.text) & set(OPTIONAL_MODULES)):
        try:
            importlib.import_module(module)
        except ImportError:
            pytest.skip("%s imports %s, which this Python lacks" % (block, module))
    if "os.fork(" in block.text and not hasattr(os, "fork"):
        pytest.skip("%s calls os.fork(), which this system lacks" % block)


def bash():
    """The bash that runs shell blocks; skips the test where there is none.

    It also checks that the ``semidbm`` command the blocks call is the one
    installed beside this interpreter, not another found further on PATH.
    """
    found = shutil.which("bash") if os.name == "posix" else None
    if found is None:
        pytest.skip("shell blocks need bash on a POSIX system")
    assert os.path.isfile(os.path.join(BIN, "semidbm")), (
        "the semidbm command is not installed beside %s" % sys.executable
    )
    return found


def block_environment(kernel):
    """The environment of a block's processes: the kernel chosen, this interpreter first on PATH.

    Output is unbuffered, so that stdout and stderr interleave as on a terminal.
    """
    environment = dict(os.environ, PYTHONUNBUFFERED="1")
    environment["PATH"] = os.pathsep.join([BIN, environment.get("PATH", os.defpath)])
    environment.pop("SEMIDBM_PURE_PYTHON", None)
    if kernel == "python":
        environment["SEMIDBM_PURE_PYTHON"] = "1"
    return environment


def kill_all(process):
    """Kill a process and, on POSIX, every process it started (its own session)."""
    if os.name == "posix":
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    else:
        process.kill()


def run(argv, cwd, environment, deadline):
    """Run ``argv`` with no input; return its exit status and its stdout and stderr together.

    It fails the test if it is still running at ``deadline`` (a
    ``time.monotonic()`` value), once it and all it started are killed:
    a child holding the output pipe would otherwise keep the test waiting.
    Whatever it left running in the background is killed when it ends,
    and everything it started when the test is interrupted.
    """
    with subprocess.Popen(
        argv, cwd=cwd, env=environment, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, start_new_session=os.name == "posix",
    ) as process:
        try:
            output, _ = process.communicate(timeout=max(deadline - time.monotonic(), 0))
        except subprocess.TimeoutExpired:
            kill_all(process)
            output, _ = process.communicate()
            pytest.fail("%s was still running at the block's deadline; killed. Its output:\n%s"
                        % (argv, output.decode("utf-8", "backslashreplace")))
        finally:
            kill_all(process)
    return process.returncode, output.decode("utf-8", "backslashreplace")


def run_script(block, argv, scripts, cwd, environment, deadline):
    """Write the block to a file in ``scripts``, run ``argv`` + that file; it must succeed."""
    script = scripts / ("block%d" % block.line)
    script.write_text(block.text, encoding="utf-8")
    status, output = run(argv + [str(script)], cwd, environment, deadline)
    assert status == 0, "%s failed with exit status %d:\n%s" % (block, status, output)


def run_python(block, scripts, cwd, environment, deadline):
    """Run a python block as a script with this interpreter."""
    run_script(block, [sys.executable], scripts, cwd, environment, deadline)


def run_shell(block, scripts, cwd, environment, deadline):
    """Run an sh block with bash, stopping at the first command that fails."""
    run_script(block, [bash(), "-e", "-o", "pipefail"], scripts, cwd, environment, deadline)


def transcript_steps(text):
    """The commands of a console transcript, each with the output shown after it.

    Returns (command, output) pairs, both without a final newline; a
    command continued on ``> `` lines has them joined by newlines.
    """
    steps = []
    for line in text.splitlines():
        if line.startswith("$ "):
            steps.append(([line[2:]], []))
        elif steps and not steps[-1][1] and (line == ">" or line.startswith("> ")):
            steps[-1][0].append(line[2:])
        elif steps:
            steps[-1][1].append(line)
        else:
            raise ValueError("a transcript starts with a command ($ ...), not %r" % line)
    return [("\n".join(command), "\n".join(output)) for command, output in steps]


def as_shown(output):
    """Output as a transcript shows it: process IDs as ``process N``, no final newline."""
    return PROCESS_ID.sub("process N", output).removesuffix("\n")


def run_transcript(block, scripts, cwd, environment, deadline):
    """Run a console block's commands in order; each must print what the transcript shows."""
    shell = bash()
    for command, shown in transcript_steps(block.text):
        _, output = run([shell, "-c", command], cwd, environment, deadline)
        assert as_shown(output) == as_shown(shown), "%s: $ %s" % (block, command)


#: How each language's blocks run.
RUNNERS = {"python": run_python, "sh": run_shell, "console": run_transcript}

#: The documents' blocks: none from a document this copy of the tests came without.
BLOCKS = [
    block
    for path in documents()
    for block in fenced_blocks(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())
]


def block_id(block):
    """A block's test id: its document and the line of its opening fence."""
    return "%s:%d" % (block.document, block.line)


def test_every_block_runs_or_says_why_not():
    if not (ROOT / "README.md").is_file():
        pytest.skip("README.md is not beside tests/: this copy of the tests came without it")
    assert BLOCKS, "no code block found in README.md"
    assert [str(block) for block in blocks_without_a_way_to_run(BLOCKS)] == []


@pytest.mark.parametrize(
    "block", [block for block in BLOCKS if block.skip_reason is not None], ids=block_id
)
def test_block_not_run(block):
    pytest.skip("%s: %s" % (block, block.skip_reason))


@pytest.mark.parametrize(
    "block",
    [block for block in BLOCKS if block.skip_reason is None and block.language in RUNNERS],
    ids=block_id,
)
def test_block(block, kernel, tmp_path):
    skip_unless_importable(block)
    run_block(block, tmp_path, kernel_name(kernel))


@pytest.mark.parametrize("document", ["README.md", "docs/getting-started.md"])
def test_read_top_to_bottom(kernel, tmp_path, document):
    """A page a newcomer follows step by step: its blocks, run in order in one directory, work.

    Catches a block that breaks a later one (Getting started's first
    block made ``cache.db``, so its later ``semidbm convert old
    cache.db`` refused).
    """
    blocks = [
        block
        for block in BLOCKS
        if block.document == document and block.skip_reason is None
        and block.language in RUNNERS
    ]
    if not blocks:
        pytest.skip("%s is not beside tests/: this copy of the tests came without it" % document)
    for block in blocks:
        skip_unless_importable(block)
    run_blocks(blocks, tmp_path, kernel_name(kernel))


def run_block(block, tmp_path, kernel, seconds=BLOCK_SECONDS):
    """Run a block with its language's runner in a new directory under ``tmp_path``."""
    run_blocks([block], tmp_path, kernel, seconds)


def run_blocks(blocks, tmp_path, kernel, seconds=BLOCK_SECONDS):
    """Run ``blocks`` in order, all in one new directory under ``tmp_path``, ``seconds`` each."""
    cwd = tmp_path / "scratch"
    cwd.mkdir()
    for block in blocks:
        RUNNERS[block.language](
            block, tmp_path, cwd, block_environment(kernel), time.monotonic() + seconds
        )


# --- the tests of these tests -------------------------------------------------

SAMPLE = """# Title

```sh
# not run by the tests: needs the network
curl https://example.org
```

## Part two

````python title="one word more"
print("```")
````

~~~text
an example's output
~~~

```{toctree}
usage
```

```ini
[no way to run]
```

```sh
echo run first
# not run by the tests: the marker may close a block
```
"""


def test_fenced_blocks_reads_languages_lines_sections_and_markers():
    blocks = fenced_blocks(SAMPLE)
    assert [(b.line, b.language, b.section, b.skip_reason) for b in blocks] == [
        (3, "sh", "Title", "needs the network"),
        (10, "python", "Part two", None),
        (14, "text", "Part two", None),
        (18, "{toctree}", "Part two", None),
        (22, "ini", "Part two", None),
        (26, "sh", "Part two", "the marker may close a block"),
    ]
    assert blocks[1].text == 'print("```")\n'


def test_a_block_of_no_runnable_language_without_a_marker_is_found_but_not_text():
    assert blocks_without_a_way_to_run(fenced_blocks(SAMPLE)) == [fenced_blocks(SAMPLE)[4]]


def test_an_unclosed_block_is_an_error():
    with pytest.raises(ValueError, match="line 1 is never closed"):
        fenced_blocks("```sh\necho\n")


def test_optional_modules_are_found_in_python_and_shell_imports():
    assert imported_modules("import os, dbm.gnu\n") == {"os", "dbm.gnu"}
    assert imported_modules("python3 -c 'import dbm.gnu; db = 1'") == {"dbm.gnu"}
    assert imported_modules("from dbm.sqlite3 import open") == {"dbm.sqlite3"}
    assert imported_modules("semidbm convert old.gdbm cache.db  # dbm.gnu") == set()


def test_transcript_steps_join_continued_commands():
    text = "$ cat <<'EOF'\n> one\n>\n> EOF\none\n\n$ true\n"
    assert transcript_steps(text) == [("cat <<'EOF'\none\n\nEOF", "one\n"), ("true", "")]


def console(text):
    """A console block of ``text``."""
    return Block("sample", 1, "console", text, "sample")


def test_a_transcript_that_shows_what_the_commands_print_passes(tmp_path):
    run_block(console("$ echo 'process 12'; printf x\nprocess 7\nx\n$ true\n"), tmp_path, "cython")


def test_a_transcript_that_shows_other_output_fails(tmp_path):
    with pytest.raises(AssertionError, match=r"\$ echo hello"):
        run_block(console("$ echo hello\nhullo\n"), tmp_path, "cython")


def test_a_shell_block_that_fails_midway_fails(tmp_path):
    with pytest.raises(AssertionError, match="exit status 1"):
        run_block(Block("sample", 1, "sh", "false\ntrue\n", "sample"), tmp_path, "cython")


def test_a_block_that_runs_too_long_fails_and_is_killed(tmp_path):
    block = Block("sample", 1, "sh", "sleep 300 &\nsleep 300\n", "sample")
    with pytest.raises(pytest.fail.Exception, match="still running"):
        run_block(block, tmp_path, "cython", seconds=1)


def test_blocks_run_in_order_share_their_directory(tmp_path):
    first = Block("sample", 1, "python", "open('made', 'w').write('by the first')\n", "sample")
    second = Block("sample", 5, "sh", 'test "$(cat made)" = "by the first"\n', "sample")
    run_blocks([first, second], tmp_path, "cython")
    (tmp_path / "again").mkdir()
    with pytest.raises(AssertionError, match="exit status 1"):
        run_blocks([second, first], tmp_path / "again", "cython")


def test_blocks_run_on_the_kernel_under_test(kernel, tmp_path):
    name = kernel_name(kernel)
    check = "import semidbm\nassert semidbm.implementation == %r, semidbm.implementation\n" % name
    run_block(Block("sample", 1, "python", check, "sample"), tmp_path, name)


def test_shell_blocks_find_this_interpreter_first(tmp_path):
    check = "".join(
        'test "$(%s)" = %s\n' % (command, shlex.quote(expected))
        for command, expected in [
            ("command -v semidbm", os.path.join(BIN, "semidbm")),
            ("python3 -c 'import sys; print(sys.prefix)'", sys.prefix),
            ("python -c 'import sys; print(sys.prefix)'", sys.prefix),
        ]
    )
    run_block(Block("sample", 1, "sh", check, "sample"), tmp_path, "python")


def running(pid):
    """True while process ``pid`` exists and is not a zombie (Linux's /proc says)."""
    try:
        stat = Path("/proc/%d/stat" % pid).read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads processes from Linux's /proc")
def test_a_block_leaves_no_process_running(tmp_path):
    text = "sleep 300 > /dev/null 2>&1 &\necho $! > ../sleeper\n"
    block = Block("sample", 1, "sh", text, "sample")
    run_block(block, tmp_path, "cython")
    pid = int((tmp_path / "sleeper").read_text())
    for _ in range(100):
        if not running(pid):
            break
        time.sleep(0.1)
    assert not running(pid), "the block's background process %d outlived it" % pid


# --- README's install instructions, which the packaging session runs ----------


def packaging_check():
    """scripts/check_packaging.py as a module; skips where there is no scripts/ (an sdist)."""
    if not (benchmark_scripts.SCRIPTS / "check_packaging.py").is_file():
        pytest.skip("no scripts/ beside the tests (not a checkout)")
    return benchmark_scripts.load("check_packaging", folder=benchmark_scripts.SCRIPTS)


def test_the_packaging_session_runs_readmes_install_commands_and_its_version_check():
    if not (ROOT / "README.md").is_file():
        pytest.skip("README.md is not beside tests/: this copy of the tests came without it")
    packaging = packaging_check()
    commands, transcript = packaging.readme_install((ROOT / "README.md").read_text())
    assert commands == ["pip install ."]
    # The version it shows is this one: what the install is checked against.
    assert transcript == [('python -c "import semidbm; print(semidbm.__version__)"',
                           semidbm.__version__)]


def test_install_instructions_without_the_packaging_mark_are_refused():
    """Only the commands marked as the packaging session's are run: the same section with the
    mark gives them, without it nothing (kills the check taking every ``sh`` block)."""
    packaging = packaging_check()
    transcript = '```console\n$ python -c "import semidbm"\n```\n\n'
    marked = "```sh\npip install .\n# %s\n```\n\n" % packaging.CHECKED_HERE
    readme = "## Install\n\n%s%s## Use\n"
    assert packaging.readme_install(readme % (transcript, marked)) == (
        ["pip install ."], [('python -c "import semidbm"', "")])
    unmarked = marked.replace("# " + packaging.CHECKED_HERE, "# run it yourself")
    with pytest.raises(packaging.Failure, match="no checked commands"):
        packaging.readme_install(readme % (transcript, unmarked))
