"""The scale benchmark's values: numbers in American English words (benchmarks/_number_words.py)."""

import importlib.util
import pathlib
import random

import pytest

_PATH = pathlib.Path(__file__).resolve().parent.parent / "benchmarks" / "_number_words.py"
_SPEC = importlib.util.spec_from_file_location("_number_words", _PATH)
number_words_module = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(number_words_module)
number_words = number_words_module.number_words
words_block = number_words_module.words_block

KNOWN = {
    0: "zero",
    7: "seven",
    13: "thirteen",
    20: "twenty",
    21: "twenty-one",
    99: "ninety-nine",
    100: "one hundred",
    105: "one hundred five",
    110: "one hundred ten",
    342: "three hundred forty-two",
    1000: "one thousand",
    1001: "one thousand, one",
    1100: "one thousand, one hundred",
    20_019: "twenty thousand, nineteen",
    100_000: "one hundred thousand",
    1_000_000: "one million",
    1_000_001: "one million, one",
    7_000_300: "seven million, three hundred",
    123_456_789: "one hundred twenty-three million, four hundred fifty-six thousand, "
    "seven hundred eighty-nine",
    124_999_999: "one hundred twenty-four million, nine hundred ninety-nine thousand, "
    "nine hundred ninety-nine",
    125_000_000: "one hundred twenty-five million",
    2_000_000_017: "two billion, seventeen",
    10**15 - 1: "nine hundred ninety-nine trillion, nine hundred ninety-nine billion, "
    "nine hundred ninety-nine million, nine hundred ninety-nine thousand, "
    "nine hundred ninety-nine",
}


@pytest.mark.parametrize("number", sorted(KNOWN))
def test_known_numbers(number):
    assert number_words(number) == KNOWN[number]


SMALL = {
    word: value
    for value, word in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen "
        "fourteen fifteen sixteen seventeen eighteen nineteen".split()
    )
}
TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
SMALL.update({word: 10 * tens for tens, word in enumerate(TENS, 2)})
SCALE = {"thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12}


def parse(words):
    """Read words back into a number: an independent check of the rules (written the other way)."""
    total = 0
    for group in words.split(", "):
        tokens = group.split(" ")
        scale = SCALE[tokens.pop()] if tokens[-1] in SCALE else 1
        value = 0
        for token in tokens:
            if token == "hundred":
                value *= 100
            else:
                tens, _, ones = token.partition("-")
                assert not ones or SMALL[ones] < 10, token
                value += SMALL[tens] + (SMALL[ones] if ones else 0)
        assert 0 < value < 1000 or words == "zero", group
        total += value * scale
    return total


def test_words_read_back_to_their_number():
    rng = random.Random(5)
    numbers = list(range(2000)) + [rng.randrange(10**15) for _ in range(5000)]
    numbers += [rng.randrange(125_000_000) for _ in range(5000)]
    for number in numbers:
        assert parse(number_words(number)) == number, number


def test_words_are_plain_lowercase_ascii():
    for number in range(0, 2_000_000, 997):
        words = number_words(number)
        assert words == words.strip() and "  " not in words and "and" not in words.split()
        assert set(words) <= set("abcdefghijklmnopqrstuvwxyz -,")


@pytest.mark.parametrize(
    "start, stop",
    [(0, 0), (0, 1), (0, 2500), (998, 1003), (999_990, 1_001_010), (123_456_000, 123_457_001),
     (124_999_000, 125_000_000)],
)
def test_words_block_matches_number_words(start, stop):
    assert words_block(start, stop) == [number_words(n).encode("ascii") for n in range(start, stop)]


@pytest.mark.parametrize("bad", [-1, 10**15])
def test_out_of_range_is_value_error(bad):
    with pytest.raises(ValueError, match="covers"):
        number_words(bad)
    with pytest.raises(ValueError, match="covers"):
        words_block(bad, bad + 1)


@pytest.mark.parametrize("bad", [1.0, "1", True, None])
def test_non_int_is_type_error(bad):
    with pytest.raises(TypeError, match="int"):
        number_words(bad)
