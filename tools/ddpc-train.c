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
 */
#include <errno.h>
#include <glob.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "base/env.h"
#include "base/strbuf.h"
#include "ddpc/data.h"
#include "ddpc/ddp.h"
#include "ddpc/ddpc.h"
#include "ddpc/nn.h"

/* ------------------------------------------------------------ options */

typedef struct options {
    const char *data;  /* MNIST-format directory */
    const char *model; /* linear | mlp | cnn */
    int epochs;
    int batch_size;         /* per rank */
    ddpc_optim_options opt; /* kind, lr, momentum, weight decay, nesterov */
    int lr_set, wd_set;
    uint64_t seed;
    int log_every;          /* batches between "Epoch | Batch | Loss" lines; 0 = none */
    const char *checkpoint; /* written atomically at start and at each epoch end */
    const char *resume;     /* read before training (NULL with resume_auto) */
    int resume_auto;        /* --resume auto: from --checkpoint whenever it exists */
    const char *metrics;    /* one JSON line per epoch */
    const char *trace;      /* Chrome trace-event timeline, one file per rank */
    int threads;            /* OpenBLAS threads; 0 = DDPC_THREADS or the default */
    int prefetch;           /* batches the loader keeps ready; -1 = by spare CPUs */
    long max_batches;       /* training batches per epoch; 0 = all */
    long max_eval_batches;  /* test batches per rank per evaluation; 0 = all */
    int progress;           /* -1 auto (a terminal), 0 off, 1 on */
    ddpc_ddp_options ddp;   /* buckets and compression */
} options;

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
    o->opt.momentum = p.momentum;
    o->opt.nesterov = p.nesterov;
}

/* ------------------------------------------------------------ trainer */

typedef struct trainer {
    options o;
    int rank, world; /* one process: 0, 1 */
    ddpc_comm *comm; /* NULL with one process */
    ddpc_ddp *ddp;   /* NULL with one process */
    ddpc_dataset *train_ds, *test_ds;
    ddpc_sampler *sampler;      /* this rank's shard of the training set */
    ddpc_sampler *test_sampler; /* this rank's shard of the test set, in order */
    ddpc_loader *train, *test;
    int prefetch; /* batches the loaders keep ready (0: inline) */
    ddpc_model *m;
    ddpc_optim *opt;
    uint64_t start_epoch; /* epochs already done (from a checkpoint) */
    uint64_t step;        /* optimizer steps done */
    FILE *metrics;
    long restart;          /* TORCHELASTIC_RESTART_COUNT: attempts before this one */
    int resumed_own;       /* continued from --checkpoint (not from --resume FILE) */
    ddpc_ckpt_meta loaded; /* rank 0: what the checkpoint it continued from said */
    struct timeline *tl;   /* --trace, or NULL */
} trainer;

/* Sums v[0..n) over all ranks, in place. With one process: unchanged. */
static ddpc_status reduce_sums(trainer *t, double *v, int n) {
    return t->ddp ? ddpc_ddp_allreduce_sum(t->ddp, v, n) : DDPC_OK;
}

/* ------------------------------------------------------------ resuming */

