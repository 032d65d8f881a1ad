/*
 * loader.c — batches in the sampler's order, decoded ahead by one thread.
 *
 * The dataset stays as raw bytes; each batch is transformed straight from
 * them into its slot's float buffer (the only copy). With prefetch k > 0 a
 * background thread fills a ring of k + 1 slots: k ready batches plus the
 * one the caller holds (valid until its next call). Batch b always lives in
 * slot b % (k + 1), so the order is the sampler's whatever the timing.
 *
 * Synchronisation: one mutex; the caller waits on `ready` (bounded by
 * DDPC_DATA_TIMEOUT), the thread on `space`, and start_epoch on `idle` while
 * the thread finishes the batch it is decoding. The thread decodes outside
 * the lock; `busy` says it is doing so, `cancel` that its work is void.
 * Before either side sleeps on its condition variable it watches the other's
 * counter for up to SPIN_S (see spin_while): on the virtual machines this
 * was measured on, a sleeping thread took tens of microseconds to run again
 * once woken, while a step of the example takes about 20 us. The counters
 * are read without the mutex by the spins, so they are atomic.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/base.h"
#include "base/env.h"
#include "base/util.h"
#include "data/internal.h"

/* How long a side watches the other's counter before it sleeps. */
#define SPIN_S 100e-6

typedef struct slot {
    ddpc_batch b; /* what ddpc_loader_next hands out */
    float *x;     /* (batch_size, rows*cols) */
    int32_t *y;   /* (batch_size) */
} slot;

struct ddpc_loader {
    const ddpc_dataset *ds; /* borrowed */
    ddpc_sampler *sampler;  /* borrowed; NULL = identity order */
    int64_t *identity;      /* (ds->n) 0..n-1 when sampler is NULL */
    size_t len;             /* samples per epoch */
    int batch_size, drop_last, prefetch;
    size_t nb;         /* batches per epoch */
    ddpc__xform xform; /* pixel value -> transformed float */
    int nslots;        /* prefetch + 1 */
    slot *slots;       /* (nslots) */
    double timeout_s;  /* DDPC_DATA_TIMEOUT */

    pthread_mutex_t mu;
    pthread_cond_t ready, space, idle;
    pthread_t thread;
    int have_thread;
    /* under mu: */
    const int64_t *idx; /* (len) this epoch's order, borrowed from the sampler */
    int active;         /* an epoch has been started */
    size_t produced;    /* batches decoded this epoch */
    size_t consumed;    /* batches handed out this epoch */
    int busy, cancel, quit;
};

/* Decodes batch b of the current epoch into sl. */
static void decode(ddpc_loader *l, const int64_t *idx, size_t b, slot *sl) {
    size_t first = b * (size_t)l->batch_size;
    size_t left = l->len - first;
    int size = left < (size_t)l->batch_size ? (int)left : l->batch_size;
    const int64_t *ix = idx + first;
    ddpc__xform_rows(&l->xform, l->ds, ix, size, sl->x);
    for (int i = 0; i < size; i++) sl->y[i] = l->ds->labels[ix[i]];
    sl->b.size = size;
    sl->b.index = b;
}

static size_t load_count(const size_t *v) { return __atomic_load_n(v, __ATOMIC_ACQUIRE); }
static void store_count(size_t *v, size_t x) { __atomic_store_n(v, x, __ATOMIC_RELEASE); }

/* Called without the mutex: returns once *v differs from old, or after
 * SPIN_S. Yields the CPU every 64 polls, in case the thread it waits for
 * shares this CPU. */
static void spin_while(const size_t *v, size_t old) {
    double end = ddpc__now() + SPIN_S;
    for (unsigned i = 1; load_count(v) == old; i++) {
        ddpc__cpu_relax();
        if (i % 64 == 0) {
            if (ddpc__now() > end) return;
            sched_yield();
        }
    }
}

/* Under mu: this epoch has batches left for the thread to decode. */
static int epoch_has_work(const ddpc_loader *l) {
    return l->active && !l->cancel && l->produced < l->nb;
}

/* Under mu: the thread has nothing to decode now. */
static int nothing_to_do(const ddpc_loader *l) {
    return !epoch_has_work(l) || l->produced - l->consumed >= (size_t)l->prefetch;
}

