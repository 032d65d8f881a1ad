/* test_resume.c — a job that loses a worker continues from its last
 * complete checkpoint: ddpc-train under ddpc-run --max-restarts, a worker
 * SIGKILLed at a random moment (fixed seeds; 2 and 4 workers) or inside a
 * checkpoint write, finishes with the parameters and optimizer state of a
 * run never killed, bit for bit, and its metrics log holds each epoch once
 * with the same figures; a disk that fills during a save leaves the
 * previous checkpoint intact and the job's failure names the file and the
 * cause; --resume auto and a restarted attempt continue by themselves. */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "ddpc/nn.h"
#include "test.h"
#include "train/train.h" /* model_create_preset: ddpc-train's models */

#define DATA "/usr/share/datasets/fashion-mnist"

static char out[1 << 16];

static void need_data(void) {
    if (access(DATA "/train-images-idx3-ubyte.gz", R_OK) != 0)
        SKIP("Fashion-MNIST is not installed in " DATA " (apt-get install dataset-fashion-mnist)");
}

/* The training every run of a test shares: an MLP with SGD momentum, a few
 * short epochs, so that a kill lands in start-up, training, evaluation or a
 * save. */
static void train_args(char *buf, size_t cap, const char *model, int world, int epochs) {
    snprintf(buf, cap,
             "--model %s --epochs %d --max-batches %d --max-eval-batches 1 --momentum 0.9 "
             "--log-every 0",
             model, epochs, world > 2 ? 10 : 20);
}

/* A checkpoint of `model` with SGD momentum: its meta, parameters and
 * momentum (malloc'd, n floats each). */
typedef struct ckpt {
    ddpc_ckpt_meta meta;
    float *p, *mom;
    size_t n;
} ckpt;

static void ckpt_read(const char *path, const char *model, ckpt *c) {
    ddpc_model *m;
    ddpc_optim *o;
    CHECK_OK(model_create_preset(model, 0, &m));
    ddpc_optim_options oo = ddpc_optim_options_default(DDPC_OPTIM_SGD);
    oo.momentum = 0.9f;
    CHECK_OK(ddpc_optim_create(m, &oo, &o));
    CHECK_OK(ddpc_checkpoint_load(path, m, o, &c->meta));
    const float *b = ddpc_model_param_block(m, &c->n);
    c->p = malloc(c->n * sizeof *c->p);
    c->mom = malloc(c->n * sizeof *c->mom);
    CHECK(c->p && c->mom);
    memcpy(c->p, b, c->n * sizeof *c->p);
    memcpy(c->mom, ddpc_optim_state(o, 0, NULL), c->n * sizeof *c->mom);
    ddpc_optim_destroy(o);
    ddpc_model_destroy(m);
}

/* The two checkpoints hold the same epoch, step, parameters and momentum,
 * bit for bit. */
static void same_ckpt(const char *a, const char *b, const char *model) {
    ckpt x, y;
    ckpt_read(a, model, &x);
    ckpt_read(b, model, &y);
    CHECK_EQ(x.meta.epoch, y.meta.epoch);
    CHECK_EQ(x.meta.step, y.meta.step);
    CHECK_EQ(x.n, y.n);
    size_t dp = 0, dm = 0;
    for (size_t i = 0; i < x.n; i++) {
        dp += memcmp(&x.p[i], &y.p[i], 4) != 0;
        dm += memcmp(&x.mom[i], &y.mom[i], 4) != 0;
    }
    CHECK_MSG(dp == 0 && dm == 0, "%s and %s: %zu of %zu parameters and %zu momenta differ", a, b,
              dp, x.n, dm);
    free(x.p), free(x.mom), free(y.p), free(y.mom);
}

/* Reads a metrics log into lines[] (at most cap); returns how many. */
static int read_lines(const char *path, char lines[][1024], int cap) {
    FILE *f = fopen(path, "r");
    CHECK_MSG(f != NULL, "cannot open %s", path);
    int n = 0;
    while (n < cap && fgets(lines[n], 1024, f)) n++;
    fclose(f);
    return n;
}

/* The killed job's log has each epoch 0..epochs-1 once, in order, and the
 * same loss and accuracies as the reference's (each line up to its
 * timings). */
