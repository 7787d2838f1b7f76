"""The ``semidbm`` command, run as users run it: the console script and ``python -m semidbm``.

Every test runs the tool in a subprocess, once through each entry point.
"""

import json
import os
import pty
import re
import subprocess

import pytest

import semidbm
from semidbm import _checkpoint
from semidbm._progress import quantity
from semidbm.format import HEADER_SIZE

from .support.cli import FILLED, one_error_line, run
from .support.log import CHECKPOINT_RECORDS
from .support.migration import (
    INTO_THE_DATABASE,
    SQLITEDICT_TABLE,
    files_of,
    make_sqlite,
    output_into_database,
)
from .support.records import put_record

COMMANDS = [
    "stats",
    "get",
    "set",
    "delete",
    "keys",
    "verify",
    "compact",
    "convert",
    "export",
    "import",
    "bench",
]


def test_help_lists_every_command_and_version(tool):
    result = run(tool, "--help")
    assert result.returncode == 0
    for command in COMMANDS:
        assert re.search(rb"^\s+%s\s" % command.encode(), result.stdout, re.MULTILINE), command
    assert run(tool, "--version").stdout.strip() == b"semidbm " + semidbm.__version__.encode()


@pytest.mark.parametrize(
    "command, says, never",
    [
        ("get", "KEY is given, and the value printed, percent-encoded", "VALUE"),
        ("set", "KEY and VALUE are percent-encoded (a value from stdin is raw)", None),
        ("delete", "the KEYs are percent-encoded", "VALUE"),
        ("import", "nothing is written", None),
        # Not only a checksum: a log unreadable past a point, records after it.
        ("compact", "cannot be read past some offset when records follow", None),
        ("compact", "sets the log from there on aside in data.torn-OFFSET", None),
    ],
)
def test_help_says_what_each_command_takes(tool, command, says, never):
    text = " ".join(run(tool, command, "--help").stdout.decode().split())  # as one line
    assert says in text
    assert never is None or never not in text


def test_set_get_keys_delete(tool, tmp_path):
    path = tmp_path / "new.db"
    assert run(tool, "set", "--create", path, "greeting", "h\u00e9llo").returncode == 0
    assert run(tool, "set", path, "binary", input=b"\x00\xff\n").returncode == 0  # value from stdin
    assert run(tool, "set", path, "-e", "k%00", "v%20w").returncode == 0
    assert (
        run(tool, "get", path, "greeting").stdout == "h\u00e9llo".encode()
    )  # raw, no newline when piped
    assert run(tool, "get", path, "binary").stdout == b"\x00\xff\n"
    assert run(tool, "get", "-e", path, "k%00").stdout == b"v%20w\n"
    assert run(tool, "keys", path).stdout == b"binary\ngreeting\nk\x00\n"
    assert run(tool, "keys", "-e", path).stdout == b"binary\ngreeting\nk%00\n"
    assert run(tool, "delete", path, "greeting", "binary").returncode == 0
    with semidbm.open(path) as database:
        assert dict(database.items()) == {b"k\x00": b"v w"}


def test_delete_deletes_nothing_if_a_key_is_missing(tool, filled):
    line = one_error_line(run(tool, "delete", filled, "alpha", "missing"))
    assert "no key 'missing'" in line
    with semidbm.open(filled) as database:
        assert b"alpha" in database


def test_set_delete_and_import_write_beside_a_shared_writer_with_shared(tool, tmp_path):
    path = tmp_path / "shared.db"
    dump = tmp_path / "dump"
    dump.write_bytes(b"d1 one\nd2 two\n")
    with semidbm.open(path, "cm") as held:  # held open by another writer all along
        assert run(tool, "set", "-m", path, "a", "1").returncode == 0
        assert run(tool, "set", "--shared", path, "b", "2").returncode == 0
        assert run(tool, "import", "--shared", dump, path).returncode == 0
        line = one_error_line(run(tool, "set", path, "c", "3"))
        assert "open by shared writers" in line
        assert "no key 'x'" in one_error_line(run(tool, "delete", "-m", path, "a", "x"))
        assert run(tool, "delete", "-m", path, "a", "d2").returncode == 0
        held.refresh()
        assert dict(held.items()) == {b"b": b"2", b"d1": b"one"}
    assert run(tool, "set", "-c", "-m", tmp_path / "new.db", "k", "v").returncode == 0
    with semidbm.open(tmp_path / "new.db") as database:
        assert database[b"k"] == b"v"