/* The prefetch thread: while an epoch is active and not cancelled, decodes
 * the next batch whenever fewer than `prefetch` are ready; exits on quit.
 * With the ring full, it watches for the caller to take a batch (SPIN_S)
 * before it sleeps. */
static void *producer(void *arg) {
    ddpc_loader *l = arg;
    pthread_setname_np(pthread_self(), "ddpc-data"); /* shows in top -H, gdb */
    pthread_mutex_lock(&l->mu);
    while (!l->quit) {
        if (nothing_to_do(l)) {
            if (epoch_has_work(l)) { /* the ring is full */
                size_t seen = l->consumed;
                pthread_mutex_unlock(&l->mu);
                spin_while(&l->consumed, seen);
                pthread_mutex_lock(&l->mu);
            }
            /* still nothing to do: sleep until signalled (timed, so a lost
             * wake-up costs 0.5 s, not a hang) */
            if (!l->quit && nothing_to_do(l))
                ddpc__cond_wait_until(&l->space, &l->mu, ddpc__now() + 0.5, 0.5);
            continue;
        }
        size_t b = l->produced;
        const int64_t *idx = l->idx;
        slot *sl = &l->slots[b % (size_t)l->nslots];
        l->busy = 1;
        pthread_mutex_unlock(&l->mu);
        decode(l, idx, b, sl);
        pthread_mutex_lock(&l->mu);
        l->busy = 0;
        if (l->cancel) {
            pthread_cond_broadcast(&l->idle); /* start_epoch waits for this */
            continue;
        }
        store_count(&l->produced, b + 1);
        pthread_cond_broadcast(&l->ready);
    }
    l->busy = 0;
    pthread_cond_broadcast(&l->idle);
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

/*
 * Creates a loader (see data.h): checks the arguments, builds the lookup
 * table, allocates the slots and, when prefetch > 0, starts the thread.
 */
ddpc_loader_options ddpc_loader_options_default(void) {
    ddpc_loader_options o = {
        .batch_size = 1, .drop_last = 0, .mean = 0.0f, .std = 1.0f, .prefetch = 0
    };
    return o;
}

ddpc_status ddpc_loader_create(const ddpc_dataset *ds, ddpc_sampler *sampler,
                               const ddpc_loader_options *o, ddpc_loader **out) {
    if (!out) return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_loader_create: out is NULL");
    *out = NULL;
    ddpc_loader_options def = ddpc_loader_options_default();
    if (!o) o = &def;
    int batch_size = o->batch_size, drop_last = o->drop_last, prefetch = o->prefetch;
    float mean = o->mean, std = o->std;
    if (!ds || !ds->images || !ds->labels || ds->n < 0 || ds->rows < 1 || ds->cols < 1)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_loader_create: dataset is NULL or empty");
    if (batch_size < 1)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_loader_create: batch_size=%d, must be >= 1",
                         batch_size);
    if (prefetch < 0 || prefetch > 1024)
        return ddpc__err(DDPC_ERR_INVALID_ARG,
                         "ddpc_loader_create: prefetch=%d is out of range [0, 1024]", prefetch);
    if (!isfinite(mean) || !isfinite(std) || std == 0.0f)
        return ddpc__err(DDPC_ERR_INVALID_ARG,
                         "ddpc_loader_create: Normalize(mean=%g, std=%g) is invalid", (double)mean,
                         (double)std);
    if (sampler && ddpc_sampler_dataset_len(sampler) > (size_t)ds->n)
        return ddpc__err(
            DDPC_ERR_INVALID_ARG,
            "ddpc_loader_create: the sampler covers %zu samples but the dataset has %d",
            ddpc_sampler_dataset_len(sampler), ds->n);
    double timeout_s;
    DDPC_CHECK(ddpc__env_double(DDPC_ENV_DATA_TIMEOUT, &timeout_s));

    ddpc_loader *l = calloc(1, sizeof *l);
    if (!l) return ddpc__err(DDPC_ERR_NOMEM, "ddpc_loader_create: out of memory");
    l->ds = ds;
    l->sampler = sampler;
    l->len = sampler ? ddpc_sampler_len(sampler) : (size_t)ds->n;
    l->batch_size = batch_size;
    l->drop_last = drop_last != 0;
    l->prefetch = prefetch;
    l->nb = l->drop_last ? l->len / (size_t)batch_size
                         : (l->len + (size_t)batch_size - 1) / (size_t)batch_size;
    l->timeout_s = timeout_s;
    ddpc__xform_init(&l->xform, mean, std);
    l->nslots = prefetch + 1;
    pthread_mutex_init(&l->mu, NULL);
    ddpc__cond_init_monotonic(&l->ready);
    ddpc__cond_init_monotonic(&l->space);
    ddpc__cond_init_monotonic(&l->idle);

    ddpc_status s = DDPC_OK;
    const size_t d = (size_t)ds->rows * (size_t)ds->cols;
    if (!sampler) {
        l->identity = malloc(((size_t)ds->n + 1) * sizeof *l->identity);
        if (!l->identity)
            s = ddpc__err(DDPC_ERR_NOMEM, "ddpc_loader_create: out of memory");
        else
            for (int i = 0; i < ds->n; i++) l->identity[i] = i;
    }
    l->slots = calloc((size_t)l->nslots, sizeof *l->slots);
    if (!l->slots && s == DDPC_OK)
        s = ddpc__err(DDPC_ERR_NOMEM, "ddpc_loader_create: out of memory");
    for (int i = 0; s == DDPC_OK && i < l->nslots; i++) {
        l->slots[i].x = malloc((size_t)batch_size * d * sizeof(float));
        l->slots[i].y = malloc((size_t)batch_size * sizeof(int32_t));
        if (!l->slots[i].x || !l->slots[i].y)
            s = ddpc__err(DDPC_ERR_NOMEM,
                          "ddpc_loader_create: cannot allocate %d batches of %d x %zu floats",
                          l->nslots, batch_size, d);
        else {
            l->slots[i].b.x = l->slots[i].x;
            l->slots[i].b.y = l->slots[i].y;
        }
    }
    if (s == DDPC_OK && prefetch > 0) {
        int e = pthread_create(&l->thread, NULL, producer, l);
        if (e != 0)
            s = ddpc__err_errno(DDPC_ERR_SYSTEM, e,
                                "ddpc_loader_create: cannot start the prefetch thread");
        else
            l->have_thread = 1;
    }
    if (s != DDPC_OK) {
        ddpc_loader_destroy(l);
        return s;
    }
    DDPC_INFO(DATA, "loader: %zu samples, batch %d, %zu batches/epoch, drop_last %d, prefetch %d",
              l->len, batch_size, l->nb, l->drop_last, prefetch);
    *out = l;
    return DDPC_OK;
}

