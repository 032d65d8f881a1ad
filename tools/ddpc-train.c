/*
 * ddpc-train — trains a model on MNIST-format data (Fashion-MNIST by
 * default) and reports, per epoch, the mean loss, the test accuracy,
 * samples per second and seconds.
 *
 *     ddpc-train --model mlp --optimizer adam --lr 1e-3 --batch-size 128 --epochs 10
 *
 * Started by a launcher (ddpc-run, torchrun, mpirun, srun: RANK or
 * OMPI_COMM_WORLD_RANK or SLURM_PROCID set), every process trains a shard
 * with DDP: rank 0's parameters everywhere, gradient buckets averaged while
 * backward runs (backward returns with them averaged), the sums of loss, accuracy and count reduced
 * over all ranks (reduce_sums) so every rank reports the same global
 * figures, and the test set evaluated as one shard per rank. Started alone,
 * it trains in one process.
 *
 * Exit status: 0 on success, 1 when training fails, 2 for a bad option.
 *
 * This file holds the options, the training loop, evaluation and main;
 * resuming from checkpoints, the --trace timeline and the models --model
 * names are in tools/train/ (train.h lists them).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "base/env.h"
#include "base/strbuf.h"
#include "train/train.h"

/* ------------------------------------------------------------ options */

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: ddpc-train [options]\n"
        "  --data DIR          MNIST-format data (default /usr/share/datasets/fashion-mnist)\n"
        "  --model NAME        linear | mlp | cnn (default linear)\n"
        "  --epochs N          (default 10)\n"
        "  --batch-size N      per process (default 32)\n"
        "  --optimizer NAME    sgd | adam | adamw (default sgd)\n"
        "  --lr X              (default: sgd 0.01, adam/adamw 0.001)\n"
        "  --momentum X        SGD momentum (default 0)\n"
        "  --nesterov          SGD Nesterov momentum\n"
        "  --weight-decay X    (default: 0; adamw 0.01)\n"
        "  --seed N            model init, shuffling and dropout (default 0)\n"
        "  --log-every N       print 'Epoch: E | Batch: B | Loss: L' every N batches (default 100; "
        "0 off)\n"
        "  --checkpoint FILE   safetensors checkpoint written at start and at each epoch end\n"
        "                      (atomically); a restarted attempt (TORCHELASTIC_RESTART_COUNT >= "
        "1,\n"
        "                      set by ddpc-run --max-restarts and torchrun) continues from it\n"
        "  --checkpoint-every N  also write --checkpoint every N optimizer steps (rank 0, on a\n"
        "                      thread, from a copy): a restart continues after that step, at\n"
        "                      any world size (default 0 = at epoch ends only)\n"
        "  --resume FILE       continue from a checkpoint (model, optimizer, epoch, step)\n"
        "  --resume auto       continue from --checkpoint FILE whenever it exists, first attempt\n"
        "                      too (torchrun's recipe); else start from epoch 0\n"
        "  --metrics FILE      append one JSON line per epoch (rank 0: loss, accuracy, samples/s,\n"
        "                      seconds per step phase: data, forward, backward, sync, step)\n"
        "  --threads N         OpenBLAS threads (default DDPC_THREADS, else CPUs / local ranks)\n"
        "  --prefetch N        batches the loader thread keeps ready (0: decoded inline; default "
        "2\n"
        "                      while a CPU is left over (CPUs > local ranks x threads), else 0)\n"
        "  --max-batches N     stop each epoch after N training batches (default 0 = all)\n"
        "  --max-eval-batches N  evaluate only the first N test batches of each process's shard\n"
        "                      (default 0 = the whole test set)\n"
        "  --progress / --no-progress   a progress bar on stderr (default: when it is a terminal,\n"
        "                      or DDPC_PROGRESS=1, which ddpc-run sets for rank 0 on a terminal)\n"
        "  --local-rank N      accepted for torch.distributed.launch, which passes it; LOCAL_RANK "
        "is read\n"
        "  --bucket-mb X       DDP bucket size in MB (default 25; the first bucket is 1 MB)\n"
        "  --first-bucket-mb X size of DDP's first bucket (default 1)\n"
        "  --compress NAME     gradient allreduce in none | fp16 | bf16 (default none)\n"
        "  --overlap MODE      auto | on | off: buckets reduced by the progress thread while "
        "backward\n"
        "                      runs (on), or by backward's thread (off); auto: off where all "
        "ranks\n"
        "                      share this host and its CPUs (default auto)\n"
        "  --trace FILE        a timeline of the training steps as Chrome trace-event JSON: data,\n"
        "                      forward and backward per layer, each DDP bucket's allreduce from\n"
        "                      issue to completion, sync, optimizer step. With several processes\n"
        "                      rank R writes FILE with {rank} replaced by R, else FILE.rankR\n"
        "                      (before a .json); `ddpc-trace --merge OUT FILE...` joins them for\n"
        "                      Perfetto or chrome://tracing\n"
        "Under ddpc-run (or torchrun, mpirun, srun) each process trains its shard with DDP.\n"
        "  --help\n");
}

