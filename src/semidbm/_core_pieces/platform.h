/* The operating-system calls of the compiled kernel, for POSIX and Windows.
 *
 * Each returns what its POSIX namesake returns; the mapping functions
 * report failure as NULL with an errno value in *error.
 *
 * POSIX may map past the end of a file (the pages there are never
 * touched), so a writer maps room to grow into; Windows cannot map more
 * than the file holds, so there every growth past the mapping remaps.
 *
 * semidbm_advise_huge asks for huge pages (Linux transparent huge pages)
 * under a large index: its lookups land anywhere in it, and with 4 KiB
 * pages nearly every one also misses the TLB. Elsewhere it does nothing.
 * semidbm_prefetch starts loading memory that will be needed soon.
 * semidbm_release lets go of the whole pages of a range of a read-only
 * shared mapping of a file (Linux and the BSDs: MADV_DONTNEED): they leave
 * the process's resident memory, stay in the page cache, and are read
 * again from the file if touched again. Never on memory of its own: there
 * it would lose the bytes. Windows: nothing.
 *
 * For the index rebuild's two threads: semidbm_load_acquire and
 * semidbm_store_release read and write a 64-bit counter that another
 * thread writes or reads (what was written before a release is seen by
 * whoever acquires the value it stored); semidbm_exchange stores a value
 * and returns the one it replaced, in one step; semidbm_pause eases the
 * processor in a spin-wait, semidbm_yield gives it to another thread,
 * semidbm_clock_ns reads a monotonic clock in nanoseconds.
 *
 * For a shared writer's turn in C: semidbm_map_turns maps lock.write's
 * first SEMIDBM_TURNS_SIZE bytes (semidbm_turns, docs/FORMAT.md "Shared
 * writers"), readable and writable, or gives NULL; semidbm_unmap_turns
 * undoes it. Where the turn is the robust mutex in it (glibc; elsewhere
 * ENOSYS), semidbm_take_mutex takes it without waiting (0;
 * SEMIDBM_HOLDER_DIED if its last holder died holding it, which leaves it
 * taken and consistent again; or an errno: EBUSY if another thread holds
 * it), and semidbm_give_mutex lets go of it (0, or an errno);
 * semidbm_process_id is this process's id without a system call.
 * Elsewhere the turn is an flock: semidbm_try_turn takes an exclusive one
 * on a file without waiting (0, or an errno: EWOULDBLOCK if another holds
 * it), semidbm_end_turn lets go of it (0, or an errno). semidbm_file_at
 * finds the identity and size of a file named in an open directory (0, or
 * an errno); semidbm_file_end finds the size of an open file from its end,
 * without the cost of fstat on a file that has unwritten pages (0, or an
 * errno). Windows has none of them (ENOSYS, NULL): its turns are all taken
 * in Python.
 *
 * semidbm_name_missing says whether nothing at all is named name in an
 * open directory (1; 0 if something is, a dangling symbolic link too, or
 * if it cannot tell): an open that would fail costs Python an exception.
 *
 * For the index file's checks in C (trust.pxi): semidbm_open_index opens
 * a file named in an open directory read-only, never through a symbolic
 * link, without waiting should it be a FIFO, and closed at exec (the
 * descriptor, or -1 with errno set); semidbm_file_info finds an open
 * file's identity, size, modification time and whether it is a regular
 * file (0, or an errno); semidbm_read_at reads size bytes at offset,
 * fewer only where the file ends (the count, or -1 with errno set). An
 * interrupted call is made again. Windows has none of them (ENOSYS): there
 * the checks run in Python.
 */
#ifndef SEMIDBM_PLATFORM_H
#define SEMIDBM_PLATFORM_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

/* lock.write's bytes, in the machine's byte order (docs/FORMAT.md, "Shared
 * writers"; the Python side is _turn_mutex.py). */
typedef struct {
    uint64_t replacements;     /* the count of data files that shared writers replaced */
    uint32_t kind;             /* 0: turns are an flock; "MTX" and the size of a pointer: the mutex */
    uint32_t holder;           /* mutex turns: the process id of the turn's holder, or 0 */
    uint64_t end;              /* mutex turns: data's end after the last turn taken in C ... */
    uint64_t end_replacements; /* ... at this count of replacements ... */
    uint32_t end_known;        /* ... if 1; 0 once any other turn began */
    uint32_t unused[7];
    unsigned char mutex[64];   /* mutex turns: a process-shared, robust pthread mutex */
} semidbm_turns;

