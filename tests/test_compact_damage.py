"""A compaction checks the checksum of every record it copies (docs/FORMAT.md, "Compaction").

Reads do not check checksums by default, but a compaction reads every
byte it copies: a damaged live record is refused (``DBMChecksumError``
naming its key and offset, the database unchanged), or with
``recover=True`` left out and counted. Both kernels, on files built by
hand and on damage that happens while a writer has the database open;
the case where the copy would land where the lost-data rule ends the
new log; a record damaged in its key or lengths, which the walk cannot
find by its key or read past, so that the copy starts again from the
index; and the command's ``compact --recover`` and ``stats --verify``.
Without the check in the kernels' walk (the CRC-32 comparison of the
compiled kernel's ``write_live``, the ``checksum_matches`` of the pure
kernel's ``_write_live_records``) every test here of a damaged value
fails; the tests of damaged keys and lengths each say what they catch.
"""

import json
import os
import warnings

import pytest

import semidbm
from semidbm import _checkpoint, _kernel, cli, db
from semidbm._progress import human_bytes
from semidbm.format import DISK_PAGE, HEADER, LENGTHS_SIZE

from .support.log import records_after_start
from .support.records import data_bytes, delete_record, put_record, write_data


def damaged(record):
    """``record`` (a put) with the first byte of its value changed, its checksum left as it was."""
    at = LENGTHS_SIZE + int.from_bytes(record[:4], "big")
    return record[:at] + bytes([record[at] ^ 0x01]) + record[at + 1 :]


BEFORE, AFTER = put_record(b"a", b"1"), put_record(b"c", b"3")
DAMAGED = damaged(put_record(b"b", b"value"))


def test_a_damaged_live_record_is_refused_and_nothing_changes(dbopen, dbpath):
    write_data(dbpath, BEFORE, DAMAGED, AFTER)
    with dbopen(dbpath, "w") as database:
        with pytest.raises(semidbm.DBMChecksumError) as refused:
            database.compact()
        message = str(refused.value)
        offset = len(HEADER) + len(BEFORE)
        assert "checksum mismatch in the record of key b'b' at offset %d" % offset in message
        assert "compact(recover=True)" in message
        assert data_bytes(dbpath) == HEADER + BEFORE + DAMAGED + AFTER
        assert sorted(os.listdir(dbpath)) == ["data", "lock"]  # no data.compact left behind
        database[b"d"] = b"4"  # the database works on
    with dbopen(dbpath) as database:
        assert sorted(database.keys()) == [b"a", b"b", b"c", b"d"]


def test_recover_leaves_the_damaged_record_out_and_says_how_many(dbopen, dbpath, kernel):
    write_data(dbpath, BEFORE, DAMAGED, put_record(b"b2", b"x"), damaged(AFTER))
    with dbopen(dbpath, "w") as database:
        assert database.compact(recover=True) == 2
        assert dict(database.items()) == {b"a": b"1", b"b2": b"x"}
        assert database.compact() == 0
    assert records_after_start(data_bytes(dbpath)) == BEFORE + put_record(b"b2", b"x")


def test_a_damaged_record_that_is_no_longer_live_is_not_copied_and_not_refused(dbopen, dbpath):
    write_data(dbpath, BEFORE, DAMAGED, put_record(b"b", b"new"))
    with dbopen(dbpath, "w") as database:
        assert database.compact() == 0
        assert dict(database.items()) == {b"a": b"1", b"b": b"new"}


def damage_the_value(dbpath, value):
    """Change a byte of the last copy of ``value`` in the data file of ``dbpath``, in place."""
    data = bytearray(data_bytes(dbpath))
    at = data.rindex(value)
    data[at] ^= 0x01
    with open(dbpath / "data", "r+b") as file:  # the same file, which the writer has open
        file.seek(at)
        file.write(data[at : at + 1])
    return at