/*
 * Where training continues from. A restarted attempt (ddpc-run
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
enum { RH_STATE, RH_EPOCH, RH_STEP, RH_OSTEPS, RH_RNG, RH_N = RH_RNG + 4 };
enum { RS_NONE, RS_LOADED, RS_FAILED };

/* Rank 0 reads the checkpoint (if any); every rank takes its state. */
static ddpc_status resume(trainer *t) {
    uint64_t h[RH_N] = { RS_NONE };
    ddpc_status s = DDPC_OK;
    const char *path = NULL;
    if (t->rank == 0) {
        int own;
        if (t->o.checkpoint) remove_stale_temps(t->o.checkpoint);
        path = resume_source(t, &own);
        if (path) {
            s = ddpc_checkpoint_load(path, t->m, t->opt, &t->loaded);
            h[RH_STATE] = s == DDPC_OK ? RS_LOADED : RS_FAILED;
            t->resumed_own = own && s == DDPC_OK;
        }
        if (s == DDPC_OK && path) {
            h[RH_EPOCH] = t->loaded.epoch;
            h[RH_STEP] = t->loaded.step;
            h[RH_OSTEPS] = ddpc_optim_steps(t->opt);
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
        if (t->restart > 0) printf(" (restart %ld of the job)", t->restart);
        putchar('\n');
    }
    return DDPC_OK;
}

/* Rank 0, continuing from --checkpoint: the metrics log loses the lines of
 * epochs after the checkpoint's (an attempt killed after logging an epoch
 * but before saving it), so that each epoch is logged once. */
static ddpc_status trim_metrics(trainer *t) {
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
static ddpc_status save_checkpoint(trainer *t, uint64_t epochs) {
    ddpc_ckpt_meta meta = { epochs, t->step, 0, 0 };
    if (t->metrics) {
        long end = ftell(t->metrics);
        if (end < 0)
            return ddpc__err_errno(DDPC_ERR_IO, errno, "--metrics %s: ftell", t->o.metrics);
        meta.metrics_bytes = (uint64_t)end;
        meta.metrics_kept = 1;
    }
    return ddpc_checkpoint_save(t->o.checkpoint, t->m, t->opt, &meta);
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
    so.num_replicas = t->world;
    so.rank = t->rank;
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
    DDPC_CHECK(ddpc_model_create_preset(o->model, o->seed, &t->m));
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

/* The epoch's sums: [0] loss * samples, [1] correct, [2] samples. */
typedef struct epoch_sums {
    double v[3];
} epoch_sums;

/* Seconds this rank spent in each phase of the epoch's steps (as PyTorch
 * DDP's logging data splits a step), written to --metrics. */
enum { PH_DATA, PH_FORWARD, PH_BACKWARD, PH_SYNC, PH_STEP, PH_N };
static const char *const phase_name[PH_N] = { "data", "forward", "backward", "sync", "step" };
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

/* ------------------------------------------------------------ timeline (--trace) */

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

static ddpc_status tl_open(trainer *t) {
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

static ddpc_status tl_close(trainer *t) {
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
static void tl_layer(void *ctx, const ddpc_layer_event *ev) {
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
static void tl_step(trainer *t, uint64_t step, double c0, double c1, double c3, double sync,
                    double c4) {
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
    DDPC_CHECK(ddpc_loader_start_epoch(t->train, epoch));
    size_t total = ddpc_loader_num_batches(t->train);
    if (o->max_batches && (size_t)o->max_batches < total) total = (size_t)o->max_batches;
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
        if (t->rank == 0 && o->log_every && bi % (size_t)o->log_every == 0 && !bar) {
            printf("Epoch: %" PRIu64 " | Batch: %zu | Loss: %.4f\n", epoch, bi, (double)loss);
            fflush(stdout);
        }
        if (bar) {
            double now = ddpc__now();
            if (now - last_bar > 0.1 || bi + 1 == total) {
                progress_bar(bi + 1, total, s->v[0] / s->v[2], now - t0);
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
        DDPC_CHECK(train_epoch(t, epoch, &tr, &secs, &ph));
        DDPC_CHECK(reduce_sums(t, tr.v, 3));
        double te0 = ddpc__now();
        DDPC_CHECK(evaluate(t, &te));
        double eval_secs = ddpc__now() - te0;
        double loss = tr.v[2] ? tr.v[0] / tr.v[2] : 0, train_acc = tr.v[2] ? tr.v[1] / tr.v[2] : 0;
        double test_acc = te.v[2] ? te.v[1] / te.v[2] : 0,
               test_loss = te.v[2] ? te.v[0] / te.v[2] : 0;
        double sps = secs > 0 ? tr.v[2] / secs : 0;
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
                        "\"test_loss\": %.6f, \"test_samples\": %.0f, \"samples_per_s\": %.1f, "
                        "\"seconds\": %.4f, "
                        "\"eval_seconds\": %.4f, "
                        "\"step\": %" PRIu64
                        ", \"model\": \"%s\", \"world_size\": %d, \"phase_seconds\": {%s}}\n",
                        epoch, loss, train_acc, test_acc, test_loss, te.v[2], sps, secs, eval_secs,
                        t->step, o->model, t->world, phs);
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
