"""The ``semidbm`` command: look into, check, edit and move semidbm databases from the shell.

Installed as the ``semidbm`` console script; ``python -m semidbm`` runs
the same. ``semidbm --help`` lists the subcommands, ``semidbm CMD --help``
explains one.

Exit status: 0 when all went well; 1 for an error (a missing or locked
database, a missing key, an unreadable file), reported as one line on
stderr, never a traceback; 2 for bad arguments; 3 when ``verify`` finds
damage; 130 when interrupted (Ctrl-C, SIGTERM, SIGHUP during ``import``).
Long work shows a progress bar on stderr when it is a terminal.
"""

import argparse
import collections
import contextlib
import json
import os
import random
import signal
import stat
import sys
import tempfile
import threading
import time
import warnings

from . import __version__, _examine, _order, db, migrate, shelf
from ._progress import Progress, human_bytes, quantity
from .format import BATCH_FORMAT, TORN_PREFIX, VERSIONS

#: Exit statuses.
OK, FAILED, BAD_ARGUMENTS, DAMAGED = 0, 1, 2, 3

#: The most bytes ``verify --key-file`` reads of a key file (a key is 16 to a few dozen
#: bytes); a longer file is refused, read no further (``--key-file /dev/zero``).
MAX_KEY_FILE_SIZE = 4096