def test_damage_after_the_writer_opened_is_found(dbopen, dbpath):
    with dbopen(dbpath, "c", format=2) as database:
        database[b"a"] = b"1"
        database[b"b"] = b"value"
        database.sync()
        damage_the_value(dbpath, b"value")
        with pytest.raises(semidbm.DBMChecksumError, match="key b'b' at offset"):
            database.compact()
        assert database.compact(recover=True) == 1
        assert dict(database.items()) == {b"a": b"1"}


def replace_in_place(dbpath, old, new):
    """Replace the bytes ``old`` by ``new`` (as long) in the data file of ``dbpath``, in place."""
    data = data_bytes(dbpath)
    at = data.index(old)
    with open(dbpath / "data", "r+b") as file:  # the same file, which the writer has open
        file.seek(at)
        file.write(new)
    return data


@pytest.mark.parametrize(
    "old, new",
    [
        (b"beta", b"bexa"),  # the key's bytes
        # The lengths, moved by one byte between key and value: the record ends where it did.
        ((4).to_bytes(4, "big") + (8).to_bytes(4, "big"),
         (5).to_bytes(4, "big") + (7).to_bytes(4, "big")),
    ],
    ids=["key", "lengths"],
)
def test_a_live_record_damaged_in_its_key_or_lengths_is_refused_or_counted(
    dbopen, dbpath, old, new
):
    """A live record that no longer reads as its key is not dropped unseen.

    The walk finds a live record by the key it reads there: damaged,
    ``beta`` read as ``bexa`` (or ``betaB``), a key not live, and the
    record was skipped as dead, compact() returning 0. Catches the
    compaction without ``_compaction.all_copied``, its count of the
    records copied against the live ones.
    """
    with dbopen(dbpath, "c") as database:
        database[b"alpha"] = b"A" * 8
        database[b"beta"] = b"B" * 8
        database[b"gamma"] = b"C" * 8
        database.sync()
        before = replace_in_place(dbpath, old, new)
        beta_at = before.index(b"beta") - LENGTHS_SIZE
        with pytest.raises(semidbm.DBMChecksumError) as refused:
            database.compact()
        message = str(refused.value)
        assert "the live record at offset %d is damaged" % beta_at in message
        assert "compact(recover=True)" in message
        assert data_bytes(dbpath) == before.replace(old, new)  # nothing changed
        assert sorted(os.listdir(dbpath)) == ["data", "lock"]
        assert database.compact(recover=True) == 1
    with dbopen(dbpath) as database:
        assert dict(database.items()) == {b"alpha": b"A" * 8, b"gamma": b"C" * 8}


def test_a_batch_damaged_after_the_writer_opened_loses_only_its_damaged_record(dbopen, dbpath):
    """A batch's records are judged one by one, as any others, on both kernels.

    Its body's checksum, which the replay checked, fails now; reopened,
    the replay would read the batch as lost data, but the writer's index
    still holds its keys: the damaged record is named, or with
    ``recover=True`` left out, and the batch's sound record copied.
    Catches the pure kernel's walk, which stops at the batch, refusing
    it as a log changed under the writer while the compiled kernel's
    walk steps into the batch (the kernels disagreed).
    """
    with dbopen(dbpath, "c", format=2) as database:
        database[b"a"] = b"1"
        with database.batch() as batch:
            batch[b"b"] = b"value"
            batch[b"c"] = b"3"
        database.sync()
        before = data_bytes(dbpath)
        b_at = before.index(put_record(b"b", b"value"))
        damage_the_value(dbpath, b"value")
        with pytest.raises(semidbm.DBMChecksumError, match="key b'b' at offset %d" % b_at):
            database.compact()
        assert database.compact(recover=True) == 1
        assert dict(database.items()) == {b"a": b"1", b"c": b"3"}
    with dbopen(dbpath) as reader:
        assert dict(reader.items()) == {b"a": b"1", b"c": b"3"} and reader.torn_tail is None