static void same_metrics(const char *ref, const char *got, int epochs) {
    static char a[64][1024], b[64][1024];
    int na = read_lines(ref, a, 64), nb = read_lines(got, b, 64);
    CHECK_EQ(na, epochs);
    CHECK_MSG(nb == epochs, "%s has %d lines for %d epochs", got, nb, epochs);
    for (int e = 0; e < epochs; e++) {
        char want[32];
        snprintf(want, sizeof want, "{\"epoch\": %d,", e);
        CHECK_MSG(!strncmp(b[e], want, strlen(want)), "line %d of %s is not epoch %d: %s", e + 1,
                  got, e, b[e]);
        char *ta = strstr(a[e], ", \"samples_per_s\""), *tb = strstr(b[e], ", \"samples_per_s\"");
        CHECK(ta && tb);
        CHECK_MSG(ta - a[e] == tb - b[e] && !memcmp(a[e], b[e], (size_t)(ta - a[e])),
                  "epoch %d differs from the run never killed:\n  %.*s\n  %.*s", e,
                  (int)(ta - a[e]), a[e], (int)(tb - b[e]), b[e]);
    }
}

/* ddpc-run ... ddpc-train ARGS --checkpoint DIR/NAME.st --metrics DIR/NAME.jsonl */
static void job_cmd(char *buf, size_t cap, int world, const char *args, const char *name) {
    snprintf(buf, cap,
             "%s --standalone --nproc-per-node=%d --max-restarts=3 %s %s --checkpoint %s/%s.st "
             "--metrics %s/%s.jsonl",
             t_bin("ddpc-run"), world, t_bin("ddpc-train"), args, t_tmp_dir(), name, t_tmp_dir(),
             name);
}

/* Runs the job never killed; returns its seconds. */
static double reference(int world, const char *args) {
    char job[2048];
    job_cmd(job, sizeof job, world, args, "ref");
    double t0 = ddpc__now();
    int rc = t_run_cmdf(100, out, sizeof out, "%s 2>&1", job);
    CHECK_MSG(rc == 0, "reference run: rc=%d: %s", rc, out);
    return ddpc__now() - t0;
}

static uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* The job with one worker SIGKILLed `delay` seconds after the launch (the
 * worker is the victim-th child of ddpc-run); it must still succeed. */
static void killed_at(int world, const char *args, double delay, int victim) {
    char job[2048];
    job_cmd(job, sizeof job, world, args, "k");
    int rc = t_run_cmdf(200, out, sizeof out,
                        "cd %s || exit 1; rm -f k.st k.jsonl; %s > k.log 2>&1 & L=$!; sleep %.3f; "
                        "set -- $(cat /proc/$L/task/$L/children 2>/dev/null); "
                        "if [ $# -gt %d ]; then shift %d; kill -9 $1 && echo \"killed worker $1\"; "
                        "fi; wait $L; echo \"rc=$?\"; cat %s/k.log",
                        t_tmp_dir(), job, delay, victim, victim, t_tmp_dir());
    CHECK_MSG(rc == 0 && strstr(out, "rc=0\n"), "killed at %.2f s: rc=%d: %s", delay, rc, out);
}

/* The job with a kill inside the save of epoch `epoch` (the checkpoint
 * then says epoch-1 epochs done and its temporary file exists; each save
 * pauses halfway for DDPC_CKPT_DELAY_MS): the writer (rank 0) itself, or
 * the last child of ddpc-run (then rank 0 is stopped mid-write by the
 * launcher's SIGTERM). */
static void killed_in_save(int world, const char *args, int epoch, int writer) {
    char job[2048];
    job_cmd(job, sizeof job, world, args, "k");
    int rc = t_run_cmdf(
        200, out, sizeof out,
        "cd %s || exit 1; rm -f k.st k.jsonl; DDPC_CKPT_DELAY_MS=400 %s > k.log 2>&1 & L=$!; i=0; "
        "while [ $i -lt 3000 ]; do "
        "  if head -c 100 k.st 2>/dev/null | grep -q '\"epoch\":\"%d\"' && ls k.st.tmp.* "
        "     >/dev/null 2>&1; then break; fi; sleep 0.01; i=$((i+1)); done; "
        "t=$(ls k.st.tmp.* 2>/dev/null | head -n 1); "
        "if [ %d = 1 ]; then v=${t##*.}; else set -- $(cat /proc/$L/task/$L/children); "
        "  while [ $# -gt 1 ]; do shift; done; v=$1; fi; "
        "kill -9 $v && echo \"killed $v while writing $t\"; "
        "sleep 0.2; [ -n \"$t\" ] && [ -e \"$t\" ] && echo \"partial $(stat -c %%s $t) of "
        "$(stat -c %%s k.st) bytes\"; "
        "wait $L; echo \"rc=$?\"; echo \"left $(ls k.st.tmp.* 2>/dev/null | wc -l)\"; cat k.log",
        t_tmp_dir(), job, epoch - 1, writer);
    CHECK_MSG(rc == 0 && strstr(out, "rc=0\n"), "kill inside a save: rc=%d: %s", rc, out);
    CHECK_CONTAINS(out, "while writing k.st.tmp.");
    CHECK_CONTAINS(out, "left 0\n"); /* the restart removed the dead writer's temporary */
    char want[64];
    snprintf(want, sizeof want, "k.st: %d epochs", epoch - 1);
    if (writer) {
        CHECK_CONTAINS(out, "partial "); /* a half-written file was there to be loaded */
        CHECK_CONTAINS(out, want);
        /* the epochs saved were trained once; the one whose save was cut, twice */
        for (int e = 0; e < epoch; e++) {
            char line[32];
            snprintf(line, sizeof line, "[0]: epoch %d: ", e);
            int n = 0;
            for (const char *p = out; (p = strstr(p, line)); p++) n++;
            CHECK_MSG(n == (e < epoch - 1 ? 1 : 2), "'%s' %d times: %s", line, n, out);
        }
    } else {
        CHECK_CONTAINS(out, "resumed from ");
    }
}

