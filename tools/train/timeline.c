/*
 * timeline.c — ddpc-train's --trace (train.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/base.h"
#include "train.h"

/* A Chrome trace-event file (the JSON Object Format): complete ("X") events
 * with microsecond wall-clock times, so that ranks' files merge into one
 * timeline (ddpc-trace --merge); process = rank, thread 0 = the training
 * thread, thread 1 = DDP's bucket allreduces from issue to completion. */
typedef struct timeline {
    FILE *f;
    char path[4096];
    int rank;
    double off_us; /* wall-clock microseconds minus ddpc__now()'s */
    long events;
} timeline;

/* rank r's file for --trace FILE: {rank} replaced, else FILE.rankR(.json). */
static void trace_path(const char *file, int rank, int world, char *out, size_t len) {
    const char *at = strstr(file, "{rank}");
    const char *ext = strrchr(file, '.');
    if (at)
        snprintf(out, len, "%.*s%d%s", (int)(at - file), file, rank, at + 6);
    else if (world == 1)
        snprintf(out, len, "%s", file);
    else if (ext && !strcmp(ext, ".json"))
        snprintf(out, len, "%.*s.rank%d.json", (int)(ext - file), file, rank);
    else
        snprintf(out, len, "%s.rank%d", file, rank);
}

static void tl_event(timeline *tl, const char *name, const char *cat, int tid, double t0,
                     double t1) {
    if (!tl || t0 <= 0 || t1 < t0) return;
    fprintf(tl->f,
            ",\n{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": %d, \"tid\": %d, "
            "\"ts\": %.3f, \"dur\": %.3f}",
            name, cat, tl->rank, tid, t0 * 1e6 + tl->off_us, (t1 - t0) * 1e6);
    tl->events++;
}

ddpc_status tl_open(trainer *t) {
    timeline *tl = calloc(1, sizeof *tl);
    if (!tl) return ddpc__err(DDPC_ERR_NOMEM, "out of memory for --trace");
    t->tl = tl;
    trace_path(t->o.trace, t->rank, t->world, tl->path, sizeof tl->path);
    tl->f = fopen(tl->path, "w");
    if (!tl->f) return ddpc__err_errno(DDPC_ERR_IO, errno, "cannot open --trace %s", tl->path);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    tl->off_us = ((double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 - ddpc__now()) * 1e6;
    tl->rank = t->rank;
    fprintf(tl->f,
            "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n"
            "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": 0, \"args\": "
            "{\"name\": \"rank %d\"}},\n"
            "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": 0, \"args\": "
            "{\"name\": \"training\"}},\n"
            "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": 1, \"args\": "
            "{\"name\": \"DDP bucket allreduce\"}}",
            t->rank, t->rank, t->rank, t->rank);
    return DDPC_OK;
}

ddpc_status tl_close(trainer *t) {
    timeline *tl = t->tl;
    if (!tl) return DDPC_OK;
    t->tl = NULL;
    ddpc_status s = DDPC_OK;
    if (tl->f) {
        fputs("\n]}\n", tl->f);
        int bad = ferror(tl->f);
        if (fclose(tl->f) != 0 || bad)
            s = ddpc__err(DDPC_ERR_IO, "cannot write --trace %s", tl->path);
    }
    free(tl);
    return s;
}

/* The model's layer timer: forward and backward of each layer; a backward
 * is split around its grad_ready hooks (DDP's work there is the bucket's). */
void tl_layer(void *ctx, const ddpc_layer_event *ev) {
    timeline *tl = ctx;
    char name[64];
    snprintf(name, sizeof name, "%s %s%d", ev->backward ? "backward" : "forward", ev->kind,
             ev->layer);
    const char *cat = ev->backward ? "backward" : "forward";
    if (ev->hook_t0 > 0 && ev->hook_t1 >= ev->hook_t0) {
        tl_event(tl, name, cat, 0, ev->t0, ev->hook_t0);
        tl_event(tl, "grad ready (DDP hook)", "hook", 0, ev->hook_t0, ev->hook_t1);
        tl_event(tl, name, cat, 0, ev->hook_t1, ev->t1);
    } else {
        tl_event(tl, name, cat, 0, ev->t0, ev->t1);
    }
}

/* One training step's events: c0 data c1 forward c2 backward c3 step c4;
 * sync is the end of backward's wait for the buckets. */
void tl_step(trainer *t, uint64_t step, double c0, double c1, double c3, double sync, double c4) {
    timeline *tl = t->tl;
    char name[64];
    snprintf(name, sizeof name, "train step %" PRIu64, step);
    tl_event(tl, name, "step", 0, c0, c4);
    tl_event(tl, "data", "data", 0, c0, c1);
    if (t->ddp) tl_event(tl, "sync (wait for buckets)", "sync", 0, c3 - sync, c3);
    tl_event(tl, "optimizer step", "step", 0, c3, c4);
    for (int b = 0; t->ddp && b < ddpc_ddp_num_buckets(t->ddp); b++) {
        double issued, done;
        size_t first, count;
        ddpc_ddp_bucket_times(t->ddp, b, &issued, &done);
        ddpc_ddp_bucket_range(t->ddp, b, &first, &count);
        snprintf(name, sizeof name, "allreduce bucket %d (%zu floats)", b, count);
        tl_event(tl, name, "allreduce", 1, issued, done);
    }
}
