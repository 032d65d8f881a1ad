/*
 * acl_event.c — Ascend's events on CPUs, part of libascendcl: records,
 * waits and resets queued on streams (through ddpc__acl_enqueue, like any
 * task), host-side synchronization and queries, elapsed time between two
 * records.
 *
 * An event counts its records: aclrtRecordEvent takes the next number and
 * queues a task that marks it reached (with the time) when the stream gets
 * there; a wait queued on another stream blocks that stream's thread until
 * the number recorded at the time of the call is reached (an ACL_EVENT_SYNC
 * event's: until a record after its last reset is). Events are
 * checked against a registry, as streams are (acl_rt.c). What this file
 * leaves to others: streams and their threads (acl_rt.c).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "acl/acl.h"
#include "acl_internal.h"

#define fail ddpc__acl_fail

typedef struct acl_event {
    uint64_t recorded, reached; /* records made; the last one a stream reached (ev_mu) */
    uint64_t reset_mark;        /* records up to it were undone by aclrtResetEvent (ev_mu) */
    struct timespec at;         /* when it was reached */
    uint32_t flag;              /* ACL_EVENT_SYNC: a flag that waits block on (see acl_rt.h) */
    int uses;                   /* tasks queued that point at it (ev_mu) */
    int dying;                  /* aclrtDestroyEvent is waiting for those tasks (ev_mu) */
    struct acl_event *next;     /* the registry (reg_mu) */
} acl_event;

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER; /* g_events */
static pthread_mutex_t ev_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ev_cv = PTHREAD_COND_INITIALIZER; /* some event was reached */
static acl_event *g_events;

static aclError event_get(aclrtEvent event, const char *what, acl_event **out) {
    pthread_mutex_lock(&reg_mu);
    acl_event *e = g_events;
    while (e && e != event) e = e->next;
    pthread_mutex_unlock(&reg_mu);
    if (!e) return fail(ACL_ERROR_RT_INVALID_HANDLE, "%s: %p is not a live event", what, event);
    *out = e;
    return ACL_SUCCESS;
}

aclError aclrtCreateEventWithFlag(aclrtEvent *event, uint32_t flag) {
    if (!event) return fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateEvent: event is NULL");
    acl_event *e = calloc(1, sizeof *e);
    if (!e) return fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "aclrtCreateEvent: out of memory");
    e->flag = flag; /* every event takes its time here, whatever the flag */
    pthread_mutex_lock(&reg_mu);
    e->next = g_events;
    g_events = e;
    pthread_mutex_unlock(&reg_mu);
    *event = e;
    return ACL_SUCCESS;
}

aclError aclrtCreateEvent(aclrtEvent *event) {
    return aclrtCreateEventWithFlag(event, ACL_EVENT_TIME_LINE);
}

/* How many records of ev have been queued so far. */
static uint64_t recorded_now(acl_event *ev) {
    pthread_mutex_lock(&ev_mu);
    uint64_t n = ev->recorded;
    pthread_mutex_unlock(&ev_mu);
    return n;
}

/* Waits until ev has reached record number target. */
static void event_wait(acl_event *ev, uint64_t target) {
    pthread_mutex_lock(&ev_mu);
    while (ev->reached < target) pthread_cond_wait(&ev_cv, &ev_mu);
    pthread_mutex_unlock(&ev_mu);
}

aclError aclrtDestroyEvent(aclrtEvent event) {
    acl_event *ev;
    aclError e = event_get(event, "aclrtDestroyEvent", &ev);
    if (e != ACL_SUCCESS) return e;
    /* Queued tasks still point at it: let them run; a stream blocked on it
     * (an ACL_EVENT_SYNC wait no record will end) gives up with an error. */
    pthread_mutex_lock(&ev_mu);
    ev->dying = 1;
    pthread_cond_broadcast(&ev_cv);
    while (ev->uses > 0) pthread_cond_wait(&ev_cv, &ev_mu);
    pthread_mutex_unlock(&ev_mu);
    pthread_mutex_lock(&reg_mu);
    acl_event **pp = &g_events;
    while (*pp && *pp != ev) pp = &(*pp)->next;
    if (*pp) *pp = ev->next;
    pthread_mutex_unlock(&reg_mu);
    free(ev);
    return ACL_SUCCESS;
}

typedef struct event_arg {
    acl_event *ev;
    uint64_t seq;
} event_arg;

/* Ends a task that pointed at a->ev (ev_mu held). */
static void event_task_done(event_arg *a) {
    a->ev->uses--;
    pthread_cond_broadcast(&ev_cv);
    pthread_mutex_unlock(&ev_mu);
    free(a);
}

static aclError record_task(void *arg, char *err, size_t errlen) {
    event_arg *a = arg;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    pthread_mutex_lock(&ev_mu);
    if (a->seq > a->ev->reached) {
        a->ev->reached = a->seq;
        a->ev->at = now;
    }
    event_task_done(a);
    return ACL_SUCCESS;
}