/*
 * Starts an epoch: 1. tells the thread its work is void and waits (bounded)
 * until it is not decoding; 2. sets the sampler's epoch and takes its new
 * order; 3. resets the counters and wakes the thread.
 */
ddpc_status ddpc_loader_start_epoch(ddpc_loader *l, uint64_t epoch) {
    return ddpc_loader_start_epoch_at(l, epoch, 0);
}

ddpc_status ddpc_loader_start_epoch_at(ddpc_loader *l, uint64_t epoch, size_t start) {
    if (!l) return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_loader_start_epoch: loader is NULL");
    if (start && !l->sampler)
        return ddpc__err(DDPC_ERR_INVALID_ARG,
                         "ddpc_loader_start_epoch_at: start %zu needs a sampler", start);
    pthread_mutex_lock(&l->mu);
    l->cancel = 1;
    pthread_cond_broadcast(&l->space);
    double deadline = ddpc__deadline_in(l->timeout_s);
    while (l->busy && !ddpc__expired(deadline))
        ddpc__cond_wait_until(&l->idle, &l->mu, deadline, 0.5);
    if (l->busy) {
        pthread_mutex_unlock(&l->mu);
        return ddpc__err(
            DDPC_ERR_TIMEOUT,
            "ddpc_loader_start_epoch: the prefetch thread did not finish its batch in %g s "
            "(DDPC_DATA_TIMEOUT)",
            l->timeout_s);
    }
    if (l->sampler) {
        ddpc_sampler_set_epoch(l->sampler, epoch);
        ddpc_sampler_set_start(l->sampler, start);
        l->idx = ddpc_sampler_indices(l->sampler);
        l->len = ddpc_sampler_len(l->sampler); /* what is left after start */
        l->nb = l->drop_last ? l->len / (size_t)l->batch_size
                             : (l->len + (size_t)l->batch_size - 1) / (size_t)l->batch_size;
    } else {
        l->idx = l->identity;
    }
    store_count(&l->produced, 0);
    store_count(&l->consumed, 0);
    l->active = 1;
    l->cancel = 0;
    pthread_cond_broadcast(&l->space);
    pthread_mutex_unlock(&l->mu);
    DDPC_TRACE(DATA, "loader: epoch %llu started", (unsigned long long)epoch);
    return DDPC_OK;
}