def test_stats(tool, filled):
    with semidbm.open(filled, "w") as database:
        database[b"alpha"] = b"replaced"
        del database[b"beta"]
    result = run(tool, "stats", "--json", filled)
    assert result.returncode == 0
    numbers = json.loads(result.stdout)
    size = os.path.getsize(filled / "data")
    live = (12 + 5 + 8) + (12 + 5 + 3)
    assert numbers == {
        "database": str(filled),
        "format_version": "1.1",
        "file_size": size,
        "keys": 2,
        "records": CHECKPOINT_RECORDS + 5,
        "live_bytes": live,
        "expired_bytes": 0,
        "dead_bytes": size - HEADER_SIZE - live,
        "compaction_frees": size - _checkpoint.START_SIZE - live,
        "torn_tail": 0,
        "writer_active": False,
    }
    text = run(tool, "stats", filled).stdout.decode()
    assert re.search(r"^keys\s+2$", text, re.MULTILINE)
    assert re.search(
        r"^compaction frees\s+%d bytes \(\d+\.\d%%\)$" % (size - _checkpoint.START_SIZE - live),
        text,
        re.MULTILINE,
    )
    assert re.search(r"^format version\s+1\.1$", text, re.MULTILINE)


def test_stats_gives_a_large_count_its_short_form_and_share_in_one_bracket(tool, tmp_path):
    path = tmp_path / "large.db"
    with semidbm.open(path, "c") as database:
        database[b"big"] = b"x" * 100_000
        database[b"big"] = b"y"
    text = run(tool, "stats", path).stdout.decode()
    line = next(line for line in text.splitlines() if line.startswith("compaction frees"))
    assert re.fullmatch(r"compaction frees\s+[\d,]+ bytes \(97\.\d KiB, \d+\.\d%\)", line), line


def test_verify_a_sound_database(tool, filled):
    result = run(tool, "verify", filled)
    assert result.returncode == 0
    records = CHECKPOINT_RECORDS + 3
    assert result.stdout.startswith(b"ok: every checksum matches (%d records, 3 keys" % records)


def test_verify_reports_bad_records_by_offset_with_status_3(tool, filled):
    data = bytearray((filled / "data").read_bytes())
    # The first key written (b"alpha"), not the checkpoint's before it: a
    # checkpoint's checksum, over a random nonce, ends in a zero byte one
    # time in 256, and a record that ends in zero with a bad checksum is
    # a lost page, not a bad record (docs/FORMAT.md, "Lost pages").
    first = _checkpoint.START_SIZE
    data[first + 8] ^= 0xFF
    (filled / "data").write_bytes(bytes(data) + put_record(b"torn", b"tail")[:-3])
    result = run(tool, "verify", filled)
    assert result.returncode == 3
    lines = result.stdout.decode().splitlines()
    assert lines[0] == "bad checksum: record at offset %d (the current value of its key)" % first
    assert lines[1].startswith("torn tail: 17 bytes at offset %d" % len(data))
    assert lines[2].startswith("damaged: 1 bad checksum, a torn tail")


def test_verify_reports_zeros_a_power_cut_left_as_a_torn_tail(tool, filled):
    size = len((filled / "data").read_bytes())
    with open(filled / "data", "ab") as data:
        data.write(bytes(2 << 20))  # longer than a buffer: still no recover=True needed
    result = run(tool, "verify", filled)
    assert result.returncode == 3
    lines = result.stdout.decode().splitlines()
    assert lines[0] == (
        "torn tail: 2,097,152 bytes (2.0 MiB) at offset %d start with zeros a power cut left"
        " (a page the disk did not write?); opening for writing cuts them off and keeps them"
        " in data.torn-%d"
        % (size, size)
    )


def test_verify_reports_a_corrupt_record(tool, filled):
    data = bytearray((filled / "data").read_bytes())
    data[8:12] = b"\xff\xff\xff\xf0"
    (filled / "data").write_bytes(bytes(data))
    result = run(tool, "verify", filled)
    assert result.returncode == 3
    assert result.stdout.decode().startswith(
        "corrupt record at offset 8: impossible lengths, or a malformed batch")


def test_verify_leaves_a_write_in_progress_alone(tool, filled):
    with semidbm.open(filled, "w"):
        with open(filled / "data", "ab") as data:
            data.write(b"\x00\x00\x00")
        result = run(tool, "verify", filled)
    assert result.returncode == 0, result.stdout
    assert b"a write in progress" in result.stdout