#: The most keys whose refused signatures ``verify --key-file`` lists; a line counts the rest.
LISTED_REFUSALS = 20


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
        except KeyboardInterrupt as exc:
            _say("interrupted: %s" % exc if str(exc) else "interrupted")
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
        sub.set_defaults(run=run, parser=sub)
        return sub

    def encoded(sub, what):
        sub.add_argument(
            "-e", "--encoded", action="store_true", help=what + ", as in a dump (binary keys)"
        )

    def prefix(sub, what):
        sub.add_argument("-p", "--prefix", metavar="PREFIX", help=what + " that start with PREFIX")

    def shared(sub):
        sub.add_argument(
            "-m",
            "--shared",
            action="store_true",
            help="write as a shared writer (flag 'wm'), beside other processes that do "
            "(docs/sharing.md)",
        )

    sub = command("stats", run_stats, "show keys, live and dead bytes, what compaction would free")
    sub.add_argument("database", metavar="DB")
    sub.add_argument("--json", action="store_true", help="print the numbers as JSON")
    sub.add_argument(
        "--verify",
        action="store_true",
        help="check every record's checksum too, and count the damaged ones (as verify does)",
    )

    sub = command("get", run_get, "print the value of a key (raw bytes)")
    sub.add_argument("database", metavar="DB")
    sub.add_argument("key", metavar="KEY")
    encoded(sub, "KEY is given, and the value printed, percent-encoded")

    sub = command(
        "set",
        run_set,
        "set a key to a value (read from stdin if VALUE is left out)",
        "Set KEY to VALUE in DB. Without VALUE, the value is all of standard "
        "input, raw bytes (semidbm set DB KEY < file); standard input on a "
        "terminal is refused rather than waited on.",
    )
    sub.add_argument("database", metavar="DB")
    sub.add_argument("key", metavar="KEY")
    sub.add_argument("value", metavar="VALUE", nargs="?")
    encoded(sub, "KEY and VALUE are percent-encoded (a value from stdin is raw)")
    sub.add_argument("-c", "--create", action="store_true", help="create DB if it is missing")
    shared(sub)

    sub = command("delete", run_delete, "delete keys (none if any is missing)")
    sub.add_argument("database", metavar="DB")
    sub.add_argument("keys", metavar="KEY", nargs="+")
    encoded(sub, "the KEYs are percent-encoded")
    shared(sub)

    sub = command("keys", run_keys, "list the keys, sorted, one a line")
    sub.add_argument("database", metavar="DB")
    sub.add_argument(
        "-e",
        "--encoded",
        action="store_true",
        help="percent-encode them, as in a dump (and PREFIX is given so)",
    )
    prefix(sub, "list only the keys")

    sub = command(
        "verify",
        run_verify,
        "check every record's checksum; exit status 3 on damage",
        "Check every record of the data file: its lengths and its CRC-32. "
        "Reports the offset of each bad record and any torn tail; the exit "
        "status is 3 if anything is damaged. With --key-file, also check "
        "the signature of every value of a signed shelf.",
    )
    sub.add_argument("database", metavar="DB")
    sub.add_argument(
        "--key-file",
        metavar="FILE",
        help="also check that every value is signed with the signing key held in FILE (all "
        "its bytes, as they are: at most %d; a warning if group or others can read FILE), "
        "as a shelf opened with key= checks it; values that are not are listed by key, and "
        "make the exit status 3; so do values signed for more than one serializer"
        % MAX_KEY_FILE_SIZE,
    )
    sub.add_argument(
        "--serializer",
        metavar="NAME",
        help="with --key-file, also refuse (and list) every value signed for a serializer "
        "other than NAME (pickle, json, or a serializer's own name), as a shelf of that "
        "serializer refuses it",
    )

    sub = command(
        "compact",
        run_compact,
        "rewrite the data file with only the live records",
        "Rewrite the data file of DB with only the live records, checking each "
        "record's checksum as it is copied: a damaged one stops the compaction, "
        "which then changes nothing (exit status 1), unless --recover. So does a "
        "log that cannot be read past some offset when records follow (a damaged "
        "record or batch, not a cut write), unless --recover, which sets the "
        "log from there on aside in data.torn-OFFSET and compacts the records "
        "before it.",
    )
    sub.add_argument("database", metavar="DB")
    sub.add_argument(
        "--recover",
        action="store_true",
        help="leave damaged records out (their keys are then gone), and set an "
        "unreadable tail aside in data.torn-OFFSET, instead of refusing",
    )

    sub = command(
        "upgrade",
        run_upgrade,
        "convert a database to format 2.1, which has atomic batches and expiring values",
        "Rewrite DB in format 2.1 by compacting it, so that it has atomic "
        "batches (Database.batch) and values that expire (Database.set). "
        "semidbm 0.5.1 cannot open a database of format 2; "
        "db.compact(format=1) turns it back. A database of format 2.1 "
        "already is left as it is.",
    )
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
    prefix(sub, "write only the records whose keys")
    encoded(sub, "PREFIX is percent-encoded")

    sub = command(
        "import",
        run_import,
        "store the records of a text dump in a database (created if missing)",
        "Store the records of the dump DUMP in DB, created if it is missing; "
        "a key already there takes the dump's value. The whole dump is checked "
        "first: a malformed line is an error and nothing is written (a dump "
        "on stdin is kept in a temporary file meanwhile). If the import then "
        "fails or is interrupted: a DB it created is removed; an existing DB "
        "of format 2.0 takes the dump as one atomic batch, so it gets all of "
        "it or none (the batch is held in memory until it is written, and a "
        "dump of more than 2 GiB - 1 of records, each 12 bytes more than its "
        "key and value, is refused before anything is written); an existing "
        "DB of format 1.1, or any with --no-batch, keeps the dump's first "
        "records, stored before the failure, and the error says how many (so "
        "that it can, each record is written as it comes, which is slower "
        "than filling a new one).",
    )
    sub.add_argument("dump", metavar="DUMP", help="file, or - for stdin (not a terminal)")
    sub.add_argument("database", metavar="DB")
    sub.add_argument(
        "--no-batch",
        action="store_true",
        help="into a DB of format 2.0, store each record as it comes, as into one of 1.1, "
        "not all or nothing (for a dump too large for one batch, or for the memory)",
    )
    shared(sub)

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
    sub.add_argument(
        "--value-size", type=_not_negative, default=100, help="bytes per value (100; 0 is empty)"
    )
    sub.add_argument("--dir", help="where to put the temporary database (default: the system's)")
    return parser


def _positive(text):
    """An argparse type: a whole number above zero."""
    return _whole_number(text, 1, "a positive whole number")


def _not_negative(text):
    """An argparse type: a whole number, zero or more."""
    return _whole_number(text, 0, "a whole number, 0 or more")


def _whole_number(text, least, what):
    """``text`` as a whole number of ``least`` or more; else an argparse error wanting ``what``."""
    try:
        number = int(text)
    except ValueError:
        number = least - 1
    if number < least:
        raise argparse.ArgumentTypeError("must be %s, not %r" % (what, text))
    return number


def _argument_bytes(text, encoded):
    """A key or value from the command line: its original bytes, or decoded from a dump field."""
    if encoded:
        try:
            return migrate.decode_field(text)
        except ValueError as exc:
            raise Failure("%r: %s" % (text, exc)) from None
    return os.fsencode(text)


