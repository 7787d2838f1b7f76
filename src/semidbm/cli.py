"""The ``semidbm`` command: look into, check, edit and move semidbm databases from the shell.

Installed as the ``semidbm`` console script; ``python -m semidbm`` runs
the same. ``semidbm --help`` lists the subcommands, ``semidbm CMD --help``
explains one.

Exit status: 0 when all went well; 1 for an error (a missing or locked
database, a missing key, an unreadable file), reported as one line on
stderr, never a traceback; 2 for bad arguments; 3 when ``verify`` finds
damage. Long work shows a progress bar on stderr when it is a terminal.
"""

import argparse
import contextlib
import json
import os
import random
import sys
import tempfile
import time
import warnings

from . import __version__, _checks, db, migrate
from ._progress import Progress, human_bytes
from .format import TORN_PREFIX

#: Exit statuses.
OK, FAILED, BAD_ARGUMENTS, DAMAGED = 0, 1, 2, 3


class Failure(Exception):
    """A user's mistake or a refused request, reported as one line on stderr."""


def main(argv=None):
    """Run the tool with ``argv`` (default: the command line); return the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        try:
            return args.run(args)
        except (Failure, OSError, ValueError) as exc:
            if isinstance(exc, BrokenPipeError):
                return _stop_writing()
            _say("error: %s" % describe(exc))
            return FAILED
        except KeyboardInterrupt:
            _say("interrupted")
            return 130


def describe(exc):
    """One line for an error: the operating system's reason and the path, or the message."""
    if isinstance(exc, OSError) and exc.strerror and exc.filename is not None:
        return "%s: %s" % (exc.strerror, os.fsdecode(exc.filename))
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc)


def _say(message):
    sys.stderr.write("semidbm: %s\n" % message)


def _show_warning(message, category, filename, lineno, file=None, line=None):
    _say("warning: %s" % message)