def test_compact(tool, filled):
    with semidbm.open(filled, "w") as database:
        for number in range(100):
            database[b"alpha"] = b"x" * number
    before = os.path.getsize(filled / "data")
    result = run(tool, "compact", filled)
    assert result.returncode == 0
    assert result.stdout.startswith(b"compacted ")
    assert os.path.getsize(filled / "data") < before
    with semidbm.open(filled) as database:
        assert database[b"alpha"] == b"x" * 99 and len(database) == 3


def test_export_and_import_through_files_and_pipes(tool, filled, tmp_path):
    records = {b"alpha": b"1", b"beta": b"two", b"bin\x00\xff": b"\x00\x01\x02"}
    piped = run(tool, "export", filled)
    assert piped.returncode == 0 and piped.stderr == b""
    assert piped.stdout.splitlines()[1:] == [b"alpha 1", b"beta two", b"bin%00%FF %00%01%02"]
    dump = tmp_path / "dump.txt"
    result = run(tool, "export", filled, dump)
    assert result.stdout == b"exported 3 records from %s to %s\n" % (bytes(filled), bytes(dump))
    assert dump.read_bytes() == piped.stdout
    assert run(tool, "import", dump, tmp_path / "from-file.db").returncode == 0
    assert run(tool, "import", "-", tmp_path / "from-stdin.db", input=piped.stdout).returncode == 0
    for name in ["from-file.db", "from-stdin.db"]:
        with semidbm.open(tmp_path / name) as database:
            assert dict(database.items()) == records


def test_keys_and_export_with_a_prefix(tool, tmp_path):
    """``--prefix``: raw bytes, or a dump field with ``--encoded``; keys in byte order."""
    path = tmp_path / "prefixed.db"
    records = {b"user:1": b"one", b"user:2": b"two", b"user\xff": b"\x00", b"users": b"s"}
    with semidbm.open(path, "c") as database:
        database.update(records)
        database[b"\xffx"] = b"last"
    assert run(tool, "keys", path, "--prefix", "user:").stdout == b"user:1\nuser:2\n"
    assert run(tool, "keys", "-e", "-p", "user%FF", path).stdout == b"user%FF\n"
    exported = run(tool, "export", "-p", "user", path)
    assert exported.stdout.splitlines()[1:] == [
        b"user:1 one", b"user:2 two", b"users s", b"user%FF %00"
    ]
    dump = tmp_path / "dump.txt"
    result = run(tool, "export", "-e", "--prefix", "%FF", path, dump)
    assert result.stdout == b"exported 1 record from %s to %s\n" % (bytes(path), bytes(dump))
    assert dump.read_bytes().splitlines()[1:] == [b"%FFx last"]
    nothing = run(tool, "keys", "-p", "none", path)
    assert (nothing.returncode, nothing.stdout, nothing.stderr) == (0, b"", b"")
    assert "'%G1': malformed field" in one_error_line(run(tool, "keys", "-e", "-p", "%G1", path))


def assert_intact(database, files):
    """Check that the ``database`` directory still holds ``files`` and reads as ``filled``."""
    assert files_of(database) == files
    with semidbm.open(database) as reopened:
        assert {key: reopened[key] for key in reopened.keys()} == FILLED


@pytest.mark.parametrize("kind", INTO_THE_DATABASE)
def test_export_refuses_to_write_into_the_database(tool, filled, tmp_path, kind):
    output = output_into_database(kind, filled, tmp_path)
    before = files_of(filled)
    line = one_error_line(run(tool, "export", filled, output))
    assert "refusing to write the dump to %s: it is" % output in line
    assert "semidbm database %s" % filled in line
    assert_intact(filled, before)


def test_export_refuses_stdout_appending_to_the_database(tool, filled):
    before = files_of(filled)
    with open(filled / "data", "ab") as data:
        result = subprocess.run(
            tool + ["export", os.fspath(filled)], stdout=data, stderr=subprocess.PIPE, timeout=120
        )
    assert "refusing to write the dump to <stdout>: it is" in one_error_line(result)
    assert_intact(filled, before)