def _prefix(args):
    """The bytes of ``--prefix``, percent-decoded with ``--encoded``; None without it."""
    return None if args.prefix is None else _argument_bytes(args.prefix, args.encoded)


# --- the subcommands ---


def run_stats(args):
    """``stats``: the numbers of one walk over the log."""
    with Progress("reading", unit="bytes") as progress:
        found = _examine.examine(args.database, check_checksums=args.verify, progress=progress)
    numbers = {
        "database": found.path,
        "format_version": "%d.%d" % found.version,
        "file_size": found.file_size,
        "keys": found.keys,
        "records": found.records,
        "live_bytes": found.live_bytes,
        "expired_bytes": found.expired_bytes,
        "dead_bytes": found.dead_bytes,
        "compaction_frees": found.reclaimable,
        "torn_tail": found.tail,
        "writer_active": found.writer_active,
    }
    if found.corrupt_at is not None:
        numbers["corrupt_at"] = found.corrupt_at
    if args.verify:
        live = sum(1 for _, is_live in found.bad_checksums if is_live)
        numbers["damaged"] = found.damaged
        numbers["damaged_records"] = len(found.bad_checksums)
        numbers["damaged_live_records"] = live
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
        ("expired bytes", _bytes(found.expired_bytes)),
        ("dead bytes", _bytes(found.dead_bytes)),
        ("compaction frees", _bytes(found.reclaimable, "%.1f%%" % (share * 100))),
    ]
    if found.tail:
        lines.append(("torn tail", "%s at offset %d" % (_bytes(found.tail), found.tail_offset)))
    if found.corrupt_at is not None:
        lines.append(("corrupt record", "at offset %d (run semidbm verify)" % found.corrupt_at))
    if args.verify:
        damage = _damage(found, "{:,} holding a key's current value".format(live))
        lines.append(("damage", "%s; run semidbm verify" % damage if damage else "none"))
    if found.writer_active:
        lines.append(("writer", "a writer has the database open"))
    for name, value in lines:
        print("%-17s %s" % (name, value))
    return OK


def _bytes(count, *more):
    """A byte count for people: exact, then in one bracket its short form when large and ``more``.

    ``more`` is what else the line says of the count (its share of the
    file): ``61,740,000 bytes (58.9 MiB, 50.0%)``, not two brackets in a row.
    """
    notes = ([human_bytes(count)] if count >= 1024 else []) + list(more)
    if not notes:
        return quantity(count, "byte")
    return "%s (%s)" % (quantity(count, "byte"), ", ".join(notes))


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
    """``set``: one key, its value from the command line or stdin (refused if a terminal)."""
    key = _argument_bytes(args.key, args.encoded)
    if args.value is None:
        value = _piped_stdin(args, "VALUE is left out", "give VALUE, or pipe the value in").read()
    else:
        value = _argument_bytes(args.value, args.encoded)
    with db.open(args.database, _writer_flag(args, "c" if args.create else "w")) as database:
        database[key] = value
    return OK


def _writer_flag(args, flag):
    """``flag`` (``'w'`` or ``'c'``), made a shared writer's with ``--shared``."""
    return flag + "m" if args.shared else flag


def run_delete(args):
    """``delete``: all the keys given, or none if one is missing.

    A shared writer holds its turn over the whole command, so that no
    other writer changes the keys between their check and their deletion.
    """
    keys = [_argument_bytes(key, args.encoded) for key in args.keys]
    with contextlib.ExitStack() as stack:
        database = stack.enter_context(db.open(args.database, _writer_flag(args, "w")))
        if args.shared:
            stack.enter_context(database.locked())
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
            _, chunks = database._sorted_lines(
                "encoded keys" if args.encoded else "keys",
                progress,
                *_order.key_range(None, None, _prefix(args)),
            )
        for _, chunk in chunks:
            out.write(chunk)
    out.flush()
    return OK


