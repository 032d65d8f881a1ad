/*
 * ddp_mnist.c — the classic "Linear(784, 10) on MNIST with DDP" program, in C.
 *
 * Line for line the PyTorch original: init_process_group(env://), the model,
 * DDP, DistributedSampler + DataLoader with ToTensor + Normalize((0.5,),
 * (0.5,)), SGD lr 0.01, batch 32, 10 epochs, set_epoch every epoch, rank 0
 * printing the loss every 100 batches, destroy at the end.
 *
 *     ddpc-run --nproc-per-node=2 build/bin/ddp_mnist [DATA_DIR]
 *
 * DATA_DIR holds the MNIST-format files (default: Debian's Fashion-MNIST).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddpc/data.h"
#include "ddpc/ddp.h"
#include "ddpc/ddpc.h"
#include "ddpc/nn.h"

#define TRY(call)                                                                   \
    do {                                                                            \
        if ((call) != DDPC_OK) {                                                    \
            fprintf(stderr, "ddp_mnist: %s\n", ddpc_last_error());                  \
            exit(1);                                                                \
        }                                                                           \
    } while (0)

int main(int argc, char **argv) {
    const char *data = "/usr/share/datasets/fashion-mnist";
    for (int i = 1; i < argc; i++) /* torch.distributed.launch adds --local_rank=N */
        if (strncmp(argv[i], "--local", 7) != 0) data = argv[i];
    ddpc_comm *comm;
    TRY(ddpc_comm_init_env(&comm)); /* dist.init_process_group(init_method='env://') */
    int rank = ddpc_comm_rank(comm), world = ddpc_comm_size(comm);
    ddpc_nn_set_threads(ddpc_nn_default_threads(ddpc_comm_local_size(comm)));

    ddpc_model *model; /* nn.Linear(784, 10), on flattened images */
    TRY(ddpc_model_preset("linear", 32, 0, &model));
    ddpc_ddp *ddp; /* DDP(model) */
    TRY(ddpc_ddp_create(comm, model, NULL, &ddp));

    ddpc_dataset *dataset; /* datasets.MNIST(data, train=True, transform=...) */
    TRY(ddpc_mnist_load(data, "train", &dataset));
    ddpc_sampler *sampler; /* DistributedSampler(dataset) */
    TRY(ddpc_sampler_create((size_t)dataset->n, world, rank, 1, 0, 0, &sampler));
    ddpc_loader *loader; /* DataLoader(dataset, batch_size=32, sampler=sampler): num_workers=0 */
    TRY(ddpc_loader_create(dataset, sampler, 32, 0, 0.5f, 0.5f, 0, &loader));

    ddpc_optim_options o = ddpc_optim_options_default(DDPC_OPTIM_SGD);
    o.lr = 0.01f; /* optim.SGD(model.parameters(), lr=0.01) */
    ddpc_optim *optimizer;
    TRY(ddpc_optim_create(model, &o, &optimizer));
    float *dlogits = ddpc_model_output_grad(model);

    for (int epoch = 0; epoch < 10; epoch++) {
        TRY(ddpc_loader_start_epoch(loader, (uint64_t)epoch)); /* sampler.set_epoch(epoch) */
        const ddpc_batch *b;
        for (int batch = 0;; batch++) { /* for batch, (data, target) in enumerate(loader) */
            TRY(ddpc_loader_next(loader, &b));
            if (!b) break;
            const float *output;
            float loss;
            ddpc_model_zero_grad(model);                                    /* optimizer.zero_grad() */
            TRY(ddpc_model_forward(model, b->x, b->size, &output));        /* output = model(data) */
            TRY(ddpc_cross_entropy(output, b->y, b->size, 10, dlogits, &loss, NULL)); /* criterion */
            TRY(ddpc_model_backward(model, dlogits));                      /* loss.backward() */
            TRY(ddpc_ddp_sync(ddp));                                       /* (DDP's bucket waits) */
            TRY(ddpc_optim_step(optimizer));                               /* optimizer.step() */
            if (batch % 100 == 0 && rank == 0)
                printf("Epoch: %d | Batch: %d | Loss: %.4f\n", epoch, batch, loss);
        }
    }

    ddpc_loader_free(loader);
    ddpc_sampler_free(sampler);
    ddpc_dataset_free(dataset);
    ddpc_optim_free(optimizer);
    ddpc_ddp_destroy(ddp);
    ddpc_model_free(model);
    return ddpc_comm_destroy(comm) == DDPC_OK ? 0 : 1; /* dist.destroy_process_group() */
}