def _stop_writing():
    """The reader of our output went away (``semidbm keys db | head``): stop quietly."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return FAILED


class _Parser(argparse.ArgumentParser):
    """An argument parser whose complaints are one line, pointing at ``--help``."""

    def error(self, message):
        self.exit(
            BAD_ARGUMENTS, "%s: error: %s (see %s --help)\n" % (self.prog, message, self.prog)
        )


def build_parser():
    """The argument parser: one subcommand per job."""
    parser = _Parser(
        prog="semidbm",
        description="Look into, check, edit and move semidbm databases.",
        epilog="Exit status: 0 ok, 1 error, 2 bad arguments, 3 verify found damage.",
    )
    parser.add_argument("--version", action="version", version="semidbm %s" % __version__)
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)

    def command(name, run, help, description=None):
        sub = commands.add_parser(name, help=help, description=description or help)
        sub.set_defaults(run=run)
        return sub

    encoded_help = "KEY (and VALUE) are percent-encoded, as in a dump (for binary keys)"

    sub = command("stats", run_stats, "show keys, live and dead bytes, what compaction would free")
    sub.add_argument("database", metavar="DB")
    sub.add_argument("--json", action="store_true", help="print the numbers as JSON")

    sub = command("get", run_get, "print the value of a key (raw bytes)")
    sub.add_argument("database", metavar="DB")
    sub.add_argument("key", metavar="KEY")
    sub.add_argument("-e", "--encoded", action="store_true", help=encoded_help)

    sub = command("set", run_set, "set a key to a value (read from stdin if VALUE is left out)")
    sub.add_argument("database", metavar="DB")
    sub.add_argument("key", metavar="KEY")
    sub.add_argument("value", metavar="VALUE", nargs="?")
    sub.add_argument("-e", "--encoded", action="store_true", help=encoded_help)
    sub.add_argument("-c", "--create", action="store_true", help="create DB if it is missing")

    sub = command("delete", run_delete, "delete keys (none if any is missing)")
    sub.add_argument("database", metavar="DB")
    sub.add_argument("keys", metavar="KEY", nargs="+")
    sub.add_argument("-e", "--encoded", action="store_true", help=encoded_help)

    sub = command("keys", run_keys, "list the keys, sorted, one a line")
    sub.add_argument("database", metavar="DB")
    sub.add_argument(
        "-e", "--encoded", action="store_true", help="percent-encode them, as in a dump"
    )

    sub = command(
        "verify",
        run_verify,
        "check every record's checksum; exit status 3 on damage",
        "Check every record of the data file: its lengths and its CRC-32. "
        "Reports the offset of each bad record and any torn tail; the exit "
        "status is 3 if anything is damaged.",
    )
    sub.add_argument("database", metavar="DB")

    sub = command("compact", run_compact, "rewrite the data file with only the live records")
    sub.add_argument("database", metavar="DB")

    sub = command(
        "convert",
        run_convert,
        "copy a stdlib dbm database (gnu, ndbm, dumb, sqlite3) into a new semidbm database",
        "Copy any database that the standard library's dbm.open opens "
        "(dbm.gnu, dbm.ndbm, dbm.dumb, and dbm.sqlite3 on Python 3.13 and "
        "later) into the new semidbm database DST.",
    )
    sub.add_argument("source", metavar="SRC", help="as you would pass it to dbm.open")
    sub.add_argument("destination", metavar="DST", help="must not exist yet")

    sub = command(
        "export",
        run_export,
        "write a text dump of a database (one record a line)",
        "Write every record of DB, in key order, to a text dump: one "
        "'KEY VALUE' line a record, both percent-encoded, so any bytes survive. "
        "A DUMP inside DB, or one of DB's files under any name, is refused.",
    )
    sub.add_argument("database", metavar="DB")
    sub.add_argument("dump", metavar="DUMP", nargs="?", default="-", help="file (default: stdout)")

    sub = command(
        "import",
        run_import,
        "store the records of a text dump in a database (created if missing)",
    )
    sub.add_argument("dump", metavar="DUMP", help="file, or - for stdin")
    sub.add_argument("database", metavar="DB")

    sub = command(
        "bench",
        run_bench,
        "a quick timing of semidbm alone: fill, read and delete N keys",
        "A quick timing of semidbm alone on this machine: fill, read (in "
        "random order) and delete N keys in a temporary database. For "
        "side-by-side comparisons with other dbms, run "
        "scripts/nox.sh -s bench (benchmarks/compare.py) in the source tree.",
    )
    sub.add_argument(
        "-n", "--keys", type=_positive, default=100_000, help="number of keys (100000)"
    )
    sub.add_argument("--value-size", type=_positive, default=100, help="bytes per value (100)")
    sub.add_argument("--dir", help="where to put the temporary database (default: the system's)")
    return parser


def _positive(text):
    """An argparse type: a whole number above zero."""
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number <= 0:
        raise argparse.ArgumentTypeError("must be a positive whole number, not %r" % text)
    return number


def _argument_bytes(text, encoded):
    """A key or value from the command line: its original bytes, or decoded from a dump field."""
    if encoded:
        try:
            return migrate.decode_field(text)
        except ValueError as exc:
            raise Failure("%r: %s" % (text, exc)) from None
    return os.fsencode(text)


# --- the subcommands ---


def run_stats(args):
    """``stats``: the numbers of one walk over the log."""
    with Progress("reading", unit="bytes") as progress:
        found = _checks.examine(args.database, progress=progress)
    numbers = {
        "database": found.path,
        "format_version": "%d.%d" % found.version,
        "file_size": found.file_size,
        "keys": found.keys,
        "records": found.records,
        "live_bytes": found.live_bytes,
        "dead_bytes": found.dead_bytes,
        "compaction_frees": found.reclaimable,
        "torn_tail": found.tail,
        "writer_active": found.writer_active,
    }
    if found.corrupt_at is not None:
        numbers["corrupt_at"] = found.corrupt_at
    if args.json:
        print(json.dumps(numbers, indent=2))
        return OK
    share = found.reclaimable / found.file_size if found.file_size else 0
    lines = [
        ("database", found.path),
        ("format version", numbers["format_version"]),
        ("file size", _bytes(found.file_size)),
        ("keys", "{:,}".format(found.keys)),
        ("records", "{:,}".format(found.records)),
        ("live bytes", _bytes(found.live_bytes)),
        ("dead bytes", _bytes(found.dead_bytes)),
        ("compaction frees", "%s (%.1f%%)" % (_bytes(found.reclaimable), share * 100)),
    ]
    if found.tail:
        lines.append(("torn tail", "%s at offset %d" % (_bytes(found.tail), found.tail_offset)))
    if found.corrupt_at is not None:
        lines.append(("corrupt record", "at offset %d (run semidbm verify)" % found.corrupt_at))
    if found.writer_active:
        lines.append(("writer", "a writer has the database open"))
    for name, value in lines:
        print("%-17s %s" % (name, value))
    return OK


def _bytes(count):
    """A byte count for people: exact, with a short form when large."""
    if count < 1024:
        return "{:,} bytes".format(count)
    return "{:,} bytes ({})".format(count, human_bytes(count))


def run_get(args):
    """``get``: the value, raw (a newline only on a terminal), or percent-encoded."""
    key = _argument_bytes(args.key, args.encoded)
    with db.open(args.database) as database:
        try:
            value = database[key]
        except KeyError:
            raise Failure("no key %s in %s" % (repr(args.key), args.database)) from None
    if args.encoded:
        print(migrate.encode_field(value))
        return OK
    sys.stdout.buffer.write(value)
    if sys.stdout.isatty():
        sys.stdout.buffer.write(b"\n")
    sys.stdout.flush()
    return OK


def run_set(args):
    """``set``: one key, its value from the command line or stdin."""
    key = _argument_bytes(args.key, args.encoded)
    if args.value is None:
        value = sys.stdin.buffer.read()
    else:
        value = _argument_bytes(args.value, args.encoded)
    with db.open(args.database, "c" if args.create else "w") as database:
        database[key] = value
    return OK


def run_delete(args):
    """``delete``: all the keys given, or none if one is missing."""
    keys = [_argument_bytes(key, args.encoded) for key in args.keys]
    with db.open(args.database, "w") as database:
        for text, key in zip(args.keys, keys):
            if key not in database:
                raise Failure("no key %s in %s; nothing deleted" % (repr(text), args.database))
        for key in keys:
            if key in database:  # a key given twice
                del database[key]
    return OK


def run_keys(args):
    """``keys``: sorted (by the kernel), one a line, raw or percent-encoded."""
    out = sys.stdout.buffer
    with db.open(args.database) as database:
        with Progress("sorting") as progress:
            _, chunks = database._sorted_lines("encoded keys" if args.encoded else "keys", progress)
        for _, chunk in chunks:
            out.write(chunk)
    out.flush()
    return OK


def run_verify(args):
    """``verify``: every record's lengths and checksum; status 3 on damage."""
    with Progress("verifying", unit="bytes") as progress:
        found = _checks.examine(args.database, check_checksums=True, progress=progress)
    for offset, live in found.bad_checksums:
        print(
            "bad checksum: record at offset %d (%s)"
            % (
                offset,
                "the current value of its key" if live else "an old record, which compaction drops",
            )
        )
    if found.corrupt_at is not None:
        print(
            "corrupt record at offset %d: impossible lengths; the %s from there on cannot be read"
            % (found.corrupt_at, _bytes(found.file_size - found.corrupt_at))
        )
    if found.tail and found.writer_active:
        print(
            "note: %s at offset %d are a write in progress (a writer has the database open)"
            % (_bytes(found.tail), found.tail_offset)
        )
    elif found.tail:
        kept = "%s%d" % (TORN_PREFIX, found.tail_offset)
        if found.tail_needs_recover:
            what = "opening needs recover=True, which keeps them in " + kept
        else:
            what = "opening for writing cuts them off and keeps them in " + kept
        cause = (
            "start with zeros a power cut left (a page the disk did not write?)"
            if found.tail_lost
            else "do not make a whole record (an interrupted write?)"
        )
        print(
            "torn tail: %s at offset %d %s; %s"
            % (_bytes(found.tail), found.tail_offset, cause, what)
        )
    summary = "{:,} records, {:,} keys, {}".format(
        found.records, found.keys, human_bytes(found.file_size)
    )
    if found.damaged:
        problems = []
        if found.bad_checksums:
            count = len(found.bad_checksums)
            problems.append("%d bad checksum%s" % (count, "" if count == 1 else "s"))
        if found.corrupt_at is not None:
            problems.append("a corrupt record")
        if found.tail:
            problems.append("a torn tail")
        print("damaged: %s (%s)" % (", ".join(problems), summary))
        return DAMAGED
    print("ok: every checksum matches (%s)" % summary)
    return OK


