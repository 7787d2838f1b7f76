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
 */
#ifndef SEMIDBM_PLATFORM_H
#define SEMIDBM_PLATFORM_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

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

static void semidbm_advise_huge(void *data, size_t size)
{
    (void)data;
    (void)size;
}

#else

#include <sys/mman.h>
#include <unistd.h>

#define SEMIDBM_MAP_BEYOND_EOF 1

static const char *semidbm_map(int fd, size_t length, int *error)
{
    void *view = mmap(NULL, length, PROT_READ, MAP_SHARED, fd, 0);
    if (view == MAP_FAILED) {
        *error = errno;
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

#endif

#if defined(__GNUC__) || defined(__clang__)
#define semidbm_prefetch(address) __builtin_prefetch(address)
#else
#define semidbm_prefetch(address) ((void)(address))
#endif

#endif