/* What semidbm_file_info finds of an open file: the identity and size
 * that _index_file.Header.identity holds (st_mtime_ns is the two times
 * together), and whether it is a regular file. */
typedef struct {
    uint64_t device;
    uint64_t inode;
    uint64_t size;
    int64_t mtime_seconds;
    int64_t mtime_nanoseconds;
    int regular;
    int device_signed; /* dev_t is signed here (macOS): Python's st_dev may be negative */
} semidbm_info;

#define SEMIDBM_TURNS_SIZE 128
#define SEMIDBM_HOLDER_DIED (-1)

#ifdef _WIN32

#include <io.h>
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN /* keep the rest of the Windows API's macros out */
#endif
#include <windows.h>

#define SEMIDBM_MAP_BEYOND_EOF 0

static const char *semidbm_map(int fd, size_t length, int *error)
{
    HANDLE file = (HANDLE)_get_osfhandle(fd);
    HANDLE mapping;
    void *view;
    unsigned long long size = length;

    if (file == INVALID_HANDLE_VALUE) {
        *error = EBADF;
        return NULL;
    }
    mapping = CreateFileMappingW(file, NULL, PAGE_READONLY, (DWORD)(size >> 32),
                                 (DWORD)(size & 0xFFFFFFFFu), NULL);
    if (mapping == NULL) {
        *error = EIO;
        return NULL;
    }
    view = MapViewOfFile(mapping, FILE_MAP_READ, 0, 0, length);
    CloseHandle(mapping); /* the view keeps the mapping alive */
    if (view == NULL) {
        *error = ENOMEM;
        return NULL;
    }
    return (const char *)view;
}

static void semidbm_unmap(const char *data, size_t length)
{
    (void)length;
    UnmapViewOfFile(data);
}

static ptrdiff_t semidbm_write(int fd, const char *data, size_t size)
{
    return _write(fd, data, (unsigned int)size);
}

static int semidbm_close(int fd)
{
    return _close(fd);
}

/* The size of the file fd, or -1 with errno set. */
static int64_t semidbm_file_size(int fd)
{
    return _filelengthi64(fd);
}

/* Cut or extend the file fd to size bytes: 0, or an errno. */
static int semidbm_truncate(int fd, int64_t size)
{
    return _chsize_s(fd, size);
}

static void semidbm_advise_huge(void *data, size_t size)
{
    (void)data;
    (void)size;
}

static void semidbm_release(const char *data, size_t size)
{
    (void)data;
    (void)size;
}

static void semidbm_yield(void)
{
    SwitchToThread();
}

static int semidbm_try_turn(int fd)
{
    (void)fd;
    return ENOSYS;
}

static int semidbm_end_turn(int fd)
{
    (void)fd;
    return ENOSYS;
}

static int semidbm_file_at(int directory, const char *name, uint64_t *device, uint64_t *inode,
                           uint64_t *size)
{
    (void)directory;
    (void)name;
    (void)device;
    (void)inode;
    (void)size;
    return ENOSYS;
}

static int semidbm_name_missing(int directory, const char *name)
{
    (void)directory;
    (void)name;
    return 0;
}

static volatile semidbm_turns *semidbm_map_turns(int fd)
{
    (void)fd;
    return NULL;
}

static void semidbm_unmap_turns(volatile semidbm_turns *turns)
{
    (void)turns;
}

static int semidbm_file_end(int fd, uint64_t *size)
{
    (void)fd;
    (void)size;
    return ENOSYS;
}

static int semidbm_open_index(int directory, const char *name)
{
    (void)directory;
    (void)name;
    errno = ENOSYS;
    return -1;
}

static int semidbm_file_info(int fd, semidbm_info *info)
{
    (void)fd;
    (void)info;
    return ENOSYS;
}

static ptrdiff_t semidbm_read_at(int fd, char *data, size_t size, uint64_t offset)
{
    (void)fd;
    (void)data;
    (void)size;
    (void)offset;
    errno = ENOSYS;
    return -1;
}

static int64_t semidbm_clock_ns(void)
{
    LARGE_INTEGER now, frequency;
    QueryPerformanceCounter(&now);
    QueryPerformanceFrequency(&frequency);
    return (int64_t)((double)now.QuadPart * 1e9 / (double)frequency.QuadPart);
}

#else

#include <sched.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SEMIDBM_MAP_BEYOND_EOF 1

/* The errno of a call that failed, never 0: the callers take 0 for success (and would use
 * what the call did not fill in), and the compiler cannot know errno is set. */
