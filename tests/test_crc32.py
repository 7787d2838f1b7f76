"""Every way the compiled kernel computes CRC-32 gives zlib's answer.

``_core_pieces/crc32.h`` has three ways: tables (everywhere), folds by
carry-less multiplication on x86-64, and the CRC32 instructions of 64-bit
ARM; ``semidbm_crc32`` picks one by the processor and the input's size.
A wrong constant, a tail of fewer than 16 bytes left out, or a fold that
loses a block passes every test that only writes and reads records back
(both sides computed alike), so each way is held here to ``zlib.crc32``:
through ``_core._crc32``, and through ``tests/harness/crc_check.c``,
which also tries every alignment of the input (the ``crc_arm`` nox
session runs the same program for ARM under an emulator).
"""

import os
import platform
import shutil
import subprocess
import sys
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from semidbm import _kernel

from .conftest import compiled_only

pytestmark = compiled_only

SOURCES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")


def ways(data, crc=0):
    """The compiled kernel's CRC-32 of ``data`` from ``crc``, by way: the one it chooses, the
    tables, and the processor's own where it takes ``data``."""
    core = _kernel.load("cython")
    found = {way: core._crc32(data, crc, way) for way in ("chosen", "tables")}
    if core._crc32_hardware() is not None and len(data) >= 16:
        found[core._crc32_hardware()] = core._crc32(data, crc, "hardware")
    return found


#: What ``processor_way`` returns where this system does not say what its processor has.
UNKNOWN = "unknown"


def processor_way():
    """The way crc32.h must find on this processor, from what the system says it has: "clmul",
    "armv8", None (the tables only), or UNKNOWN."""
    machine = platform.machine().lower()
    if sys.platform.startswith("linux"):
        with open("/proc/cpuinfo") as info:
            flags = set(info.read().split())
    elif sys.platform == "darwin":
        flags = set(sysctl("machdep.cpu.features").lower().split())
        if sysctl("hw.optional.armv8_crc32") == "1":
            flags.add("crc32")
    else:
        return UNKNOWN
    if machine in ("x86_64", "amd64") and {"pclmulqdq", "ssse3"} <= flags:
        return "clmul"
    if machine in ("aarch64", "arm64") and "crc32" in flags:
        return "armv8"
    return None


def sysctl(name):
    """macOS's value of ``name``, as text ("" where it has none)."""
    run = subprocess.run(["sysctl", "-n", name], capture_output=True, text=True)
    return run.stdout.strip() if run.returncode == 0 else ""


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=700), crc=st.integers(0, 2**32 - 1))
def test_every_way_agrees_with_zlib(data, crc):
    assert set(ways(data, crc).values()) == {zlib.crc32(data, crc)}


@pytest.mark.parametrize("size", [*range(0, 70), 100, 116, 127, 128, 129, 1000, 100 * 1024 + 7])
def test_each_size_around_the_blocks(size):
    # Sizes on each side of the 16-byte blocks and the 128 bytes from which four
    # blocks fold at a time, and a large value's.
    data = os.urandom(size)
    expected = zlib.crc32(data, 0x5EED)
    assert set(ways(data, 0x5EED).values()) == {expected}


def test_the_processor_s_own_way_is_the_one_taken():
    # Where the processor has a way of its own, crc32.h finds it: the tests above then
    # compare it, not the tables twice.
    expected = processor_way()
    if expected == UNKNOWN:
        pytest.skip("this system does not say which instructions its processor has")
    assert _kernel.load("cython")._crc32_hardware() == expected


def test_a_way_that_is_not_there_or_not_a_way():
    core = _kernel.load("cython")
    with pytest.raises(ValueError, match="'chosen', 'tables' or 'hardware'"):
        core._crc32(b"data", 0, "fastest")
    if core._crc32_hardware() is None:
        with pytest.raises(ValueError, match="no way of its own"):
            core._crc32(bytes(16), 0, "hardware")
    if core._crc32_hardware() == "clmul":
        with pytest.raises(ValueError, match="no way of its own for 15 bytes"):
            core._crc32(bytes(15), 0, "hardware")


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (cc) to build the harness")
@pytest.mark.skipif(
    not os.path.exists(os.path.join(SOURCES, "semidbm", "_core_pieces", "crc32.h")),
    reason="the kernel's C sources are not beside the tests (an installed semidbm's run)",
)
def test_the_c_harness_at_every_alignment(tmp_path):
    program = tmp_path / "crc_check"
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "harness", "crc_check.c")
    subprocess.run(
        ["cc", "-O2", "-Wall", "-Werror", "-I", os.path.join(SOURCES, "semidbm"), source,
         "-o", str(program)],
        check=True,
    )
    expected = processor_way()
    run = subprocess.run(
        [str(program)] + ([] if expected == UNKNOWN else [expected or "none"]),
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "failures: 0" in run.stdout
