/*
 * outcome.c — how a generation of workers ended, as a value: its kind, the
 * node and rank concerned, the worker's wait status (or the signal a
 * launcher got) and the text users are told. It is made where the event is
 * seen (a reaped worker, a silent heartbeat, a store error, a signal),
 * shared with the other nodes through the store in a text form, and read by
 * the restart decision, the exit code and the summary: nothing decides by
 * reading the text.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "run.h"

/* Names in the stored form; indexed by run_kind. */
static const char *const kind_names[RUN_KIND_COUNT] = {
    [RUN_OK] = "ok",
    [RUN_WORKER_FAILED] = "worker-failed",
    [RUN_WORKER_SIGNALLED] = "worker-signalled",
    [RUN_START_FAILED] = "start-failed",
    [RUN_INTERRUPTED] = "interrupted",
    [RUN_NODE_LOST] = "node-lost",
    [RUN_STORE_LOST] = "store-lost",
    [RUN_NODE_JOINED] = "node-joined",
    [RUN_MALFORMED] = "malformed",
};

void outcome_clear(run_outcome *oc) {
    free(oc->text);
    *oc = (run_outcome){ RUN_OK, -1, -1, 0, NULL };
}

void outcome_set(run_outcome *oc, run_kind kind, int node, int rank, int status, const char *fmt,
                 ...) {
    char *text = NULL;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&text, fmt, ap) < 0) text = NULL;
    va_end(ap);
    free(oc->text);
    *oc = (run_outcome){ kind, node, rank, status, text };
}

void outcome_worker_failed(job *J, worker *w, run_outcome *oc) {
    char how[96], sn[32];
    int signalled = WIFSIGNALED(w->status);
    if (signalled)
        snprintf(how, sizeof how, "killed by %s (%s)", sig_name(WTERMSIG(w->status), sn, sizeof sn),
                 strsignal(WTERMSIG(w->status)));
    else
        snprintf(how, sizeof how, "exit code %d", WEXITSTATUS(w->status));
    size_t cap = 1024 + TAIL_LINES * (TAIL_LINE_CAP + 16);
    char *s = malloc(cap);
    if (s) {
        size_t n =
            (size_t)snprintf(s, cap,
                             "first failure: rank %d (local rank %d, node %d on %s, pid %d): %s, "
                             "%.3f s after it started (restart %d)",
                             w->rank, w->local_rank, J->o->node_rank, J->host, (int)w->pid, how,
                             w->t_exit - J->gen_start, J->gen);
        int have = w->tail_n < TAIL_LINES ? w->tail_n : TAIL_LINES;
        if (have == 0)
            n += (size_t)snprintf(s + n, cap - n, "\n  (it wrote nothing to stderr)");
        else
            n += (size_t)snprintf(s + n, cap - n, "\n  last %d line%s of its stderr:", have,
                                  have > 1 ? "s" : "");
        for (int k = w->tail_n - have; k < w->tail_n && n < cap; k++)
            n += (size_t)snprintf(s + n, cap - n, "\n    [%d]: %s", w->rank,
                                  w->tail[k % TAIL_LINES]);
    }
    outcome_set(oc, signalled ? RUN_WORKER_SIGNALLED : RUN_WORKER_FAILED, J->o->node_rank, w->rank,
                w->status, "%s", s ? s : "first failure: (no memory for the summary)");
    free(s);
}

char *outcome_encode(const run_outcome *oc) {
    return xasprintf("%s %d %d %d\n%s", kind_names[oc->kind], oc->node, oc->rank, oc->status,
                     outcome_text(oc));
}

void outcome_decode(const char *s, run_outcome *oc) {
    char name[32];
    int node, rank, status, used = 0;
    if (sscanf(s, "%31s %d %d %d%n", name, &node, &rank, &status, &used) == 4 && s[used] == '\n')
        for (int k = 0; k < RUN_KIND_COUNT; k++)
            if (!strcmp(kind_names[k], name)) {
                outcome_set(oc, (run_kind)k, node, rank, status, "%s", s + used + 1);
                return;
            }
    outcome_set(oc, RUN_MALFORMED, -1, -1, 0, "malformed outcome in the job's store");
}

int outcome_restartable(const run_outcome *oc) {
    return oc->kind == RUN_WORKER_FAILED || oc->kind == RUN_WORKER_SIGNALLED;
}

const char *outcome_text(const run_outcome *oc) { return oc->text ? oc->text : ""; }

int outcome_exit_code(const job *J, const run_outcome *oc) {
    if (J->got_signal) return 128 + J->got_signal;
    if (outcome_restartable(oc) && oc->node == J->o->node_rank) {
        if (WIFSIGNALED(oc->status)) return 128 + WTERMSIG(oc->status);
        if (WIFEXITED(oc->status) && WEXITSTATUS(oc->status)) return WEXITSTATUS(oc->status);
    }
    return 1;
}
