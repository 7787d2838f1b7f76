"""A one-line progress bar for the command-line tool, drawn only on a terminal; counts in words.

When stderr is not a terminal (piped, redirected, under CI) nothing is
drawn, so logs stay clean. The bar is redrawn at most ten times a second
and erased when the work ends, leaving only the tool's own output.

:func:`quantity` and :func:`human_bytes` write the numbers the tool and
the migration messages show: ``1 record``, ``2,000 records``, ``1.5 KiB``.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

#: Seconds between two drawings of the bar.
_INTERVAL = 0.1
_WIDTH = 30


class Progress:
    """Shows ``label [#####.....]  42%  done/total`` on ``stream`` while work goes on.

    Call it as ``progress(done, total)`` (the callback the library's
    long-running functions take); ``total`` may be None when unknown,
    then only the count is shown. ``unit`` is ``"bytes"`` or ``"keys"``.
    Drawing is on only if ``stream`` is a terminal, unless ``enabled``
    says otherwise.
    """

    def __init__(
        self,
        label: str,
        unit: str = "keys",
        stream: TextIO | None = None,
        enabled: bool | None = None,
    ) -> None:
        self.stream = sys.stderr if stream is None else stream
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty and isatty())
        self.enabled = enabled
        self.label = label
        self.unit = unit
        self._next_draw = 0.0
        self._drawn = False

    def __call__(self, done: int, total: int | None = None) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now < self._next_draw:
            return
        self._next_draw = now + _INTERVAL
        self._draw(done, total)

    def _draw(self, done: int, total: int | None) -> None:
        if total:
            fraction = min(done / total, 1.0)
            filled = int(fraction * _WIDTH)
            line = "%s [%s%s] %3d%%  %s/%s" % (
                self.label,
                "#" * filled,
                "." * (_WIDTH - filled),
                fraction * 100,
                self._amount(done),
                self._amount(total),
            )
        else:
            line = "%s  %s" % (self.label, self._amount(done))
        self.stream.write("\r\x1b[K" + line)
        self.stream.flush()
        self._drawn = True

    def _amount(self, count: int) -> str:
        if self.unit == "bytes":
            return human_bytes(count)
        return "{:,}".format(count)

    def close(self) -> None:
        """Erase the bar, if it was drawn."""
        if self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._drawn = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def human_bytes(count: int) -> str:
    """``count`` bytes in a short readable form: ``512 B``, ``1.5 KiB``, ``3.2 GiB``."""
    if count < 1024:
        return "%d B" % count
    size = float(count)
    for unit in ("KiB", "MiB", "GiB"):
        size /= 1024
        if size < 1024:
            return "%.1f %s" % (size, unit)
    return "%.1f TiB" % (size / 1024)


def noun(word: str, count: int) -> str:
    """``word`` as it goes with ``count``: ``record`` for 1, ``records`` for any other number.

    For the regular nouns the tool counts (record, key, byte, field, table).
    """
    return word if count == 1 else word + "s"


def quantity(count: int, word: str) -> str:
    """``count`` with its noun, in thousands: ``1 record``, ``0 records``, ``2,000 records``."""
    return "{:,} {}".format(count, noun(word, count))
