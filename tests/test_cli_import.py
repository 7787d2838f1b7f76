"""``semidbm import`` when things go wrong, and standard input on a terminal.

A malformed dump writes nothing; a failed or interrupted import removes
the database it created, and into an existing one says exactly how many
of the dump's records went in (the first ones, in order). ``set``
without VALUE and ``import -`` refuse a terminal rather than wait on it.
"""

import errno
import os
import pty
import re
import resource
import signal
import subprocess

import pytest

import semidbm
from semidbm import cli, db, migrate

from . import test_cli
from .test_cli import FILLED, one_error_line, run
from .test_migrate import files_of

#: test_cli's fixtures: the command line of the tool (script and module), a small database.
tool, filled = test_cli.tool, test_cli.filled

posix_only = pytest.mark.skipif(os.name != "posix", reason="POSIX signals and limits")

#: A dump of 100 records whose line 4 is malformed.
BAD_AT_LINE_4 = b"a 1\nb 2\nc 3\nnot a record\n" + b"".join(b"k%d v\n" % n for n in range(100))


def dump_of(records):
    """The dump text of ``records``, a list of (key, value)."""
    lines = [
        "%s %s\n" % (migrate.encode_field(key), migrate.encode_field(value))
        for key, value in records
    ]
    return (migrate.DUMP_HEADER + "".join(lines)).encode("ascii")


#: The records of the dumps below: 100 of them, of 100-byte values, in order.
RECORDS = [(b"key%03d" % number, b"%03d" % number * 33 + b"!") for number in range(100)]


def contents(path):
    with semidbm.open(path) as database:
        return dict(database.items())


@pytest.mark.parametrize("source", ["file", "stdin"])
def test_a_malformed_dump_creates_no_database(tool, tmp_path, source):
    dump, new = tmp_path / "bad.dump", tmp_path / "new.db"
    dump.write_bytes(BAD_AT_LINE_4)
    if source == "file":
        result = run(tool, "import", dump, new)
    else:
        result = run(tool, "import", "-", new, input=BAD_AT_LINE_4)
    line = one_error_line(result)
    name = dump if source == "file" else "stdin"
    assert line == (
        "semidbm: error: %s: dump line 4: expected KEY VALUE separated by one space, found 3 "
        "fields; nothing imported" % name
    )
    assert sorted(os.listdir(tmp_path)) == ["bad.dump"]


@pytest.mark.parametrize("source", ["file", "stdin"])
def test_a_malformed_dump_changes_nothing_in_an_existing_database(tool, tmp_path, filled, source):
    dump = tmp_path / "bad.dump"
    dump.write_bytes(BAD_AT_LINE_4)
    before = files_of(filled)
    if source == "file":
        result = run(tool, "import", dump, filled)
    else:
        result = run(tool, "import", "-", filled, input=BAD_AT_LINE_4)
    assert "dump line 4: " in one_error_line(result)
    assert files_of(filled) == before


def test_counts_are_in_words_that_agree(tool, tmp_path):
    result = run(tool, "import", "-", tmp_path / "one.db", input=b"k v\n")
    assert result.stdout == b"imported 1 record from stdin into %s\n" % bytes(tmp_path / "one.db")
    line = one_error_line(run(tool, "import", "-", tmp_path / "two.db", input=b"lonely\n"))
    assert line.endswith("found 1 field; nothing imported")


def limited_to(size):
    """A preexec_fn: files of at most ``size`` bytes, and a write past that an error (EFBIG)."""

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, resource.RLIM_INFINITY))

    return limit


def run_limited(tool, size, *args, stdin=None):
    """Run the tool with files limited to ``size`` bytes; ``stdin`` is a file to read from."""
    return subprocess.run(
        tool + [os.fspath(arg) for arg in args],
        stdin=stdin,
        capture_output=True,
        preexec_fn=limited_to(size),
        timeout=120,
    )