def test_a_damaged_record_copied_where_the_new_log_would_end_it_as_lost_data(dbopen, dbpath):
    # Compacted, the damaged record is the first live one: it starts right after the new
    # log's start. Its value's zeros are placed so that, there, a page boundary falls
    # beside them, where the lost-page rule reads its checksum, finds it wrong and ends
    # the log: copied unchecked, it would take "f" and "after" with it.
    key = b"k"
    zeros_at = DISK_PAGE - _checkpoint.START_SIZE - LENGTHS_SIZE - len(key)
    value = b"v" * zeros_at + bytes(2) + b"v" * 50
    bad = damaged(put_record(key, value))
    assert bad[-1] != 0, "its last byte alone would have the replay check it in the old file"
    # In the old file it starts at page + 100 after a dead filler: no boundary beside a zero.
    filler = put_record(b"f", b"x" * (DISK_PAGE + 100 - len(HEADER) - LENGTHS_SIZE - 5))
    later = put_record(b"f", b"1") + put_record(b"after", b"kept")
    write_data(dbpath, filler, bad, later)
    with dbopen(dbpath, "r") as reader:  # the old file reads whole: nothing looks lost
        assert sorted(reader.keys()) == [b"after", b"f", key] and reader.torn_tail is None

    # The hazard: the copy an unchecked compaction would write ends the log at the record.
    copy = dbpath.parent / "unchecked.db"
    copy.mkdir()
    (copy / "data").write_bytes(_checkpoint.new_log(1) + bad + later)
    with pytest.warns(semidbm.TornTailWarning), dbopen(copy, "r") as reader:
        assert list(reader.keys()) == []

    with dbopen(dbpath, "w") as database:
        with pytest.raises(semidbm.DBMChecksumError, match="key b'k' at offset %d" % (
                len(HEADER) + len(filler))):
            database.compact()
        assert database.compact(recover=True) == 1
    with dbopen(dbpath, "r") as reader:
        assert dict(reader.items()) == {b"f": b"1", b"after": b"kept"}
        assert reader.torn_tail is None


def test_the_command_refuses_then_recovers_and_stats_counts_the_damage(
    dbopen, dbpath, monkeypatch, capsys
):
    write_data(dbpath, BEFORE, DAMAGED, AFTER, damaged(put_record(b"a", b"old")), BEFORE)
    monkeypatch.setattr(db, "open", dbopen)  # the kernel under test
    assert cli.main(["stats", str(dbpath)]) == 0
    assert "damaged" not in capsys.readouterr().out  # not checked unless asked
    assert cli.main(["stats", "--verify", str(dbpath)]) == 0
    assert "damage            2 bad checksums (1 holding a key's current value); run semidbm " \
        "verify\n" in capsys.readouterr().out
    assert cli.main(["stats", "--verify", "--json", str(dbpath)]) == 0
    numbers = json.loads(capsys.readouterr().out)
    assert (numbers["damaged"], numbers["damaged_records"], numbers["damaged_live_records"]) == (
        True, 2, 1
    )

    assert cli.main(["compact", str(dbpath)]) == 1
    assert "checksum mismatch in the record of key b'b'" in capsys.readouterr().err
    assert cli.main(["compact", "--recover", str(dbpath)]) == 0
    assert capsys.readouterr().out.endswith("left out 1 damaged record, and its key\n")
    assert cli.main(["stats", "--verify", str(dbpath)]) == 0
    assert "damage            none\n" in capsys.readouterr().out


