/*
 * queue.c — the ordered queue of a communicator's operations: submission
 * (a blocking call with nothing queued runs on its caller's thread), the
 * progress thread, the batching of queued sends and receives (so that
 * pairs that send each other first still meet), receives from any source,
 * and the work handles of asynchronous calls.
 *
 * Each operation comes with its executor (ddpc__args.run, handed in by the
 * layer that issues it); the queue only decides which thread runs what, and
 * when. The socket driving is progress.c's.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "comm/comm.h"

struct ddpc_work {
    ddpc_comm *c; /* borrowed; only used while queued */
    ddpc__args a;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    int started; /* taken off the queue (under c->mu) */
    ddpc_status st;
    double timeout;                     /* the comm's exec timeout, for wait(-1) */
    double spin_s;                      /* the comm's spin before a wait sleeps */
    int no_thread;                      /* the comm has no progress thread: waiters run the queue */
    int refs;                           /* atomic: the caller's and the queue's */
    double t_queued, t_started, t_done; /* ddpc__now(); t_done under mu */
    char err[1024];
    struct ddpc_work *next;
};

static int is_collective(ddpc__kind k) { return k != DDPC_K_SEND && k != DDPC_K_RECV; }
static int is_p2p(ddpc__kind k) { return k == DDPC_K_SEND || k == DDPC_K_RECV; }
static int is_reducing(ddpc__kind k) {
    return k == DDPC_K_ALLREDUCE || k == DDPC_K_REDUCE || k == DDPC_K_REDUCE_SCATTER;
}
static int is_rooted(ddpc__kind k) {
    return k == DDPC_K_BROADCAST || k == DDPC_K_REDUCE || k == DDPC_K_GATHER || k == DDPC_K_SCATTER;
}

/*
 * The right to execute. One thread at a time runs operations of c: it
 * holds c->busy, claimed by compare-and-swap with or without c->mu (a
 * blocking call on an idle communicator takes it without the lock), and
 * given back by the store of 0. c->qhead is written under c->mu only,
 * atomically, so that the lock-free claim can see that nothing is queued
 * ahead of its call; whoever gives the right back with work queued, or
 * the communicator stopping, wakes the threads waiting on c->cv (the
 * progress thread, a waiter running the queue itself). Each side stores,
 * then loads the other's variable, all sequentially consistent, so that
 * one of them sees the other: no wake-up is lost.
 */
static int claim(ddpc_comm *c) {
    int idle = 0;
    return __atomic_compare_exchange_n(&c->busy, &idle, 1, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED);
}

/* After giving the right back without c->mu. */
static void wake_if_wanted(ddpc_comm *c) {
    if (!__atomic_load_n(&c->qhead, __ATOMIC_SEQ_CST) &&
        !__atomic_load_n(&c->stop, __ATOMIC_SEQ_CST))
        return;
    pthread_mutex_lock(&c->mu);
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* Unlinks the queue's head (c->mu held). */
static void set_head(ddpc_comm *c, struct ddpc_work *next) {
    __atomic_store_n(&c->qhead, next, __ATOMIC_SEQ_CST);
    if (!next) c->qtail = NULL;
}

/* Readies e to execute a on c: fingerprint, sequence number, deadline.
 * Fails when c was aborted or failed earlier. */
static ddpc_status exec_init(ddpc_comm *c, const ddpc__args *a, ddpc__exec *e) {
    if (__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE))
        return ddpc__err(DDPC_ERR_ABORTED,
                         "rank %d: the communicator was aborted (ddpc_comm_abort)", c->rank);
    if (c->failed != DDPC_OK) {
        char msg[1024];
        pthread_mutex_lock(&c->err_mu);
        snprintf(msg, sizeof msg, "%s", c->last_err);
        pthread_mutex_unlock(&c->err_mu);
        return ddpc__err(c->failed, "the communicator failed earlier: %s", msg);
    }
    memset(e, 0, sizeof *e);
    e->c = c;
    e->a = *a;
    e->fp.magic = DDPC_MSG_MAGIC;
    e->fp.kind = (uint8_t)(a->kind == DDPC_K_RECV ? DDPC_K_SEND : a->kind);
    e->fp.dtype = a->kind == DDPC_K_BARRIER ? 0 : (uint8_t)a->dtype;
    e->fp.op = is_reducing(a->kind) ? (uint8_t)a->op : 0;
    e->fp.root = is_rooted(a->kind) ? a->root : is_p2p(a->kind) ? a->tag : -1; /* p2p: the tag */
    e->fp.count = a->count;
    e->fp.seq = is_collective(a->kind) ? c->seq++ : 0;
    double now = ddpc__now(); /* one clock read: the deadline, the record, the peers heard */
    e->deadline = c->exec_timeout > 0 ? now + c->exec_timeout : INFINITY;
    e->now = now;
    e->lost = -1;
    e->culprit = -1;
    e->waits_on = -1;
    ddpc__rec_start(e, now);
    if (ddpc__log_enabled(DDPC_LOG_TRACE, DDPC_SUB_COLL)) {
        char d[160];
        ddpc__describe(&e->fp, d, sizeof d);
        DDPC_TRACE(COLL, "%s #%" PRIu64 " start", d, e->fp.seq);
    }
    return DDPC_OK;
}