def run_compact(args):
    """``compact``: rewrite the data file, say how much that freed."""
    with db.open(args.database, "w") as database:
        data_path = database.path
        before = os.path.getsize(data_path)
        database.compact()
        after = os.path.getsize(data_path)
    print(
        "compacted %s: %s -> %s (freed %s)"
        % (args.database, human_bytes(before), human_bytes(after), human_bytes(before - after))
    )
    return OK


def run_convert(args):
    """``convert``: a stdlib dbm database into a new semidbm one."""
    with Progress("converting") as progress:
        kind, count = migrate.convert(args.source, args.destination, progress=progress)
    print(
        "converted {:,} keys from the {} database {} into the semidbm database {}".format(
            count, kind, args.source, args.destination
        )
    )
    return OK


def run_export(args):
    """``export``: a dump to a file or stdout (then nothing else on stdout).

    Refuses an output into the database itself (its data file, a link to
    it, a new file in its directory), which would destroy it: migrate's
    export_dump checks the path before opening it, and stdout before writing.
    """
    with contextlib.ExitStack() as stack:
        database = stack.enter_context(db.open(args.database))
        sorting = stack.enter_context(Progress("sorting"))
        progress = stack.enter_context(Progress("exporting"))
        if args.dump == "-":
            migrate.export_dump(database, sys.stdout.buffer, progress, sorting)
            sys.stdout.flush()
            return OK
        count = migrate.export_dump(database, args.dump, progress, sorting)
    print("exported {:,} records from {} to {}".format(count, args.database, args.dump))
    return OK


