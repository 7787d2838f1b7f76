# A shared writer's turn taken in C, for its single puts and deletes and
# its bulk calls (Store.shared_put, shared_delete, _shared_update,
# _shared_delete_many): the steps of a turn of _lock.SharedLock around
# Store._follow and Store._publish (docs/FORMAT.md, "Shared writers"),
# without the Python between them, and without a system call but the write
# where the turn is lock.write's mutex. A single put or delete holds the GIL
# from the first step to the last, but a bulk call may run Python code (its
# iterator's), and other threads with it: they find the turn taken, as in
# Python. Whatever is not the usual case gives the turn up before the
# operation changed anything, and the operation then takes its turn in Python.

cdef extern from "pythread.h":
    unsigned long PyThread_get_thread_ident()


cdef extern from *:
    """
    #if PY_VERSION_HEX >= 0x030C0000
    #define SEMIDBM_T_OBJECT_EX Py_T_OBJECT_EX
    #define SEMIDBM_READONLY Py_READONLY
    #else
    #include "structmember.h"
    #define SEMIDBM_T_OBJECT_EX T_OBJECT_EX
    #define SEMIDBM_READONLY READONLY
    #endif

    /* Where the instances of type keep the attribute name, if it is one of
     * their __slots__ (a writable object member, as a slot is): its offset
     * in the instance; else 0. */
    static Py_ssize_t semidbm_slot_offset(PyObject *type, const char *name)
    {
        PyObject *found = PyObject_GetAttrString(type, name);
        Py_ssize_t offset = 0;
        if (found == NULL) {
            PyErr_Clear();
            return 0;
        }
        if (Py_IS_TYPE(found, &PyMemberDescr_Type)) {
            PyMemberDef *member = ((PyMemberDescrObject *)found)->d_member;
            if (member->type == SEMIDBM_T_OBJECT_EX && !(member->flags & SEMIDBM_READONLY)) {
                offset = member->offset;
            }
        }
        Py_DECREF(found);
        return offset;
    }

    /* The slot at offset of owner, as getattr reads it (borrowed; NULL: not set). */
    static PyObject *semidbm_slot_get(PyObject *owner, Py_ssize_t offset)
    {
        return *(PyObject **)((char *)owner + offset);
    }

    /* Set the slot at offset of owner to value, as setattr does. */
    static void semidbm_slot_set(PyObject *owner, Py_ssize_t offset, PyObject *value)
    {
        PyObject **place = (PyObject **)((char *)owner + offset);
        PyObject *old = *place;
        Py_INCREF(value);
        *place = value;
        Py_XDECREF(old);
    }
    """
    Py_ssize_t slot_offset "semidbm_slot_offset" (object type, const char* name)
    PyObject* slot_get "semidbm_slot_get" (object owner, Py_ssize_t offset)
    void slot_set "semidbm_slot_set" (object owner, Py_ssize_t offset, object value)


cdef struct LockSlots:
    # The offsets of the store's ``_lock`` and of that lock's ``_owner``, ``_depth``,
    # ``_turn_fd`` and ``_turn_key`` (``_lock.SharedLock``'s slots), which a turn in C reads
    # and sets at every operation: a getattr or setattr through the class costs about a
    # hundred instructions, and a single put's turn made ten of them and more (a third of
    # a shared writer's put); a slot at a known offset costs a few. All 0 until found
    # (``find_lock_slots``).
    Py_ssize_t lock
    Py_ssize_t owner
    Py_ssize_t depth
    Py_ssize_t turn_fd
    Py_ssize_t turn_key


cdef bint find_lock_slots(Store store, object lock) except -1:
    """Find ``store.lock_slots`` and ``store.turns_held``: True, or False (nothing kept) if
    any of the attributes is not a slot of its class, and turns are then taken in Python."""
    cdef LockSlots found
    found.lock = slot_offset(type(store), b"_lock")
    found.owner = slot_offset(type(lock), b"_owner")
    found.depth = slot_offset(type(lock), b"_depth")
    found.turn_fd = slot_offset(type(lock), b"_turn_fd")
    found.turn_key = slot_offset(type(lock), b"_turn_key")
    held = getattr(type(lock), "_held", None)
    if not (found.lock and found.owner and found.depth and found.turn_fd and found.turn_key
            and type(held) is dict):
        return False
    store.lock_slots = found
    store.turns_held = held
    return True