/* Runs one operation on this thread: fingerprint, deadline, its executor. */
static ddpc_status execute(ddpc_comm *c, const ddpc__args *a) {
    ddpc__exec e;
    DDPC_CHECK(exec_init(c, a, &e));
    ddpc_status s = a->run(&e);
    ddpc__rec_end(&e, s);
    return s;
}

/* A work handle for a, held by the caller and the queue (two references);
 * NULL on out of memory. It takes over a->vec only once enqueued. */
static struct ddpc_work *work_new(ddpc_comm *c, const ddpc__args *a) {
    struct ddpc_work *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->c = c;
    w->a = *a;
    w->refs = 2;
    w->t_queued = ddpc__now();
    /* wait(-1) outlasts the operation's own deadline and the settle after
     * it, so that the operation's error (naming the silent rank) wins */
    w->timeout = c->exec_timeout > 0 ? c->exec_timeout + c->settle_s + 1.0 : 0;
    w->spin_s = c->spin_s;
    w->no_thread = c->no_thread;
    pthread_mutex_init(&w->mu, NULL);
    ddpc__cond_init_monotonic(&w->cv);
    return w;
}

static void work_free(struct ddpc_work *w) {
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w->a.vec);
    free(w);
}

static void work_release(struct ddpc_work *w) {
    if (__atomic_sub_fetch(&w->refs, 1, __ATOMIC_ACQ_REL) == 0) work_free(w);
}

static void work_complete(struct ddpc_work *w, ddpc_status st) {
    pthread_mutex_lock(&w->mu);
    w->t_done = ddpc__now();
    w->st = st;
    if (st != DDPC_OK) snprintf(w->err, sizeof w->err, "%s", ddpc_last_error());
    __atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    work_release(w);
}

/* A rank with a point-to-point message of a's tag for this one, held as
 * unexpected or next on its stream, for a receive from DDPC_ANY_SOURCE
 * (nothing is taken); -1 when none has come yet. A rank whose next message
 * has another tag gets it read aside as unexpected (ddpc__p2p_drain), so
 * that a later call sees behind it. Ranks with a receive of that tag
 * already posted are passed over: their next such message is that one's. */
static int any_source(ddpc_comm *c, const ddpc__args *a) {
    int drain[c->size > 1 ? c->size : 1], nd = 0;
    for (int k = 1; k < c->size; k++) {
        int p = (c->rank + k) % c->size;
        int w = ddpc__p2p_waiting(c, p, a->tag);
        if (w > 0) return p;
        if (w < 0) drain[nd++] = p;
    }
    for (int i = 0; i < nd; i++) ddpc__p2p_drain(c, drain[i]); /* out of memory: tried again */
    return -1;
}

/* One queued send or receive of a batch (run_p2p). Its request is linked
 * into the peer's queue once posted, so an item never moves. */
typedef struct p2p_item {
    struct ddpc_work *w;
    ddpc__exec e;
    ddpc__req q;
    int posted, done;
} p2p_item;

/* The sends and receives run together: it[0, n) in the order queued, left
 * of them not done. */
typedef struct p2p_batch {
    p2p_item **it; /* owned, each item too */
    size_t n, cap, left;
} p2p_batch;

/* Takes the sends and receives at the head of the queue into bt (c->mu
 * held); on out of memory, what is taken runs and the rest waits its turn. */