/* A reference, then a kill at a random moment for each seed, then a kill
 * inside a save, each job's final checkpoint and metrics compared with the
 * reference's. */
static void sigkill_job(int world, const uint64_t *seeds, int nseeds) {
    need_data();
    char args[256], ref[512], got[512], refm[512], gotm[512];
    int epochs = 4;
    train_args(args, sizeof args, "mlp", world, epochs);
    double secs = reference(world, args);
    snprintf(ref, sizeof ref, "%s", t_tmp_path("ref.st"));
    snprintf(refm, sizeof refm, "%s", t_tmp_path("ref.jsonl"));
    snprintf(got, sizeof got, "%s", t_tmp_path("k.st"));
    snprintf(gotm, sizeof gotm, "%s", t_tmp_path("k.jsonl"));
    for (int k = 0; k < nseeds; k++) {
        uint64_t r = mix(seeds[k]);
        double delay = secs * (0.15 + 0.8 * (double)(r % 1000) / 1000);
        killed_at(world, args, delay, (int)((r >> 20) % (uint64_t)world));
        same_ckpt(ref, got, "mlp");
        same_metrics(refm, gotm, epochs);
    }
    killed_in_save(world, args, 3, world == 2); /* 2: the writer; 4: another worker */
    same_ckpt(ref, got, "mlp");
    same_metrics(refm, gotm, epochs);
    t_tmp_remove();
}

TEST_T(resume_sigkill_2_workers, 300) {
    static const uint64_t seeds[] = { 1, 2, 3 };
    sigkill_job(2, seeds, 3);
}

TEST_T(resume_sigkill_4_workers, 300) {
    static const uint64_t seeds[] = { 11, 12, 13 };
    sigkill_job(4, seeds, 3);
}

/* The job killed (a worker, SIGKILL) just after the step checkpoint of
 * epoch 1 that `pattern` matches in the file's header is written: it must
 * continue from that step and succeed. */
static void killed_after_step_ckpt(int world, const char *args, const char *pattern) { /* grep -E */
    char job[2048];
    job_cmd(job, sizeof job, world, args, "k");
    int rc = t_run_cmdf(200, out, sizeof out,
                        "cd %s || exit 1; rm -f k.st k.jsonl; %s > k.log 2>&1 & L=$!; i=0; "
                        "while [ $i -lt 3000 ]; do "
                        "  if head -c 400 k.st 2>/dev/null | grep -Eq '%s'; then break; fi; "
                        "  sleep 0.005; i=$((i+1)); done; "
                        "set -- $(cat /proc/$L/task/$L/children 2>/dev/null); "
                        "if [ $# -gt 1 ]; then kill -9 $2 && echo \"killed worker $2\"; fi; "
                        "wait $L; echo \"rc=$?\"; cat k.log",
                        t_tmp_dir(), job, pattern);
    CHECK_MSG(rc == 0 && strstr(out, "rc=0\n"), "killed after a step checkpoint: rc=%d: %s", rc,
              out);
    CHECK_CONTAINS(out, "killed worker ");
}

/* --checkpoint-every 7: a worker killed right after a step checkpoint of
 * epoch 1, then at random moments (seeds 21-23): the restart continues
 * from the step after the checkpoint, says so, and the job ends with the
 * parameters, momentum and metrics of a run never killed, bit for bit. */