def run_import(args):
    """``import``: a dump from a file or stdin into a database, created if missing."""
    with contextlib.ExitStack() as stack:
        if args.dump == "-":
            stream, total = sys.stdin.buffer, None
        else:
            stream = stack.enter_context(open(args.dump, "rb"))
            total = os.fstat(stream.fileno()).st_size
        database = stack.enter_context(db.open(args.database, "c"))
        progress = stack.enter_context(Progress("importing", unit="bytes"))
        try:
            count = migrate.import_dump(stream, database, lambda done, _: progress(done, total))
        except ValueError as exc:
            raise Failure("%s: %s" % (args.dump, exc)) from None
    print("imported {:,} records from {} into {}".format(count, args.dump, args.database))
    return OK


def run_bench(args):
    """``bench``: a quick fill, read and delete timing of semidbm alone (not a comparison)."""
    count, value = args.keys, b"v" * args.value_size
    keys = [b"key-%012d" % number for number in range(count)]
    shuffled = random.Random(8).sample(keys, len(keys))
    timings = []
    with tempfile.TemporaryDirectory(prefix="semidbm-bench-", dir=args.dir) as place:
        path = os.path.join(place, "bench.db")
        started = time.perf_counter()
        with db.open(path, "n") as database:
            for key in keys:
                database[key] = value
        timings.append(("fill (then close: sync)", time.perf_counter() - started))
        started = time.perf_counter()
        with db.open(path, "r") as database:
            for key in shuffled:
                database[key]
        timings.append(("open and read, random order", time.perf_counter() - started))
        started = time.perf_counter()
        with db.open(path, "w") as database:
            for key in shuffled:
                del database[key]
        timings.append(("open and delete (then close: sync)", time.perf_counter() - started))
    print(
        "semidbm %s, %s kernel: {:,} keys, values of {:,} bytes (quick timing; see "
        "`semidbm bench --help` for fuller benchmarks)".format(count, args.value_size)
        % (__version__, db.implementation)
    )
    for name, seconds in timings:
        print("  %-36s %8.3f s  %12s ops/s" % (name, seconds, "{:,.0f}".format(count / seconds)))
    return OK
