"""The development loop's own tools: CI's runner (scripts/ci.py) and the build's inputs
(scripts/build_inputs.py), which decide what runs at once and what is built again."""

import os
import re
import sys
import time

import pytest

from .support import benchmark_scripts

pytestmark = pytest.mark.tooling

if not (benchmark_scripts.SCRIPTS / "ci.py").exists():
    # The suite run from an sdist or a wheel's copy of the tests has no scripts/.
    pytest.skip("no scripts/ beside the tests (not a checkout)", allow_module_level=True)

ci = benchmark_scripts.load("ci", "semidbm_ci", benchmark_scripts.SCRIPTS)
build_inputs = benchmark_scripts.load("build_inputs", "semidbm_build_inputs",
                                      benchmark_scripts.SCRIPTS)


@pytest.fixture(autouse=True)
def quick_polls(monkeypatch):
    monkeypatch.setattr(ci, "POLL_SECONDS", 0.02)


def noting(tmp_path, name, seconds=0.2, status=0, awaits=()):
    """A command that notes when it starts and ends in ``tmp_path/NAME``, sleeping between.

    It first waits, for up to 30 s, until the commands of the phases
    ``awaits`` have noted their start (then it fails): run at once, they
    overlap however late a loaded machine starts one of the interpreters;
    run one after another, they fail.
    """
    waits = [str(tmp_path / other) for other in awaits]
    code = (
        "import os, sys, time; note = open(sys.argv[1], 'w'); "
        "note.write('%%r ' %% time.monotonic()); note.flush(); "
        "deadline = time.monotonic() + 30\n"
        "while not all(os.path.exists(other) and os.path.getsize(other) for other in %r):\n"
        "    time.sleep(0.01)\n"
        "    if time.monotonic() > deadline: sys.exit('the others never started')\n"
        "time.sleep(%r); "
        "note.write('%%r' %% time.monotonic()); print('output of %s'); sys.exit(%d)"
        % (waits, seconds, name, status)
    )
    return [sys.executable, "-c", code, str(tmp_path / name)]


def span(tmp_path, name):
    """(start, end) of the phase ``name``, as its command noted them; end None if it was ended."""
    words = (tmp_path / name).read_text().split()
    return float(words[0]), float(words[1]) if len(words) > 1 else None


def ended_early(tmp_path, name):
    """True if the command of phase ``name`` was ended before its sleep was over (or its start)."""
    return not (tmp_path / name).exists() or span(tmp_path, name)[1] is None


def test_two_phases_run_at_once_and_the_table_has_each(tmp_path, capsys):
    awaits = {"a": ("b",), "b": ("a",), "c": ()}
    phases = [ci.Phase(name, noting(tmp_path, name, 1.0, awaits=awaits[name]), 60)
              for name in ("a", "b", "c")]
    assert ci.execute(phases) == 0
    spans = {name: span(tmp_path, name) for name in ("a", "b", "c")}
    # a and b overlap; c starts only once one of them has ended.
    assert spans["a"][0] < spans["b"][1] and spans["b"][0] < spans["a"][1]
    assert spans["c"][0] >= min(spans["a"][1], spans["b"][1])
    out = capsys.readouterr().out
    for name in ("a", "b", "c"):
        assert "output of %s" % name in out
        assert "phase passed: %s" % name in out
    # The table lists the phases in the order they ended: a and b either way, then c.
    table = out[out.index("phases (seconds; budget)"):]
    listed = [line.split()[0] for line in table.splitlines()[1:4]]
    assert sorted(listed[:2]) == ["a", "b"] and listed[2] == "c"
    assert "all phases passed" in out and "OVER BUDGET" not in out


def test_a_phase_that_waits_for_the_network_takes_no_place(tmp_path):
    names = ("net", "a", "b")
    commands = {name: noting(tmp_path, name, 1.0, awaits=set(names) - {name}) for name in names}
    phases = [ci.Phase("net", commands["net"], 60, processor=False)]
    phases += [ci.Phase(name, commands[name], 60) for name in ("a", "b")]
    assert ci.execute(phases) == 0
    starts = [span(tmp_path, name)[0] for name in ("net", "a", "b")]
    ends = [span(tmp_path, name)[1] for name in ("net", "a", "b")]
    assert max(starts) < min(ends)  # all three at once


def test_a_phase_starts_after_the_one_it_needs(tmp_path):
    phases = [
        ci.Phase("later", noting(tmp_path, "later", 0.05), 60, after=("first",)),
        ci.Phase("first", noting(tmp_path, "first"), 60),
    ]
    assert ci.execute(phases) == 0
    assert span(tmp_path, "later")[0] >= span(tmp_path, "first")[1]