/* seq 0: an ACL_EVENT_SYNC wait, for a record reached after the last reset. */
static aclError wait_task(void *arg, char *err, size_t errlen) {
    event_arg *a = arg;
    acl_event *ev = a->ev;
    pthread_mutex_lock(&ev_mu);
    for (;;) {
        int done = a->seq ? ev->reached >= a->seq : ev->reached > ev->reset_mark;
        if (done) break;
        if (ev->dying) {
            snprintf(err, errlen,
                     "aclrtStreamWaitEvent: event %p was destroyed while a stream "
                     "waited for its record",
                     (void *)ev);
            event_task_done(a);
            return ACL_ERROR_RT_INVALID_HANDLE;
        }
        pthread_cond_wait(&ev_cv, &ev_mu);
    }
    event_task_done(a);
    return ACL_SUCCESS;
}

static aclError reset_task(void *arg, char *err, size_t errlen) {
    event_arg *a = arg;
    pthread_mutex_lock(&ev_mu);
    a->ev->reset_mark = a->ev->reached;
    event_task_done(a);
    return ACL_SUCCESS;
}

/* Queues fn on stream with {ev, seq}. */
static aclError event_enqueue(aclrtStream stream, ddpc__acl_task_fn fn, acl_event *ev,
                              uint64_t seq) {
    event_arg *a = malloc(sizeof *a);
    if (!a) return fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "out of memory queuing an event");
    *a = (event_arg){ ev, seq };
    pthread_mutex_lock(&ev_mu);
    ev->uses++;
    pthread_mutex_unlock(&ev_mu);
    aclError e = ddpc__acl_enqueue(stream, fn, a);
    if (e != ACL_SUCCESS) {
        pthread_mutex_lock(&ev_mu);
        ev->uses--;
        pthread_cond_broadcast(&ev_cv);
        pthread_mutex_unlock(&ev_mu);
        free(a);
    }
    return e;
}

aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream) {
    acl_event *ev;
    aclError e = event_get(event, "aclrtRecordEvent", &ev);
    if (e != ACL_SUCCESS) return e;
    pthread_mutex_lock(&ev_mu);
    uint64_t seq = ++ev->recorded;
    pthread_mutex_unlock(&ev_mu);
    e = event_enqueue(stream, record_task, ev, seq);
    if (e != ACL_SUCCESS) { /* nothing will reach it: take the record back */
        pthread_mutex_lock(&ev_mu);
        if (ev->recorded == seq) ev->recorded--;
        pthread_mutex_unlock(&ev_mu);
    }
    return e;
}

aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event) {
    acl_event *ev;
    aclError e = event_get(event, "aclrtStreamWaitEvent", &ev);
    if (e != ACL_SUCCESS) return e;
    if (ev->flag & ACL_EVENT_SYNC) return event_enqueue(stream, wait_task, ev, 0);
    uint64_t target = recorded_now(ev);
    return target ? event_enqueue(stream, wait_task, ev, target) : ACL_SUCCESS;
}

aclError aclrtResetEvent(aclrtEvent event, aclrtStream stream) {
    acl_event *ev;
    aclError e = event_get(event, "aclrtResetEvent", &ev);
    return e != ACL_SUCCESS ? e : event_enqueue(stream, reset_task, ev, 0);
}

aclError aclrtSynchronizeEvent(aclrtEvent event) {
    acl_event *ev;
    aclError e = event_get(event, "aclrtSynchronizeEvent", &ev);
    if (e != ACL_SUCCESS) return e;
    uint64_t target = recorded_now(ev);
    event_wait(ev, target);
    return ACL_SUCCESS;
}

aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus *status) {
    acl_event *ev;
    aclError e = event_get(event, "aclrtQueryEventStatus", &ev);
    if (e != ACL_SUCCESS) return e;
    if (!status) return fail(ACL_ERROR_INVALID_PARAM, "aclrtQueryEventStatus: status is NULL");
    pthread_mutex_lock(&ev_mu);
    *status = ev->reached >= ev->recorded ? ACL_EVENT_RECORDED_STATUS_COMPLETE
                                          : ACL_EVENT_RECORDED_STATUS_NOT_READY;
    pthread_mutex_unlock(&ev_mu);
    return ACL_SUCCESS;
}

aclError aclrtEventElapsedTime(float *ms, aclrtEvent startEvent, aclrtEvent endEvent) {
    acl_event *a, *b;
    aclError e = event_get(startEvent, "aclrtEventElapsedTime", &a);
    if (e == ACL_SUCCESS) e = event_get(endEvent, "aclrtEventElapsedTime", &b);
    if (e != ACL_SUCCESS) return e;
    if (!ms) return fail(ACL_ERROR_INVALID_PARAM, "aclrtEventElapsedTime: ms is NULL");
    pthread_mutex_lock(&ev_mu);
    int pending = a->reached < a->recorded || b->reached < b->recorded;
    int never = a->recorded == 0 || b->recorded == 0 ||
                (!pending && (a->reached <= a->reset_mark || b->reached <= b->reset_mark));
    double d =
        (double)(b->at.tv_sec - a->at.tv_sec) * 1e3 + (double)(b->at.tv_nsec - a->at.tv_nsec) / 1e6;
    pthread_mutex_unlock(&ev_mu);
    if (never)
        return fail(ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID,
                    "aclrtEventElapsedTime: an event was never recorded (or reset since)");
    if (pending)
        return fail(ACL_ERROR_RT_EVENT_NOT_COMPLETE,
                    "aclrtEventElapsedTime: an event's stream has not reached it "
                    "(aclrtSynchronizeEvent first)");
    *ms = (float)d;
    return ACL_SUCCESS;
}