static void batch_take(ddpc_comm *c, p2p_batch *bt) {
    while (c->qhead && is_p2p(c->qhead->a.kind)) {
        if (bt->n == bt->cap) {
            size_t nc = bt->cap ? 2 * bt->cap : 16;
            p2p_item **nb = realloc(bt->it, sizeof *nb * nc);
            if (!nb) break;
            bt->it = nb;
            bt->cap = nc;
        }
        p2p_item *it = calloc(1, sizeof *it);
        if (!it) break;
        struct ddpc_work *w = c->qhead;
        set_head(c, w->next);
        w->started = 1;
        w->t_started = ddpc__now();
        it->w = w;
        bt->it[bt->n++] = it;
        bt->left++;
    }
}

static void item_complete(p2p_batch *bt, p2p_item *it, ddpc_status s) {
    ddpc__rec_end(&it->e, s);
    it->done = 1;
    bt->left--;
    work_complete(it->w, s);
}

/* Readies the items from first on: an exec each; one that fails, or that
 * carries nothing, completes at once. */
static void batch_ready(ddpc_comm *c, p2p_batch *bt, size_t first) {
    for (size_t i = first; i < bt->n; i++) {
        p2p_item *it = bt->it[i];
        ddpc_status s = exec_init(c, &it->w->a, &it->e);
        if (s != DDPC_OK || it->w->a.count == 0) item_complete(bt, it, s);
        it->e.nap = 0.001;
    }
}

/* Posts, in order, every item not posted yet, except the receives behind a
 * receive from any source whose message has not arrived to choose it. */
static void batch_post(ddpc_comm *c, p2p_batch *bt) {
    int hold_recv = 0;
    for (size_t i = 0; i < bt->n; i++) {
        p2p_item *it = bt->it[i];
        if (it->done || it->posted) continue;
        ddpc__args *a = &it->w->a;
        if (a->kind == DDPC_K_RECV && hold_recv) continue;
        if (a->kind == DDPC_K_RECV && a->root == DDPC_ANY_SOURCE &&
            (a->root = any_source(c, a)) < 0) {
            hold_recv = 1;
            continue;
        }
        size_t nb = a->count * ddpc_dtype_size(a->dtype);
        if (a->kind == DDPC_K_SEND) {
            it->e.fp.seq = c->p2p_sent[a->root]++;
            ddpc__post_send(&it->e, &it->q, a->root, a->send, nb);
        } else {
            it->e.fp.seq = c->p2p_recvd[a->root]++;
            ddpc__post_recv_tagged(&it->e, &it->q, a->root, a->recv, nb);
        }
        it->posted = 1;
    }
}

/* Progresses the batch once, through its oldest pending item (so under its
 * deadline), and completes what is done; on failure, every item left. */
static void batch_progress(p2p_batch *bt) {
    p2p_item *drv = NULL;
    for (size_t i = 0; i < bt->n && !drv; i++)
        if (!bt->it[i]->done) drv = bt->it[i];
    ddpc_status s = ddpc__progress(&drv->e, 1);
    for (size_t i = 0; i < bt->n; i++) {
        p2p_item *it = bt->it[i];
        if (it->done || (s == DDPC_OK && !(it->posted && it->q.done))) continue;
        item_complete(bt, it, s);
    }
}

/* Runs the point-to-point operations at the head of the queue together, and
 * takes in those queued behind them while they run: every send and receive
 * of the batch is posted at once and progresses together, so two ranks that
 * each send the other a large message before receiving (torch's
 * batch_isend_irecv, isend then irecv) do not wait on each other forever.
 * Per pair, messages still match in the order issued. c->mu is held on
 * entry and on return; the head is a send or receive; nothing executes. */
static void run_p2p(ddpc_comm *c) {
    p2p_batch bt = { 0 };
    for (;;) {
        size_t first_new = bt.n;
        batch_take(c, &bt);
        pthread_mutex_unlock(&c->mu);
        batch_ready(c, &bt, first_new);
        batch_post(c, &bt);
        if (bt.left) batch_progress(&bt);
        pthread_mutex_lock(&c->mu);
        if (!bt.left && !(c->qhead && is_p2p(c->qhead->a.kind))) break;
    }
    for (size_t i = 0; i < bt.n; i++) free(bt.it[i]);
    free(bt.it);
}

/* Takes the queue's head and runs it on this thread, then gives the right
 * to execute back; c->mu is held on entry and on return, and this thread
 * has claimed that right (claim). */
static void run_head(ddpc_comm *c) {
    if (is_p2p(c->qhead->a.kind)) {
        run_p2p(c);
    } else {
        struct ddpc_work *w = c->qhead;
        set_head(c, w->next);
        w->started = 1;
        w->t_started = ddpc__now();
        pthread_mutex_unlock(&c->mu);
        ddpc_status st = execute(c, &w->a);
        work_complete(w, st);
        pthread_mutex_lock(&c->mu);
    }
    __atomic_store_n(&c->busy, 0, __ATOMIC_SEQ_CST);
    pthread_cond_broadcast(&c->cv);
}

