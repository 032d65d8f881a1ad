/* fuzz_util.c — fuzz_file: the input as a file, without touching the disk. */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz/fuzz.h"

const char *fuzz_file(const char *name, const void *data, size_t size) {
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create(name, 0);
        if (fd < 0) fuzz_fail("memfd_create failed");
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0) fuzz_fail("ftruncate failed");
    if (size && pwrite(fd, data, size, 0) != (ssize_t)size) fuzz_fail("pwrite failed");
    return path;
}
