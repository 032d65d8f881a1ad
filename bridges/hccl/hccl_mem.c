/*
 * hccl_mem.c — the memory HCCL programs register with a communicator:
 * virtual memory ranges and the physical memory activated in them
 * (HcclCommSetMemoryRange & co., HCCL Test's -z) and symmetric windows
 * (HcclCommSymWinRegister, its -m).
 *
 * On NPUs these let HCCL map the memory for its engines. On CPUs any host
 * memory serves the collectives, so here they are records, checked against
 * what libascendcl reserved and mapped (acl_internal.h): a range must be
 * reserved, active memory must be mapped from the handle it names, nothing
 * may overlap, and undoing needs what was done. What this file leaves to
 * others: the memory itself (acl_mem.c), the collectives (hccl_coll.c).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "acl_internal.h"
#include "hccl_internal.h"

/* Physical memory activated at [addr, addr + size) of a range. */
typedef struct hccl_active {
    char *addr;
    size_t size;
    struct hccl_active *next;
} hccl_active;

typedef struct hccl_range {
    char *base;
    size_t size;
    hccl_active *active; /* owned */
    struct hccl_range *next;
} hccl_range;

#define WIN_MAGIC 0x4857494eu /* "HWIN" */

typedef struct hccl_win {
    uint32_t magic; /* WIN_MAGIC while registered */
    hccl_comm *hc;
    char *addr;
    uint64_t size;
    struct hccl_win *next; /* the registry */
} hccl_win;

static pthread_mutex_t win_mu = PTHREAD_MUTEX_INITIALIZER;
static hccl_win *g_wins; /* every registered window, of every communicator (win_mu) */

static int overlap(const char *a, size_t an, const char *b, size_t bn) {
    return a < b + bn && b < a + an;
}

/* ------------------------------------------------------------ ranges */

HcclResult HcclCommSetMemoryRange(HcclComm comm, void *baseVirPtr, size_t size, size_t alignment,
                                  uint64_t flags) {
    const char *what = "HcclCommSetMemoryRange";
    hccl_comm *hc = hccl__comm(comm);
    if (!hc) return hccl__fail(HCCL_E_PTR, "%s: comm is not a live communicator", what);
    if (!baseVirPtr || size == 0)
        return hccl__fail(HCCL_E_PARA, "%s: baseVirPtr is NULL or size is 0", what);
    if (alignment || flags)
        return hccl__fail(HCCL_E_PARA, "%s: alignment and flags must be 0", what);
    if (!ddpc__acl_reserved(baseVirPtr, size))
        return hccl__fail(HCCL_E_PARA,
                          "%s: [%p, +%zu) is not inside a range aclrtReserveMemAddress reserved",
                          what, baseVirPtr, size);
    hccl_range *r = calloc(1, sizeof *r);
    if (!r) return hccl__fail(HCCL_E_OOM, "%s: out of memory", what);
    *r = (hccl_range){ baseVirPtr, size, NULL, NULL };
    pthread_mutex_lock(&hc->mu);
    hccl_range *o = hc->ranges;
    while (o && !overlap(o->base, o->size, r->base, r->size)) o = o->next;
    if (!o) {
        r->next = hc->ranges;
        hc->ranges = r;
    }
    pthread_mutex_unlock(&hc->mu);
    if (!o) return HCCL_SUCCESS;
    free(r);
    return hccl__fail(HCCL_E_PARA, "%s: [%p, +%zu) overlaps the range set at %p (+%zu)", what,
                      baseVirPtr, size, (void *)o->base, o->size);
}

HcclResult HcclCommUnsetMemoryRange(HcclComm comm, void *baseVirPtr) {
    const char *what = "HcclCommUnsetMemoryRange";
    hccl_comm *hc = hccl__comm(comm);
    if (!hc) return hccl__fail(HCCL_E_PTR, "%s: comm is not a live communicator", what);
    pthread_mutex_lock(&hc->mu);
    hccl_range **pp = &hc->ranges;
    while (*pp && (*pp)->base != (char *)baseVirPtr) pp = &(*pp)->next;
    hccl_range *r = *pp;
    int busy = r && r->active;
    if (r && !busy) *pp = r->next;
    pthread_mutex_unlock(&hc->mu);
    if (!r)
        return hccl__fail(HCCL_E_PARA, "%s: no range of this communicator starts at %p", what,
                          baseVirPtr);
    if (busy)
        return hccl__fail(HCCL_E_PARA,
                          "%s: memory is still active in the range at %p "
                          "(HcclCommDeactivateCommMemory first)",
                          what, baseVirPtr);
    free(r);
    return HCCL_SUCCESS;
}

HcclResult HcclCommActivateCommMemory(HcclComm comm, void *virPtr, size_t size, size_t offset,
                                      aclrtDrvMemHandle handle, uint64_t flags) {
    const char *what = "HcclCommActivateCommMemory";
    hccl_comm *hc = hccl__comm(comm);
    char *va = virPtr;
    if (!hc) return hccl__fail(HCCL_E_PTR, "%s: comm is not a live communicator", what);
    if (!va || size == 0 || !handle)
        return hccl__fail(HCCL_E_PARA, "%s: virPtr or handle is NULL, or size is 0", what);
    if (flags) return hccl__fail(HCCL_E_PARA, "%s: flags must be 0", what);
    if (!ddpc__acl_mapped(va, size, handle, offset))
        return hccl__fail(HCCL_E_PARA,
                          "%s: [%p, +%zu) is not mapped from handle %p at offset %zu "
                          "(aclrtMapMem first)",
                          what, virPtr, size, handle, offset);
    hccl_active *a = calloc(1, sizeof *a);
    if (!a) return hccl__fail(HCCL_E_OOM, "%s: out of memory", what);
    *a = (hccl_active){ va, size, NULL };
    HcclResult res = HCCL_SUCCESS;
    pthread_mutex_lock(&hc->mu);
    hccl_range *r = hc->ranges;
    while (r && !(va >= r->base && size <= r->size && va - r->base <= (ptrdiff_t)(r->size - size)))
        r = r->next;
    hccl_active *o = r ? r->active : NULL;
    while (o && !overlap(o->addr, o->size, va, size)) o = o->next;
    if (r && !o) {
        a->next = r->active;
        r->active = a;
        a = NULL;
    } else if (!r) {
        res = HCCL_E_PARA;
    }
    pthread_mutex_unlock(&hc->mu);
    if (!a) return HCCL_SUCCESS;
    free(a);
    if (res != HCCL_SUCCESS)
        return hccl__fail(res,
                          "%s: [%p, +%zu) is not inside a range of this communicator "
                          "(HcclCommSetMemoryRange first)",
                          what, virPtr, size);
    return hccl__fail(HCCL_E_PARA, "%s: [%p, +%zu) overlaps memory already active", what, virPtr,
                      size);
}

