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

from .harness import fuzz

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "hostile")


@pytest.fixture(scope="module")
def place():
    directory = fuzz.scratch_directory()
    yield directory
    shutil.rmtree(directory)


@settings(max_examples=800, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=fuzz.hostile_files)
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