/*
 * Hands out the next batch (see data.h). Inline mode decodes it into the
 * single slot; prefetch mode waits until the thread has produced it, then
 * releases the previously held slot to the thread.
 */
ddpc_status ddpc_loader_next(ddpc_loader *l, const ddpc_batch **b) {
    if (!l || !b) return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_loader_next: NULL argument");
    *b = NULL;
    pthread_mutex_lock(&l->mu);
    if (!l->active) {
        pthread_mutex_unlock(&l->mu);
        return ddpc__err(DDPC_ERR_INVALID_ARG,
                         "ddpc_loader_next: call ddpc_loader_start_epoch first");
    }
    if (l->consumed >= l->nb) {
        pthread_mutex_unlock(&l->mu);
        return DDPC_OK; /* end of epoch */
    }
    size_t k = l->consumed;
    if (l->prefetch == 0) {
        pthread_mutex_unlock(&l->mu);
        decode(l, l->idx, k, &l->slots[0]);
        store_count(&l->consumed, k + 1);
        *b = &l->slots[0].b;
        return DDPC_OK;
    }
    if (l->produced <= k) { /* not decoded yet: watch for it, then sleep */
        pthread_mutex_unlock(&l->mu);
        spin_while(&l->produced, k);
        pthread_mutex_lock(&l->mu);
    }
    double deadline = ddpc__deadline_in(l->timeout_s);
    while (l->produced <= k && !ddpc__expired(deadline))
        ddpc__cond_wait_until(&l->ready, &l->mu, deadline, 0.5);
    if (l->produced <= k) {
        pthread_mutex_unlock(&l->mu);
        return ddpc__err(DDPC_ERR_TIMEOUT,
                         "ddpc_loader_next: batch %zu was not ready after %g s (DDPC_DATA_TIMEOUT)",
                         k, l->timeout_s);
    }
    *b = &l->slots[k % (size_t)l->nslots].b;
    store_count(&l->consumed, k + 1);
    /* wake the thread once the ring is half drained, not at every batch:
     * it then decodes a burst, and sleeps and wakes half as often */
    if (l->produced - l->consumed <= (size_t)(l->prefetch / 2)) pthread_cond_broadcast(&l->space);
    pthread_mutex_unlock(&l->mu);
    return DDPC_OK;
}

size_t ddpc_loader_num_batches(const ddpc_loader *l) { return l ? l->nb : 0; }

/* Stops the thread (it finishes at most the batch it is decoding), joins
 * it and frees everything. */
void ddpc_loader_destroy(ddpc_loader *l) {
    if (!l) return;
    if (l->have_thread) {
        pthread_mutex_lock(&l->mu);
        l->quit = 1;
        pthread_cond_broadcast(&l->space);
        pthread_mutex_unlock(&l->mu);
        pthread_join(l->thread, NULL);
    }
    for (int i = 0; l->slots && i < l->nslots; i++) {
        free(l->slots[i].x);
        free(l->slots[i].y);
    }
    free(l->slots);
    free(l->identity);
    pthread_cond_destroy(&l->ready);
    pthread_cond_destroy(&l->space);
    pthread_cond_destroy(&l->idle);
    pthread_mutex_destroy(&l->mu);
    free(l);
}