TEST_T(resume_step_checkpoint_sigkill, 300) {
    need_data();
    int world = 2, epochs = 3;
    char args[320], ref[512], got[512], refm[512], gotm[512];
    snprintf(args, sizeof args,
             "--model mlp --epochs %d --max-batches 40 --max-eval-batches 1 --momentum 0.9 "
             "--log-every 0 --checkpoint-every 7",
             epochs);
    double secs = reference(world, args);
    snprintf(ref, sizeof ref, "%s", t_tmp_path("ref.st"));
    snprintf(refm, sizeof refm, "%s", t_tmp_path("ref.jsonl"));
    snprintf(got, sizeof got, "%s", t_tmp_path("k.st"));
    snprintf(gotm, sizeof gotm, "%s", t_tmp_path("k.jsonl"));
    /* epoch 1 is steps 40-79: checkpoints after its steps 2 (step 42), 9, ... */
    killed_after_step_ckpt(world, args, "\"epoch\":\"1\".*epoch_step=(2|9|16) ");
    /* "k.st: 1 epochs, 42 steps done; epoch 1 continues after its step 2 (128 of
     * 60000 samples done) (restart 1 of the job)", or step 9 or 16 */
    const char *line = strstr(out, "k.st: 1 epochs, ");
    unsigned long long steps = 0, estep = 0, samples = 0;
    CHECK_MSG(line && sscanf(line,
                             "k.st: 1 epochs, %llu steps done; epoch 1 continues after its step "
                             "%llu (%llu of 60000 samples done) (restart 1 of the job)",
                             &steps, &estep, &samples) == 3,
              "no resume line naming epoch 1 and its step: %s", out);
    CHECK_EQ(steps, 40 + estep);
    CHECK_EQ(samples, estep * 32 * 2);
    CHECK(strstr(out, "re-sharded") == NULL);
    for (int e = 0; e < epochs; e++) { /* no epoch was finished twice */
        char line[32];
        snprintf(line, sizeof line, "[0]: epoch %d: ", e);
        int n = 0;
        for (const char *p = out; (p = strstr(p, line)); p++) n++;
        CHECK_MSG(n == 1, "'%s' %d times: %s", line, n, out);
    }
    same_ckpt(ref, got, "mlp");
    same_metrics(refm, gotm, epochs);
    static const uint64_t seeds[] = { 21, 22, 23 };
    for (int k = 0; k < 3; k++) {
        uint64_t r = mix(seeds[k]);
        killed_at(world, args, secs * (0.15 + 0.8 * (double)(r % 1000) / 1000),
                  (int)((r >> 20) % (uint64_t)world));
        same_ckpt(ref, got, "mlp");
        same_metrics(refm, gotm, epochs);
    }
    t_tmp_remove();
}

/* The metrics log at path has one line, epoch 0, counting each of the
 * 60000 training samples once, at world size `world`. */
static void one_epoch_all_samples(const char *path, int world) {
    static char lines[4][1024];
    char want[64];
    CHECK_EQ(read_lines(path, lines, 4), 1);
    CHECK_CONTAINS(lines[0], "\"train_samples\": 60000, ");
    snprintf(want, sizeof want, "\"world_size\": %d,", world);
    CHECK_CONTAINS(lines[0], want);
}

/* An elastic job's ddpc-run options (--nnodes=1:2, 2 workers a node, id,
 * last_call_timeout) into el, and ddpc-train's (one epoch of the linear
 * model, a step checkpoint every 20 steps, DIR/NAME.st, DIR/NAME.jsonl)
 * into tr. */
static void elastic_args(char *el, size_t elcap, char *tr, size_t trcap, const char *name,
                         double last_call) {
    snprintf(el, elcap,
             "--nnodes=1:2 --nproc-per-node=2 --rdzv-backend=c10d --rdzv-endpoint=127.0.0.1:%d "
             "--rdzv-id=%s --rdzv-conf=last_call_timeout=%g --max-restarts=2 "
             "--monitor-interval=0.2 --heartbeat-timeout=2",
             t_free_port_pair(), name, last_call);
    snprintf(tr, trcap,
             "--model linear --epochs 1 --batch-size 100 --max-eval-batches 1 --log-every 0 "
             "--checkpoint-every 20 --checkpoint %s/%s.st --metrics %s/%s.jsonl",
             t_tmp_dir(), name, t_tmp_dir(), name);
}

/* A job of `from` workers stopped for good (a worker killed, no restarts
 * left) after its step checkpoint of epoch 0 that `pattern` (grep -E)
 * matches, then
 * started again by hand at `to` workers with --resume auto: the epoch
 * continues where the checkpoint left it, re-sharded over the new world
 * size, and its one metrics line counts every training sample once
 * (60000: no sample trained twice or skipped) at world_size `to`. */
