/*
 * train.h — the parts of ddpc-train, the trainer (tools/ddpc-train.c holds
 * its options, the training loop, evaluation and main). One job per file:
 *
 *   resume.c    where training continues from: checkpoints read and saved,
 *               restarts under TORCHELASTIC_RESTART_COUNT, --resume auto,
 *               the metrics log cut back to the checkpoint's epochs
 *   timeline.c  --trace: the training steps as a Chrome trace-event file
 *   presets.c   the models --model names (the tests of those models link it)
 *
 * Everything runs on the training thread.
 */
#ifndef DDPC_TRAIN_H
#define DDPC_TRAIN_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "ddpc/data.h"
#include "ddpc/ddp.h"
#include "ddpc/ddpc.h"
#include "ddpc/nn.h"

/* ddpc-train's options (ddpc-train.c parses them). */
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
    long checkpoint_every;  /* and every N optimizer steps (0: not) */
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

/* The epoch's sums: [0] loss * samples, [1] correct, [2] samples. */
typedef struct epoch_sums {
    double v[3];
} epoch_sums;

/* Rank 0's step checkpoint being written on its own thread (resume.c). */
typedef struct ckpt_writer {
    pthread_t thread;
    int running;            /* a thread to join */
    ddpc_ckpt_snapshot *sn; /* owned: what it writes */
    const char *path;       /* borrowed: --checkpoint */
    ddpc_status s;          /* its result */
    char err[1024];         /* its error, when s is not DDPC_OK */
} ckpt_writer;

/* One process's training: what every part reads and fills. */
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
    /* where a step checkpoint left epoch start_epoch (0, 0 at its start): */
    uint64_t epoch_step;    /* its steps done, at the world size of the time */
    uint64_t epoch_samples; /* samples all ranks took: the sampler's start */
    epoch_sums acc;         /* the epoch's sums over all ranks, folded at checkpoints */
    ckpt_writer writer;     /* rank 0 */
    FILE *metrics;
    long restart;          /* TORCHELASTIC_RESTART_COUNT: attempts before this one */
    int resumed_own;       /* continued from --checkpoint (not from --resume FILE) */
    ddpc_ckpt_meta loaded; /* rank 0: what the checkpoint it continued from said */
    struct timeline *tl;   /* --trace, or NULL (timeline.c) */
} trainer;

/* ------------------------------------------------------------ resume.c */

/* Rank 0 reads the checkpoint to continue from (if any: a restart's
 * --checkpoint, --resume auto's, --resume FILE's) and every rank takes its
 * state: epoch, step, the optimizer's steps and state, the dropout RNG (DDP
 * then broadcasts the parameters). Sets start_epoch, step, loaded and
 * resumed_own. Collective when there is a communicator. */
ddpc_status resume(trainer *t);
/* Rank 0, continuing from --checkpoint: cuts --metrics back to where the
 * checkpoint's epochs ended, so each epoch is logged once. */
ddpc_status trim_metrics(trainer *t);
/* Rank 0 saves --checkpoint with `epochs` epochs done, with where the
 * metrics log ends. */
ddpc_status save_checkpoint(trainer *t, uint64_t epochs);
/* Rank 0, after `estep` steps of epoch `epoch` (all ranks having taken
 * `samples` samples of it): copies the state and writes --checkpoint on a
 * thread, after waiting for the previous one. */
ddpc_status save_step_checkpoint(trainer *t, uint64_t epoch, uint64_t estep, uint64_t samples);
/* Waits for the step checkpoint being written (if any); its error, if it
 * failed. Harmless when none. */
ddpc_status checkpoint_wait(trainer *t);

/* ------------------------------------------------------------ presets.c */

/* The models of ddpc-train, built with ddpc_model_create: "linear"
 * Flatten+Linear(784, 10); "mlp" Flatten, 784-512-512-10 with ReLU; "cnn"
 * Conv(1,16,3,pad 1), ReLU, MaxPool 2, Conv(16,32,3,pad 1), ReLU, MaxPool 2,
 * Flatten, Linear(1568,128), ReLU, Linear(128,10). Input (1, 28, 28),
 * classes 10, parameters initialised from seed. An unknown name is an error
 * naming it. */
ddpc_status model_create_preset(const char *name, uint64_t seed, ddpc_model **out);

/* ------------------------------------------------------------ timeline.c */

/* Opens rank t->rank's --trace file (t->tl); an error names the file. */
ddpc_status tl_open(trainer *t);
/* Ends and closes the file (t->tl NULL after; harmless when none). */
ddpc_status tl_close(trainer *t);
/* The model's layer timer (ddpc_model_set_layer_timer, ctx = t->tl). */
void tl_layer(void *ctx, const ddpc_layer_event *ev);
/* One training step's events: c0 data c1 forward c2 backward c3 step c4;
 * sync is the end of backward's wait for the buckets. */
void tl_step(trainer *t, uint64_t step, double c0, double c1, double c3, double sync, double c4);

#endif /* DDPC_TRAIN_H */