@posix_only
def test_a_full_disk_midway_into_an_existing_database_says_how_many_records_went_in(
    tool, tmp_path, filled
):
    dump = tmp_path / "dump"
    dump.write_bytes(dump_of(RECORDS))
    room = os.path.getsize(filled / "data") + 2000  # for some of the records, not all
    line = one_error_line(run_limited(tool, room, "import", dump, filled))
    found = re.fullmatch(
        r"semidbm: error: cannot write to (.*): File too large; the dump's first (\d+) "
        r"records went into (.*), the rest did not",
        line,
    )
    assert found, line
    stored = int(found.group(2))
    assert found.group(1) == str(filled / "data") and found.group(3) == str(filled)
    assert 0 < stored < len(RECORDS)
    assert contents(filled) == {**FILLED, **dict(RECORDS[:stored])}


@posix_only
@pytest.mark.parametrize("source", ["file", "stdin"])
def test_a_full_disk_removes_the_database_the_import_created(tool, tmp_path, source):
    dump, new = tmp_path / "dump", tmp_path / "new.db"
    dump.write_bytes(dump_of(RECORDS))
    if source == "file":
        result = run_limited(tool, 4096, "import", dump, new)
    else:
        with open(dump, "rb") as stdin:
            result = run_limited(tool, 4096, "import", "-", new, stdin=stdin)
    line = one_error_line(result)
    assert line == "semidbm: error: cannot write to %s: File too large; nothing imported" % (
        new / "data"
    )
    assert sorted(os.listdir(tmp_path)) == ["dump"]


@posix_only
def test_a_full_temporary_directory_for_a_piped_dump_creates_nothing(tool, tmp_path):
    dump = tmp_path / "dump"
    dump.write_bytes(dump_of(RECORDS))
    command = "cat %s | %s import - %s" % (dump, " ".join(tool), tmp_path / "new.db")
    result = subprocess.run(
        ["sh", "-c", command], capture_output=True, preexec_fn=limited_to(4096), timeout=120
    )
    line = one_error_line(result)
    assert re.fullmatch(
        r"semidbm: error: File too large \(a temporary copy of the dump\): .*; nothing imported",
        line,
    ), line
    assert sorted(os.listdir(tmp_path)) == ["dump"]


#: A dump of more than a pipe holds: once it is written into one, the tool is reading it.
PIPEFUL = dump_of([(b"pipe%06d" % number, b"x" * 40) for number in range(20_000)])


def start_import(tool, path, **options):
    """Start ``import - path`` and pipe it PIPEFUL; return the process, reading what follows."""
    process = subprocess.Popen(
        tool + ["import", "-", str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **options,
    )
    process.stdin.write(PIPEFUL)  # returns once the tool has read all but a pipe's worth
    process.stdin.flush()
    return process


@posix_only
@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
@pytest.mark.parametrize("database", ["new", "existing"])
def test_an_interrupted_import_leaves_no_trace(tool, tmp_path, filled, number, database):
    path = tmp_path / "new.db" if database == "new" else filled
    before = files_of(filled)
    spool = tmp_path / "tmp"
    spool.mkdir()
    process = start_import(
        tool,
        path,
        env=dict(os.environ, TMPDIR=str(spool)),
        # Not ignored, whatever this test inherited (a shell's background job ignores SIGINT):
        # the tool leaves an ignored signal ignored.
        preexec_fn=lambda: signal.signal(number, signal.SIG_DFL),
    )
    process.send_signal(number)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert stderr == b"semidbm: interrupted: nothing imported\n"
    assert not (tmp_path / "new.db").exists()
    assert files_of(filled) == before
    assert os.listdir(spool) == []


@posix_only
def test_an_ignored_hangup_stays_ignored(tool, tmp_path):
    path = tmp_path / "new.db"
    process = start_import(
        tool, path, preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN)  # nohup
    )
    process.send_signal(signal.SIGHUP)
    stdout, stderr = process.communicate(b"last one\n", timeout=60)
    assert process.returncode == 0, stderr
    assert stdout == b"imported 20,001 records from stdin into %s\n" % bytes(path)
    assert contents(path)[b"last"] == b"one"


