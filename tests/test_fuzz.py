"""Hostile data files through both kernels (tests/harness/fuzz.py): a short run and the corpus.

tests/corpus/hostile holds the regression corpus: one input of each kind
of answer that long fuzz runs met (named by hash), and hand-made cases
for what broke or nearly broke (named for what they are). Longer runs:
``python -m tests.harness.fuzz --seconds N``; under the sanitizers:
``bash scripts/nox.sh -s sanitize``.
"""

import os
import shutil

import pytest
from hypothesis import HealthCheck, given, settings

from .conftest import compiled_only
from .harness import fuzz

pytestmark = pytest.mark.kernel_logic

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "hostile")


@pytest.fixture(scope="module")
def place():
    directory = fuzz.scratch_directory()
    yield directory
    shutil.rmtree(directory)


@settings(max_examples=800, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=fuzz.hostile_files)
@pytest.mark.slow
def test_hostile_files(place, data):
    fuzz.check(data, place)


@pytest.mark.parametrize("name", sorted(os.listdir(CORPUS)))
def test_corpus(place, name):
    with open(os.path.join(CORPUS, name), "rb") as handle:
        fuzz.check(handle.read(), place)


def test_refresh_case_of_the_corpus_reads_the_last_value(place):
    with open(os.path.join(CORPUS, "refresh-key-written-twice.bin"), "rb") as handle:
        answers = fuzz.check(handle.read(), place)
    assert answers[2] == ("ok", {b"a": b"2"}, [])


def test_a_disallowed_error_is_reported(place, monkeypatch):
    """The check fails on anything but DBMLoadError and DBMChecksumError (a check of the check)."""

    def broken(kernel, path, data):
        raise OSError("not allowed")

    monkeypatch.setattr(fuzz, "refresh_after_append", broken)
    with pytest.raises(OSError, match="not allowed"):
        fuzz.check(b"SEMI\0\1\0\1", place)


def test_kinds_name_answers_without_numbers():
    message = "/x/data: corrupt record at offset 12 (key length -1, value length 0)"
    expected = "load error: corrupt record at offset N (key length -N, value length N)"
    assert fuzz.kind([("load error", message)]) == expected


# --- hostile index files beside a valid log (fuzz.check_index) ---


@compiled_only
@settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=fuzz.hostile_indexes)
def test_hostile_index_files(place, case):
    fuzz.check_index(case, place)


@compiled_only
@pytest.mark.parametrize("base", ["one block", "three blocks"])
def test_the_index_bases_are_used_as_they_are(place, base):
    """Unchanged, the base's index is used: the damage, not the base, makes the fallbacks."""
    assert fuzz.check_index((base, [], False), place) == "used the index"
    assert fuzz.check_index((base, [], True), place) == "used the index"


@compiled_only
@pytest.mark.parametrize(
    "case",
    [
        ("three blocks", [("flip", "slots", 5000, 3)], False),
        ("three blocks", [("truncate", "checksums", 2)], False),
        ("one block", [("extend", "header", 77, b"\0")], False),
        ("one block", [("field", "covered", 8)], True),
        ("one block", [("sample", 31, 12, 1)], True),
        ("three blocks", [("slot", 123, "past covered", 5)], True),
        ("three blocks", [("slot", 2000, "delete record", 3)], True),
        ("three blocks", [("forge", "covered", 4096)], "forged"),
        ("one block", [("forge", "count", 3), ("forge", "seed", 1)], "forged"),
    ],
    ids=["flipped slot", "cut checksums", "extended header", "covered 8", "sample",
         "slot past covered", "slot at a delete", "forged covered", "forged count and seed"],
)
def test_chosen_hostile_index_files(place, case):
    assert fuzz.check_index(case, place).startswith(
        ("used the index", "replayed the log", "forged, ")
    )


@compiled_only
def test_a_wrong_answer_from_the_index_is_reported(place, monkeypatch):
    """check_index fails when the compiled kernel answers otherwise than the log (a check of it)."""
    base = fuzz.index_base("one block")
    wrong = dict(base.contents)
    wrong[sorted(wrong)[3]] = b"not what the log says"
    monkeypatch.setattr(base, "contents", wrong)
    with pytest.raises(AssertionError):
        fuzz.check_index(("one block", [], False), place)
