/*
 * ddp_mnist.c — the classic "Linear(784, 10) on MNIST with DDP" program, in C.
 *
 * Line for line the PyTorch original, whose lines are in the comments:
 * init_process_group(env://), the model, DDP, DistributedSampler + DataLoader
 * with ToTensor + Normalize((0.5,), (0.5,)), SGD lr 0.01, batch 32, 10 epochs,
 * set_epoch every epoch, rank 0 printing the loss every 100 batches, destroy.
 * Backward returns with the gradients averaged over ranks, as under DDP; the
 * first model chooses the BLAS threads (DDPC_THREADS overrides).
 *
 *     ddpc-run --nproc-per-node=2 build/bin/ddp_mnist [DATA_DIR]
 *
 * DATA_DIR holds the MNIST-format files (default: Debian's Fashion-MNIST);
 * a last argument starting with '-' (torch.distributed.launch's --local_rank)
 * is not one.
 */
#include <stdio.h>

#include "ddpc/data.h"
#include "ddpc/ddp.h"
#include "ddpc/ddpc.h"
#include "ddpc/nn.h"
#include "ddpc/try.h"

#define DATA "/usr/share/datasets/fashion-mnist"

int main(int argc, char **argv) {
    const char *data = argc > 1 && argv[argc - 1][0] != '-' ? argv[argc - 1] : DATA;
    ddpc_comm *comm;
    ddpc_model *model; /* model = nn.Linear(784, 10), built below */
    ddpc_ddp *ddp;
    ddpc_dataset *dataset;
    ddpc_sampler *sampler;
    ddpc_loader *loader;
    ddpc_optim *optimizer;
    DDPC_TRY(ddpc_comm_create_env(&comm)); /* dist.init_process_group(init_method="env://") */
    DDPC_TRY(ddpc_model_create(DDPC_LAYERS(ddpc_linear(784, 10)), NULL, &model));
    DDPC_TRY(ddpc_ddp_create(comm, model, NULL, &ddp));           /* model = DDP(model) */
    DDPC_TRY(ddpc_dataset_create_mnist(data, "train", &dataset)); /* MNIST(data, train=True) */
    DDPC_TRY(ddpc_sampler_create_dist(comm, dataset->n, NULL, &sampler)); /* DistributedSampler */
    ddpc_loader_options lo = ddpc_loader_options_default(); /* DataLoader(dataset, sampler, */
    lo.batch_size = 32;                                     /*   batch_size=32); transform: */
    lo.mean = lo.std = 0.5f;                                /*   Normalize((0.5,), (0.5,)) */
    DDPC_TRY(ddpc_loader_create(dataset, sampler, &lo, &loader));
    ddpc_optim_options so = ddpc_optim_options_default(DDPC_OPTIM_SGD);
    so.lr = 0.01f; /* SGD(model.parameters(), lr=0.01) */
    DDPC_TRY(ddpc_optim_create(model, &so, &optimizer));
    float loss;                                           /* criterion = nn.CrossEntropyLoss() */
    for (int epoch = 0; epoch < 10; epoch++) {            /* for epoch in range(10): */
        DDPC_TRY(ddpc_loader_start_epoch(loader, epoch)); /* sampler.set_epoch(epoch) */
        for (const ddpc_batch *b; DDPC_TRY(ddpc_loader_next(loader, &b)), b;) { /* for batch, ... */
            ddpc_optim_zero_grad(optimizer);                          /* optimizer.zero_grad() */
            DDPC_TRY(ddpc_model_forward(model, b->x, b->size, NULL)); /* output = model(data) */
            DDPC_TRY(ddpc_model_loss(model, DDPC_CROSS_ENTROPY, b->y, &loss)); /* criterion(...) */
            DDPC_TRY(ddpc_model_backward(model));                              /* loss.backward() */
            DDPC_TRY(ddpc_optim_step(optimizer));                 /* optimizer.step() */
            if (b->index % 100 == 0 && ddpc_comm_rank(comm) == 0) /* if ... and rank == 0: */
                printf("Epoch: %d | Batch: %zu | Loss: %.4f\n", epoch, b->index, loss);
        }
    }
    ddpc_loader_destroy(loader); /* Python lets these go by reference counting */
    ddpc_sampler_destroy(sampler);
    ddpc_dataset_destroy(dataset);
    ddpc_optim_destroy(optimizer);
    ddpc_ddp_destroy(ddp);
    ddpc_model_destroy(model);
    return ddpc_comm_destroy(comm) == DDPC_OK ? 0 : 1; /* dist.destroy_process_group() */
}