/* The progress thread: runs queued operations in order until stopped and
 * the queue is empty. */
static void *worker(void *arg) {
    ddpc_comm *c = arg;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        if (c->qhead && claim(c)) {
            run_head(c);
            continue;
        }
        if (c->stop && !c->qhead) break;
        pthread_cond_wait(&c->cv, &c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* A thread that waits for w without a limit of its own runs the queue up to
 * w itself when no operation is executing, instead of sleeping while the
 * progress thread wakes to do it: the last bucket of a DDP step costs two
 * thread hand-offs less. Order is kept (only the head runs, one at a time).
 * Where the communicator has no progress thread (w->no_thread), a waiter
 * that cannot run the queue now must not sleep on w alone, since nobody
 * else may ever run it: while another thread holds the right to execute (a
 * blocking call running inline, a waiter running the queue up to its own
 * work), it sleeps until the right is given back (whoever gives it back
 * with work queued wakes c->cv) and tries again, until w is started (by
 * this thread, or by a waiter that ran the queue past it and completes it)
 * or deadline. */
static void run_inline(struct ddpc_work *w, double deadline) {
    pthread_mutex_lock(&w->mu);
    int done = w->done;
    pthread_mutex_unlock(&w->mu);
    if (done) return; /* w->c may be gone once w is done */
    ddpc_comm *c = w->c;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!w->started && c->qhead && claim(c)) run_head(c);
        if (!w->no_thread || w->started || ddpc__now() >= deadline) break;
        ddpc__cond_wait_until(&c->cv, &c->mu, deadline, 0);
    }
    pthread_mutex_unlock(&c->mu);
}

/* The fast path of a blocking call: this thread claimed the right to
 * execute with nothing queued; a runs here, now. c->mu is not held. */
static ddpc_status run_now(ddpc_comm *c, const ddpc__args *a) {
    ddpc_status st = execute(c, a);
    __atomic_store_n(&c->busy, 0, __ATOMIC_SEQ_CST);
    wake_if_wanted(c);
    free(a->vec);
    return st;
}

ddpc_status ddpc__submit(ddpc_comm *c, const ddpc__args *a, struct ddpc_work **wout) {
    ddpc_status s = DDPC_OK;
    struct ddpc_work *w = NULL;
    /* a blocking call on an idle communicator: no lock */
    if (!wout && !__atomic_load_n(&c->qhead, __ATOMIC_RELAXED) && claim(c)) {
        if (!__atomic_load_n(&c->qhead, __ATOMIC_SEQ_CST) &&
            !__atomic_load_n(&c->stop, __ATOMIC_SEQ_CST))
            return run_now(c, a);
        __atomic_store_n(&c->busy, 0, __ATOMIC_SEQ_CST); /* queued behind, or stopping */
        wake_if_wanted(c);
    }
    pthread_mutex_lock(&c->mu);
    if (c->stop) {
        s = ddpc__err(DDPC_ERR_INVALID_ARG, "rank %d: the communicator is being destroyed",
                      c->rank);
        goto refuse;
    }
    if (!wout && !c->qhead && claim(c)) {
        pthread_mutex_unlock(&c->mu);
        return run_now(c, a);
    }
    w = work_new(c, a);
    if (!w) {
        s = ddpc__err(DDPC_ERR_NOMEM, "out of memory for a work handle");
        goto refuse;
    }
    if (!c->thread_started && !c->no_thread) {
        if (pthread_create(&c->thread, NULL, worker, c) != 0) {
            s = ddpc__err_errno(DDPC_ERR_SYSTEM, errno, "cannot start the progress thread");
            w->a.vec = NULL; /* freed below */
            work_free(w);
            goto refuse;
        }
        c->thread_started = 1;
    }
    w->a.rec = ddpc__rec_queued(c, a);
    if (c->qtail)
        c->qtail->next = w;
    else
        __atomic_store_n(&c->qhead, w, __ATOMIC_SEQ_CST);
    c->qtail = w;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    if (wout) {
        *wout = w;
        return DDPC_OK;
    }
    s = ddpc_work_wait(w, INFINITY); /* the operation itself is bounded */
    ddpc_work_destroy(w);
    return s;
refuse:
    pthread_mutex_unlock(&c->mu);
    free(a->vec);
    return s;
}