static void resume_at_new_size(int from, int to, const char *pattern) {
    char args[320], job[2048], want[256];
    const char *ck = t_tmp_path("w.st"), *mt = t_tmp_path("w.jsonl");
    snprintf(args, sizeof args,
             "--model linear --epochs 1 --batch-size 100 --max-eval-batches 1 --log-every 0 "
             "--checkpoint-every 20 --checkpoint %s --metrics %s",
             ck, mt);
    snprintf(job, sizeof job, "%s --standalone --nproc-per-node=%d %s %s", t_bin("ddpc-run"), from,
             t_bin("ddpc-train"), args);
    int rc =
        t_run_cmdf(200, out, sizeof out,
                   "cd %s || exit 1; rm -f w.st w.jsonl; DDPC_CKPT_DELAY_MS=100 %s > w.log 2>&1 & "
                   "L=$!; i=0; "
                   "while [ $i -lt 6000 ]; do "
                   "  if head -c 400 w.st 2>/dev/null | grep -Eq '%s'; then break; fi; "
                   "  sleep 0.005; i=$((i+1)); done; "
                   "set -- $(cat /proc/$L/task/$L/children 2>/dev/null); "
                   "if [ $# -gt 1 ]; then kill -9 $2 && echo \"killed worker $2\"; fi; "
                   "wait $L; echo \"rc=$?\"; cat w.log",
                   t_tmp_dir(), job, pattern);
    CHECK_MSG(rc == 0 && strstr(out, "killed worker ") && !strstr(out, "rc=0\n"),
              "the job of %d did not fail as meant: rc=%d: %s", from, rc, out);
    struct stat st;
    CHECK_MSG(stat(mt, &st) != 0 || st.st_size == 0, "epoch 0 ended before the kill: %s", out);
    rc = t_run_cmdf(200, out, sizeof out,
                    "%s --standalone --nproc-per-node=%d %s %s --resume auto 2>&1",
                    t_bin("ddpc-run"), to, t_bin("ddpc-train"), args);
    CHECK_MSG(rc == 0, "resumed at %d: rc=%d: %s", to, rc, out);
    snprintf(want, sizeof want, "epoch 0 continues after its step ");
    CHECK_CONTAINS(out, want);
    snprintf(want, sizeof want, " at world size %d, the checkpoint's %d: the rest is re-sharded",
             to, from);
    CHECK_CONTAINS(out, want);
    one_epoch_all_samples(mt, to);
}

/* 4 workers -> 2 and 2 -> 4 mid-epoch, from a step checkpoint. */
TEST_T(resume_step_checkpoint_new_world_size, 300) {
    need_data();
    /* batch 100 x 4 = 400 samples a step, 150 steps an epoch; x 2: 300.
     * Each step checkpoint's write pauses 100 ms (DDPC_CKPT_DELAY_MS) and
     * the next one waits for it, so the epoch lasts long enough for the
     * kill to land in it after a step checkpoint from its middle */
    resume_at_new_size(4, 2, "\"epoch\":\"0\".*epoch_step=(40|60|80|100) ");
    resume_at_new_size(2, 4, "\"epoch\":\"0\".*epoch_step=(80|100|120|140|160|180|200) ");
    t_tmp_remove();
}

/* Step checkpoints are written off the training loop: with each write
 * made to last 200 ms (DDPC_CKPT_DELAY_MS), 3 step checkpoints 100 steps
 * apart cost the loop far less than the 0.6 s that writing them in line
 * would (the metrics' "checkpoint" phase), and the file is still whole. */
TEST_T(resume_step_checkpoint_written_off_the_loop, 120) {
    need_data();
    const char *ck = t_tmp_path("o.st"), *mt = t_tmp_path("o.jsonl");
    int rc = t_run_cmdf(100, out, sizeof out,
                        "DDPC_CKPT_DELAY_MS=200 %s --standalone --nproc-per-node=2 %s --model mlp "
                        "--epochs 1 --max-batches 350 --max-eval-batches 1 --momentum 0.9 "
                        "--log-every 0 --checkpoint %s --checkpoint-every 100 --metrics %s 2>&1",
                        t_bin("ddpc-run"), t_bin("ddpc-train"), ck, mt);
    CHECK_MSG(rc == 0, "rc=%d: %s", rc, out);
    static char lines[4][1024];
    CHECK_EQ(read_lines(mt, lines, 4), 1);
    const char *p = strstr(lines[0], "\"checkpoint\": ");
    CHECK_MSG(p != NULL, "no checkpoint phase: %s", lines[0]);
    double secs = atof(p + strlen("\"checkpoint\": "));
    CHECK_MSG(secs < 0.3, "3 step checkpoints cost the loop %.3f s (in line: >= 0.6 s)", secs);
    ckpt c;
    ckpt_read(ck, "mlp", &c);
    CHECK_EQ(c.meta.epoch, 1);
    CHECK_EQ(c.meta.step, 350);
    free(c.p), free(c.mom);
    t_tmp_remove();
}

