"""Expiry times: the wall clock in the format's unit, and the check of an ``expire=`` argument.

An expiry record holds the time at which the put before it expires, in
milliseconds since the Unix epoch (docs/FORMAT.md, "Expiry"). Both
kernels and the API layer read the clock through :func:`now`, so that
every part of the process agrees on it (and a test can move it).
"""

from __future__ import annotations

import math
import time
from typing import cast

from . import _messages

#: The latest expiry time the record holds (unsigned 64-bit), kept within a signed one.
LATEST = 2**63 - 1


def now() -> int:
    """The wall clock, in milliseconds since the Unix epoch (``time.time_ns``); 0 for a clock
    set before 1970 (no expiry time is earlier: nothing has expired then)."""
    return max(0, time.time_ns() // 1_000_000)


def expires_at(seconds: object) -> int:
    """The time, in milliseconds since the Unix epoch, ``seconds`` from now (rounded up).

    ``seconds`` is an int or a float, finite and above 0 (ValueError
    otherwise, TypeError for another type, bool included).
    """
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError(_messages.EXPIRE_TYPE % type(seconds).__name__)
    if not (0 < seconds < math.inf):  # NaN compares False
        raise ValueError(_messages.EXPIRE_VALUE % (seconds,))
    at = now() + math.ceil(seconds * 1000)
    if at > LATEST:
        raise ValueError(_messages.EXPIRE_VALUE % (seconds,))
    return at


def lifetime(seconds: object) -> float:
    """``seconds`` checked as an ``expire=`` argument is (:func:`expires_at`), as a float: the
    default lifetime of ``semidbm.open(expire=)``, checked before the disk is touched."""
    expires_at(seconds)
    return float(cast(float, seconds))  # an int or a float, as checked
