/*
 * resume.c — where ddpc-train continues from (train.h). A restarted attempt (ddpc-run
 * --max-restarts or torchrun set TORCHELASTIC_RESTART_COUNT >= 1) is the
 * same job with the same flags, so it continues from --checkpoint FILE when
 * that exists, as torchrun's recipe does ("load the snapshot if there is
 * one"): nothing changes between attempts. --resume auto does so on the
 * first attempt too; --resume FILE starts from FILE (a restart still
 * prefers --checkpoint, which by then holds the newer state).
 *
 * Rank 0 alone reads the file and hands the others what DDP does not
 * (epoch, step, the optimizer's steps and state, the dropout RNG); DDP then
 * broadcasts its parameters. So every rank continues from the same epoch of
 * the same file, and only rank 0's host needs it. A checkpoint is renamed
 * into place complete (safetensors.c), so a kill during a save leaves the
 * previous one, never half of one.
 */
#include <errno.h>
#include <glob.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "train.h"

/* Removes PATH.tmp.PID files (a save's temporary, ddpc__st_write) whose
 * process is gone: left by a kill during a save. */
static void remove_stale_temps(const char *path) {
    char pat[4096];
    if ((size_t)snprintf(pat, sizeof pat, "%s.tmp.*", path) >= sizeof pat) return;
    glob_t g;
    if (glob(pat, GLOB_NOSORT, NULL, &g) != 0) return;
    for (size_t i = 0; i < g.gl_pathc; i++) {
        const char *tail = g.gl_pathv[i] + strlen(pat) - 1;
        char *end;
        long pid = strtol(tail, &end, 10);
        if (end == tail || *end || pid <= 0) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* its writer may still run */
        if (unlink(g.gl_pathv[i]) == 0)
            DDPC_INFO(NN, "removed %s, a checkpoint save cut short", g.gl_pathv[i]);
    }
    globfree(&g);
}

/* Rank 0: the file to continue from (NULL: none) and whether it is
 * --checkpoint's; says on one line what this attempt does. */
static const char *resume_source(trainer *t, int *own) {
    const options *o = &t->o;
    int have = o->checkpoint && access(o->checkpoint, F_OK) == 0;
    *own = have && (t->restart > 0 || o->resume_auto);
    if (*own) return o->checkpoint;
    if (t->restart > 0 && !o->resume)
        printf("restart %ld: %s%s%s, so training starts again from epoch 0\n", t->restart,
               o->checkpoint ? "no checkpoint " : "no --checkpoint FILE",
               o->checkpoint ? o->checkpoint : "", o->checkpoint ? " yet" : "");
    else if (o->resume_auto)
        printf("--resume auto: no checkpoint %s yet, so training starts from epoch 0\n",
               o->checkpoint);
    return o->resume;
}

/* What rank 0 hands the others after reading a checkpoint. */
enum {
    RH_STATE,
    RH_EPOCH,
    RH_STEP,
    RH_OSTEPS,
    RH_ESTEP,
    RH_ESAMPLES,
    RH_SUMS,
    RH_RNG = RH_SUMS + 3,
    RH_N = RH_RNG + 4
};

/* A step checkpoint's position in its epoch, the "trainer" metadata:
 * "epoch_step=S samples=N world=W sums=L,C,T" (the sums as %a, exact). */
static void position_format(char *out, size_t cap, uint64_t estep, uint64_t samples, int world,
                            const epoch_sums *acc) {
    snprintf(out, cap, "epoch_step=%" PRIu64 " samples=%" PRIu64 " world=%d sums=%a,%a,%a", estep,
             samples, world, acc->v[0], acc->v[1], acc->v[2]);
}

static ddpc_status position_parse(const char *path, const char *s, uint64_t *estep,
                                  uint64_t *samples, int *world, epoch_sums *acc) {
    *estep = *samples = 0;
    *world = 0;
    memset(acc, 0, sizeof *acc);
    if (!*s) return DDPC_OK; /* an epoch's end or start */
    unsigned long long a, b;
    int n = 0;
    if (sscanf(s, "epoch_step=%llu samples=%llu world=%d sums=%la,%la,%la%n", &a, &b, world,
               &acc->v[0], &acc->v[1], &acc->v[2], &n) != 6 ||
        s[n] != 0 || *world < 1)
        return ddpc__err(DDPC_ERR_IO,
                         "checkpoint %s: __metadata__ \"trainer\" = \"%s\" is not "
                         "\"epoch_step=S samples=N world=W sums=L,C,T\"",
                         path, s);
    *estep = a;
    *samples = b;
    return DDPC_OK;
}
enum { RS_NONE, RS_LOADED, RS_FAILED };