def run_verify(args):
    """``verify``: every record's lengths and checksum, and with a key file every value's
    signature; status 3 on damage or a refused signature.

    The key is read, and refused if it cannot serve, before the log is.
    """
    if args.key_file is None:
        if args.serializer is not None:
            args.parser.error("--serializer names what --key-file checks: give --key-file too")
        key = None
    else:
        key = _read_key(args)
    name = None if args.serializer is None else _signed_name(args)
    with Progress("verifying", unit="bytes") as progress:
        found = _examine.examine(args.database, check_checksums=True, progress=progress)
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
            "corrupt record at offset %d: impossible lengths, or a malformed batch; the %s "
            "from there on cannot be read"
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
        if found.tail_followed:
            cause += ", and records follow (a damaged record or batch?)"
        print(
            "torn tail: %s at offset %d %s; %s"
            % (_bytes(found.tail), found.tail_offset, cause, what)
        )
    summary = "%s, %s, %s" % (
        quantity(found.records, "record"), quantity(found.keys, "key"), human_bytes(found.file_size)
    )
    if found.damaged:
        print("damaged: %s (%s)" % (_damage(found), summary))
    else:
        print("ok: every checksum matches (%s)" % summary)
    signed = key is None or _verify_signatures(args.database, key, name)
    return OK if signed and not found.damaged else DAMAGED


def _signed_name(args):
    """The name ``args.serializer`` as signed values hold it; exit status 2 if none can."""
    try:
        return shelf._encoded_name(args.serializer)
    except ValueError as exc:
        args.parser.error("--serializer: %s" % exc)


def _read_key(args):
    """The signing key in the file ``args.key_file``: all its bytes; exit status 2 if it cannot
    serve.

    Read from a file, never from the command line, where other users
    can see it (``ps``). No newline is taken off: the key is the bytes
    that a program reads from the same file. A file of more than
    :data:`MAX_KEY_FILE_SIZE` bytes, or a key too short, is a bad
    argument. On POSIX, a file that its group or others can read is
    warned of (on stderr): whoever reads the key can sign anything.
    """
    path = args.key_file
    with open(path, "rb") as handle:
        mode = os.fstat(handle.fileno()).st_mode
        key = handle.read(MAX_KEY_FILE_SIZE + 1)
    if len(key) > MAX_KEY_FILE_SIZE:
        args.parser.error(
            "--key-file %s: more than %d bytes, too many for a signing key"
            % (path, MAX_KEY_FILE_SIZE)
        )
    try:
        shelf._Signing(key)
    except ValueError as exc:
        args.parser.error("--key-file %s: %s" % (path, exc))
    if os.name == "posix" and mode & 0o044:
        _say(
            "warning: %s can be read by other users (mode %04o): whoever reads it can sign "
            "values; chmod 600 it" % (path, stat.S_IMODE(mode))
        )
    return key


#: The most bytes of a key that ``verify`` shows; a longer one is cut, saying its length.
SHOWN_KEY_BYTES = 80


def _shown_key(key):
    """``key`` as ``verify`` shows it: its repr, cut after ``SHOWN_KEY_BYTES`` bytes."""
    if len(key) <= SHOWN_KEY_BYTES:
        return repr(key)
    return "%r... (%s)" % (key[:SHOWN_KEY_BYTES], quantity(len(key), "byte"))


def _verify_signatures(path, key, name):
    """Check the signature of every value of the database ``path``; print what fails.

    Lists the first ``LISTED_REFUSALS`` keys refused, then counts. True
    if every value is signed with ``key`` under its own key, for the
    serializer ``name`` (bytes) if given, else all for one serializer:
    a shelf reads only its own serializer's values, so values of several
    are counted by serializer and make it False. A database that cannot
    be opened (a corrupt record, which the checksum pass has reported)
    is no error here: it is said, and counts as damage, so that the exit
    status stays 3.
    """
    try:
        database = db.open(path)
    except OSError as exc:
        print("signatures not checked: %s" % describe(exc))
        return False
    names = collections.Counter()
    refused = 0
    with database, Progress("checking signatures") as progress:
        values = len(database)
        for stored_key, signed in shelf._signatures(database, key, name, progress):
            if isinstance(signed, bytes):
                names[signed.decode("utf-8", "replace")] += 1
                continue
            refused += 1
            if refused <= LISTED_REFUSALS:
                print("bad signature: key %s: %s" % (_shown_key(stored_key), signed))
    if refused > LISTED_REFUSALS:
        print("... and %d more" % (refused - LISTED_REFUSALS))
    if refused:
        print("refused signatures: %d of %s" % (refused, quantity(values, "value")))
    if len(names) > 1:
        print(
            "signed for %d serializers: %s; a shelf reads one serializer's values (name it "
            "with --serializer to list the others)"
            % (len(names), ", ".join("%r %s" % (each, quantity(count, "value"))
                                     for each, count in sorted(names.items())))
        )
    if refused or len(names) > 1:
        return False
    counted = quantity(values, "value")
    if names:
        counted += ", for the %r serializer" % next(iter(names))
    print("ok: every signature matches (%s)" % counted)
    return True


