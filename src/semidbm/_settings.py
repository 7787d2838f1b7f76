"""Settings both kernels follow that are not part of the file format.

Another value here changes speed or memory, never the bytes a database
holds or what it reads back.
"""

#: Default size of the append buffer, in bytes.
DEFAULT_BUFFER_SIZE = 1024 * 1024
#: Largest append buffer ``open`` accepts (1 GiB): larger ones only delay
#: the write, and a mistyped size should fail before the disk is touched.
MAX_BUFFER_SIZE = 1 << 30
#: Bytes of the old log a compaction gets through between two calls of its
#: progress callback. ``compact(progress)`` calls ``progress(done, total)``
#: after each live record that ends at least this far past the last call
#: (``done`` is the offset in the old data file where that record ends),
#: and ``progress(total, total)`` at the end; ``total`` is the old data
#: file's size. A copy that damage starts again from the index reports
#: again from the start. Both kernels call it at the same points.
PROGRESS_STEP = 1 << 20
#: Bytes a compaction collects before each write.
COMPACT_CHUNK = 1 << 20
#: Bytes of a value checked against its checksum at a time, in a memory map
#: of the data file. Each chunk's whole pages are let go once read (they
#: stay in the page cache), so that checking a value of gigabytes (a zero
#: run a power cut may have left in a data file past 4 GiB) keeps at most
#: this much of it in the process's resident memory. Both kernels.
CHECK_CHUNK = 1 << 26
#: A writer writes a new index file at ``close()`` once the log it does not cover
#: is at least this long (docs/FORMAT.md, "Writing an index file"), or
#: :data:`INDEX_TAIL_SHARE` of the covered part if more: an open replays at
#: most that much, and a few writes to a large database do not rewrite its
#: index file at each close.
INDEX_MIN_TAIL = 4 << 20
#: The share of the covered log (one part in this many) that the log past
#: it may reach before ``close()`` writes a new index file.
INDEX_TAIL_SHARE = 64
#: The same share for ``sync()``, which a loader may call often: each new
#: index file is then at least a quarter larger than the last, so that all
#: written during a load add up to a few times the last one.
INDEX_SYNC_SHARE = 4


def index_due(covered, disk_end, share=INDEX_TAIL_SHARE):
    """True when the log past ``covered`` (up to ``disk_end``) is long enough for a new index file.

    ``share`` is :data:`INDEX_TAIL_SHARE` at ``close()``,
    :data:`INDEX_SYNC_SHARE` at ``sync()``.
    """
    return disk_end - covered >= max(INDEX_MIN_TAIL, covered // share)
