/*
 * acl_mem.c — Ascend's virtual memory calls (aclrtReserveMemAddress & co.)
 * and aclrtGetMemInfo on CPUs, part of libascendcl.
 *
 * A reservation is an inaccessible mapping of its range (PROT_NONE,
 * MAP_NORESERVE): the addresses are the process's and nothing else will be
 * put there. Physical memory is a memfd of its size (pages come on first
 * touch, as anonymous memory's do). aclrtMapMem puts the memfd's pages at an
 * address of a reservation (MAP_SHARED | MAP_FIXED), aclrtUnmapMem puts the
 * inaccessible mapping back. Every reservation, handle and mapping is kept
 * in a registry, so that a call with an address or handle that is not one of
 * ours fails with ACL_ERROR_INVALID_PARAM (or ACL_ERROR_RT_INVALID_HANDLE)
 * and a reason, not a crash. What this file leaves to others: streams,
 * plain allocations (acl_rt.c), events (acl_event.c).
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "acl/acl.h"
#include "acl_internal.h"

#define fail            ddpc__acl_fail
#define PHYS_MAGIC      0x41434c50u /* "ACLP" */
#define RECOMMENDED_GRN ((size_t)2 << 20)

typedef struct phys {
    uint32_t magic; /* PHYS_MAGIC while alive */
    int fd;         /* the memfd (owned) */
    size_t size;
    int maps; /* mappings of it now */
    struct phys *next;
} phys;

typedef struct vm_map {
    char *addr;
    size_t size, offset; /* offset: into p */
    phys *p;
    struct vm_map *next;
} vm_map;

typedef struct vm_range {
    char *base;
    size_t size;
    vm_map *maps; /* owned */
    struct vm_range *next;
} vm_range;

static pthread_mutex_t vm_mu = PTHREAD_MUTEX_INITIALIZER; /* both registries */
static vm_range *g_ranges;
static phys *g_phys;

static size_t page(void) {
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

/* ------------------------------------------------------------ memory info */

/* MemTotal and MemAvailable of /proc/meminfo in bytes; 0 when unreadable. */
static int meminfo(size_t *avail, size_t *total) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kb, got = 0;
    *avail = *total = 0;
    for (int i = 0; i < 64 && fgets(line, sizeof line, f); i++) {
        if (sscanf(line, "MemTotal: %llu kB", &kb) == 1) *total = (size_t)kb * 1024, got |= 1;
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) *avail = (size_t)kb * 1024, got |= 2;
    }
    fclose(f);
    return got == 3;
}

aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t *free, size_t *total) {
    if ((int)attr < ACL_DDR_MEM || attr > ACL_MEM_P2P_HUGE1G)
        return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetMemInfo: attr %d is not an aclrtMemAttr",
                    (int)attr);
    if (!free || !total)
        return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetMemInfo: free or total is NULL");
    if (meminfo(free, total)) return ACL_SUCCESS;
    struct sysinfo si; /* no /proc: the kernel's counters */
    if (sysinfo(&si) != 0)
        return fail(ACL_ERROR_RT_INTERNAL_ERROR, "aclrtGetMemInfo: sysinfo: %s", strerror(errno));
    *total = (size_t)si.totalram * si.mem_unit;
    *free = ((size_t)si.freeram + si.bufferram) * si.mem_unit;
    return ACL_SUCCESS;
}

/* ------------------------------------------------------------ properties */

