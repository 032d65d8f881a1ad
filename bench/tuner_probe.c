/*
 * tuner_probe.c — runs every tuned collective at 8 sizes (float32, and
 * float16 allreduce), then writes the flight recorder (DDPC_TRACE_DIR), whose
 * records name each operation's algorithm. bench/tuner_choices.sh runs it
 * on several layouts and DDPC_ALGO values, to compare the tuner's choices
 * between two builds.
 */
#include <stdlib.h>

#include "comm/comm.h"
#include "ddpc/ddpc.h"

int main(void) {
    ddpc_comm *c;
    if (ddpc_comm_create_env(&c) != DDPC_OK) return 1;
    int n = ddpc_comm_size(c);
    static const size_t sizes[] = { 1, 3, 64, 2048, 16384, 16385, 65536, 1 << 20 };
    float *a = calloc((size_t)n << 20, sizeof(float)), *b = calloc((size_t)n << 20, sizeof(float));
    if (!a || !b) return 1;
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        size_t k = sizes[i];
        ddpc_allreduce(c, a, b, k, DDPC_FLOAT32, DDPC_SUM);
        ddpc_allreduce(c, a, b, k, DDPC_FLOAT16, DDPC_AVG);
        ddpc_broadcast(c, a, b, k, DDPC_FLOAT32, 1 % n);
        ddpc_reduce(c, a, b, k, DDPC_FLOAT32, DDPC_SUM, 0);
        ddpc_reduce_scatter(c, a, b, k, DDPC_FLOAT32, DDPC_SUM);
        ddpc_allgather(c, a, b, k, DDPC_FLOAT32);
    }
    ddpc__rec_dump("tuner_probe");
    free(a);
    free(b);
    return ddpc_comm_destroy(c) == DDPC_OK ? 0 : 1;
}