static int semidbm_failure(void)
{
    int error = errno;
    return error != 0 ? error : EIO;
}

static const char *semidbm_map(int fd, size_t length, int *error)
{
    void *view = mmap(NULL, length, PROT_READ, MAP_SHARED, fd, 0);
    if (view == MAP_FAILED) {
        *error = semidbm_failure();
        return NULL;
    }
    return (const char *)view;
}

static void semidbm_unmap(const char *data, size_t length)
{
    munmap((void *)data, length);
}

static ptrdiff_t semidbm_write(int fd, const char *data, size_t size)
{
    return write(fd, data, size);
}

static int semidbm_close(int fd)
{
    return close(fd);
}

/* The size of the file fd, or -1 with errno set. */
static int64_t semidbm_file_size(int fd)
{
    struct stat info;
    return fstat(fd, &info) == 0 ? (int64_t)info.st_size : -1;
}

/* Cut or extend the file fd to size bytes: 0, or an errno. */
static int semidbm_truncate(int fd, int64_t size)
{
    return ftruncate(fd, (off_t)size) == 0 ? 0 : semidbm_failure();
}

static void semidbm_advise_huge(void *data, size_t size)
{
#ifdef MADV_HUGEPAGE
    /* Only whole huge pages inside the block can be huge. */
    uintptr_t start = ((uintptr_t)data + 0x1FFFFF) & ~(uintptr_t)0x1FFFFF;
    uintptr_t end = ((uintptr_t)data + size) & ~(uintptr_t)0x1FFFFF;
    if (end > start)
        madvise((void *)start, end - start, MADV_HUGEPAGE);
#endif
}

static void semidbm_release(const char *data, size_t size)
{
#ifdef MADV_DONTNEED
    /* Only the whole pages inside the range: the others hold bytes still wanted. */
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t start = ((uintptr_t)data + page - 1) / page * page;
    uintptr_t end = ((uintptr_t)data + size) / page * page;
    if (end > start)
        madvise((void *)start, end - start, MADV_DONTNEED);
#else
    (void)data;
    (void)size;
#endif
}

static void semidbm_yield(void)
{
    sched_yield();
}

static int semidbm_try_turn(int fd)
{
    return flock(fd, LOCK_EX | LOCK_NB) == 0 ? 0 : semidbm_failure();
}

static int semidbm_end_turn(int fd)
{
    return flock(fd, LOCK_UN) == 0 ? 0 : semidbm_failure();
}

static int semidbm_file_at(int directory, const char *name, uint64_t *device, uint64_t *inode,
                           uint64_t *size)
{
    struct stat info;
    if (fstatat(directory, name, &info, 0) != 0)
        return semidbm_failure();
    *device = (uint64_t)info.st_dev;
    *inode = (uint64_t)info.st_ino;
    *size = (uint64_t)info.st_size;
    return 0;
}