static aclError prop_check(const aclrtPhysicalMemProp *prop, const char *what) {
    if (!prop) return fail(ACL_ERROR_INVALID_PARAM, "%s: prop is NULL", what);
    if (prop->handleType != ACL_MEM_HANDLE_TYPE_NONE &&
        prop->handleType != ACL_MEM_HANDLE_TYPE_POSIX)
        return fail(ACL_ERROR_INVALID_PARAM, "%s: prop->handleType %d is not an aclrtMemHandleType",
                    what, (int)prop->handleType);
    if (prop->allocationType != ACL_MEM_ALLOCATION_TYPE_PINNED)
        return fail(ACL_ERROR_INVALID_PARAM,
                    "%s: prop->allocationType %d is not ACL_MEM_ALLOCATION_TYPE_PINNED", what,
                    (int)prop->allocationType);
    if ((int)prop->memAttr < ACL_DDR_MEM || prop->memAttr > ACL_MEM_P2P_HUGE1G)
        return fail(ACL_ERROR_INVALID_PARAM, "%s: prop->memAttr %d is not an aclrtMemAttr", what,
                    (int)prop->memAttr);
    switch (prop->location.type) {
    case ACL_MEM_LOCATION_TYPE_DEVICE:
        if (prop->location.id >= ddpc__acl_device_count())
            return fail(ACL_ERROR_RT_INVALID_DEVICEID,
                        "%s: prop->location.id %u is not a device (0..%u)", what, prop->location.id,
                        ddpc__acl_device_count() - 1);
        return ACL_SUCCESS;
    case ACL_MEM_LOCATION_TYPE_HOST:
    case ACL_MEM_LOCATION_TYPE_HOST_NUMA: return ACL_SUCCESS;
    default:
        return fail(ACL_ERROR_INVALID_PARAM,
                    "%s: prop->location.type %d is not DEVICE, HOST or HOST_NUMA", what,
                    (int)prop->location.type);
    }
}

aclError aclrtMemGetAllocationGranularity(aclrtPhysicalMemProp *prop,
                                          aclrtMemGranularityOptions option, size_t *granularity) {
    const char *what = "aclrtMemGetAllocationGranularity";
    aclError e = prop_check(prop, what);
    if (e != ACL_SUCCESS) return e;
    if (!granularity) return fail(ACL_ERROR_INVALID_PARAM, "%s: granularity is NULL", what);
    if (option == ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM)
        *granularity = page();
    else if (option == ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED)
        *granularity = RECOMMENDED_GRN > page() ? RECOMMENDED_GRN : page();
    else
        return fail(ACL_ERROR_INVALID_PARAM,
                    "%s: option %d is not ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM or _RECOMMENDED",
                    what, (int)option);
    return ACL_SUCCESS;
}

/* size > 0 and a whole number of pages. */
static aclError size_check(size_t size, const char *what, const char *name) {
    if (size == 0) return fail(ACL_ERROR_INVALID_PARAM, "%s: %s is 0", what, name);
    if (size % page())
        return fail(ACL_ERROR_INVALID_PARAM,
                    "%s: %s %zu is not a multiple of the granularity (%zu bytes: "
                    "aclrtMemGetAllocationGranularity)",
                    what, name, size, page());
    return ACL_SUCCESS;
}

/* ------------------------------------------------------------ reservations */

aclError aclrtReserveMemAddress(void **virPtr, size_t size, size_t alignment, void *expectPtr,
                                uint64_t flags) {
    const char *what = "aclrtReserveMemAddress";
    if (!virPtr) return fail(ACL_ERROR_INVALID_PARAM, "%s: virPtr is NULL", what);
    aclError e = size_check(size, what, "size");
    if (e != ACL_SUCCESS) return e;
    if (expectPtr) return fail(ACL_ERROR_INVALID_PARAM, "%s: expectPtr must be NULL", what);
    if (alignment & (alignment - 1))
        return fail(ACL_ERROR_INVALID_PARAM, "%s: alignment %zu is not a power of two", what,
                    alignment);
    if (flags > 1)
        return fail(ACL_ERROR_INVALID_PARAM, "%s: flags %llu is not a page type (0 or 1)", what,
                    (unsigned long long)flags);
    size_t pad = alignment > page() ? alignment : 0;
    if (size + pad < size) return fail(ACL_ERROR_INVALID_PARAM, "%s: size is too large", what);
    vm_range *r = calloc(1, sizeof *r);
    if (!r) return fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: out of memory", what);
    char *m = mmap(NULL, size + pad, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
        free(r);
        return fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: mmap of %zu bytes: %s", what, size + pad,
                    strerror(errno));
    }
    char *base = m;
    if (pad) { /* keep the aligned part, give back what is around it */
        base = (char *)(((uintptr_t)m + alignment - 1) & ~(uintptr_t)(alignment - 1));
        if (base > m) munmap(m, (size_t)(base - m));
        if (base + size < m + size + pad)
            munmap(base + size, (size_t)(m + size + pad - base - size));
    }
    r->base = base;
    r->size = size;
    pthread_mutex_lock(&vm_mu);
    r->next = g_ranges;
    g_ranges = r;
    pthread_mutex_unlock(&vm_mu);
    *virPtr = base;
    return ACL_SUCCESS;
}