def test_convert_from_gnu_and_dumb(tool, tmp_path):
    import dbm.dumb

    gnu = pytest.importorskip(
        "dbm.gnu", reason="this Python has no dbm.gnu (Debian's own has it with python3-gdbm)"
    )
    for module in [gnu, dbm.dumb]:
        source = str(tmp_path / module.__name__)
        with module.open(source, "c") as database:
            database[b"key"] = b"value"
            database[b"\x00"] = b""
        destination = tmp_path / (module.__name__ + ".semidbm")
        result = run(tool, "convert", source, destination)
        assert result.returncode == 0, result.stderr
        assert (
            result.stdout.decode()
            == "converted 2 keys from the %s database %s into the semidbm database %s\n"
            % (
                module.__name__,
                source,
                destination,
            )
        )
        with semidbm.open(destination) as converted:
            assert dict(converted.items()) == {b"key": b"value", b"\x00": b""}


def test_bench_is_a_quick_timing_of_semidbm_alone(tool, tmp_path):
    result = run(tool, "bench", "-n", "2000", "--dir", tmp_path)
    assert result.returncode == 0, result.stderr
    text = result.stdout.decode()
    assert "2,000 keys" in text and semidbm.implementation + " kernel" in text
    assert len(re.findall(r"\d+\.\d{3} s\s+[\d,]+ ops/s", text)) == 3
    assert os.listdir(tmp_path) == []
    pure = run(tool, "bench", "-n", "100", env=dict(os.environ, SEMIDBM_PURE_PYTHON="1"))
    assert b"python kernel" in pure.stdout
    helptext = b" ".join(run(tool, "bench", "--help").stdout.split())  # as one line
    assert b"benchmarks/compare.py" in helptext and b"scripts/nox.sh -s bench" in helptext


def test_bench_takes_empty_values_and_counts_in_words(tool, tmp_path):
    result = run(tool, "bench", "-n", "1", "--value-size", "0", "--dir", tmp_path)
    assert result.returncode == 0, result.stderr
    assert " kernel: 1 key, values of 0 bytes (" in result.stdout.decode()
    result = run(tool, "bench", "-n", "2", "--value-size", "1", "--dir", tmp_path)
    assert " kernel: 2 keys, values of 1 byte (" in result.stdout.decode()


def test_convert_counts_one_key_as_one(tool, tmp_path):
    import dbm.dumb

    with dbm.dumb.open(str(tmp_path / "one"), "c") as database:
        database[b"k"] = b"v"
    result = run(tool, "convert", tmp_path / "one", tmp_path / "new.db")
    assert result.stdout.decode().startswith("converted 1 key from the dbm.dumb database")


@pytest.mark.parametrize(
    "count, word, said",
    [(0, "record", "0 records"), (1, "record", "1 record"), (2, "key", "2 keys"),
     (1234567, "byte", "1,234,567 bytes")],
)
def test_quantities_agree_with_their_count(count, word, said):
    assert quantity(count, word) == said


@pytest.mark.parametrize(
    "args, message",
    [
        (["get", "{missing}", "k"], "no semidbm database: {missing}"),
        (["stats", "{missing}"], "no semidbm database: {missing}"),
        (["verify", "{missing}"], "no semidbm database: {missing}"),
        (["keys", "{missing}"], "no semidbm database: {missing}"),
        (["compact", "{missing}"], "no semidbm database: {missing}"),
        (["set", "{missing}", "k", "v"], "no semidbm database: {missing}"),
        (["export", "{missing}"], "no semidbm database: {missing}"),
        (["get", "{filled}", "nope"], "no key 'nope' in {filled}"),
        (["get", "{not_a_db}", "k"], "not a semidbm database"),
        (["stats", "{not_a_db}"], "not a semidbm database"),
        (["import", "{missing}", "{filled}"], "No such file or directory: {missing}"),
        (["import", "{bad_dump}", "{filled}"], "{bad_dump}: dump line 1: expected KEY VALUE"),
        (["convert", "{missing}", "{new}"], "no database at {missing}"),
        (["convert", "{filled}", "{new}"], "already a semidbm database"),
        (["convert", "{sqlitedict}", "{new}"], "is a sqlitedict database (table 'unnamed')"),
        (["get", "-e", "{filled}", "%zz"], "'%zz': malformed field"),
    ],
)
def test_mistakes_are_one_line_and_status_1(tool, tmp_path, filled, args, message):
    places = {
        "missing": tmp_path / "missing.db",
        "filled": filled,
        "not_a_db": tmp_path / "file.txt",
        "bad_dump": tmp_path / "bad.dump",
        "new": tmp_path / "new.db",
        "sqlitedict": tmp_path / "dict.sqlite",
    }
    places["not_a_db"].write_bytes(b"hello")
    make_sqlite(places["sqlitedict"], SQLITEDICT_TABLE % "unnamed")
    places["bad_dump"].write_bytes(b"one two three\n")
    before = sorted(os.listdir(tmp_path))
    line = one_error_line(run(tool, *[arg.format(**places) for arg in args]))
    assert line.startswith("semidbm: error: ")
    assert message.format(**places) in line
    assert sorted(os.listdir(tmp_path)) == before


