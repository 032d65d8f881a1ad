/*
 * ddp_mnist.c — the classic "Linear(784, 10) on MNIST with DDP" program, in C.
 *
 * Line for line examples/ddp_mnist.py, whose lines are in the comments:
 * init_process_group(env://), the model, DDP, DistributedSampler + DataLoader
 * with ToTensor + Normalize((0.5,), (0.5,)), SGD lr 0.01, batch 32, 10 epochs,
 * set_epoch every epoch, rank 0 printing the loss every 100 batches and, after
 * each epoch, its seconds, mean loss and test accuracy; destroy. Backward
 * returns with the gradients averaged over ranks, as under DDP; the first
 * model chooses the BLAS threads (DDPC_THREADS overrides).
 *
 *     ddpc-run --nproc-per-node=2 build/bin/ddp_mnist [--epochs N] [--data DIR]
 *
 * The arguments are the Python program's: --data DIR holds the MNIST-format
 * files (default: Debian's Fashion-MNIST), --epochs N (10), --limit N trains
 * on the first N samples only (fast tests); its torch-only ones (--backend,
 * --save, ...) it has not. torch.distributed.launch's --local_rank=N is
 * accepted and ignored. The two print the same lines, "ddpc" where the
 * Python one prints its backend (tests/dist/test_train_ddp.c compares them).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ddpc/data.h"
#include "ddpc/ddp.h"
#include "ddpc/ddpc.h"
#include "ddpc/nn.h"
#include "ddpc/try.h"

/* ap = argparse.ArgumentParser(); ap.add_argument(...) for each */
typedef struct args {
    const char *data; /* --data, default Debian's Fashion-MNIST */
    int epochs;       /* --epochs, default 10 */
    int limit;        /* --limit: the first N training samples; 0 = all */
} args;

static args parse_args(int argc, char **argv) {
    args a = { "/usr/share/datasets/fashion-mnist", 10, 0 };
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strncmp(argv[i], "--local_rank", 12) || !strncmp(argv[i], "--local-rank", 12))
            i += !strchr(argv[i], '=') && v; /* torch.distributed.launch's: not ours */
        else if (!strcmp(argv[i], "--data") && v)
            a.data = argv[++i];
        else if (!strcmp(argv[i], "--epochs") && v)
            a.epochs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--limit") && v)
            a.limit = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--data DIR] [--epochs N] [--limit N]\n", argv[0]);
            exit(2);
        }
    }
    return a;
}