cdef object slot_object(object owner, Py_ssize_t offset):
    """The slot at ``offset`` of ``owner``, or None where it is not set."""
    cdef PyObject* found = slot_get(owner, offset)
    return None if found == NULL else <object>found


cdef enum:
    # How many times a turn in C tries the mutex again while another process holds it, before
    # it waits in Python, and of those how many after a pause of the processor (the others
    # after sched_yield): some tens of µs here, with the GIL let go, where a turn in C lasts
    # about a microsecond and a wait in Python sleeps for tens.
    TURN_SPINS = 1000
    TURN_PAUSES = 980


# The data file's name in the database directory, for fstatat.
cdef bytes DATA_FILE_NAME = os.fsencode(_DATA_NAME)


cdef object turn_begin(Store store):
    """Begin a turn of the shared writer ``store`` in C: its ``SharedLock``, or None.

    None, with the turn not taken, if the store is not open and ready
    for writes, a thread of this process is in a turn (this one too: an
    operation in a batch or a ``locked()`` block only counts in that
    turn), another writer holds the turn, or catching up meets anything
    unusual (``turn_follow``). The caller then takes the turn in Python,
    which handles all of these. Like ``SharedLock.enter``, the turn is
    this thread's, of depth 1, while it lasts: anything this thread runs
    in it (a finalizer, say) only counts in it.

    Where the turn is ``lock.write``'s mutex, which belongs to one
    thread, that mutex keeps this process's other threads out as well as
    other processes: the lock's own mutex (``_mutex``, which a turn in
    Python takes first) is left alone, and a turn in Python of another
    thread, found by its ``_owner``, is not waited for here. Where the
    turn is an ``flock``, which belongs to the open file, the lock's
    mutex is taken first, as in Python.
    """
    cdef int turn_fd, taken
    cdef unsigned long ident
    cdef volatile semidbm_turns* turns
    cdef LockSlots* slots = &store.lock_slots
    cdef PyObject* found
    if (store.fd < 0 or store.busy or not store.writable or store.owner
            or store.directory_fd < 0):
        return None
    if slots.lock:
        lock = slot_object(store, slots.lock)
    else:
        lock = store._lock
    if lock is None:
        return None
    turns = store.turns
    if turns == NULL:
        turn_fd = lock._turn_fd
        if turn_fd < 0 or not find_lock_slots(store, lock):
            return None
        turns = store.turns = semidbm_map_turns(turn_fd)
        # The kind of turns is the lock's, chosen when it joined, whatever lock.write says
        # later (a writer that joined flock turns holds no shared lock on lock.write: a
        # writer alone may make a mutex there meanwhile, which this one must not take).
        store.mutex_turns = lock._turns is not None
        if turns == NULL:
            return None
    found = slot_get(lock, slots.turn_fd)
    if found == NULL or <object>found is None:
        return None
    turn_fd = <object>found
    if turn_fd < 0:  # the lock was released
        return None
    if store.mutex_turns:
        if slot_get(lock, slots.owner) != <PyObject*>None:
            return None  # a turn of another thread, or around this operation
        taken = semidbm_take_mutex(turns)
        # Another process's turn lasts a microsecond: tried again, with the GIL let go (a
        # thread of this process in a turn is not waited for here: it is not another's).
        if taken == EBUSY and turns.holder != semidbm_process_id():
            store.turns_in_use += 1  # the map stays, should the store be closed meanwhile
            with nogil:
                taken = turn_spin(turns)
            store.turns_in_use -= 1
            if store.fd < 0 or not store.writable or store.owner or store.busy:
                if taken <= 0:  # changed meanwhile: the turn is given back unused
                    if taken == SEMIDBM_HOLDER_DIED:  # and its next taker is not told
                        turns.end_known = 0
                    semidbm_give_mutex(turns)
                turns_unmap_if_released(store)
                return None
        if taken > 0:
            return None
        if taken == SEMIDBM_HOLDER_DIED:  # it may have written past the end it published
            turns.end_known = 0
        turns.holder = semidbm_process_id()
    else:
        mutex = lock._mutex
        if not mutex.acquire(False):  # a plain lock: held by this thread too, it refuses
            return None
        if semidbm_try_turn(turn_fd):
            mutex.release()
            return None
    store.turns_in_use += 1
    try:
        ident = PyThread_get_thread_ident()
        if store.turn_owner is None or ident != store.turn_owner_ident:
            store.turn_owner = ident
            store.turn_owner_ident = ident
        slot_set(lock, slots.owner, store.turn_owner)
        slot_set(lock, slots.depth, 1)
        # Seen by this thread's other handles of the database, which then refuse at once
        # (EDEADLK) to wait for the turn this thread holds: a bulk call's iterator may
        # write through one, and so may a finalizer that a single put runs.
        (<dict>store.turns_held)[slot_object(lock, slots.turn_key)] = store.turn_owner
        if turn_follow(store, turn_fd):
            return lock
    except BaseException:  # the store is closed: the error ends the turn, as in Python
        turn_release(store, lock)
        raise
    turn_release(store, lock)
    return None