class SignalsItself:
    """A database that sends this process SIGINT while it stores its ``at``-th record."""

    def __init__(self, database, at):
        self.database, self.at, self.stores = database, at, 0

    def __setitem__(self, key, value):
        self.stores += 1
        if self.stores == self.at:
            os.kill(os.getpid(), signal.SIGINT)  # its handler runs before the store below
        self.database[key] = value

    def close(self):
        self.database.close()


@posix_only
def test_an_interrupt_while_storing_ends_after_a_whole_record_and_counts_it(
    tmp_path, filled, monkeypatch, capsys, request
):
    dump = tmp_path / "dump"
    dump.write_bytes(dump_of(RECORDS))
    real_open = db.open
    monkeypatch.setattr(db, "open", lambda *args, **kw: SignalsItself(real_open(*args, **kw), 5))
    # Python's own handler, even where this test inherited SIGINT ignored (a background job):
    # the tool leaves an ignored signal ignored.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    request.addfinalizer(lambda: signal.signal(signal.SIGINT, previous))
    assert cli.main(["import", str(dump), str(filled)]) == 130
    assert capsys.readouterr().err == (
        "semidbm: interrupted: the dump's first 5 records went into %s, the rest did not\n"
        % filled
    )
    assert contents(filled) == {**FILLED, **dict(RECORDS[:5])}
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back


def test_a_symlink_put_in_place_of_the_new_database_is_not_followed(
    tmp_path, filled, monkeypatch, capsys
):
    new, moved = tmp_path / "new.db", tmp_path / "moved.db"
    before = files_of(filled)

    def swap_then_fail(stream, database, progress, check_progress):
        os.rename(new, moved)
        os.symlink(filled, new)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(migrate, "import_dump", swap_then_fail)
    (tmp_path / "dump").write_bytes(b"k v\n")
    assert cli.main(["import", str(tmp_path / "dump"), str(new)]) == 1
    assert capsys.readouterr().err == (
        "semidbm: error: No space left on device; nothing imported\n"
    )
    assert os.path.islink(new) and files_of(filled) == before
    assert sorted(os.listdir(moved)) == ["data", "lock"]


def run_on_a_terminal(tool, *args):
    """Run the tool with stdin on a pseudo-terminal; return its result (skip if none can be had)."""
    try:
        controller, terminal = pty.openpty()
    except OSError as exc:
        pytest.skip("no pseudo-terminal: %s" % exc)
    try:
        return subprocess.run(
            tool + [os.fspath(arg) for arg in args],
            stdin=terminal,
            capture_output=True,
            timeout=60,  # waiting on the terminal would end here
        )
    finally:
        os.close(terminal)
        os.close(controller)


def test_set_without_a_value_refuses_a_terminal(tool, filled):
    before = files_of(filled)
    line = one_error_line(run_on_a_terminal(tool, "set", filled, "key"), status=2)
    assert line == (
        "semidbm set: error: VALUE is left out and standard input is a terminal: give VALUE, "
        "or pipe the value in (see semidbm set --help)"
    )
    assert files_of(filled) == before


def test_import_from_stdin_refuses_a_terminal(tool, tmp_path):
    line = one_error_line(run_on_a_terminal(tool, "import", "-", tmp_path / "new.db"), status=2)
    assert line == (
        "semidbm import: error: DUMP is - and standard input is a terminal: give a file, or pipe "
        "the dump in (see semidbm import --help)"
    )
    assert os.listdir(tmp_path) == []


def test_set_without_a_value_refuses_a_closed_stdin(tool, filled):
    command = " ".join(tool) + " set %s key <&-" % filled
    result = subprocess.run(["sh", "-c", command], capture_output=True, timeout=60)
    assert "standard input is closed" in one_error_line(result, status=2)


def test_set_reads_an_empty_value_piped_in(tool, filled):
    assert run(tool, "set", filled, "piped", input=b"").returncode == 0
    assert contents(filled)[b"piped"] == b""