def _damage(found, of_checksums=None):
    """The damage ``verify`` (and ``stats --verify``) finds in ``found``, in words; "" if none.

    ``found`` is an Examination with checksums checked; ``of_checksums``,
    if given, says more of the bad checksums, in brackets.
    """
    if not found.damaged:
        return ""
    problems = []
    if found.bad_checksums:
        problems.append(quantity(len(found.bad_checksums), "bad checksum"))
        if of_checksums:
            problems[-1] += " (%s)" % of_checksums
    if found.corrupt_at is not None:
        problems.append("a corrupt record")
    if found.tail:
        problems.append("a torn tail")
    return ", ".join(problems)


def run_compact(args):
    """``compact``: rewrite the data file, say how much that freed (and how many damaged
    records ``--recover`` left out, and what it set aside).

    A log that cannot be read past a point that records follow (a damaged
    record or batch, ``Examination.tail_followed``) is refused unless
    ``--recover``: the writer's open would cut it there, keeping those
    records in ``data.torn-OFFSET``, with no more than a warning.
    """
    found = _examine.examine(args.database)
    kept = "%s%d" % (TORN_PREFIX, found.tail_offset) if found.tail_followed else None
    if kept and not args.recover:
        raise Failure(
            "%s cannot be read past offset %d, and records follow (a damaged record or "
            "batch, not a cut write): opening it for writing would set the %s from there "
            "on aside in %s, those records with them; nothing changed. semidbm verify "
            "says more; semidbm compact --recover compacts the records before it"
            % (args.database, found.tail_offset, _bytes(found.tail), kept)
        )
    # Measured before the open, which cuts an unreadable tail off: the
    # size freed counts the tail set aside. ``recover`` lets the open set
    # aside a tail of any length, as --recover asked.
    before = found.file_size
    with db.open(args.database, "w", recover=args.recover) as database:
        damaged = database.compact(recover=args.recover)
        after = os.path.getsize(database.path)
    print(
        "compacted %s: %s -> %s (freed %s)"
        % (args.database, human_bytes(before), human_bytes(after), human_bytes(before - after))
    )
    if damaged:
        print("left out %s, %s" % (
            quantity(damaged, "damaged record"), "and its key" if damaged == 1 else "and their keys"
        ))
    if kept:
        print("set aside %s that could not be read, from offset %d, in %s"
              % (_bytes(found.tail), found.tail_offset, kept))
    return OK


def run_upgrade(args):
    """``upgrade``: compact into the latest format, 2.1, unless the database is of it already."""
    with db.open(args.database, "w") as database:
        before = database.format_version
        if before < VERSIONS[BATCH_FORMAT]:
            database.compact(format=BATCH_FORMAT)
        after = database.format_version
    if before == after:
        print("%s is of format %d.%d already: nothing to do" % ((args.database,) + after))
    else:
        print("upgraded %s from format %d.%d to %d.%d" % ((args.database,) + before + after))
    return OK


def run_convert(args):
    """``convert``: a stdlib dbm database into a new semidbm one."""
    with Progress("converting") as progress:
        kind, count = migrate.convert(args.source, args.destination, progress=progress)
    print(
        "converted %s from the %s database %s into the semidbm database %s"
        % (quantity(count, "key"), kind, args.source, args.destination)
    )
    return OK


def run_export(args):
    """``export``: a dump to a file or stdout (then nothing else on stdout).

    Refuses an output into the database itself (its data file, a link to
    it, a new file in its directory), which would destroy it: migrate's
    export_dump checks the path before opening it, and stdout before writing.
    """
    prefix = _prefix(args)
    with contextlib.ExitStack() as stack:
        database = stack.enter_context(db.open(args.database))
        sorting = stack.enter_context(Progress("sorting"))
        progress = stack.enter_context(Progress("exporting"))
        if args.dump == "-":
            migrate.export_dump(database, sys.stdout.buffer, progress, sorting, prefix=prefix)
            sys.stdout.flush()
            return OK
        count = migrate.export_dump(database, args.dump, progress, sorting, prefix=prefix)
    print("exported %s from %s to %s" % (quantity(count, "record"), args.database, args.dump))
    return OK


