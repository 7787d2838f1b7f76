"""``semidbm import`` when things go wrong, and standard input on a terminal.

A malformed dump writes nothing; a failed or interrupted import removes
the database it created; into an existing database of format 2.0 it is
one batch, all or nothing, and a dump too large for a batch is refused
before anything is written; into one of format 1.1 (or with
``--no-batch``) the error says exactly how many of the dump's records
went in (the first ones, in order). ``set`` without VALUE and
``import -`` refuse a terminal rather than wait on it.
"""

import errno
import gc
import os
import pty
import re
import resource
import signal
import subprocess
import sys
import warnings

import pytest

import semidbm
from semidbm import _batch, cli, db, migrate
from semidbm.format import EMPTY_RECORD_SIZE

from .conftest import kernel_name
from .support.cli import FILLED, one_error_line, run
from .support.migration import files_of

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
    """Every record of the database at ``path``; a torn tail (a warning) is an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with semidbm.open(path) as database:
            return dict(database.items())


def records_size(records):
    """The bytes of the put records of ``records``, as a batch counts them."""
    return sum(EMPTY_RECORD_SIZE + len(key) + len(value) for key, value in records)


@pytest.fixture
def batched(tmp_path):
    """A database of format 2.0 (with batches) holding FILLED."""
    path = tmp_path / "batched.db"
    with semidbm.open(path, "c", format=2) as database:
        database.update(FILLED)
    return path


#: The tool run as a module, for the tests run once per kernel rather than per way of starting it.
MODULE_TOOL = [sys.executable, "-m", "semidbm"]


def kernel_environment(kernel):
    """The environment of a tool that runs ``kernel`` (the pure one through SEMIDBM_PURE_PYTHON)."""
    environment = dict(os.environ)
    environment.pop("SEMIDBM_PURE_PYTHON", None)
    if kernel_name(kernel) == "python":
        environment["SEMIDBM_PURE_PYTHON"] = "1"
    return environment


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


def run_limited(tool, size, *args, stdin=None, env=None):
    """Run the tool with files limited to ``size`` bytes; ``stdin`` is a file to read from."""
    return subprocess.run(
        tool + [os.fspath(arg) for arg in args],
        stdin=stdin,
        capture_output=True,
        preexec_fn=limited_to(size),
        env=env,
        timeout=120,
    )


@posix_only
@pytest.mark.parametrize("format_2", [False, True], ids=["format 1.1", "format 2.0 --no-batch"])
def test_a_full_disk_midway_into_an_existing_database_says_how_many_records_went_in(
    tool, tmp_path, filled, format_2
):
    dump = tmp_path / "dump"
    dump.write_bytes(dump_of(RECORDS))
    options = []
    if format_2:
        with semidbm.open(filled, "w") as database:
            database.compact(format=2)
        options = ["--no-batch"]
    room = os.path.getsize(filled / "data") + 2000  # for some of the records, not all
    line = one_error_line(run_limited(tool, room, "import", *options, dump, filled))
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


def test_into_a_database_of_format_2_the_dump_is_one_batch_record(kernel, tmp_path, batched):
    dump = tmp_path / "dump"
    dump.write_bytes(dump_of(RECORDS))
    before = os.path.getsize(batched / "data")
    result = run(MODULE_TOOL, "import", dump, batched, env=kernel_environment(kernel))
    assert result.returncode == 0, result.stderr
    assert result.stdout == b"imported 100 records from %s into %s\n" % (
        bytes(dump),
        bytes(batched),
    )
    assert contents(batched) == {**FILLED, **dict(RECORDS)}
    # One batch record: its own lengths and checksum, then a put record for each record.
    assert os.path.getsize(batched / "data") - before == EMPTY_RECORD_SIZE + records_size(RECORDS)


@posix_only
def test_a_full_disk_midway_into_a_database_of_format_2_imports_nothing(kernel, tmp_path, batched):
    dump = tmp_path / "dump"
    dump.write_bytes(dump_of(RECORDS))
    room = os.path.getsize(batched / "data") + 2000  # for some of the records, not all
    result = run_limited(
        MODULE_TOOL, room, "import", dump, batched, env=kernel_environment(kernel)
    )
    assert one_error_line(result) == (
        "semidbm: error: cannot write to %s: File too large; nothing imported" % (batched / "data")
    )
    assert contents(batched) == FILLED


class FailsWhileFilling:
    """Batch.__setitem__ that fails as it takes its ``at``-th record: SIGINT, or an exception."""

    def __init__(self, at, failure):
        self.at, self.failure, self.calls = at, failure, 0
        self.setitem = _batch.Batch.__setitem__

    def __call__(self, batch, key, value):
        self.calls += 1
        if self.calls == self.at:
            if self.failure == "interrupt":
                os.kill(os.getpid(), signal.SIGINT)  # its handler runs before the line below
            else:
                raise RuntimeError("a failure midway")
        self.setitem(batch, key, value)

    def install(self, monkeypatch):
        """Put it in the place of Batch.__setitem__ until the test ends."""
        monkeypatch.setattr(_batch.Batch, "__setitem__", lambda *arguments: self(*arguments))


@posix_only
@pytest.mark.parametrize("failure", ["interrupt", "exception"])
def test_a_failure_midway_into_a_database_of_format_2_imports_nothing(
    tmp_path, batched, dbopen, monkeypatch, capsys, request, failure
):
    dump = tmp_path / "dump"
    dump.write_bytes(dump_of(RECORDS))
    monkeypatch.setattr(db, "open", dbopen)  # the kernel under test
    FailsWhileFilling(50, failure).install(monkeypatch)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    request.addfinalizer(lambda: signal.signal(signal.SIGINT, previous))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        if failure == "interrupt":
            assert cli.main(["import", str(dump), str(batched)]) == 130
            assert capsys.readouterr().err == "semidbm: interrupted: nothing imported\n"
        else:
            with pytest.raises(RuntimeError, match="a failure midway"):
                cli.main(["import", str(dump), str(batched)])
        gc.collect()
    assert contents(batched) == FILLED
    # The import rolls its batch back: dropped without, it would warn of changes lost.
    assert [str(warning.message) for warning in caught] == []


#: Records whose dump has escapes, a comment, a CRLF line end, an empty value and a key given twice.
ESCAPED_DUMP = (
    b"# a comment\r\n"
    b"bin%00%FF line%0Anext\r\n"
    b"plain%20key %25%23\n"
    b"empty \n"
    b"\n"
    b"plain%20key again\n"
)
#: The bytes of ESCAPED_DUMP's records as its check counts them: the key given twice, twice.
ESCAPED_SIZE = records_size(
    [
        (b"bin\x00\xff", b"line\nnext"),
        (b"plain key", b"%#"),
        (b"empty", b""),
        (b"plain key", b"again"),
    ]
)
#: ESCAPED_DUMP imported into FILLED.
ESCAPED_RESULT = {**FILLED, b"bin\x00\xff": b"line\nnext", b"plain key": b"again", b"empty": b""}


def test_the_batch_takes_a_dump_that_just_fits(
    tmp_path, batched, dbopen, monkeypatch, capsys
):
    dump = tmp_path / "dump"
    dump.write_bytes(ESCAPED_DUMP)
    monkeypatch.setattr(db, "open", dbopen)
    monkeypatch.setattr(_batch, "CAPACITY", ESCAPED_SIZE)
    assert cli.main(["import", str(dump), str(batched)]) == 0, capsys.readouterr().err
    assert contents(batched) == ESCAPED_RESULT


@pytest.mark.parametrize("no_batch", [False, True], ids=["refused", "--no-batch"])
def test_a_dump_too_large_for_a_batch_is_refused_before_anything_is_stored(
    tmp_path, batched, dbopen, monkeypatch, capsys, no_batch
):
    dump = tmp_path / "dump"
    dump.write_bytes(ESCAPED_DUMP)
    monkeypatch.setattr(db, "open", dbopen)
    monkeypatch.setattr(_batch, "CAPACITY", ESCAPED_SIZE - 1)
    filling = FailsWhileFilling(0, "never")  # counts the records given to the batch
    filling.install(monkeypatch)
    status = cli.main(["import"] + ["--no-batch"] * no_batch + [str(dump), str(batched)])
    if no_batch:
        assert status == 0
        assert contents(batched) == ESCAPED_RESULT
    else:
        assert status == 1
        assert capsys.readouterr().err == (
            "semidbm: error: %s: its records add up to %d bytes, more than the batch can take "
            "(%d bytes): import it without a batch (semidbm import --no-batch), record by "
            "record; nothing imported\n" % (dump, ESCAPED_SIZE, ESCAPED_SIZE - 1)
        )
        assert contents(batched) == FILLED
    assert filling.calls == 0


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
@pytest.mark.parametrize("target", ["new", "existing", "existing of format 2.0"])
def test_an_interrupted_import_leaves_no_trace(tool, tmp_path, filled, number, target):
    path = tmp_path / "new.db" if target == "new" else filled
    if target == "existing of format 2.0":
        with semidbm.open(filled, "w") as upgrading:
            upgrading.compact(format=2)
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

    @property
    def format_version(self):
        return self.database.format_version

    def close(self):
        self.database.close()


@posix_only
def test_an_interrupt_while_storing_ends_after_a_whole_record_and_counts_it(
    tmp_path, filled, dbopen, monkeypatch, capsys, request
):
    dump = tmp_path / "dump"
    dump.write_bytes(dump_of(RECORDS))
    monkeypatch.setattr(db, "open", lambda *args, **kw: SignalsItself(dbopen(*args, **kw), 5))
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