/* An elastic job (--nnodes=1:2, two launchers of 2 workers on loopback)
 * loses node 1 (its launcher and workers SIGKILLed) mid-epoch, after a
 * step checkpoint: node 0 notices, rejoins the rendezvous alone and
 * restarts its workers at world size 2, which continue the epoch from the
 * checkpoint, re-sharded: its metrics line counts 60000 samples (each
 * once) at world_size 2. */
TEST_T(resume_elastic_node_killed_mid_epoch, 200) {
    need_data();
    char el[320], tr[512];
    elastic_args(el, sizeof el, tr, sizeof tr, "e", 1);
    /* each step checkpoint's write pauses 100 ms, so the epoch lasts */
    int rc = t_run_cmdf(
        180, out, sizeof out,
        "cd %s || exit 1; export DDPC_CKPT_DELAY_MS=100; %s %s %s %s > n0.log 2>&1 & p0=$!; "
        "sleep 0.3; %s %s %s %s > n1.log 2>&1 & p1=$!; i=0; "
        "while [ $i -lt 6000 ]; do "
        "  if head -c 400 e.st 2>/dev/null | grep -Eq 'epoch_step=(20|40|60|80) '; then break; fi; "
        "  sleep 0.005; i=$((i+1)); done; "
        "c=$(cat /proc/$p1/task/$p1/children); kill -9 $p1 $c && echo \"killed node 1\"; "
        "wait $p0; echo \"rc0=$?\"; cat n0.log",
        t_tmp_dir(), t_bin("ddpc-run"), el, t_bin("ddpc-train"), tr, t_bin("ddpc-run"), el,
        t_bin("ddpc-train"), tr);
    CHECK_MSG(rc == 0 && strstr(out, "rc0=0\n"), "rc=%d: %s", rc, out);
    CHECK_CONTAINS(out, "killed node 1");
    CHECK_CONTAINS(out,
                   "elastic rendezvous (--nnodes=1:2): 2 nodes, this one node 0 (ranks 0-1 of 4)");
    CHECK_CONTAINS(out, "restarting all workers on all nodes (restart 1 of at most 2)");
    CHECK_CONTAINS(out,
                   "elastic rendezvous (--nnodes=1:2): 1 nodes, this one node 0 (ranks 0-1 of 2)");
    CHECK_CONTAINS(out, "epoch 0 continues after its step ");
    CHECK_CONTAINS(out,
                   " at world size 2, the checkpoint's 4: the rest is re-sharded (restart 1 of "
                   "the job)");
    one_epoch_all_samples(t_tmp_path("e.jsonl"), 2);
    t_tmp_remove();
}

/* An elastic job (--nnodes=1:2) started alone (one launcher, 2 workers,
 * after last_call_timeout) gains a second launcher mid-epoch: the first
 * sees it waiting at its next heartbeat, both rejoin and restart at world
 * size 4, which continue the epoch from the last step checkpoint,
 * re-sharded: one metrics line, 60000 samples, world_size 4. */
TEST_T(resume_elastic_node_added_mid_run, 200) {
    need_data();
    char el[320], tr[512];
    elastic_args(el, sizeof el, tr, sizeof tr, "a", 0.5);
    int rc = t_run_cmdf(
        180, out, sizeof out,
        "cd %s || exit 1; export DDPC_CKPT_DELAY_MS=100; %s %s %s %s > n0.log 2>&1 & p0=$!; i=0; "
        "while [ $i -lt 6000 ]; do "
        "  if head -c 400 a.st 2>/dev/null | grep -Eq 'epoch_step=(40|60|80|100) '; then break; "
        "fi; sleep 0.005; i=$((i+1)); done; "
        "%s %s %s %s > n1.log 2>&1; echo \"rc1=$?\"; wait $p0; echo \"rc0=$?\"; "
        "cat n0.log n1.log",
        t_tmp_dir(), t_bin("ddpc-run"), el, t_bin("ddpc-train"), tr, t_bin("ddpc-run"), el,
        t_bin("ddpc-train"), tr);
    CHECK_MSG(rc == 0 && strstr(out, "rc0=0\n") && strstr(out, "rc1=0\n"), "rc=%d: %s", rc, out);
    CHECK_CONTAINS(out, "elastic rendezvous (--nnodes=1:2): 1 nodes, this one node 0 (ranks 0-1 "
                        "of 2)");
    CHECK_CONTAINS(out, "a node asked to join run id 'a' (1 nodes now, --nnodes=1:2): every node "
                        "restarts at the new size");
    CHECK_CONTAINS(out, "elastic rendezvous (--nnodes=1:2): 2 nodes, this one node 0 (ranks 0-1 "
                        "of 4)");
    CHECK_CONTAINS(out, "elastic rendezvous (--nnodes=1:2): 2 nodes, this one node 1 (ranks 2-3 "
                        "of 4)");
    CHECK_CONTAINS(out,
                   " at world size 4, the checkpoint's 2: the rest is re-sharded (restart 1 of "
                   "the job)");
    one_epoch_all_samples(t_tmp_path("a.jsonl"), 4);
    t_tmp_remove();
}