cdef void turns_unmap_if_released(Store store) noexcept:
    """Unmap lock.write if the store was released while turns in C used the map, and the
    last of them is done with it."""
    if store.fd < 0 and not store.turns_in_use and store.turns != NULL:
        semidbm_unmap_turns(store.turns)
        store.turns = NULL


cdef int turn_spin(volatile semidbm_turns* turns) noexcept nogil:
    """Try the mutex again, pausing the processor and then giving it up between tries, for
    about ``TURN_SPINS`` tries: what ``semidbm_take_mutex`` gave at the last."""
    cdef int spins, taken = EBUSY
    for spins in range(TURN_SPINS):
        if spins < TURN_PAUSES:
            semidbm_pause()
        else:
            semidbm_yield()
        taken = semidbm_take_mutex(turns)
        if taken != EBUSY:
            break
    return taken


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
    stat while ``lock.write``'s count of replaced data files is the one
    at which a stat last found it so: a shared writer counts a
    replacement in its turn before it makes one (docs/FORMAT.md, "Shared
    writers"). The file's end then comes from ``lock.write`` where the
    last turn was taken in C and published it, else from the open file,
    for a tenth of a stat's cost.
    """
    cdef uint64_t device, inode, size, count
    cdef volatile semidbm_turns* turns = store.turns
    count = turns.replacements
    if store.replacements_known and count == store.replacements_seen:
        if store.mutex_turns and turns.end_known and turns.end_replacements == count:
            size = turns.end
        elif semidbm_file_end(store.fd, &size):
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
    """End a turn ``turn_begin`` took, as ``SharedLock.leave`` with ``Store._publish`` does.

    With mutex turns, a turn whose records are all written publishes the
    file's end in ``lock.write``, for the next turn in C: a turn that
    ended otherwise, or began in Python, unpublished it.
    """
    cdef volatile semidbm_turns* turns = store.turns
    cdef bint mutex_turn = store.mutex_turns
    try:
        store.publish()
        if mutex_turn and store.fd >= 0 and store.replacements_known:
            turns.end = store.log.disk_end
            turns.end_replacements = store.replacements_seen
            turns.end_known = 1
        elif mutex_turn:
            turns.end_known = 0
    except BaseException:
        if mutex_turn:
            turns.end_known = 0
        raise
    finally:
        turn_release(store, lock)
    return 0


cdef int turn_release(Store store, object lock) except -1:
    """Let go of the turn (``lock.write``'s mutex, or its flock, unless the lock was released
    meanwhile), then mark it no longer this thread's (``turn_unmark``)."""
    cdef int failure = 0
    cdef volatile semidbm_turns* turns = store.turns
    cdef bint mutex_turn = store.mutex_turns
    store.turns_in_use -= 1
    try:
        if mutex_turn:
            turns.holder = 0
            failure = semidbm_give_mutex(turns)
        elif lock._turn_fd >= 0:
            failure = semidbm_end_turn(lock._turn_fd)
        turns_unmap_if_released(store)
        if failure:
            raise OSError(failure, os.strerror(failure))
    finally:
        turn_unmark(store, lock, not mutex_turn)
    return 0


cdef int turn_unmark(Store store, object lock, bint release) except -1:
    """Mark the turn no longer this thread's (after it was given back: the Python objects this
    touches take none of the time that other writers wait), then let go of the lock's mutex
    if ``release`` (the turn took it: an ``flock`` turn)."""
    cdef LockSlots* slots = &store.lock_slots
    try:
        slot_set(lock, slots.owner, None)
        slot_set(lock, slots.depth, 0)
        (<dict>store.turns_held).pop(slot_object(lock, slots.turn_key), None)
    finally:
        if release:
            lock._mutex.release()
    return 0