/* The reservation holding [va, va + size) (vm_mu held); NULL when none. */
static vm_range *range_of(const char *va, size_t size) {
    for (vm_range *r = g_ranges; r; r = r->next)
        if (va >= r->base && va < r->base + r->size && size <= (size_t)(r->base + r->size - va))
            return r;
    return NULL;
}

aclError aclrtReleaseMemAddress(void *virPtr) {
    const char *what = "aclrtReleaseMemAddress";
    if (!virPtr) return fail(ACL_ERROR_INVALID_PARAM, "%s: virPtr is NULL", what);
    pthread_mutex_lock(&vm_mu);
    vm_range **pp = &g_ranges;
    while (*pp && (*pp)->base != virPtr) pp = &(*pp)->next;
    vm_range *r = *pp;
    int mapped = r && r->maps;
    if (r && !mapped) *pp = r->next;
    pthread_mutex_unlock(&vm_mu);
    if (!r)
        return fail(ACL_ERROR_INVALID_PARAM,
                    "%s: %p is not an address aclrtReserveMemAddress returned", what, virPtr);
    if (mapped)
        return fail(ACL_ERROR_INVALID_PARAM,
                    "%s: %p still has memory mapped in it (aclrtUnmapMem "
                    "first)",
                    what, virPtr);
    munmap(r->base, r->size);
    free(r);
    return ACL_SUCCESS;
}

/* ------------------------------------------------------------ physical memory */

aclError aclrtMallocPhysical(aclrtDrvMemHandle *handle, size_t size,
                             const aclrtPhysicalMemProp *prop, uint64_t flags) {
    const char *what = "aclrtMallocPhysical";
    if (!handle) return fail(ACL_ERROR_INVALID_PARAM, "%s: handle is NULL", what);
    aclError e = prop_check(prop, what);
    if (e == ACL_SUCCESS) e = size_check(size, what, "size");
    if (e != ACL_SUCCESS) return e;
    if (flags) return fail(ACL_ERROR_INVALID_PARAM, "%s: flags must be 0", what);
    phys *p = calloc(1, sizeof *p);
    if (!p) return fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: out of memory", what);
    p->fd = memfd_create("ddpc-acl-physical", MFD_CLOEXEC);
    if (p->fd < 0 || ftruncate(p->fd, (off_t)size) != 0) {
        int err = errno;
        if (p->fd >= 0) close(p->fd);
        free(p);
        return fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: a memfd of %zu bytes: %s", what, size,
                    strerror(err));
    }
    p->magic = PHYS_MAGIC;
    p->size = size;
    pthread_mutex_lock(&vm_mu);
    p->next = g_phys;
    g_phys = p;
    pthread_mutex_unlock(&vm_mu);
    *handle = p;
    return ACL_SUCCESS;
}

/* handle as a live one of ours (vm_mu held); NULL when not. */
static phys *phys_of(aclrtDrvMemHandle handle) {
    phys *p = g_phys;
    while (p && p != handle) p = p->next;
    return p;
}

aclError aclrtFreePhysical(aclrtDrvMemHandle handle) {
    const char *what = "aclrtFreePhysical";
    pthread_mutex_lock(&vm_mu);
    phys **pp = &g_phys;
    while (*pp && *pp != handle) pp = &(*pp)->next;
    phys *p = *pp;
    int maps = p ? p->maps : 0;
    if (p && !maps) *pp = p->next;
    pthread_mutex_unlock(&vm_mu);
    if (!p)
        return fail(ACL_ERROR_RT_INVALID_HANDLE,
                    "%s: %p is not a handle aclrtMallocPhysical returned (or it was freed)", what,
                    handle);
    if (maps)
        return fail(ACL_ERROR_INVALID_PARAM,
                    "%s: %p is still mapped %d time(s) (aclrtUnmapMem "
                    "first)",
                    what, handle, maps);
    p->magic = 0;
    close(p->fd);
    free(p);
    return ACL_SUCCESS;
}

/* ------------------------------------------------------------ mappings */