HcclResult HcclCommDeactivateCommMemory(HcclComm comm, void *virPtr) {
    const char *what = "HcclCommDeactivateCommMemory";
    hccl_comm *hc = hccl__comm(comm);
    if (!hc) return hccl__fail(HCCL_E_PTR, "%s: comm is not a live communicator", what);
    hccl_active *found = NULL;
    pthread_mutex_lock(&hc->mu);
    for (hccl_range *r = hc->ranges; r && !found; r = r->next) {
        hccl_active **pp = &r->active;
        while (*pp && (*pp)->addr != (char *)virPtr) pp = &(*pp)->next;
        if ((found = *pp)) *pp = found->next;
    }
    pthread_mutex_unlock(&hc->mu);
    if (!found)
        return hccl__fail(HCCL_E_PARA,
                          "%s: no memory of this communicator was activated at %p "
                          "(HcclCommActivateCommMemory)",
                          what, virPtr);
    free(found);
    return HCCL_SUCCESS;
}

/* ------------------------------------------------------------ symmetric windows */

HcclResult HcclCommSymWinRegister(HcclComm comm, void *addr, uint64_t size,
                                  HcclCommSymWindow *winHandle, uint32_t flag) {
    const char *what = "HcclCommSymWinRegister";
    hccl_comm *hc = hccl__comm(comm);
    if (!hc) return hccl__fail(HCCL_E_PTR, "%s: comm is not a live communicator", what);
    if (!addr || !winHandle) return hccl__fail(HCCL_E_PTR, "%s: addr or winHandle is NULL", what);
    if (flag == HCCL_WIN_DEFAULT)
        return hccl__fail(HCCL_E_NOT_SUPPORT,
                          "%s: flag HCCL_WIN_DEFAULT is not supported (HCCL_WIN_COLL_SYMMETRIC)",
                          what);
    if (flag != HCCL_WIN_COLL_SYMMETRIC)
        return hccl__fail(HCCL_E_PARA, "%s: flag %u is not HCCL_WIN_COLL_SYMMETRIC (1)", what,
                          flag);
    if (size == 0 || size > hc->symwin_max)
        return hccl__fail(HCCL_E_PARA,
                          "%s: size %llu is not in 1..%llu (hcclSymWinMaxMemSizePerRank GiB)", what,
                          (unsigned long long)size, (unsigned long long)hc->symwin_max);
    hccl_win *w = calloc(1, sizeof *w);
    if (!w) return hccl__fail(HCCL_E_OOM, "%s: out of memory", what);
    *w = (hccl_win){ WIN_MAGIC, hc, addr, size, NULL };
    pthread_mutex_lock(&win_mu);
    hccl_win *o = g_wins;
    while (o && !(o->hc == hc && overlap(o->addr, o->size, w->addr, w->size))) o = o->next;
    if (!o) {
        w->next = g_wins;
        g_wins = w;
    }
    pthread_mutex_unlock(&win_mu);
    if (o) {
        free(w);
        return hccl__fail(HCCL_E_PARA, "%s: [%p, +%llu) overlaps the window at %p (+%llu)", what,
                          addr, (unsigned long long)size, (void *)o->addr,
                          (unsigned long long)o->size);
    }
    *winHandle = w;
    return HCCL_SUCCESS;
}

HcclResult HcclCommSymWinDeregister(HcclCommSymWindow winHandle) {
    pthread_mutex_lock(&win_mu);
    hccl_win **pp = &g_wins;
    while (*pp && *pp != winHandle) pp = &(*pp)->next;
    hccl_win *w = *pp;
    if (w) *pp = w->next;
    pthread_mutex_unlock(&win_mu);
    if (!w)
        return hccl__fail(HCCL_E_PARA,
                          "HcclCommSymWinDeregister: %p is not a registered window (or its "
                          "communicator was destroyed)",
                          winHandle);
    w->magic = 0;
    free(w);
    return HCCL_SUCCESS;
}

void hccl__mem_forget(hccl_comm *hc) {
    pthread_mutex_lock(&hc->mu);
    hccl_range *r = hc->ranges;
    hc->ranges = NULL;
    pthread_mutex_unlock(&hc->mu);
    while (r) {
        hccl_range *next = r->next;
        while (r->active) {
            hccl_active *a = r->active;
            r->active = a->next;
            free(a);
        }
        free(r);
        r = next;
    }
    pthread_mutex_lock(&win_mu);
    for (hccl_win **pp = &g_wins; *pp;) {
        hccl_win *w = *pp;
        if (w->hc == hc) {
            *pp = w->next;
            free(w);
        } else {
            pp = &w->next;
        }
    }
    pthread_mutex_unlock(&win_mu);
}