def test_a_locked_database_is_one_line(tool, filled):
    with semidbm.open(filled, "w"):
        line = one_error_line(run(tool, "set", filled, "k", "v"))
    assert "locked by another writer (process %d)" % os.getpid() in line


def test_a_corrupt_database_is_one_line(tool, filled):
    data = bytearray((filled / "data").read_bytes())
    data[8:12] = b"\xff\xff\xff\xf0"
    (filled / "data").write_bytes(bytes(data))
    line = one_error_line(run(tool, "get", filled, "alpha"))
    assert "corrupt record at offset 8" in line


@pytest.mark.parametrize(
    "args",
    [["get"], ["nope"], ["bench", "-n", "0"], ["bench", "--value-size", "-1"], ["stats", "a", "b"],
     []],
)
def test_bad_arguments_are_one_line_and_status_2(tool, args):
    line = one_error_line(run(tool, *args), status=2)
    assert "--help" in line


def test_a_torn_tail_is_a_one_line_warning(tool, filled):
    with open(filled / "data", "ab") as data:
        data.write(b"\x00\x00\x00\x01")
    result = run(tool, "get", filled, "alpha")
    assert result.returncode == 0 and result.stdout == b"1"
    assert result.stderr.decode().splitlines() == [
        "semidbm: warning: %s: dropped a torn tail of 4 bytes at offset %d"
        % (filled / "data", os.path.getsize(filled / "data") - 4)
    ]


def test_output_cut_short_by_the_reader_is_no_error(tool, tmp_path):
    path = tmp_path / "many.db"
    with semidbm.open(path, "c") as database:
        for number in range(100_000):
            database[b"key number %d" % number] = b""
    command = " ".join(map(str, tool)) + " keys %s | head -n 1" % path
    result = subprocess.run(["sh", "-c", command], capture_output=True, timeout=120)
    assert result.stdout == b"key number 0\n"
    assert result.stderr == b""


def run_with_terminal_stderr(tool, *args):
    """Run the tool with stderr on a pseudo-terminal; return what it drew there.

    The calling test is skipped where no pseudo-terminal can be had (as in
    a chroot without /dev/pts mounted).
    """
    try:
        controller, terminal = pty.openpty()
    except OSError as exc:
        pytest.skip("no pseudo-terminal to draw on: %s" % exc)
    try:
        process = subprocess.Popen(
            tool + [os.fspath(arg) for arg in args], stdout=subprocess.DEVNULL, stderr=terminal
        )
        os.close(terminal)
        drawn = b""
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # the terminal closed: the tool is done
                break
            if not chunk:
                break
            drawn += chunk
        process.communicate(timeout=120)
    finally:
        os.close(controller)
    assert process.returncode == 0
    return drawn


@pytest.mark.parametrize("command", ["export", "verify", "stats"])
def test_progress_bar_on_a_terminal_and_quiet_when_piped(tool, tmp_path, command):
    path = tmp_path / "progress.db"
    with semidbm.open(path, "c") as database:
        for number in range(20_000):
            database[b"%d" % number] = b"v" * 20
    drawn = run_with_terminal_stderr(tool, command, path)
    assert re.search(rb"\[#*\.*\] +\d+%", drawn), drawn
    assert drawn.endswith(b"\r\x1b[K")  # erased at the end
    piped = run(tool, command, path)
    assert piped.returncode == 0 and piped.stderr == b""


def test_import_draws_a_bar_while_it_checks_then_one_while_it_stores(tool, tmp_path):
    dump = tmp_path / "dump"
    dump.write_bytes(b"".join(b"key%d value\n" % number for number in range(20_000)))
    drawn = run_with_terminal_stderr(tool, "import", dump, tmp_path / "new.db")
    checking = re.search(rb"checking \[#*\.*\] +\d+%", drawn)
    importing = re.search(rb"importing \[#*\.*\] +\d+%", drawn)
    assert checking and importing and checking.start() < importing.start(), drawn
    assert drawn.endswith(b"\r\x1b[K")