/* Rank 0 reads the checkpoint (if any); every rank takes its state. */
ddpc_status resume(trainer *t) {
    uint64_t h[RH_N] = { RS_NONE };
    ddpc_status s = DDPC_OK;
    const char *path = NULL;
    int saved_world = 0;
    if (t->rank == 0) {
        int own;
        if (t->o.checkpoint) remove_stale_temps(t->o.checkpoint);
        path = resume_source(t, &own);
        if (path) {
            s = ddpc_checkpoint_load(path, t->m, t->opt, &t->loaded);
            if (s == DDPC_OK)
                s = position_parse(path, t->loaded.trainer, &t->epoch_step, &t->epoch_samples,
                                   &saved_world, &t->acc);
            h[RH_STATE] = s == DDPC_OK ? RS_LOADED : RS_FAILED;
            t->resumed_own = own && s == DDPC_OK;
        }
        if (s == DDPC_OK && path) {
            h[RH_EPOCH] = t->loaded.epoch;
            h[RH_STEP] = t->loaded.step;
            h[RH_OSTEPS] = ddpc_optim_steps(t->opt);
            h[RH_ESTEP] = t->epoch_step;
            h[RH_ESAMPLES] = t->epoch_samples;
            memcpy(&h[RH_SUMS], t->acc.v, sizeof t->acc.v);
            for (int i = 0; i < 4; i++) h[RH_RNG + i] = ddpc_model_rng(t->m)->s[i];
        }
    }
    if (t->comm) DDPC_CHECK(ddpc_broadcast(t->comm, h, h, RH_N, DDPC_UINT64, 0));
    if (s != DDPC_OK) return s;
    if (h[RH_STATE] == RS_FAILED)
        return ddpc__err(DDPC_ERR_IO, "rank 0 could not read the checkpoint to continue from "
                                      "(its error says why)");
    if (h[RH_STATE] == RS_NONE) return DDPC_OK;
    t->start_epoch = h[RH_EPOCH];
    t->step = h[RH_STEP];
    t->epoch_step = h[RH_ESTEP];
    t->epoch_samples = h[RH_ESAMPLES];
    memcpy(t->acc.v, &h[RH_SUMS], sizeof t->acc.v);
    if (t->rank != 0) {
        ddpc_optim_set_steps(t->opt, h[RH_OSTEPS]);
        for (int i = 0; i < 4; i++) ddpc_model_rng(t->m)->s[i] = h[RH_RNG + i];
    }
    size_t n;
    ddpc_model_param_block(t->m, &n);
    for (int j = 0; t->comm && j < ddpc_optim_num_state(t->opt); j++)
        DDPC_CHECK(ddpc_broadcast(t->comm, ddpc_optim_state(t->opt, j, NULL),
                                  ddpc_optim_state(t->opt, j, NULL), n, DDPC_FLOAT32, 0));
    if (t->rank == 0) {
        printf("resumed from %s: %" PRIu64 " epochs, %" PRIu64 " steps done", path, t->start_epoch,
               t->step);
        if (t->epoch_step)
            printf("; epoch %" PRIu64 " continues after its step %" PRIu64 " (%" PRIu64
                   " of %zu samples done)",
                   t->start_epoch, t->epoch_step, t->epoch_samples,
                   ddpc_sampler_dataset_len(t->sampler));
        if (t->epoch_step && saved_world != t->world)
            printf(" at world size %d, the checkpoint's %d: the rest is re-sharded", t->world,
                   saved_world);
        if (t->restart > 0) printf(" (restart %ld of the job)", t->restart);
        putchar('\n');
    }
    return DDPC_OK;
}

/* Rank 0, continuing from --checkpoint: the metrics log loses the lines of
 * epochs after the checkpoint's (an attempt killed after logging an epoch
 * but before saving it), so that each epoch is logged once. */
