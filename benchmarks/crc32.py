"""How fast each of the compiled kernel's ways computes CRC-32, against zlib's.

The kernel checks every record it reads with ``verify`` and every record
it copies or replays by its CRC-32, and computes one for every record it
writes (``_core_pieces/crc32.h``). This times, for inputs the size of a
small record (16-byte key, 100-byte value), a page, a 100 KB value and a
mebibyte: the way the kernel chooses, the tables alone, the processor's
own way, and ``zlib.crc32``. Each figure is the median of ``--repeat``
rounds, the ways interleaved within each round; each round times enough
calls for about 20 ms. A call from Python costs some tens of nanoseconds,
which the small record's rate includes.

    .venv/bin/python benchmarks/crc32.py [--repeat R]

``bash scripts/nox.sh -s dev`` makes ``.venv``. Prints a Markdown table;
the figures in docs/performance.md ("CRC-32") come from it.
"""

import argparse
import os
import statistics
import time
import zlib

from _report import markdown_table

from semidbm import _kernel

#: The sizes timed, named as the table shows them.
SIZES = {"small record (116 B)": 116, "4 KiB": 4096, "100 KB": 100_000, "1 MiB": 1 << 20}

#: The seconds of calls one timing lasts, at least.
ROUND_SECONDS = 0.02


def ways():
    """The ways timed, by name: each a function of the data."""
    core = _kernel.load("cython")
    found = {
        "chosen by the kernel": lambda data: core._crc32(data, 0, "chosen"),
        "tables": lambda data: core._crc32(data, 0, "tables"),
    }
    if core._crc32_hardware() is not None:
        name = "processor's own (%s)" % core._crc32_hardware()
        found[name] = lambda data: core._crc32(data, 0, "hardware")
    found["zlib.crc32"] = zlib.crc32
    return found


def calls_per_round(function, data):
    """How many calls of ``function(data)`` last about ROUND_SECONDS."""
    calls = 1
    while True:
        started = time.perf_counter()
        for _ in range(calls):
            function(data)
        if time.perf_counter() - started >= ROUND_SECONDS / 4:
            return calls * 4
        calls *= 2


def rates(repeat):
    """{(size name, way name): GB/s, the median of ``repeat`` interleaved rounds}."""
    timed = ways()
    found = {}
    for size_name, size in SIZES.items():
        data = os.urandom(size)
        answers = {function(data) for function in timed.values()}
        if len(answers) != 1:
            raise SystemExit("the ways disagree on %d bytes: %s" % (size, sorted(answers)))
        calls = {name: calls_per_round(function, data) for name, function in timed.items()}
        seconds = {name: [] for name in timed}
        for _ in range(repeat):
            for name, function in timed.items():
                started = time.perf_counter()
                for _ in range(calls[name]):
                    function(data)
                seconds[name].append((time.perf_counter() - started) / calls[name])
        for name in timed:
            found[size_name, name] = size / statistics.median(seconds[name]) / 1e9
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=9, help="rounds of each way (default 9)")
    options = parser.parse_args(argv)
    found = rates(options.repeat)
    names = list(ways())
    rows = [
        [size_name] + ["%.2f" % found[size_name, name] for name in names]
        for size_name in SIZES
    ]
    print(markdown_table(["GB/s"] + names, rows))


if __name__ == "__main__":
    main()
