"""The log id: the record pair every log this semidbm creates begins with.

A new database, ``'n'``, and every compaction (an upgrade too) start
their data file with a put of the key ``KEY`` whose value is ``SIZE``
random bytes, then a delete of that key: two ordinary records, which
every replay (0.5.1's too) applies and which leave no key behind. The
random value names that one log among all others: an index file
repeats it, and an open trusts the index only for a data file that
begins with the same id (docs/FORMAT.md, "The log id"). A log without
the pair (one that semidbm 0.5.1 created) has no id, and no index is
ever trusted or written for it.
"""

import os

from ._records import LENGTHS, encode_delete, encode_put
from .format import HEADER_SIZE, header

#: The key of the pair; no replay leaves it live, so any key stays free for users.
KEY = b"\0semidbm log id\0"
#: Bytes of the random id.
SIZE = 16
#: Where the id lies in a data file that has one: after the header and the put's lengths and key.
_ID_OFFSET = HEADER_SIZE + LENGTHS.size + len(KEY)


def _pair(log_id):
    """The put and the delete that carry ``log_id``."""
    return encode_put(KEY, log_id) + encode_delete(KEY)


#: Size of a new log's first bytes, the header and the pair: where its first other record starts.
START_SIZE = HEADER_SIZE + len(_pair(bytes(SIZE)))


def new_log(major):
    """The first bytes of a new log of the major format ``major``: its header, a new id's pair."""
    return header(major) + _pair(os.urandom(SIZE))


def read(start):
    """The id of the log whose first bytes are ``start``, or None if it has none.

    Only the exact pair counts (lengths, key and checksums): a log that
    begins with anything else, however close, has no id.
    """
    log_id = start[_ID_OFFSET:_ID_OFFSET + SIZE]
    if len(start) < START_SIZE or start[HEADER_SIZE:START_SIZE] != _pair(log_id):
        return None
    return log_id