ddpc_status trim_metrics(trainer *t) {
    const char *path = t->o.metrics;
    if (!path || !t->resumed_own || !t->loaded.metrics_kept) return DDPC_OK;
    struct stat st;
    if (stat(path, &st) != 0 || (uint64_t)st.st_size <= t->loaded.metrics_bytes) return DDPC_OK;
    if (truncate(path, (off_t)t->loaded.metrics_bytes) != 0)
        return ddpc__err_errno(DDPC_ERR_IO, errno,
                               "--metrics %s: cannot cut it back to %" PRIu64
                               " bytes (the checkpoint's epochs)",
                               path, t->loaded.metrics_bytes);
    printf("metrics %s: dropped %" PRIu64 " bytes logged after the checkpoint's epoch\n", path,
           (uint64_t)st.st_size - t->loaded.metrics_bytes);
    return DDPC_OK;
}

/* Rank 0 saves the checkpoint of `epochs` epochs done, with where the
 * metrics log ends. */
static ddpc_status make_meta(trainer *t, uint64_t epochs, ddpc_ckpt_meta *meta) {
    memset(meta, 0, sizeof *meta);
    meta->epoch = epochs;
    meta->step = t->step;
    if (t->metrics) {
        long end = ftell(t->metrics);
        if (end < 0)
            return ddpc__err_errno(DDPC_ERR_IO, errno, "--metrics %s: ftell", t->o.metrics);
        meta->metrics_bytes = (uint64_t)end;
        meta->metrics_kept = 1;
    }
    return DDPC_OK;
}

ddpc_status save_checkpoint(trainer *t, uint64_t epochs) {
    DDPC_CHECK(checkpoint_wait(t)); /* a step checkpoint first, never over this one */
    ddpc_ckpt_meta meta;
    DDPC_CHECK(make_meta(t, epochs, &meta));
    return ddpc_checkpoint_save(t->o.checkpoint, t->m, t->opt, &meta);
}

static void *writer_main(void *arg) {
    ckpt_writer *w = arg;
    w->s = ddpc_checkpoint_snapshot_write(w->sn, w->path);
    if (w->s != DDPC_OK) snprintf(w->err, sizeof w->err, "%s", ddpc_last_error());
    return NULL;
}

ddpc_status checkpoint_wait(trainer *t) {
    ckpt_writer *w = &t->writer;
    if (!w->running) return DDPC_OK;
    pthread_join(w->thread, NULL);
    w->running = 0;
    ddpc_checkpoint_snapshot_destroy(w->sn);
    w->sn = NULL;
    if (w->s != DDPC_OK) return ddpc__err(w->s, "%s", w->err);
    return DDPC_OK;
}

/*
 * 1. Wait for the previous step checkpoint (one file is written at a time,
 *    in order; its error is this call's).
 * 2. Copy parameters, optimizer state and the position (one memcpy a block:
 *    about a millisecond for the MLP).
 * 3. Write the copy on a thread while training goes on; the file appears
 *    whole or not at all (safetensors.c).
 */
ddpc_status save_step_checkpoint(trainer *t, uint64_t epoch, uint64_t estep, uint64_t samples) {
    ckpt_writer *w = &t->writer;
    DDPC_CHECK(checkpoint_wait(t));
    ddpc_ckpt_meta meta;
    DDPC_CHECK(make_meta(t, epoch, &meta));
    position_format(meta.trainer, sizeof meta.trainer, estep, samples, t->world, &t->acc);
    DDPC_CHECK(ddpc_checkpoint_snapshot(t->m, t->opt, &meta, &w->sn));
    w->path = t->o.checkpoint;
    w->s = DDPC_OK;
    int e = pthread_create(&w->thread, NULL, writer_main, w);
    if (e != 0) { /* write it here, then */
        w->s = ddpc_checkpoint_snapshot_write(w->sn, w->path);
        ddpc_checkpoint_snapshot_destroy(w->sn);
        w->sn = NULL;
        return w->s;
    }
    w->running = 1;
    DDPC_TRACE(NN, "step checkpoint: epoch %" PRIu64 " step %" PRIu64 " written on a thread", epoch,
               estep);
    return DDPC_OK;
}