static int semidbm_name_missing(int directory, const char *name)
{
    struct stat info;
    return fstatat(directory, name, &info, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT;
}

static volatile semidbm_turns *semidbm_map_turns(int fd)
{
    void *address = mmap(NULL, SEMIDBM_TURNS_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    return address == MAP_FAILED ? NULL : (volatile semidbm_turns *)address;
}

static void semidbm_unmap_turns(volatile semidbm_turns *turns)
{
    munmap((void *)turns, SEMIDBM_TURNS_SIZE);
}

static int semidbm_file_end(int fd, uint64_t *size)
{
    off_t end = lseek(fd, 0, SEEK_END);
    if (end < 0)
        return semidbm_failure();
    *size = (uint64_t)end;
    return 0;
}

static int64_t semidbm_clock_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

static int semidbm_open_index(int directory, const char *name)
{
    int fd;
    do
        fd = openat(directory, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    return fd;
}

static int semidbm_file_info(int fd, semidbm_info *info)
{
    struct stat found;
    if (fstat(fd, &found) != 0)
        return semidbm_failure();
    info->device = (uint64_t)found.st_dev;
    info->inode = (uint64_t)found.st_ino;
    info->size = (uint64_t)found.st_size;
#ifdef __APPLE__
    info->mtime_seconds = (int64_t)found.st_mtimespec.tv_sec;
    info->mtime_nanoseconds = (int64_t)found.st_mtimespec.tv_nsec;
#else
    info->mtime_seconds = (int64_t)found.st_mtim.tv_sec;
    info->mtime_nanoseconds = (int64_t)found.st_mtim.tv_nsec;
#endif
    info->regular = S_ISREG(found.st_mode) != 0;
    info->device_signed = (dev_t)-1 < 0;
    return 0;
}

static ptrdiff_t semidbm_read_at(int fd, char *data, size_t size, uint64_t offset)
{
    size_t done = 0;
    while (done < size) {
        ssize_t part = pread(fd, data + done, size - done, (off_t)(offset + done));
        if (part < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (part == 0)
            break;
        done += (size_t)part;
    }
    return (ptrdiff_t)done;
}

#endif

#if defined(__GLIBC__) && !defined(_WIN32)
#include <pthread.h>

typedef char semidbm_mutex_fits[sizeof(pthread_mutex_t) <= 64 ? 1 : -1];

static int semidbm_take_mutex(volatile semidbm_turns *turns)
{
    pthread_mutex_t *mutex = (pthread_mutex_t *)turns->mutex;
    int failure = pthread_mutex_trylock(mutex);
    if (failure != EOWNERDEAD)
        return failure;
    failure = pthread_mutex_consistent(mutex);
    if (failure) {
        pthread_mutex_unlock(mutex);
        return failure;
    }
    return SEMIDBM_HOLDER_DIED;
}

static int semidbm_give_mutex(volatile semidbm_turns *turns)
{
    return pthread_mutex_unlock((pthread_mutex_t *)turns->mutex);
}

/* This process's id, kept: getpid() is a system call. A forked child finds its own. */
static uint32_t semidbm_pid;

static void semidbm_pid_refresh(void)
{
    semidbm_pid = (uint32_t)getpid();
}

static uint32_t semidbm_process_id(void)
{
    if (!semidbm_pid) {
        semidbm_pid_refresh();
        pthread_atfork(NULL, NULL, semidbm_pid_refresh);
    }
    return semidbm_pid;
}

#else

static int semidbm_take_mutex(volatile semidbm_turns *turns)
{
    (void)turns;
    return ENOSYS;
}

static int semidbm_give_mutex(volatile semidbm_turns *turns)
{
    (void)turns;
    return ENOSYS;
}

static uint32_t semidbm_process_id(void)
{
    return 0;
}

#endif

#ifdef _MSC_VER
static uint64_t semidbm_load_acquire(volatile uint64_t *counter)
{
    return (uint64_t)InterlockedCompareExchange64((volatile LONG64 *)counter, 0, 0);
}

static void semidbm_store_release(volatile uint64_t *counter, uint64_t value)
{
    InterlockedExchange64((volatile LONG64 *)counter, (LONG64)value);
}

static uint64_t semidbm_exchange(volatile uint64_t *counter, uint64_t value)
{
    return (uint64_t)InterlockedExchange64((volatile LONG64 *)counter, (LONG64)value);
}

static uint64_t semidbm_fetch_add(volatile uint64_t *counter, uint64_t value)
{
    return (uint64_t)InterlockedExchangeAdd64((volatile LONG64 *)counter, (LONG64)value);
}
#else
static uint64_t semidbm_load_acquire(volatile uint64_t *counter)
{
    return __atomic_load_n(counter, __ATOMIC_ACQUIRE);
}

static void semidbm_store_release(volatile uint64_t *counter, uint64_t value)
{
    __atomic_store_n(counter, value, __ATOMIC_RELEASE);
}

static uint64_t semidbm_exchange(volatile uint64_t *counter, uint64_t value)
{
    return __atomic_exchange_n(counter, value, __ATOMIC_SEQ_CST);
}

static uint64_t semidbm_fetch_add(volatile uint64_t *counter, uint64_t value)
{
    return __atomic_fetch_add(counter, value, __ATOMIC_SEQ_CST);
}
#endif

#if defined(__x86_64__) || defined(__i386__) || defined(_M_X64) || defined(_M_IX86)
#include <emmintrin.h>
#define semidbm_pause() _mm_pause()
#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
#define semidbm_pause() __asm__ __volatile__("yield")
#else
#define semidbm_pause() ((void)0)
#endif

#if defined(__GNUC__) || defined(__clang__)
/* The empty volatile asm is a side effect: GCC sees none in __builtin_prefetch,
 * so a function that only prefetches is found to do nothing
 * (-fipa-pure-const) and a call to it left out, hint and all. */
#define semidbm_prefetch(address) \
    do { __builtin_prefetch(address); __asm__ __volatile__(""); } while (0)
#else
#define semidbm_prefetch(address) ((void)(address))
#endif

#endif