/* One process, as a restarted attempt would see it (TORCHELASTIC_RESTART_COUNT
 * set by hand): it continues from --checkpoint, says so, and keeps the
 * metrics log to one line per epoch; the first attempt starts over;
 * --resume auto continues on the first attempt too and needs --checkpoint. */
TEST_T(resume_restarted_attempt_continues, 120) {
    need_data();
    char args[256];
    const char *c = t_tmp_path("one.st"), *m = t_tmp_path("one.jsonl");
    train_args(args, sizeof args, "linear", 1, 2);
    int rc = t_run_cmdf(60, out, sizeof out, "%s %s --checkpoint %s --metrics %s 2>&1",
                        t_bin("ddpc-train"), args, c, m);
    CHECK_MSG(rc == 0, "rc=%d: %s", rc, out);
    /* an attempt killed after logging epoch 2 but before saving it */
    FILE *f = fopen(m, "a");
    CHECK(f != NULL);
    fputs("{\"epoch\": 2, \"loss\": 9.0, \"half a line", f);
    fclose(f);
    train_args(args, sizeof args, "linear", 1, 3);
    rc = t_run_cmdf(60, out, sizeof out,
                    "TORCHELASTIC_RESTART_COUNT=1 %s %s --checkpoint %s --metrics %s 2>&1",
                    t_bin("ddpc-train"), args, c, m);
    CHECK_MSG(rc == 0, "rc=%d: %s", rc, out);
    CHECK_CONTAINS(out, "resumed from ");
    CHECK_CONTAINS(out, "one.st: 2 epochs, 40 steps done (restart 1 of the job)");
    CHECK_CONTAINS(out, "dropped ");
    CHECK(strstr(out, "epoch 0:") == NULL && strstr(out, "epoch 1:") == NULL);
    CHECK_CONTAINS(out, "epoch 2:");
    static char lines[8][1024];
    CHECK_EQ(read_lines(m, lines, 8), 3);
    CHECK(strstr(lines[2], "{\"epoch\": 2, \"loss\": 9.0") == NULL);
    /* the first attempt of a new job overwrites the file at once */
    rc = t_run_cmdf(60, out, sizeof out, "%s %s --epochs 1 --checkpoint %s 2>&1",
                    t_bin("ddpc-train"), args, c);
    CHECK_MSG(rc == 0, "rc=%d: %s", rc, out);
    CHECK(strstr(out, "resumed from") == NULL);
    ckpt x;
    ckpt_read(c, "linear", &x);
    CHECK_EQ(x.meta.epoch, 1);
    free(x.p), free(x.mom);
    /* --resume auto: from the checkpoint when there is one, else from 0 */
    rc = t_run_cmdf(60, out, sizeof out, "%s %s --resume auto --checkpoint %s 2>&1",
                    t_bin("ddpc-train"), args, c);
    CHECK_MSG(rc == 0, "rc=%d: %s", rc, out);
    CHECK_CONTAINS(out, "one.st: 1 epochs");
    rc = t_run_cmdf(60, out, sizeof out, "%s %s --resume auto --checkpoint %s 2>&1",
                    t_bin("ddpc-train"), args, t_tmp_path("none.st"));
    CHECK_MSG(rc == 0, "rc=%d: %s", rc, out);
    CHECK_CONTAINS(out, "--resume auto: no checkpoint ");
    rc = t_run_cmdf(60, out, sizeof out, "%s --resume auto 2>&1", t_bin("ddpc-train"));
    CHECK_EQ(rc, 2);
    CHECK_CONTAINS(out, "--resume auto continues from --checkpoint FILE, and there is none");
    /* a restart with nothing to continue from says so */
    rc = t_run_cmdf(60, out, sizeof out, "TORCHELASTIC_RESTART_COUNT=2 %s %s --epochs 1 2>&1",
                    t_bin("ddpc-train"), args);
    CHECK_MSG(rc == 0, "rc=%d: %s", rc, out);
    CHECK_CONTAINS(out, "restart 2: no --checkpoint FILE, so training starts again from epoch 0");
    t_tmp_remove();
}

