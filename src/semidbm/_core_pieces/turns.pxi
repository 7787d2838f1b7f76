# A shared writer's turn taken in C, for its single puts and deletes and
# its bulk calls (Store._shared_put, _shared_delete, _shared_update,
# _shared_delete_many): the steps of a turn of _lock.SharedLock around
# Store._follow and Store._publish (docs/FORMAT.md, "Shared writers"),
# without the Python between them. The lock's mutex is held as in Python:
# a single put or delete holds the GIL from the first step to the last, but
# a bulk call may run Python code (its iterator's), and other threads with
# it. Whatever is not the usual case gives the turn up before the operation
# changed anything, and the operation then takes its turn in Python.

cdef extern from "pythread.h":
    unsigned long PyThread_get_thread_ident()


cdef extern from *:
    """
    /* The item assignment of the extension type itself (value NULL: the
     * deletion), whatever a subclass makes of __setitem__ and __delitem__. */
    static int semidbm_store_assign(PyObject *type, PyObject *store, PyObject *key,
                                    PyObject *value)
    {
        return ((PyTypeObject *)type)->tp_as_mapping->mp_ass_subscript(store, key, value);
    }
    """
    int store_assign "semidbm_store_assign" (object type, object store, object key,
                                             PyObject* value) except -1


# The data file's name in the database directory, for fstatat.
cdef bytes DATA_FILE_NAME = os.fsencode(_DATA_NAME)


cdef object turn_begin(Store store):
    """Begin a turn of the shared writer ``store`` in C: its ``SharedLock``, or None.

    None, with the turn not taken, if the store is not open and ready
    for writes, the lock's mutex is held by any thread (this one too: an
    operation in a batch or a ``locked()`` block only counts in that
    turn), another writer holds ``lock.write``, or catching up meets
    anything unusual (``turn_follow``). The caller then takes the turn
    in Python, which handles all of these. Like ``SharedLock.enter``,
    the turn is this thread's, of depth 1, while it lasts: anything this
    thread runs in it (a finalizer, say) only counts in it.
    """
    cdef int turn_fd
    if (store.fd < 0 or store.busy or not store.writable or store.owner
            or store.directory_fd < 0):
        return None
    lock = store._lock
    if lock is None:
        return None
    mutex = lock._mutex
    if not mutex.acquire(False):  # a plain lock: held by this thread too, it refuses
        return None
    turn_fd = lock._turn_fd
    if turn_fd < 0 or semidbm_try_turn(turn_fd):
        mutex.release()
        return None
    lock._owner = PyThread_get_thread_ident()
    lock._depth = 1
    try:
        # Seen by this thread's other handles of the database, which then refuse at once
        # (EDEADLK) to wait for the turn this thread holds: a bulk call's iterator may
        # write through one, and so may a finalizer that a single put runs.
        lock._held[lock._turn_key] = lock._owner
        if turn_follow(store, turn_fd):
            return lock
    except BaseException:  # the store is closed: the error ends the turn, as in Python
        turn_release(lock)
        raise
    turn_release(lock)
    return None


cdef bint turn_follow(Store store, int turn_fd) except -1:
    """Catch up as ``Store._follow`` does, in the usual cases; False in the others.

    True: ``data`` is still the file open here, and holds nothing new,
    or new complete records, now replayed. False: ``data`` could not be
    looked at, is another file (a compaction), is shorter than what this
    store indexed, holds more new bytes than a replay in this thread
    takes on (``THREADED_REPLAY_MIN``), or ends in an incomplete record.
    Nothing was changed then, except for the complete records before an
    incomplete one, replayed: ``_follow`` starts after them.

    Whether ``data`` is still the file open here is known without a
    stat while ``lock.write``'s count of replaced data files (mapped from
    ``turn_fd``) is the one at which a stat last found it so: a shared
    writer counts a replacement in its turn before it makes one
    (docs/FORMAT.md, "Shared writers"). The file's end then comes from
    the open file, for a tenth of the stat's cost.
    """
    cdef uint64_t device, inode, size, count
    if store.replacements == NULL:
        store.replacements = semidbm_map_counter(turn_fd)
        if store.replacements == NULL:
            return False
    count = store.replacements[0]
    if store.replacements_known and count == store.replacements_seen:
        if semidbm_file_end(store.fd, &size):
            return False
    else:
        if semidbm_file_at(store.directory_fd, DATA_FILE_NAME, &device, &inode, &size):
            return False
        if device != store.data_device or inode != store.data_inode:
            return False
        store.replacements_seen = count
        store.replacements_known = True
    if size == store.log.disk_end:
        return True
    if size < store.log.disk_end or size - store.log.disk_end >= THREADED_REPLAY_MIN:
        return False
    return store.replay_tail(size) == size


cdef int turn_end(Store store, object lock) except -1:
    """End a turn ``turn_begin`` took, as ``SharedLock.leave`` with ``Store._publish`` does."""
    try:
        store.publish()
    finally:
        turn_release(lock)
    return 0


cdef int turn_release(object lock) except -1:
    """Let go of ``lock.write`` (unless the lock was released meanwhile), then of the mutex."""
    cdef int failure = 0
    lock._owner = None
    lock._depth = 0
    lock._held.pop(lock._turn_key, None)
    try:
        if lock._turn_fd >= 0:
            failure = semidbm_end_turn(lock._turn_fd)
            if failure:
                raise OSError(failure, os.strerror(failure))
    finally:
        lock._mutex.release()
    return 0