def test_the_command_finds_a_damaged_batch_and_compacts_past_it_only_with_recover(
    dbopen, dbpath, monkeypatch, capsys
):
    """A damaged batch, records after it: stats --verify and compact see what verify sees.

    The replay reads the batch as a torn tail, whatever follows, so the
    walk stops there. Catches ``stats --verify`` counting bad checksums
    alone ("damaged records none" while verify exits 3), and ``compact``
    letting the writer's open set the batch and the records after it
    aside with only a warning (``Examination.tail_followed`` unchecked).
    """
    with dbopen(dbpath, "c", format=2) as database:
        database[b"a"] = b"1"
        with database.batch() as batch:
            batch[b"b"] = b"value"
        database[b"c"] = b"after"
    damage_the_value(dbpath, b"value")
    before, listing = data_bytes(dbpath), sorted(os.listdir(dbpath))
    batch_at = before.index(put_record(b"b", b"value")[:LENGTHS_SIZE]) - 12
    monkeypatch.setattr(db, "open", dbopen)  # the kernel under test
    assert cli.main(["verify", str(dbpath)]) == 3
    assert "and records follow (a damaged record or batch?)" in capsys.readouterr().out
    assert cli.main(["stats", "--verify", str(dbpath)]) == 0
    assert "damage            a torn tail; run semidbm verify\n" in capsys.readouterr().out
    assert cli.main(["stats", "--verify", "--json", str(dbpath)]) == 0
    assert json.loads(capsys.readouterr().out)["damaged"] is True

    assert cli.main(["compact", str(dbpath)]) == 1
    assert "cannot be read past offset %d, and records follow" % batch_at in (
        capsys.readouterr().err
    )
    assert data_bytes(dbpath) == before and sorted(os.listdir(dbpath)) == listing
    with warnings.catch_warnings():
        warnings.simplefilter("always")  # shown as the command shows it, not an error
        assert cli.main(["compact", "--recover", str(dbpath)]) == 0
    out, err = capsys.readouterr()
    assert out.endswith(
        "set aside %d bytes that could not be read, from offset %d, in data.torn-%d\n"
        % (len(before) - batch_at, batch_at, batch_at)
    )
    assert "warning: %s: dropped a torn tail" % (dbpath / "data") in err
    assert (dbpath / ("data.torn-%d" % batch_at)).read_bytes() == before[batch_at:]
    with dbopen(dbpath) as reader:
        assert dict(reader.items()) == {b"a": b"1"}