def test_a_failure_ends_the_run_and_the_phases_running_beside_it(tmp_path, capsys):
    phases = [
        ci.Phase("long", noting(tmp_path, "long", 30), 60),
        ci.Phase("failing", noting(tmp_path, "failing", 0.2, status=3), 60),
        ci.Phase("never", noting(tmp_path, "never"), 60),
    ]
    began = time.monotonic()
    assert ci.execute(phases) == 1
    assert time.monotonic() - began < 20
    assert ended_early(tmp_path, "long")
    assert not (tmp_path / "never").exists()
    out = capsys.readouterr().out
    assert "phase FAILED (exit status 3): failing" in out
    assert "phase stopped, as another failed: long" in out
    assert "the run FAILED: failing" in out


def test_a_phase_past_its_budget_says_so(tmp_path, capsys):
    assert ci.execute([ci.Phase("slow", noting(tmp_path, "slow", 1.2), 1)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"phase over its budget: slow took \d+ s, its budget is 1 s", out)
    assert "OVER BUDGET" in out


def test_a_hung_phase_is_ended_and_fails_the_run(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(ci, "HUNG", 1)
    monkeypatch.setattr(ci, "STOP_SECONDS", 1)
    began = time.monotonic()
    assert ci.execute([ci.Phase("hung", noting(tmp_path, "hung", 60), 1)]) == 1
    assert time.monotonic() - began < 30
    assert ended_early(tmp_path, "hung")
    out = capsys.readouterr().out
    assert "phase hung: hung" in out and "the run FAILED: hung" in out


def test_output_that_is_not_text_is_passed_on_as_it_is(tmp_path, capfdbinary):
    command = [sys.executable, "-c", "import sys; sys.stdout.buffer.write(b'bytes \\xe2\\x80 end')"]
    assert ci.execute([ci.Phase("bytes", command, 60)]) == 0
    assert b"bytes \xe2\x80 end" in capfdbinary.readouterr().out


def test_each_phase_gets_the_processes_it_asks_for(tmp_path):
    code = "import os, sys; open(sys.argv[1], 'w').write(os.environ['SEMIDBM_TEST_PROCESSES'])"
    phases = [
        ci.Phase(name, [sys.executable, "-c", code, str(tmp_path / name)], 60, processes=count)
        for name, count in (("one", 1), ("two", 2))
    ]
    assert ci.execute(phases) == 0
    assert [(tmp_path / name).read_text() for name in ("one", "two")] == ["1", "2"]


def ci_table():
    """The table of phases that .ci/run gives scripts/ci.py (its here-document)."""
    text = (benchmark_scripts.SCRIPTS.parent / ".ci" / "run").read_text()
    return text.split("<<'PHASES'\n", 1)[1].split("\nPHASES\n", 1)[0]


def test_the_phases_of_ci_are_named_once_and_wait_only_for_phases_of_ci():
    phases = ci.parse(ci_table())
    names = [phase.name for phase in phases]
    assert len(set(names)) == len(names)
    assert all(set(phase.after) <= set(names) for phase in phases)
    assert sum(phase.budget for phase in phases if phase.processor) / ci.PLACES < ci.RUN_BUDGET
    # The README's test command is one of them, as the README says.
    assert any(phase.command[-1].startswith("bash scripts/nox.sh -s tests") for phase in phases)


def test_a_table_gives_each_phase_its_budget_options_and_command():
    phases = ci.parse(
        "# a comment\n"
        "setup | 5 | first | true\n"
        "\n"
        "net | 7 | network | echo a | cat\n"
        "suite | 9 | processes=2, after=net | bash scripts/nox.sh -s tests\n"
    )
    setup, net, suite = phases
    assert (setup.name, setup.budget, setup.after, setup.command) == (
        "setup", 5, (), ["bash", "-c", "true"])
    assert not net.processor and net.after == ("setup",)
    assert net.command == ["bash", "-c", "echo a | cat"]  # a command may hold "|"
    assert suite.processes == 2 and suite.after == ("net", "setup") and suite.processor


@pytest.mark.parametrize(
    "line",
    ["no fields", "name | soon | | true", "name | 5 | | ", "name | 5 | fast | true",
     "name | 5 | processes=two | true", "name | 5 | after= | true"],
)
def test_a_line_of_another_shape_is_refused_naming_it(line):
    with pytest.raises(ValueError, match=re.escape(line.split("|")[0].strip())):
        ci.parse(line + "\n")


# --- what a build is made from ---


@pytest.fixture
def checkout(tmp_path):
    """A checkout's build inputs in miniature."""
    for name in build_inputs.CONFIGURATION:
        (tmp_path / name).write_text(name)
    package = tmp_path / "src" / "semidbm"
    (package / build_inputs.PIECES).mkdir(parents=True)
    for name in ("_core.pyx", "_core_pieces/table.pxi", "_core_pieces/crc32.h", "db.py"):
        (package / name).write_text(name)
    return tmp_path


@pytest.mark.parametrize(
    "change, rebuilds",
    [
        ("src/semidbm/_core_pieces/table.pxi", True),
        ("src/semidbm/_core.pyx", True),
        ("src/semidbm/_core_pieces/crc32.h", True),
        ("src/semidbm/_core_pieces/new_piece.pxi", True),  # a piece added
        ("setup.cfg", True),
        ("src/semidbm/db.py", False),  # an editable install reads it where it is
        ("src/semidbm/_core.c", False),  # written by the build
        ("src/semidbm/_core.cpython-311-x86_64-linux-gnu.so", False),
        ("src/semidbm/new_module.py", True),  # a new module installs again
    ],
)
def test_a_build_input_changed_builds_again(checkout, change, rebuilds):
    before = build_inputs.digest(checkout, ["test"])
    with open(checkout / change, "a") as handle:
        handle.write("\n# changed\n")
    assert (build_inputs.digest(checkout, ["test"]) != before) is rebuilds


def test_an_install_is_up_to_date_until_a_source_or_its_build_changes(checkout):
    stamp = checkout / "stamp"
    suffix = ".cpython-311-x86_64-linux-gnu.so"
    extension = build_inputs.extension_of(checkout, suffix)

    def install(extras=("test",)):
        taken = build_inputs.digests(checkout, extras)
        extension.with_name("new").write_bytes(b"built %d" % time.monotonic_ns())
        os.replace(extension.with_name("new"), extension)  # as setup.py writes it
        build_inputs.record(stamp, checkout, suffix, taken)

    assert not build_inputs.up_to_date(stamp, checkout, ["test"], suffix)  # never installed
    install()
    assert build_inputs.up_to_date(stamp, checkout, ["test"], suffix)
    assert not build_inputs.up_to_date(stamp, checkout, ["bench"], suffix)
    assert not build_inputs.up_to_date(stamp, checkout, ["test"], ".cpython-39-x86_64-linux-gnu.so")
    pxi = checkout / "src" / "semidbm" / "_core_pieces" / "table.pxi"
    pxi.write_text("changed")
    assert not build_inputs.up_to_date(stamp, checkout, ["test"], suffix)
    install()
    extension.unlink()  # a git clean
    assert not build_inputs.up_to_date(stamp, checkout, ["test"], suffix)


def test_a_build_for_another_environment_is_seen(checkout, monkeypatch):
    # Two environments of one Python share the compiled kernel in the
    # checkout: one builds from a changed source, which is then changed
    # back; the other, whose own note matches again, must build again.
    suffix = ".cpython-311-x86_64-linux-gnu.so"
    extension = build_inputs.extension_of(checkout, suffix)
    pxi = checkout / "src" / "semidbm" / "_core_pieces" / "table.pxi"

    def install(stamp):
        taken = build_inputs.digests(checkout, ["test"])
        extension.with_name("new").write_bytes(pxi.read_bytes())
        os.replace(extension.with_name("new"), extension)
        build_inputs.record(stamp, checkout, suffix, taken)

    install(checkout / "tests-stamp")
    original = pxi.read_text()
    pxi.write_text("an edit")
    install(checkout / "quick-stamp")
    pxi.write_text(original)
    assert not build_inputs.up_to_date(checkout / "tests-stamp", checkout, ["test"], suffix)
    # A build by hand, outside the sessions, is seen too: another file.
    install(checkout / "tests-stamp")
    extension.with_name("new").write_bytes(b"by hand")
    os.replace(extension.with_name("new"), extension)
    assert not build_inputs.up_to_date(checkout / "tests-stamp", checkout, ["test"], suffix)
    # And so is a variable that changes what a build makes.
    install(checkout / "tests-stamp")
    monkeypatch.setenv("CFLAGS", "-O0")
    assert not build_inputs.up_to_date(checkout / "tests-stamp", checkout, ["test"], suffix)


def test_other_extras_install_again(checkout):
    assert build_inputs.digest(checkout, ["test"]) != build_inputs.digest(checkout, ["bench"])
    assert build_inputs.digest(checkout, ["a", "b"]) == build_inputs.digest(checkout, ["b", "a"])


def test_every_file_the_compiled_kernel_includes_is_a_build_input():
    # A file that _core.pyx or its pieces include, or take C from, with an
    # ending the digest does not read would change the build unseen.
    package = benchmark_scripts.SCRIPTS.parent / "src" / "semidbm"
    files = build_inputs.package_files(package)
    text = "".join(path.read_text() for path in files if path.suffix in (".pyx", ".pxi"))
    named = re.findall(r'^\s*include "([^"]+)"', text, re.M)
    named += re.findall(r'cdef extern from "([^"]+)"', text)
    ours = [package / name for name in named if (package / name).exists()]
    assert len(ours) >= 10, named
    assert all(path.name.endswith(build_inputs.COMPILED) for path in ours), ours
    assert set(ours) <= set(files), ours