/* Prints "ddpc-train: <message>" and exits 2. */
static void bad_option(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void bad_option(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("ddpc-train: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs(" (see --help)\n", stderr);
    va_end(ap);
    exit(2);
}

static long opt_long(const char *name, const char *v, long lo, long hi) {
    long x;
    if (ddpc__parse_long(name, v, lo, hi, &x) != DDPC_OK) bad_option("%s", ddpc_last_error());
    return x;
}

static float opt_float(const char *name, const char *v, double lo, double hi) {
    double x;
    if (ddpc__parse_double(name, v, lo, hi, &x) != DDPC_OK) bad_option("%s", ddpc_last_error());
    return (float)x;
}

/*
 * Parses argv into o. Accepts "--name value" and "--name=value". Any
 * unknown option, missing or malformed value is one line on stderr and
 * exit status 2.
 */
/* What parsing collects besides options: the optimizer's settings, applied
 * once its kind is known. */
typedef struct parse {
    options *o;
    ddpc_optim_kind kind;
    float lr, wd, momentum;
    int nesterov;
} parse;

/* Sets one option from its value (NULL for a flag); exits on a bad value. */
typedef void (*opt_setter)(parse *p, const char *name, const char *val);

#define SETTER(fn, stmt)                                          \
    static void fn(parse *p, const char *name, const char *val) { \
        (void)p, (void)name, (void)val;                           \
        stmt;                                                     \
    }
SETTER(set_help, (usage(stdout), exit(0)))
SETTER(set_nesterov, p->nesterov = 1)
SETTER(set_progress, p->o->progress = 1)
SETTER(set_no_progress, p->o->progress = 0)
SETTER(set_data, p->o->data = val)
SETTER(set_local_rank,
       opt_long(name, val, 0, 1 << 20)) /* torch.distributed.launch; LOCAL_RANK rules */
SETTER(set_epochs, p->o->epochs = (int)opt_long(name, val, 1, 100000))
SETTER(set_batch_size, p->o->batch_size = (int)opt_long(name, val, 1, 65536))
SETTER(set_lr, (p->lr = opt_float(name, val, 0, 1e6), p->o->lr_set = 1))
SETTER(set_momentum, p->momentum = opt_float(name, val, 0, 1))
SETTER(set_weight_decay, (p->wd = opt_float(name, val, 0, 1e6), p->o->wd_set = 1))
SETTER(set_seed, p->o->seed = (uint64_t)opt_long(name, val, 0, INT64_MAX))
SETTER(set_log_every, p->o->log_every = (int)opt_long(name, val, 0, 1 << 30))
SETTER(set_checkpoint, p->o->checkpoint = val)
SETTER(set_checkpoint_every, p->o->checkpoint_every = opt_long(name, val, 0, 1L << 40))
SETTER(set_resume,
       (p->o->resume_auto = !strcmp(val, "auto"), p->o->resume = p->o->resume_auto ? NULL : val))
SETTER(set_metrics, p->o->metrics = val)
SETTER(set_trace, p->o->trace = val)
SETTER(set_threads, p->o->threads = (int)opt_long(name, val, 1, 1024))
SETTER(set_prefetch, p->o->prefetch = (int)opt_long(name, val, 0, 64))
SETTER(set_max_batches, p->o->max_batches = opt_long(name, val, 0, 1L << 40))
SETTER(set_max_eval_batches, p->o->max_eval_batches = opt_long(name, val, 0, 1L << 40))
SETTER(set_bucket_mb, p->o->ddp.bucket_mb = opt_float(name, val, 1e-6, 1e5))
SETTER(set_first_bucket_mb, p->o->ddp.first_bucket_mb = opt_float(name, val, 1e-6, 1e5))
#undef SETTER

static void set_model(parse *p, const char *name, const char *val) {
    if (strcmp(val, "linear") && strcmp(val, "mlp") && strcmp(val, "cnn"))
        bad_option("--model '%s' is not one of linear, mlp, cnn", val);
    p->o->model = val;
}
static void set_optimizer(parse *p, const char *name, const char *val) {
    if (ddpc_optim_kind_parse(val, &p->kind) != DDPC_OK)
        bad_option("--optimizer: %s", ddpc_last_error());
}
static void set_overlap(parse *p, const char *name, const char *val) {
    if (ddpc_overlap_parse(val, &p->o->ddp.overlap) != DDPC_OK)
        bad_option("--overlap: %s", ddpc_last_error());
}
static void set_compress(parse *p, const char *name, const char *val) {
    if (ddpc_compress_parse(val, &p->o->ddp.compress) != DDPC_OK)
        bad_option("--compress: %s", ddpc_last_error());
}

/* ddpc-train's options: name, whether it takes a value, its setter. */
static const struct {
    const char *name;
    int takes_value;
    opt_setter set;
} option_table[] = {
    { "--help", 0, set_help },
    { "--nesterov", 0, set_nesterov },
    { "--progress", 0, set_progress },
    { "--no-progress", 0, set_no_progress },
    { "--data", 1, set_data },
    { "--local-rank", 1, set_local_rank },
    { "--local_rank", 1, set_local_rank },
    { "--model", 1, set_model },
    { "--epochs", 1, set_epochs },
    { "--batch-size", 1, set_batch_size },
    { "--optimizer", 1, set_optimizer },
    { "--lr", 1, set_lr },
    { "--momentum", 1, set_momentum },
    { "--weight-decay", 1, set_weight_decay },
    { "--seed", 1, set_seed },
    { "--log-every", 1, set_log_every },
    { "--checkpoint", 1, set_checkpoint },
    { "--checkpoint-every", 1, set_checkpoint_every },
    { "--resume", 1, set_resume },
    { "--metrics", 1, set_metrics },
    { "--threads", 1, set_threads },
    { "--prefetch", 1, set_prefetch },
    { "--max-batches", 1, set_max_batches },
    { "--max-eval-batches", 1, set_max_eval_batches },
    { "--bucket-mb", 1, set_bucket_mb },
    { "--first-bucket-mb", 1, set_first_bucket_mb },
    { "--overlap", 1, set_overlap },
    { "--compress", 1, set_compress },
    { "--trace", 1, set_trace },
};

static void defaults(options *o) {
    memset(o, 0, sizeof *o);
    o->data = "/usr/share/datasets/fashion-mnist";
    o->model = "linear";
    o->epochs = 10;
    o->batch_size = 32;
    o->log_every = 100;
    o->prefetch = -1;
    o->progress = -1;
    o->ddp = ddpc_ddp_options_default();
}

/* --name=value, --name value, or a flag --name, each looked up in option_table. */
static void parse_options(int argc, char **argv, options *o) {
    defaults(o);
    parse p = { .o = o, .kind = DDPC_OPTIM_SGD };
    for (int i = 1; i < argc; i++) {
        char *arg = argv[i], name[64];
        if (strncmp(arg, "--", 2) != 0) bad_option("unexpected argument '%s'", arg);
        char *eq = strchr(arg, '=');
        size_t nlen = eq ? (size_t)(eq - arg) : strlen(arg);
        if (nlen >= sizeof name) bad_option("unknown option '%s'", arg);
        memcpy(name, arg, nlen);
        name[nlen] = 0;
        const char *val = eq ? eq + 1 : NULL;
        size_t k = 0, n = sizeof option_table / sizeof option_table[0];
        while (k < n && strcmp(option_table[k].name, name) != 0) k++;
        if (k == n) bad_option("unknown option '%s'", name);
        if (!option_table[k].takes_value && val) bad_option("%s takes no value", name);
        if (option_table[k].takes_value && !val) {
            if (i + 1 >= argc) bad_option("%s needs a value", name);
            val = argv[++i];
        }
        option_table[k].set(&p, name, val);
    }
    o->opt = ddpc_optim_options_default(p.kind);
    if (o->lr_set) o->opt.lr = p.lr;
    if (o->wd_set) o->opt.weight_decay = p.wd;
    if (p.momentum != 0 && p.kind != DDPC_OPTIM_SGD)
        bad_option("--momentum is for --optimizer sgd");
    if (p.nesterov && p.kind != DDPC_OPTIM_SGD) bad_option("--nesterov is for --optimizer sgd");
    if (p.nesterov && p.momentum == 0) bad_option("--nesterov needs --momentum > 0");
    if (o->resume_auto && !o->checkpoint)
        bad_option("--resume auto continues from --checkpoint FILE, and there is none");
    if (o->checkpoint_every && !o->checkpoint)
        bad_option("--checkpoint-every N writes --checkpoint FILE, and there is none");
    o->opt.momentum = p.momentum;
    o->opt.nesterov = p.nesterov;
}

/* ------------------------------------------------------------ trainer */

/* Sums v[0..n) over all ranks, in place. With one process: unchanged. */
static ddpc_status reduce_sums(trainer *t, double *v, int n) {
    return t->ddp ? ddpc_ddp_allreduce_sum(t->ddp, v, n) : DDPC_OK;
}

static ddpc_status setup(trainer *t) {
    const options *o = &t->o;
    /* threads: --threads, else nn's choice (DDPC_THREADS, else CPUs / ranks on this node) */
    if (o->threads) ddpc_nn_set_threads(o->threads);
    int threads = ddpc_nn_threads();
    long local =
        t->comm ? ddpc_comm_local_size(t->comm) : 1; /* ranks on this host, by any launcher */
    /* a loader thread pays where a CPU is left over for it; where the ranks'
     * BLAS threads take every CPU it only takes turns with them (a context
     * switch or two a batch, and a preempted rank the others wait for) */
    int prefetch = t->prefetch = o->prefetch >= 0                      ? o->prefetch
                                 : ddpc__cpu_count() > local * threads ? 2
                                                                       : 0;

    DDPC_CHECK(ddpc_dataset_create_mnist(o->data, "train", &t->train_ds));
    DDPC_CHECK(ddpc_dataset_create_mnist(o->data, "test", &t->test_ds));
    if (t->train_ds->rows != 28 || t->train_ds->cols != 28 || t->test_ds->rows != 28 ||
        t->test_ds->cols != 28)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "%s: images are %dx%d; the models take 28x28",
                         o->data, t->train_ds->rows, t->train_ds->cols);
    ddpc_sampler_options so = ddpc_sampler_options_default();
    so.rank = t->rank;
    so.num_replicas = t->world;
    so.seed = o->seed;
    DDPC_CHECK(ddpc_sampler_create((size_t)t->train_ds->n, &so, &t->sampler));
    ddpc_loader_options lo = ddpc_loader_options_default();
    lo.batch_size = o->batch_size;
    lo.mean = lo.std = 0.5f;
    lo.prefetch = prefetch;
    DDPC_CHECK(ddpc_loader_create(t->train_ds, t->sampler, &lo, &t->train));
    /* the test set in shards r, r+world, ... (padding is skipped when evaluating) */
    so.shuffle = 0;
    so.seed = 0;
    DDPC_CHECK(ddpc_sampler_create((size_t)t->test_ds->n, &so, &t->test_sampler));
    DDPC_CHECK(ddpc_loader_create(t->test_ds, t->test_sampler, &lo, &t->test));
    DDPC_CHECK(model_create_preset(o->model, o->seed, &t->m));
    DDPC_CHECK(ddpc_optim_create(t->m, &o->opt, &t->opt));
    DDPC_CHECK(resume(t));
    /* DDP makes rank 0's parameters (the checkpoint's) everyone's */
    if (t->comm) DDPC_CHECK(ddpc_ddp_create(t->comm, t->m, &o->ddp, &t->ddp));
    if (o->metrics && t->rank == 0) {
        DDPC_CHECK(trim_metrics(t));
        t->metrics = fopen(o->metrics, "a");
        if (!t->metrics || fseek(t->metrics, 0, SEEK_END) != 0)
            return ddpc__err_errno(DDPC_ERR_IO, errno, "cannot open --metrics %s", o->metrics);
    }
    /* what a restart continues from, from the start: a file left by an
     * earlier job under this name is never taken for this one's */
    if (o->checkpoint && t->rank == 0 && !t->resumed_own)
        DDPC_CHECK(save_checkpoint(t, t->start_epoch));
    if (t->rank == 0) {
        const ddpc_optim_options *op = &o->opt;
        printf("model %s: %s\n", o->model, ddpc_model_describe(t->m));
        printf("data %s: %d train, %d test; batch %d x %d process(es); %s lr %g", o->data,
               t->train_ds->n, t->test_ds->n, o->batch_size, t->world,
               ddpc_optim_kind_name(op->kind), (double)op->lr);
        if (op->kind == DDPC_OPTIM_SGD && op->momentum != 0)
            printf(" momentum %g%s", (double)op->momentum, op->nesterov ? " nesterov" : "");
        if (op->weight_decay != 0) printf(" weight decay %g", (double)op->weight_decay);
        printf("; seed %" PRIu64 "; %d BLAS thread(s); prefetch %d", o->seed, ddpc_nn_threads(),
               t->prefetch);
        if (t->ddp) printf("; DDP overlap %s", ddpc_ddp_overlaps(t->ddp) ? "on" : "off");
        if (o->max_eval_batches)
            printf("; test accuracy over at most %ld batches a process", o->max_eval_batches);
        putchar('\n');
        fflush(stdout);
    }
    return DDPC_OK;
}

static void teardown(trainer *t) {
    checkpoint_wait(t); /* its thread reads the model's names */
    if (t->metrics) fclose(t->metrics);
    ddpc_ddp_destroy(t->ddp);
    ddpc_optim_destroy(t->opt);
    ddpc_model_destroy(t->m);
    ddpc_loader_destroy(t->train);
    ddpc_loader_destroy(t->test);
    ddpc_sampler_destroy(t->sampler);
    ddpc_sampler_destroy(t->test_sampler);
    ddpc_dataset_destroy(t->train_ds);
    ddpc_dataset_destroy(t->test_ds);
}

static void progress_bar(size_t done, size_t total, double loss, double secs) {
    int width = 30, fill = total ? (int)((double)done / (double)total * width) : width;
    char bar[64];
    for (int i = 0; i < width; i++) bar[i] = i < fill ? '=' : (i == fill ? '>' : ' ');
    bar[width] = 0;
    fprintf(stderr, "\r[%s] %zu/%zu loss %.4f %.1fs", bar, done, total, loss, secs);
    fflush(stderr);
}

/* Seconds this rank spent in each phase of the epoch's steps (as PyTorch
 * DDP's logging data splits a step), written to --metrics. */
enum { PH_DATA, PH_FORWARD, PH_BACKWARD, PH_SYNC, PH_STEP, PH_CKPT, PH_N };
static const char *const phase_name[PH_N] = { "data", "forward", "backward",
                                              "sync", "step",    "checkpoint" };
typedef struct phases {
    double s[PH_N];
} phases;

/* Whether rank 0 draws a progress bar on stderr: --progress, or by
 * default when stderr is a terminal or DDPC_PROGRESS=1 (ddpc-run sets it for
 * rank 0 when its own stderr is a terminal: the bar is \r updates ended by
 * one newline, which the launcher passes through). */
static int show_bar(const trainer *t) {
    if (t->rank != 0 || t->o.progress == 0) return 0;
    if (t->o.progress == 1) return 1;
    long v; /* DDPC_PROGRESS=0 or 1 decides; a bad value is as if unset */
    if (ddpc__env_isset(DDPC_ENV_PROGRESS) && ddpc__env_long(DDPC_ENV_PROGRESS, &v) == DDPC_OK)
        return v == 1;
    return isatty(2);
}

/*
 * One training epoch: for each batch, zero_grad, forward, loss, backward
 * (which under DDP returns with averaged gradients), step. Accumulates the
 * loss and accuracy sums of this rank.
 */
static ddpc_status train_epoch(trainer *t, uint64_t epoch, epoch_sums *s, double *secs,
                               phases *ph) {
    const options *o = &t->o;
    memset(s, 0, sizeof *s);
    memset(ph, 0, sizeof *ph);
    ddpc_model_train(t->m, 1);
    /* a step checkpoint's epoch continues after the samples all ranks took
     * before it, at this world size (resume.c set the position) */
    uint64_t done = epoch == t->start_epoch ? t->epoch_step : 0;
    uint64_t pos = epoch == t->start_epoch ? t->epoch_samples : 0;
    if (epoch != t->start_epoch) memset(&t->acc, 0, sizeof t->acc);
    DDPC_CHECK(ddpc_loader_start_epoch_at(t->train, epoch, (size_t)pos));
    size_t total = ddpc_loader_num_batches(t->train);
    if (o->max_batches) {
        size_t left =
            (uint64_t)o->max_batches > done ? (size_t)((uint64_t)o->max_batches - done) : 0;
        if (left < total) total = left;
    }
    int bar = show_bar(t);
    double t0 = ddpc__now(), last_bar = 0;
    if (t->tl) ddpc_model_set_layer_timer(t->m, tl_layer, t->tl); /* off in evaluation */
    for (size_t bi = 0; bi < total; bi++) {
        const ddpc_batch *b;
        double c0 = ddpc__now();
        DDPC_CHECK(ddpc_loader_next(t->train, &b));
        if (!b) break;
        float loss;
        double c1 = ddpc__now();
        ddpc_optim_zero_grad(t->opt);
        DDPC_CHECK(ddpc_model_forward(t->m, b->x, b->size, NULL));
        DDPC_CHECK(ddpc_model_loss(t->m, DDPC_CROSS_ENTROPY, b->y, &loss));
        int correct = ddpc_model_correct(t->m);
        double c2 = ddpc__now(), sync0 = t->ddp ? ddpc_ddp_sync_seconds(t->ddp) : 0;
        DDPC_CHECK(ddpc_model_backward(t->m));
        double c3 = ddpc__now(), sync = t->ddp ? ddpc_ddp_sync_seconds(t->ddp) - sync0 : 0;
        DDPC_CHECK(ddpc_optim_step(t->opt));
        double c4 = ddpc__now();
        ph->s[PH_DATA] += c1 - c0;
        ph->s[PH_FORWARD] += c2 - c1;
        ph->s[PH_BACKWARD] += c3 - c2 - sync; /* the wait for the buckets as backward ends */
        ph->s[PH_SYNC] += sync;
        ph->s[PH_STEP] += c4 - c3;
        if (t->tl) tl_step(t, t->step, c0, c1, c3, sync, c4);
        t->step++;
        if (!isfinite(loss))
            return ddpc__err(DDPC_ERR_INVALID_ARG,
                             "epoch %" PRIu64 " batch %zu: the loss is %g (try a smaller --lr)",
                             epoch, bi, (double)loss);
        s->v[0] += (double)loss * b->size;
        s->v[1] += correct;
        s->v[2] += b->size;
        /* a step checkpoint: every rank folds its sums into the epoch's
         * (so a resumed epoch adds them up in the same order as a run never
         * stopped), then rank 0 copies the state and writes it on a thread;
         * the epoch's last step is saved by the epoch's checkpoint */
        if (o->checkpoint_every && t->step % (uint64_t)o->checkpoint_every == 0 && bi + 1 < total) {
            double k0 = ddpc__now(); /* the cost on the training loop: PH_CKPT */
            DDPC_CHECK(reduce_sums(t, s->v, 3));
            for (int k = 0; k < 3; k++) t->acc.v[k] += s->v[k];
            memset(s, 0, sizeof *s);
            uint64_t at_pos =
                pos + (uint64_t)(bi + 1) * (uint64_t)o->batch_size * (uint64_t)t->world;
            if (t->rank == 0) DDPC_CHECK(save_step_checkpoint(t, epoch, done + bi + 1, at_pos));
            ph->s[PH_CKPT] += ddpc__now() - k0;
        }
        if (t->rank == 0 && o->log_every && bi % (size_t)o->log_every == 0 && !bar) {
            printf("Epoch: %" PRIu64 " | Batch: %zu | Loss: %.4f\n", epoch, bi, (double)loss);
            fflush(stdout);
        }
        if (bar) {
            double now = ddpc__now();
            if (now - last_bar > 0.1 || bi + 1 == total) {
                double sn = s->v[2] + t->acc.v[2];
                progress_bar(bi + 1, total, sn > 0 ? (s->v[0] + t->acc.v[0]) / sn : 0, now - t0);
                last_bar = now;
            }
        }
    }
    *secs = ddpc__now() - t0;
    ddpc_model_set_layer_timer(t->m, NULL, NULL);
    if (bar) fputc('\n', stderr);
    return DDPC_OK;
}

/* Loss and accuracy over the whole test set (or the first --max-eval-batches
 * batches of each shard), each rank evaluating its shard (positions r,
 * r+world, ...), then summed over ranks. The sampler pads the shards to
 * equal length by wrapping round; those repeats sit at the end of a shard
 * and are not counted, so every test sample counts at most once. */
static ddpc_status evaluate(trainer *t, epoch_sums *s) {
    memset(s, 0, sizeof *s);
    ddpc_model_train(t->m, 0);
    DDPC_CHECK(ddpc_loader_start_epoch(t->test, 0));
    size_t n = (size_t)t->test_ds->n,
           mine = (n - (size_t)t->rank + (size_t)t->world - 1) / (size_t)t->world;
    size_t batches = ddpc_loader_num_batches(t->test);
    if (t->o.max_eval_batches && (size_t)t->o.max_eval_batches < batches)
        batches = (size_t)t->o.max_eval_batches;
    for (size_t seen = 0, bi = 0; bi < batches; bi++) {
        const ddpc_batch *b;
        DDPC_CHECK(ddpc_loader_next(t->test, &b));
        if (!b) break;
        int rows = seen + (size_t)b->size <= mine ? b->size : (int)(mine - seen);
        seen += (size_t)b->size;
        if (rows <= 0) continue;
        float loss;
        DDPC_CHECK(ddpc_model_forward(t->m, b->x, rows, NULL));
        DDPC_CHECK(ddpc_model_loss(t->m, DDPC_CROSS_ENTROPY, b->y, &loss));
        s->v[0] += (double)loss * rows;
        s->v[1] += ddpc_model_correct(t->m);
        s->v[2] += rows;
    }
    ddpc_model_train(t->m, 1);
    return reduce_sums(t, s->v, 3);
}

static ddpc_status run(trainer *t) {
    const options *o = &t->o;
    if (t->start_epoch >= (uint64_t)o->epochs && t->rank == 0)
        printf("nothing to do: the checkpoint has %" PRIu64 " of %d epochs done\n", t->start_epoch,
               o->epochs);
    for (uint64_t epoch = t->start_epoch; epoch < (uint64_t)o->epochs; epoch++) {
        epoch_sums tr, te;
        phases ph;
        double secs = 0;
        epoch_sums before = epoch == t->start_epoch ? t->acc : (epoch_sums){ { 0, 0, 0 } };
        DDPC_CHECK(train_epoch(t, epoch, &tr, &secs, &ph));
        DDPC_CHECK(reduce_sums(t, tr.v, 3));
        for (int k = 0; k < 3; k++) tr.v[k] += t->acc.v[k]; /* folded at step checkpoints */
        double te0 = ddpc__now();
        DDPC_CHECK(evaluate(t, &te));
        double eval_secs = ddpc__now() - te0;
        double loss = tr.v[2] ? tr.v[0] / tr.v[2] : 0, train_acc = tr.v[2] ? tr.v[1] / tr.v[2] : 0;
        double test_acc = te.v[2] ? te.v[1] / te.v[2] : 0,
               test_loss = te.v[2] ? te.v[0] / te.v[2] : 0;
        double sps = secs > 0 ? (tr.v[2] - before.v[2]) / secs : 0; /* this attempt's */
        if (t->rank == 0) {
            printf("epoch %" PRIu64
                   ": loss %.4f | train acc %.2f%% | test acc %.2f%% | %.0f samples/s | %.2f s\n",
                   epoch, loss, 100 * train_acc, 100 * test_acc, sps, secs);
            fflush(stdout);
            if (t->metrics) {
                char phs[256];
                ddpc__strbuf sb;
                ddpc__sb_fixed(&sb, phs, sizeof phs);
                for (int k = 0; k < PH_N; k++)
                    ddpc__sb_printf(&sb, "%s\"%s\": %.4f", k ? ", " : "", phase_name[k], ph.s[k]);
                fprintf(t->metrics,
                        "{\"epoch\": %" PRIu64
                        ", \"loss\": %.6f, \"train_accuracy\": %.6f, \"test_accuracy\": %.6f, "
                        "\"test_loss\": %.6f, \"test_samples\": %.0f, \"train_samples\": %.0f, "
                        "\"samples_per_s\": %.1f, "
                        "\"seconds\": %.4f, "
                        "\"eval_seconds\": %.4f, "
                        "\"step\": %" PRIu64
                        ", \"model\": \"%s\", \"world_size\": %d, \"phase_seconds\": {%s}}\n",
                        epoch, loss, train_acc, test_acc, test_loss, te.v[2], tr.v[2], sps, secs,
                        eval_secs, t->step, o->model, t->world, phs);
                fflush(t->metrics);
            }
            if (o->checkpoint) DDPC_CHECK(save_checkpoint(t, epoch + 1));
        }
    }
    return DDPC_OK;
}

int main(int argc, char **argv) {
    trainer t;
    memset(&t, 0, sizeof t);
    parse_options(argc, argv, &t.o);
    t.rank = 0;
    t.world = 1;
    ddpc_status s = DDPC_OK;
    if (ddpc__env_isset(DDPC_ENV_RANK) || ddpc__env_isset(DDPC_ENV_OMPI_RANK) ||
        ddpc__env_isset(DDPC_ENV_SLURM_PROCID)) {
        s = ddpc_comm_create_env(&t.comm);
        if (s == DDPC_OK) {
            t.rank = ddpc_comm_rank(t.comm);
            t.world = ddpc_comm_size(t.comm);
        }
    }
    if (s == DDPC_OK) s = ddpc__env_long(DDPC_ENV_RESTART_COUNT, &t.restart);
    if (s == DDPC_OK) s = setup(&t);
    if (s == DDPC_OK && t.o.trace) s = tl_open(&t);
    if (s == DDPC_OK) s = run(&t);
    ddpc_status ws = checkpoint_wait(&t); /* a step checkpoint still being written */
    if (s == DDPC_OK) s = ws;
    ddpc_status ts = tl_close(&t);
    if (s == DDPC_OK) s = ts;
    if (s != DDPC_OK) {
        fprintf(stderr, "ddpc-train: %s: %s\n", ddpc_status_str(s), ddpc_last_error());
        fflush(stderr);
        /* the peers learn at once that this rank failed (not that it left
         * early); a rank that failed only because a peer did ends a moment
         * later, so that the launcher names the first failure's cause */
        if (t.comm && s != DDPC_ERR_PEER_LOST) ddpc_comm_abort(t.comm);
        if (t.comm && s == DDPC_ERR_PEER_LOST) ddpc__sleep(0.5);
    }
    teardown(&t);
    ddpc_status d = ddpc_comm_destroy(t.comm);
    if (s == DDPC_OK && d != DDPC_OK) {
        fprintf(stderr, "ddpc-train: %s: %s\n", ddpc_status_str(d), ddpc_last_error());
        s = d;
    }
    return s == DDPC_OK ? 0 : 1;
}
