"""The compiled kernel's copies of the format's sizes agree with ``format`` and ``_index_file``.

C wants them as constants at compile time, so ``_core.pyx`` states them
again (its ``cdef enum``). ``_core._format_constants()`` returns them as
compiled, and each is checked here against ``semidbm.format``: a change
to either side alone fails. The settings the kernel follows
(``_settings``) are not copied: it reads them from ``_settings`` at import.
"""

import pytest

import semidbm.format
from semidbm import _checkpoint, _index_file, _kernel

from .conftest import compiled_only

pytestmark = compiled_only

#: What each of the compiled kernel's constants must be.
EXPECTED = {
    "HEADER_SIZE": semidbm.format.HEADER_SIZE,
    "LENGTHS_SIZE": semidbm.format.LENGTHS_SIZE,
    "CHECKSUM_SIZE": semidbm.format.CHECKSUM_SIZE,
    "RECORD_OVERHEAD": semidbm.format.LENGTHS_SIZE + semidbm.format.CHECKSUM_SIZE,
    "DELETED": semidbm.format.DELETED,
    "BATCH": semidbm.format.BATCH,
    "EXPIRES": semidbm.format.EXPIRES,
    "EXPIRY_TIME_SIZE": semidbm.format.EXPIRY_TIME_SIZE,
    "DISK_PAGE": semidbm.format.DISK_PAGE,
    "DISK_SECTOR": semidbm.format.DISK_SECTOR,
    "INDEX_HEADER_SIZE": _index_file.HEADER_SIZE,
    "BLOCK_SLOTS": _index_file.BLOCK_SLOTS,
    "MIN_CAPACITY": _index_file.MIN_CAPACITY,
    "SLOT_SIZE": _index_file.SLOT_SIZE,
}


def compiled_constants():
    """The constants of the compiled kernel, by name."""
    return _kernel.load("cython")._format_constants()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_constant_is_the_formats(name):
    assert compiled_constants()[name] == EXPECTED[name]


def test_every_constant_is_checked():
    assert sorted(compiled_constants()) == sorted(EXPECTED)


def test_a_trusted_index_covers_at_least_one_record():
    """``_index_file.load`` trusts no index covering less than the log's first checkpoint, and
    the mapped lookups (``base_record_lengths``) rely on that: they compute ``covered -
    RECORD_OVERHEAD`` without testing that it does not wrap."""
    constants = compiled_constants()
    assert _checkpoint.START_SIZE >= constants["HEADER_SIZE"] + constants["RECORD_OVERHEAD"]