def run_import(args):
    """``import``: a dump from a file or stdin into a database, created if missing.

    ``migrate.import_dump`` checks the whole dump before it stores a
    record, so a malformed dump writes nothing. A failure after that (a
    full disk; an interrupt: SIGINT, SIGTERM or SIGHUP, held while a
    record is being stored or the batch written) removes the database
    if this import created it. An existing one is opened unbuffered and
    takes the dump as ``_storing`` says: in one batch, all or nothing,
    or record by record, so that the error can say exactly how many of
    the dump's records it holds: the first N, in order. With ``--shared``
    a database it created is never removed (other writers may have
    joined it at once): it keeps the records stored, as an existing one.
    """
    created = not args.shared and not os.path.lexists(args.database)
    with _catching_interrupts() as interrupts, contextlib.ExitStack() as stack:
        if args.dump == "-":
            stream = _piped_stdin(args, "DUMP is -", "give a file, or pipe the dump in")
        else:
            stream = stack.enter_context(open(args.dump, "rb"))
        database = made = sink = None
        try:
            with interrupts if created else contextlib.nullcontext():
                database = db.open(
                    args.database,
                    _writer_flag(args, "c"),
                    **({} if created else {"buffer_size": 0}),
                )
                made = os.lstat(args.database) if created else None
            sink = _storing(database, created or args.no_batch, interrupts)
            checking = stack.enter_context(Progress("checking", unit="bytes"))
            importing = stack.enter_context(Progress("importing", unit="bytes"))
            count = migrate.import_dump(stream, sink.target, importing, check_progress=checking)
            with interrupts:  # not cut short: it commits, writes out and syncs
                sink.commit(count)
                database.close()
        except BaseException as exc:
            interrupts.hold()
            if sink is not None:
                sink.discard()
            if database is not None:
                _close_after_failure(database)
            if made is not None:
                _remove_created(args.database, made)
            kept = sink.stored if sink is not None and made is None else 0
            failure = _import_failure(exc, args, kept)
            if failure is None:
                raise
            raise failure from None
    print(
        "imported %s from %s into %s" % (quantity(count, "record"), _dump_name(args), args.database)
    )
    return OK


def _dump_name(args):
    """The dump of an ``import``, as its messages name it: its path, or "stdin"."""
    return "stdin" if args.dump == "-" else args.dump


def _piped_stdin(args, missing, instead):
    """Standard input's bytes, for ``args``'s command to read what it lacks (``missing``).

    A terminal is refused as a bad argument (status 2), saying what to do
    ``instead``, rather than read until Ctrl-D: a user who left an
    argument out would see the command wait for no visible reason. So is
    a closed standard input.
    """
    if sys.stdin is None or sys.stdin.isatty():
        where = "closed" if sys.stdin is None else "a terminal"
        args.parser.error("%s and standard input is %s: %s" % (missing, where, instead))
    return sys.stdin.buffer


def _import_failure(exc, args, stored):
    """What reports ``exc``, which stopped an import that left ``stored`` records (None: itself)."""
    if stored:
        outcome = "the dump's first %s went into %s, the rest did not" % (
            quantity(stored, "record"),
            args.database,
        )
    else:
        outcome = "nothing imported"
    if isinstance(exc, KeyboardInterrupt):
        return KeyboardInterrupt(outcome)
    if isinstance(exc, ValueError):
        return Failure("%s: %s; %s" % (_dump_name(args), exc, outcome))
    if isinstance(exc, OSError):
        return Failure("%s; %s" % (describe(exc), outcome))
    return None


def _close_after_failure(database):
    """Close ``database`` after a failed import, dropping an error (a full disk) in closing."""
    try:
        database.close()
    except OSError:
        pass


def _remove_created(path, made):
    """Remove the database at ``path`` that this run created; ``made`` is its directory's lstat.

    Only if ``path`` is still that directory: a symlink or another
    directory put there since is left alone. Only a new database's files
    go (``db._remove_new_database``), and the directory only if that
    empties it.
    """
    try:
        now = os.lstat(path)
    except OSError:
        return
    if stat.S_ISDIR(now.st_mode) and os.path.samestat(now, made):
        db._remove_new_database(path)