/* A 1 MiB tmpfs, in a mount namespace of its own (so it is gone however the
 * test ends), holds the checkpoint; while the save of epoch 3 pauses
 * halfway, the disk is filled. The save fails naming the file and
 * ENOSPC, the checkpoint of epoch 2 is left intact (as a run of 2 epochs
 * writes it), nothing temporary is left, the restart fails the same way and
 * ddpc-run's summary says why. */
TEST_T(resume_disk_full_keeps_previous_checkpoint, 180) {
    need_data();
    if (geteuid() != 0) SKIP("needs root to mount a tmpfs (in a mount namespace of its own)");
    if (access("/usr/bin/unshare", X_OK) != 0 && access("/bin/unshare", X_OK) != 0)
        SKIP("needs unshare (util-linux) for a private mount namespace");
    char args[256], job[2048];
    train_args(args, sizeof args, "linear", 2, 2);
    const char *ref = t_tmp_path("ref2.st");
    int rc = t_run_cmdf(100, out, sizeof out,
                        "%s --standalone --nproc-per-node=2 %s %s --checkpoint %s 2>&1",
                        t_bin("ddpc-run"), t_bin("ddpc-train"), args, ref);
    CHECK_MSG(rc == 0, "run of 2 epochs: rc=%d: %s", rc, out);
    train_args(args, sizeof args, "linear", 2, 6);
    const char *mnt = t_tmp_path("mnt");
    CHECK(mkdir(mnt, 0755) == 0);
    snprintf(job, sizeof job,
             "DDPC_CKPT_DELAY_MS=500 %s --standalone --nproc-per-node=2 --max-restarts=1 %s %s "
             "--checkpoint %s/c.st",
             t_bin("ddpc-run"), t_bin("ddpc-train"), args, mnt);
    rc = t_run_cmdf(
        150, out, sizeof out,
        "unshare -m sh -c 'mount -t tmpfs -o size=1m ddpc_test_full %s || exit 90; cd %s; "
        "%s > %s/full.log 2>&1 & L=$!; i=0; "
        "while [ $i -lt 3000 ]; do "
        "  if head -c 100 c.st 2>/dev/null | grep -q \"\\\"epoch\\\":\\\"2\\\"\" && "
        "     ls c.st.tmp.* >/dev/null 2>&1; then break; fi; sleep 0.01; i=$((i+1)); done; "
        "dd if=/dev/zero of=filler bs=4k 2>/dev/null; echo \"filled $(stat -c %%s filler)\"; "
        "wait $L; echo \"rc=$?\"; cp c.st %s/survivor.st; echo \"left: $(ls)\"; cd /; "
        "umount %s' 2>&1; cat %s/full.log",
        mnt, mnt, job, t_tmp_dir(), t_tmp_dir(), mnt, t_tmp_dir());
    CHECK_MSG(rc == 0, "rc=%d: %s", rc, out);
    CHECK_CONTAINS(out, "filled ");
    CHECK_MSG(strstr(out, "rc=0\n") == NULL && strstr(out, "rc="), "the job did not fail: %s", out);
    CHECK_CONTAINS(out, "left: c.st\nfiller\n"); /* no temporary file left */
    /* the worker's error: the file, that it is unchanged, and the cause */
    char want[512];
    snprintf(want, sizeof want,
             "checkpoint %s/c.st not written (the file there, if any, is unchanged): %s/c.st.tmp.",
             mnt, mnt);
    CHECK_CONTAINS(out, want);
    CHECK_CONTAINS(out, ": write: No space left on device");
    /* the restart continued from the surviving checkpoint and failed alike;
     * the launcher's summary quotes the cause */
    CHECK_CONTAINS(out, "c.st: 2 epochs");
    CHECK_CONTAINS(out, "ddpc-run: job failed after all restarts.");
    const char *sum = strstr(out, "ddpc-run: job failed after all restarts.");
    CHECK_MSG(sum && strstr(sum, "No space left on device"), "the summary: %s", out);
    same_ckpt(ref, t_tmp_path("survivor.st"), "linear");
    rmdir(mnt);
    t_tmp_remove();
}
