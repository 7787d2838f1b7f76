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
#: file's size. Both kernels call it at the same points.
PROGRESS_STEP = 1 << 20
#: Bytes a compaction collects before each write.
COMPACT_CHUNK = 1 << 20