/* time.perf_counter() */
static double perf_counter(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* mnist(data, "test"): the test set as tensors, ToTensor + Normalize((0.5,), (0.5,)) */
typedef struct tensors {
    int n;
    float *x;   /* (n, 784) */
    int32_t *y; /* (n) */
} tensors;

static tensors mnist_test(const char *data) {
    ddpc_dataset *ds;
    DDPC_TRY(ddpc_dataset_create_mnist(data, "test", &ds));
    tensors t = { ds->n, malloc((size_t)ds->n * 784 * sizeof(float)),
                  malloc((size_t)ds->n * sizeof(int32_t)) };
    int64_t *idx = malloc((size_t)ds->n * sizeof *idx);
    if (!t.x || !t.y || !idx || ds->rows * ds->cols != 784) {
        fprintf(stderr, "ddp_mnist: %s: out of memory, or images not 28x28\n", data);
        exit(1);
    }
    for (int i = 0; i < ds->n; i++) idx[i] = i, t.y[i] = ds->labels[i];
    ddpc_transform_batch(ds, idx, ds->n, 0.5f, 0.5f, t.x);
    free(idx);
    ddpc_dataset_destroy(ds);
    return t;
}

/* with torch.no_grad(): (model(test.x).argmax(1) == test.y).float().mean() */
static double test_accuracy(ddpc_model *model, const tensors *test) {
    DDPC_TRY(ddpc_model_forward(model, test->x, test->n, NULL));
    DDPC_TRY(ddpc_model_loss(model, DDPC_CROSS_ENTROPY, test->y, NULL)); /* counts the right */
    return (double)ddpc_model_correct(model) / test->n;
}

int main(int argc, char **argv) {
    args a = parse_args(argc, argv); /* a, _ = ap.parse_known_args() */
    ddpc_comm *comm;
    ddpc_model *model; /* model = nn.Linear(784, 10), built below */
    ddpc_ddp *ddp;
    ddpc_dataset *dataset;
    ddpc_sampler *sampler;
    ddpc_loader *loader;
    ddpc_optim *optimizer;
    DDPC_TRY(ddpc_comm_create_env(&comm)); /* dist.init_process_group(init_method="env://") */
    DDPC_TRY(ddpc_model_create(DDPC_LAYERS(ddpc_linear(784, 10)), NULL, &model));
    DDPC_TRY(ddpc_ddp_create(comm, model, NULL, &ddp));             /* model = DDP(model) */
    DDPC_TRY(ddpc_dataset_create_mnist(a.data, "train", &dataset)); /* mnist(a.data, "train") */
    tensors test = mnist_test(a.data); /* test = mnist(a.data, "test") */
    size_t n = a.limit > 0 && a.limit < dataset->n ? a.limit : dataset->n; /* [:a.limit] */
    DDPC_TRY(ddpc_sampler_create_dist(comm, n, NULL, &sampler)); /* DistributedSampler(seed=0) */
    ddpc_loader_options lo = ddpc_loader_options_default();      /* DataLoader(dataset, sampler, */
    lo.batch_size = 32;                                          /*   batch_size=32); transform: */
    lo.mean = lo.std = 0.5f;                                     /*   Normalize((0.5,), (0.5,)) */
    DDPC_TRY(ddpc_loader_create(dataset, sampler, &lo, &loader));
    ddpc_optim_options so = ddpc_optim_options_default(DDPC_OPTIM_SGD);
    so.lr = 0.01f; /* SGD(model.parameters(), lr=0.01) */
    DDPC_TRY(ddpc_optim_create(model, &so, &optimizer));
    float loss;                                           /* criterion = nn.CrossEntropyLoss() */
    for (int epoch = 0; epoch < a.epochs; epoch++) {      /* for epoch in range(a.epochs): */
        DDPC_TRY(ddpc_loader_start_epoch(loader, epoch)); /* sampler.set_epoch(epoch) */
        double start = perf_counter(), losses = 0; /* start, losses = time.perf_counter(), [] */
        for (const ddpc_batch *b; DDPC_TRY(ddpc_loader_next(loader, &b)), b;) { /* for batch, ... */
            ddpc_optim_zero_grad(optimizer);                          /* optimizer.zero_grad() */
            DDPC_TRY(ddpc_model_forward(model, b->x, b->size, NULL)); /* output = model(data) */
            DDPC_TRY(ddpc_model_loss(model, DDPC_CROSS_ENTROPY, b->y, &loss)); /* criterion(...) */
            DDPC_TRY(ddpc_model_backward(model));                              /* loss.backward() */
            DDPC_TRY(ddpc_optim_step(optimizer));                 /* optimizer.step() */
            losses += loss;                                       /* losses.append(loss.item()) */
            if (b->index % 100 == 0 && ddpc_comm_rank(comm) == 0) /* if ... and rank == 0: */
                printf("Epoch: %d | Batch: %zu | Loss: %.4f\n", epoch, b->index, loss);
        }
        double seconds = perf_counter() - start, accuracy = test_accuracy(model, &test);
        if (ddpc_comm_rank(comm) == 0) /* if rank == 0: print(... its backend: ddpc) */
            printf("Epoch: %d | ddpc | %.2f s | loss %.4f | test accuracy %.4f\n", epoch, seconds,
                   losses / (double)ddpc_loader_num_batches(loader), accuracy);
    }
    ddpc_loader_destroy(loader); /* Python lets these go by reference counting */
    ddpc_sampler_destroy(sampler);
    ddpc_dataset_destroy(dataset);
    free(test.x), free(test.y);
    ddpc_optim_destroy(optimizer);
    ddpc_ddp_destroy(ddp);
    ddpc_model_destroy(model);
    return ddpc_comm_destroy(comm) == DDPC_OK ? 0 : 1; /* dist.destroy_process_group() */
}