/* Waits for w: timeout_s > 0: that long; 0: not at all; < 0: the comm's
 * exec timeout (none when that is 0); INFINITY: no limit. 1 when done. */
static int wait_done(struct ddpc_work *w, double timeout_s) {
    double limit = timeout_s < 0 ? (w->timeout > 0 ? w->timeout : INFINITY) : timeout_s;
    double deadline = ddpc__now() + limit;
    double t = ddpc__now(), spin_until = t + (w->spin_s < limit ? w->spin_s : limit);
    /* yields, as the progress loop does (a sleeping core is slow to wake),
     * until one keeps this thread off its CPU for a time slice: then some
     * other program wants the CPU, and the condition variable wakes this
     * thread sooner than its turn would come (progress.c, spin) */
    while (!__atomic_load_n(&w->done, __ATOMIC_ACQUIRE) && t < spin_until) {
        sched_yield();
        double now = ddpc__now();
        if (now - t >= DDPC_YIELD_LOST_S) break;
        t = now;
    }
    pthread_mutex_lock(&w->mu);
    while (!w->done && ddpc__now() < deadline)
        ddpc__cond_wait_until(&w->cv, &w->mu, deadline, isinf(limit) ? 0 : 1.0);
    int done = w->done;
    pthread_mutex_unlock(&w->mu);
    return done;
}

ddpc_status ddpc_work_wait(ddpc_work *w, double timeout_s) {
    if (!w) return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_work_wait: work is NULL");
    /* bounded as the operation is */
    double limit = timeout_s < 0 ? (w->timeout > 0 ? w->timeout : INFINITY) : timeout_s;
    if (timeout_s < 0 || isinf(timeout_s) || (w->no_thread && timeout_s > 0))
        run_inline(w, isinf(limit) ? INFINITY : ddpc__now() + limit);
    if (!wait_done(w, timeout_s))
        return ddpc__err(DDPC_ERR_TIMEOUT,
                         "the operation did not complete within %g s (still running; "
                         "wait again or raise the timeout)",
                         timeout_s < 0 ? w->timeout : timeout_s);
    if (w->st != DDPC_OK) return ddpc__err(w->st, "%s", w->err);
    return DDPC_OK;
}

int ddpc_work_source(ddpc_work *w) {
    if (!w) return -1;
    pthread_mutex_lock(&w->mu);
    int src = w->done ? w->a.root : -1;
    pthread_mutex_unlock(&w->mu);
    return src;
}

ddpc_status ddpc_work_times(ddpc_work *w, double *queued, double *started, double *completed) {
    if (!w) return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_work_times: work is NULL");
    pthread_mutex_lock(&w->mu); /* t_started is written before done is set under mu */
    if (queued) *queued = w->t_queued;
    if (started) *started = w->done ? w->t_started : 0;
    if (completed) *completed = w->done ? w->t_done : 0;
    pthread_mutex_unlock(&w->mu);
    return DDPC_OK;
}

ddpc_status ddpc_work_test(ddpc_work *w, int *done) {
    if (!w || !done)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_work_test: work and done must be non-NULL");
    pthread_mutex_lock(&w->mu);
    *done = w->done;
    pthread_mutex_unlock(&w->mu);
    if (!*done) return DDPC_OK;
    if (w->st != DDPC_OK) return ddpc__err(w->st, "%s", w->err);
    return DDPC_OK;
}

void ddpc_work_destroy(ddpc_work *w) {
    if (!w) return;
    if (w->no_thread) run_inline(w, INFINITY); /* nobody else may run it */
    wait_done(w, INFINITY);                    /* the operation itself is bounded by DDPC_TIMEOUT */
    work_release(w);
}

void ddpc__queue_stop(ddpc_comm *c) {
    pthread_mutex_lock(&c->mu);
    __atomic_store_n(&c->stop, 1, __ATOMIC_SEQ_CST);
    pthread_cond_broadcast(&c->cv);
    if (c->no_thread) { /* what is still queued runs here, after what runs elsewhere */
        for (;;) {
            if (c->qhead && claim(c))
                run_head(c);
            else if (__atomic_load_n(&c->busy, __ATOMIC_SEQ_CST))
                pthread_cond_wait(&c->cv, &c->mu);
            else if (!c->qhead)
                break;
        }
    }
    pthread_mutex_unlock(&c->mu);
    if (c->thread_started) pthread_join(c->thread, NULL);
}
