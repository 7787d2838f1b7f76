"""Whole numbers in American English words, for the scale benchmark's values.

``number_words(123456789)`` is "one hundred twenty-three million, four
hundred fifty-six thousand, seven hundred eighty-nine": groups of three
digits from the largest scale down, separated by a comma and a space,
no "and", a hyphen between tens and ones (twenty-one to ninety-nine),
and nothing said for a group of zeros ("one million, one").

``words_block(start, stop)`` gives the same words, as ASCII bytes, for
a range of numbers at once and much faster: numbers that share every
group but the last share the start of their words, which is made once.
"""

ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen "
    "fourteen fifteen sixteen seventeen eighteen nineteen"
).split()
TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
#: The name of each group of three digits, from the ones up.
SCALES = ["", "thousand", "million", "billion", "trillion"]
#: One more than the largest number that has words here.
LIMIT = 1000 ** len(SCALES)


def below_thousand(number):
    """Words for 1 to 999: "seven", "forty-two", "three hundred", "one hundred five"."""
    hundreds, rest = divmod(number, 100)
    words = []
    if hundreds:
        words.append(ONES[hundreds] + " hundred")
    if rest >= 20:
        tens, ones = divmod(rest, 10)
        words.append(TENS[tens] + ("-" + ONES[ones] if ones else ""))
    elif rest:
        words.append(ONES[rest])
    return " ".join(words)


def number_words(number):
    """Return ``number`` (0 to 10**15 - 1) in American English words."""
    if not isinstance(number, int) or isinstance(number, bool):
        raise TypeError("number_words takes an int, not %s" % type(number).__name__)
    if not 0 <= number < LIMIT:
        raise ValueError("number_words covers 0 to %d, not %d" % (LIMIT - 1, number))
    if number == 0:
        return ONES[0]
    groups = []
    for scale in SCALES:
        number, group = divmod(number, 1000)
        if group:
            groups.append(below_thousand(group) + (" " + scale if scale else ""))
        if not number:
            break
    return ", ".join(reversed(groups))


#: Words for 0 to 999 as bytes ("zero" for 0, which only stands alone).
_GROUP_BYTES = [number_words(group).encode("ascii") for group in range(1000)]
#: The same after ", ", for a last group following larger ones ("" for 0).
_TAIL_BYTES = [b""] + [b", " + words for words in _GROUP_BYTES[1:]]


def words_block(start, stop):
    """Return a list of ``number_words(n)`` as ASCII bytes, for n from ``start`` to ``stop - 1``."""
    if not 0 <= start <= stop <= LIMIT:
        raise ValueError("words_block covers 0 to %d, not %d to %d" % (LIMIT, start, stop))
    values = []
    high = start // 1000
    while high * 1000 < stop:
        first = max(start, high * 1000) - high * 1000
        last = min(stop, high * 1000 + 1000) - high * 1000
        if high == 0:
            values += _GROUP_BYTES[first:last]
        else:
            prefix = number_words(high * 1000).encode("ascii")
            values += [prefix + tail for tail in _TAIL_BYTES[first:last]]
        high += 1
    return values