def _storing(database, record_by_record, interrupts):
    """How an import stores records in ``database``: a ``_Counted`` or an ``_InOneBatch``.

    In one batch, all or nothing, where the database has batches (format
    2.0), unless ``record_by_record`` asks otherwise (a database the
    import created, which a failure removes whole; ``--no-batch``).
    """
    if record_by_record or database.format_version[0] < BATCH_FORMAT:
        return _Counted(database, interrupts)
    return _InOneBatch(database)


class _Counted:
    """The database as an import writes it record by record: counts the records, each stored whole.

    A signal that ``interrupts`` turns into KeyboardInterrupt is held
    while a record is stored and raised after it, so the count is exact.
    """

    def __init__(self, database, interrupts):
        self._database = database
        self._interrupts = interrupts
        #: The records in the database so far.
        self.stored = 0

    @property
    def target(self):
        """What ``migrate.import_dump`` stores the records in: this, which counts them."""
        return self

    def __setitem__(self, key, value):
        with self._interrupts:
            self._database[key] = value
            self.stored += 1

    def commit(self, count):
        """Nothing left to do: each of the ``count`` records went in as it came."""

    def discard(self):
        """Nothing to discard: the records stored stay (``stored`` counts them)."""


class _InOneBatch:
    """The database as an import writes it all or nothing: one batch, held in memory until written.

    A failure or an interrupt before :meth:`commit` discards the batch:
    the database gets none of the dump. ``migrate.import_dump`` refuses,
    before it stores anything, a dump too large for a batch.
    """

    def __init__(self, database):
        #: What ``migrate.import_dump`` stores the records in.
        self.target = database.batch()
        #: The records in the database: none until the commit, then all.
        self.stored = 0
        #: Whether the batch committed (a failure after that, in the close, leaves it).
        self.committed = False

    def commit(self, count):
        """Write the batch: the dump's ``count`` records reach the database together."""
        self.target.commit()
        self.committed, self.stored = True, count

    def discard(self):
        """After a failure: roll the batch back, unless it committed (then it stays)."""
        if not self.committed:
            self.target.rollback()


#: The signals that interrupt an import, which then cleans up (Ctrl-C, kill, a closed terminal).
_INTERRUPTING = [
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
]


@contextlib.contextmanager
def _catching_interrupts():
    """Turn the interrupting signals into KeyboardInterrupt while it lasts; yield the _Interrupts.

    A signal that is ignored (``nohup``, a background job) stays ignored.
    Handlers can be set only in the main thread: in another, nothing
    changes, and the signals are the main thread's business.
    """
    interrupts = _Interrupts()
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for number in _INTERRUPTING:
            if signal.getsignal(number) != signal.SIG_IGN:
                previous[number] = signal.signal(number, interrupts.arrived)
    try:
        yield interrupts
    finally:
        for number, handler in previous.items():
            signal.signal(number, signal.SIG_DFL if handler is None else handler)


class _Interrupts:
    """Raises an interrupting signal as KeyboardInterrupt, but never in the middle of a step.

    ``with interrupts:`` marks a step that must not be cut in two (a
    record being stored and counted): a signal that arrives during it is
    raised when the step ends. After :meth:`hold` (the cleanup after a
    failure), none is raised at all.
    """

    def __init__(self):
        self._in_step = False
        self._pending = False
        self._holding = False

    def arrived(self, number, frame):
        """The signal handler: raise now, or after the step under way."""
        if self._in_step or self._holding:
            self._pending = True
            return
        raise KeyboardInterrupt

    def hold(self):
        """Raise no signal from now on: what follows must run to its end."""
        self._holding = True

    def __enter__(self):
        self._in_step = True
        return self

    def __exit__(self, kind, value, traceback):
        self._in_step = False
        if self._pending and kind is None and not self._holding:
            self._pending = False
            raise KeyboardInterrupt


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
        "semidbm %s, %s kernel: %s, values of %s (quick timing; see "
        "`semidbm bench --help` for fuller benchmarks)"
        % (__version__, db.implementation, quantity(count, "key"), _bytes(args.value_size))
    )
    for name, seconds in timings:
        print("  %-36s %8.3f s  %12s ops/s" % (name, seconds, "{:,.0f}".format(count / seconds)))
    return OK