aclError aclrtMapMem(void *virPtr, size_t size, size_t offset, aclrtDrvMemHandle handle,
                     uint64_t flags) {
    const char *what = "aclrtMapMem";
    char *va = virPtr;
    if (!va) return fail(ACL_ERROR_INVALID_PARAM, "%s: virPtr is NULL", what);
    aclError e = size_check(size, what, "size");
    if (e != ACL_SUCCESS) return e;
    if ((uintptr_t)va % page() || offset % page())
        return fail(ACL_ERROR_INVALID_PARAM,
                    "%s: virPtr %p and offset %zu must be multiples of the granularity (%zu)", what,
                    virPtr, offset, page());
    if (flags) return fail(ACL_ERROR_INVALID_PARAM, "%s: flags must be 0", what);
    vm_map *m = calloc(1, sizeof *m);
    if (!m) return fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: out of memory", what);
    pthread_mutex_lock(&vm_mu);
    phys *p = phys_of(handle);
    vm_range *r = range_of(va, size);
    vm_map *over = NULL;
    for (vm_map *o = r ? r->maps : NULL; o && !over; o = o->next)
        if (va < o->addr + o->size && o->addr < va + size) over = o;
    if (!p)
        e = fail(ACL_ERROR_RT_INVALID_HANDLE, "%s: %p is not a live physical handle", what, handle);
    else if (offset > p->size || size > p->size - offset)
        e = fail(ACL_ERROR_INVALID_PARAM,
                 "%s: offset %zu + size %zu is more than the handle's %zu bytes", what, offset,
                 size, p->size);
    else if (!r)
        e = fail(ACL_ERROR_INVALID_PARAM,
                 "%s: [%p, +%zu) is not inside one range aclrtReserveMemAddress reserved", what,
                 virPtr, size);
    else if (over)
        e = fail(ACL_ERROR_INVALID_PARAM, "%s: [%p, +%zu) overlaps the mapping at %p (+%zu)", what,
                 virPtr, size, (void *)over->addr, over->size);
    else if (mmap(va, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, p->fd, (off_t)offset) ==
             MAP_FAILED)
        e = fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: mmap: %s", what, strerror(errno));
    if (e == ACL_SUCCESS) {
        *m = (vm_map){ va, size, offset, p, r->maps };
        r->maps = m;
        p->maps++;
        m = NULL;
    }
    pthread_mutex_unlock(&vm_mu);
    free(m);
    return e;
}

aclError aclrtUnmapMem(void *virPtr) {
    const char *what = "aclrtUnmapMem";
    if (!virPtr) return fail(ACL_ERROR_INVALID_PARAM, "%s: virPtr is NULL", what);
    pthread_mutex_lock(&vm_mu);
    vm_range *r = range_of(virPtr, 1);
    vm_map **pp = r ? &r->maps : NULL, *m = NULL;
    while (pp && *pp && (*pp)->addr != (char *)virPtr) pp = &(*pp)->next;
    if (pp) m = *pp;
    aclError e = ACL_SUCCESS;
    if (!m)
        e = fail(ACL_ERROR_INVALID_PARAM, "%s: no mapping starts at %p (aclrtMapMem)", what,
                 virPtr);
    else if (mmap(m->addr, m->size, PROT_NONE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1,
                  0) == MAP_FAILED) /* the reservation again */
        e = fail(ACL_ERROR_RT_INTERNAL_ERROR, "%s: mmap: %s", what, strerror(errno));
    if (e == ACL_SUCCESS) {
        *pp = m->next;
        m->p->maps--;
        free(m);
    }
    pthread_mutex_unlock(&vm_mu);
    return e;
}

/* ------------------------------------------------------------ for libhccl */

int ddpc__acl_reserved(const void *va, size_t size) {
    pthread_mutex_lock(&vm_mu);
    int ok = va && size && range_of(va, size) != NULL;
    pthread_mutex_unlock(&vm_mu);
    return ok;
}

int ddpc__acl_mapped(const void *va, size_t size, aclrtDrvMemHandle handle, size_t offset) {
    const char *a = va;
    int ok = 0;
    pthread_mutex_lock(&vm_mu);
    vm_range *r = a && size ? range_of(a, size) : NULL;
    for (vm_map *m = r ? r->maps : NULL; m && !ok; m = m->next)
        ok = m->p == handle && a >= m->addr && size <= (size_t)(m->addr + m->size - a) &&
             m->offset + (size_t)(a - m->addr) == offset;
    pthread_mutex_unlock(&vm_mu);
    return ok;
}