def test_the_command_recovers_past_an_unreadable_tail_longer_than_a_buffer(
    dbopen, dbpath, monkeypatch, capsys
):
    """``compact --recover``, the command its own refusal names, sets a long tail aside.

    The first record's value length is made to run past the end, so the
    log cannot be read past it while 300 records of 8 KB follow: more
    than the 1 MiB an open drops without ``recover=True``. Catches the
    command opening without ``recover=True`` (the open refused, exit
    status 1), and measuring the size before the compaction after the
    open had cut the tail ("114 B -> 114 B (freed 0 B)").
    """
    with dbopen(dbpath, "c") as database:
        for number in range(300):
            database[b"%d" % number] = b"v" * 8192
    data = bytearray(data_bytes(dbpath))
    first = _checkpoint.START_SIZE
    data[first + 4 : first + 8] = (0x7FFF0000).to_bytes(4, "big")
    (dbpath / "data").write_bytes(bytes(data))
    monkeypatch.setattr(db, "open", dbopen)  # the kernel under test
    assert cli.main(["compact", str(dbpath)]) == 1
    assert "cannot be read past offset %d, and records follow" % first in capsys.readouterr().err
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", semidbm.TornTailWarning)
        assert cli.main(["compact", "--recover", str(dbpath)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("compacted %s: %s -> " % (dbpath, human_bytes(len(data)))), out
    assert "(freed 0 B)" not in out
    assert (dbpath / ("data.torn-%d" % first)).read_bytes() == bytes(data[first:])
    with dbopen(dbpath) as reader:
        assert len(reader) == 0



def set_value_length(dbpath, at, length):
    """Set the value length of the record at offset ``at`` of the data file of ``dbpath``, in place.

    In place, while a writer has the database open: its index still
    points at every record as the sound log had them.
    """
    with open(dbpath / "data", "r+b") as file:
        file.seek(at + 4)
        file.write(length.to_bytes(4, "big"))


@pytest.mark.parametrize("recover", [False, True])
def test_a_damaged_length_in_a_dead_record_that_skips_sound_ones_loses_none(
    dbopen, dbpath, recover
):
    """A dead record's value length that now ends it on a later record's start.

    The walk jumps over the sound live record ``b`` between them. Catches
    the count of copied records taking ``b`` for damaged: refused naming
    an intact record (or offset 0, the header, on the compiled kernel),
    and with ``recover=True`` ``b`` deleted.
    """
    old, middle = put_record(b"a", b"old"), put_record(b"b", b"sound")
    write_data(dbpath, old, middle, AFTER, BEFORE)
    with dbopen(dbpath, "w") as database:
        set_value_length(dbpath, len(HEADER), 3 + len(middle))
        assert database.compact(recover=recover) == 0
        assert dict(database.items()) == {b"a": b"1", b"b": b"sound", b"c": b"3"}
    assert records_after_start(data_bytes(dbpath)) == middle + AFTER + BEFORE


def test_a_damaged_length_in_a_live_record_is_named_and_only_it_left_out(dbopen, dbpath):
    """A live record's value length that now ends it on the start of the one after next.

    Catches a refusal naming the sound record the walk jumped over
    (offset 124 where ``b`` is at 110), and ``recover=True`` leaving out
    that sound record with the damaged one (2 where 1 is right).
    """
    last = put_record(b"d", b"4")
    write_data(dbpath, BEFORE, put_record(b"b", b"value"), AFTER, last)
    at = len(HEADER) + len(BEFORE)
    with dbopen(dbpath, "w") as database:
        set_value_length(dbpath, at, 5 + len(AFTER))
        with pytest.raises(semidbm.DBMChecksumError) as refused:
            database.compact()
        assert "checksum mismatch in the record of key b'b' at offset %d" % at in str(
            refused.value)
        assert database.compact(recover=True) == 1
        assert dict(database.items()) == {b"a": b"1", b"c": b"3", b"d": b"4"}
    assert records_after_start(data_bytes(dbpath)) == BEFORE + AFTER + last


@pytest.mark.parametrize(
    "change", [-2, 3, 7, 1000], ids=["shorter", "into-lengths", "into-key", "past-the-log"]
)
def test_a_damaged_length_that_ends_a_live_record_inside_the_next_is_named_or_left_out(
    dbopen, dbpath, change
):
    """A live record's value length that now ends it inside a record, or past the log.

    Both kernels name the record and, with ``recover=True``, leave out it
    alone: the walk that landed inside the next record stops, and the
    copy from the index's offsets finds ``c`` and ``d`` sound. Catches
    the walk reading on from where the damaged length ends, which
    refused the compaction as a log "changed under the open database",
    recover or not (``into-lengths`` ends ``b`` on zeros, where the pure
    kernel's lost-data rule stopped it; ``past-the-log`` ran past the end).
    """
    last = put_record(b"d", b"4")
    write_data(dbpath, BEFORE, put_record(b"b", b"value"), AFTER, last)
    at = len(HEADER) + len(BEFORE)
    with dbopen(dbpath, "w") as database:
        set_value_length(dbpath, at, len(b"value") + change)
        with pytest.raises(semidbm.DBMChecksumError) as refused:
            database.compact()
        assert "checksum mismatch in the record of key b'b' at offset %d" % at in str(
            refused.value)
        assert sorted(os.listdir(dbpath)) == ["data", "lock"]
        assert database.compact(recover=True) == 1
        assert dict(database.items()) == {b"a": b"1", b"c": b"3", b"d": b"4"}
    assert records_after_start(data_bytes(dbpath)) == BEFORE + AFTER + last


@pytest.mark.parametrize("recover", [False, True])
def test_a_damaged_key_length_that_lands_the_walk_inside_a_record_loses_none(
    dbopen, dbpath, recover
):
    """A dead record's key length that ends it inside the live record after it.

    The walk cannot read on; the copy from the index's offsets finds
    every live record sound, so nothing is refused or left out. Catches
    the walk's stop taken as a log changed under the writer (refused,
    recover or not).
    """
    old, sound = put_record(b"a", b"old"), put_record(b"b", b"sound")
    write_data(dbpath, old, sound, BEFORE)
    with dbopen(dbpath, "w") as database:
        with open(dbpath / "data", "r+b") as file:  # in place: the index is the sound log's
            file.seek(len(HEADER))
            file.write((1 + len(old) + 3).to_bytes(4, "big"))
        assert database.compact(recover=recover) == 0
        assert dict(database.items()) == {b"a": b"1", b"b": b"sound"}
    assert records_after_start(data_bytes(dbpath)) == sound + BEFORE


def test_both_kernels_name_the_first_damaged_live_record_in_log_order(dbopen, dbpath):
    """Damage in several places: the refusal names the first damaged live record, on both kernels.

    ``L1``'s key is damaged (the walk takes it for a dead record), the
    dead ``a`` after it ends in zeros (the pure kernel's walk stops
    there, by the lost-data rule; the compiled one's walks on), and
    ``L2``'s value is damaged. Catches the compiled kernel's walk naming
    ``L2``, the first damaged record it could read as live, where the
    pure kernel named ``L1`` (the walk judged instead of the copy from
    the index).
    """
    l1, old, l2 = put_record(b"L1", b"one"), put_record(b"a", b"old"), put_record(b"L2", b"two")
    write_data(dbpath, l1, old, l2, BEFORE)
    with dbopen(dbpath, "w") as database:
        with open(dbpath / "data", "r+b") as file:  # in place: the index is the sound log's
            file.seek(len(HEADER) + LENGTHS_SIZE)
            file.write(b"X")
            file.seek(len(HEADER) + len(l1) + len(old) - 5)
            file.write(bytes(5))
            file.seek(len(HEADER) + len(l1) + len(old) + LENGTHS_SIZE + 2)
            file.write(b"T")
        with pytest.raises(semidbm.DBMChecksumError) as refused:
            database.compact()
        assert "the live record at offset %d is damaged" % len(HEADER) in str(refused.value)
        assert database.compact(recover=True) == 2
    with dbopen(dbpath) as database:
        assert dict(database.items()) == {b"a": b"1"}


def test_the_pure_kernel_refuses_a_log_cut_under_the_writer(dbpath):
    """A data file shorter than the log the writer read is a file changed under it.

    The pure-Python kernel alone: the compiled one maps the file, and a
    file cut under it is a documented limit (docs/limits.md). Catches the
    walk taking the cut for damage and copying from the index, which
    leaves the records past the cut out as damaged (``recover=True``).
    """
    write_data(dbpath, BEFORE, AFTER)
    with db.open_with(_kernel.load("python"), dbpath, "w") as database:
        os.truncate(dbpath / "data", len(HEADER) + len(BEFORE))
        with pytest.raises(semidbm.error, match="changed under the open database at offset %d"
                           % (len(HEADER) + len(BEFORE))):
            database.compact(recover=True)
        assert sorted(os.listdir(dbpath)) == ["data", "lock"]


def test_zeros_over_a_live_empty_keys_lengths_are_no_sound_empty_record(dbopen, dbpath):
    """Zeros over ``b''``'s value length and its value's first bytes read as twelve zero bytes.

    Twelve zero bytes are a record whose checksum of nothing matches (0),
    so the CRC-32 alone takes them for ``b''`` set to ``b''``; as the
    replay reads zero runs, they are sound only if a sound record follows
    the run (docs/FORMAT.md, "Zero runs"). Catches the compiled kernel,
    whose index holds no value lengths, copying ``b''`` with an empty
    value and returning 0 (``sound_live_size`` without its zero-run rule).
    """
    write_data(dbpath, put_record(b"", b"important value"), BEFORE, AFTER)
    with dbopen(dbpath, "w") as database:
        with open(dbpath / "data", "r+b") as file:  # a lost sector's zeros
            file.seek(len(HEADER) + 4)
            file.write(bytes(12))
        with pytest.raises(semidbm.DBMChecksumError, match="key b'' at offset %d" % len(HEADER)):
            database.compact()
        assert database.compact(recover=True) == 1
    with dbopen(dbpath) as database:
        assert dict(database.items()) == {b"a": b"1", b"c": b"3"}


def test_the_seal_takes_a_key_the_old_log_holds_none_of_on_both_kernels(dbopen, dbpath, kernel):
    """A compaction that leaves ``b'\\0'`` out and ends in the empty record seals it alike.

    The seal's key is the shortest run of zero bytes the database does
    not hold; both kernels ask the index of the log being compacted, so
    ``b'\\0'`` (live there, left out of the copy) is not taken. Catches
    the pure kernel asking the new index (a seal of ``b'\\0'``: other
    bytes than the compiled kernel's).
    """
    zero, empty = put_record(b"\x00", b"vv"), put_record(b"", b"")
    # A sound record follows the empty one (it is no lost page), then goes.
    write_data(dbpath, zero, empty, put_record(b"z", b"e"), delete_record(b"z"))
    with dbopen(dbpath, "w") as database:
        with open(dbpath / "data", "r+b") as file:
            file.seek(len(HEADER) + LENGTHS_SIZE + 1)  # b'\0''s value
            file.write(b"X")
        assert database.compact(recover=True) == 1
    key = b"\x00\x00"
    assert records_after_start(data_bytes(dbpath)) == (
        empty + put_record(key, b"") + delete_record(key))


def test_with_an_index_file_a_damaged_live_record_is_judged_without_dropping_it(
    dbopen, dbpath, kernel
):
    """An index file mapped, ``b``'s value length damaged to run past the log.

    The compiled kernel's lookup there finds the slot's record unsound:
    the compaction counts it damaged, naming the key as the pure kernel
    does, and keeps the index it copies by. Catches a lookup that drops
    the index file mid-compaction (``keys_find`` for ``keys_find_kept``):
    the keys were then rebuilt from the damaged log, ``b``'s dead value
    came back, and the records past the damage were lost.
    """
    with dbopen(dbpath, "c") as database:
        database[b"b"] = b"old"
        database[b"b"] = b"new"
        for number in range(5):
            database[b"f%d" % number] = b"%d" % number * (1 << 20)
    # The compiled kernel writes an index file at this close; the pure one never does.
    assert ("index" in os.listdir(dbpath)) == (kernel.__name__ == "semidbm._core")
    live_b = data_bytes(dbpath).index(put_record(b"b", b"new"))
    with dbopen(dbpath, "w") as database:
        set_value_length(dbpath, live_b, 10**9)
        with pytest.raises(semidbm.DBMChecksumError,
                           match="key b'b' at offset %d" % live_b):
            database.compact()
        assert database.compact(recover=True) == 1
        assert sorted(database.keys()) == [b"f%d" % number for number in range(5)]
    with dbopen(dbpath) as database:
        assert sorted(database.keys()) == [b"f%d" % number for number in range(5)]


@pytest.mark.parametrize("stopped", [False, True], ids=["walked", "copied-again"])
def test_both_kernels_report_progress_alike(dbopen, dbpath, stopped):
    """The progress calls of a compaction past damage: the same on both kernels.

    The dead ``a`` ends in a zero where its checksum was (the replay's
    lost-data rule would stop there); the walk reads lengths only and
    goes on. With ``stopped``, ``k50``'s value is damaged too: the walk
    stops there and the copy starts again from the index, reporting
    from the start, ``k50`` left out. Catches the pure kernel walking
    with the replay's rules (no call before the end), and a copy from
    the index that reports nothing.
    """
    old = put_record(b"a", b"old")
    big = [put_record(b"k%d" % number, b"v" * 30000) for number in range(100)]
    write_data(dbpath, old, *big, BEFORE)
    ends = [len(HEADER) + len(old) + sum(map(len, big[: count + 1])) for count in range(100)]
    total = ends[-1] + len(BEFORE)
    calls = []
    with dbopen(dbpath, "w") as database:
        with open(dbpath / "data", "r+b") as file:
            file.seek(len(HEADER) + len(old) - 1)
            file.write(b"\0")
            if stopped:
                file.seek(ends[49] + LENGTHS_SIZE + 3 + 100)
                file.write(b"X")
        left_out = database.compact(
            progress=lambda done, total: calls.append((done, total)), recover=True)

    def reports(copied):
        made, last = [], 0
        for end in copied:
            if end >= last + (1 << 20):
                made.append((end, total))
                last = end
        return made

    if stopped:
        assert left_out == 1
        expected = reports(ends[:50]) + reports(ends[:50] + ends[51:])
    else:
        assert left_out == 0
        expected = reports(ends)
    assert calls == expected + [(total, total)]


def test_a_live_empty_record_goes_with_damage_to_the_record_after_it(dbopen, dbpath):
    """The empty record, then a dead record whose value is damaged: both kernels count both.

    Twelve zero bytes are sound only as the replay reads a zero run,
    followed by a sound record; here what follows fails its checksum, so
    the empty record is refused with it (a reopen would end the log at
    it). Catches the kernels disagreeing on it (the pure kernel, knowing
    its value length, took it for sound; the compiled one cannot tell it
    from zeros a lost sector left).
    """
    empty, old = put_record(b"", b""), put_record(b"z", b"old")
    write_data(dbpath, BEFORE, empty, old, put_record(b"z", b"new"))
    with dbopen(dbpath, "w") as database:
        with open(dbpath / "data", "r+b") as file:
            file.seek(len(HEADER) + len(BEFORE) + len(empty) + LENGTHS_SIZE + 1)  # old's value
            file.write(b"X")
        with pytest.raises(semidbm.DBMChecksumError,
                           match="key b'' at offset %d" % (len(HEADER) + len(BEFORE))):
            database.compact()
        assert database.compact(recover=True) == 1
        assert dict(database.items()) == {b"a": b"1", b"z": b"new"}


@pytest.mark.parametrize("damage_before", [False, True], ids=["sound", "damage-before"])
def test_the_empty_record_that_ends_a_batch_that_ends_the_log(dbopen, dbpath, damage_before):
    """A batch's last record is ``b''`` = ``b''``, and the log ends with the batch.

    Nothing follows its twelve zero bytes, but the replay reads no zero
    run inside a batch whose body's checksum matches, nor may the
    compaction: it is copied. Catches the zero-run rule applied inside a
    whole batch (refused; with ``recover=True``, ``b''`` gone). With
    damage before it (``a``'s value), the walk stops there and the copy
    from the index, which knows no batches, judges ``b''`` by the zero-run
    rule: refused with ``a``, the exception durability.md states.
    """
    with dbopen(dbpath, "c", format=2) as database:
        database[b"a"] = b"1"
        with database.batch() as batch:
            batch[b"x"] = b"y"
            batch[b""] = b""
    with dbopen(dbpath, "w") as database:
        if damage_before:
            damage_the_value(dbpath, b"1")
            assert database.compact(recover=True) == 2
            assert dict(database.items()) == {b"x": b"y"}
        else:
            assert database.compact() == 0
            assert dict(database.items()) == {b"a": b"1", b"x": b"y", b"": b""}
    with dbopen(dbpath) as database:
        assert database.torn_tail is None
        assert len(database) == (1 if damage_before else 3)
