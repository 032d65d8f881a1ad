/*
 * bench/mlp_gemm.c — the five matrix products of one MLP training step
 * (784-512-512-10 at batch B, the 512->10 layer left out), through
 * cblas_sgemm exactly as src/nn/layers.c calls it, timed alone: the time
 * every trainer that uses this BLAS must spend per step, whatever else it
 * does. bench/mlp_gemm_bound.sh runs it beside the same products in PyTorch.
 *
 *   cc -O2 bench/mlp_gemm.c -o mlp_gemm $(pkg-config --cflags --libs openblas)
 *   OPENBLAS_NUM_THREADS=1 ./mlp_gemm [B] [REPS]
 * Prints one JSON line: microseconds per product (best of 5 rounds of REPS)
 * and their sum per step.
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static float *filled(size_t n) {
    float *p = malloc(n * sizeof *p);
    if (!p) exit(1);
    for (size_t i = 0; i < n; i++) p[i] = (float)(i % 97) / 97.0f - 0.5f;
    return p;
}

int main(int argc, char **argv) {
    int B = argc > 1 ? atoi(argv[1]) : 128, reps = argc > 2 ? atoi(argv[2]) : 50;
    const int NI = 784, NH = 512;
    float *x = filled((size_t)B * NI), *W1 = filled((size_t)NH * NI), *W2 = filled((size_t)NH * NH);
    float *h = filled((size_t)B * NH), *g = filled((size_t)B * NH), *y = filled((size_t)B * NH);
    float *dW1 = filled((size_t)NH * NI), *dW2 = filled((size_t)NH * NH),
          *dx = filled((size_t)B * NH);
    static const char *name[5] = { "fc1_forward", "fc2_forward", "fc1_dweight", "fc2_dweight",
                                   "fc2_dinput" };
    double us[5], sum = 0;
    for (int k = 0; k < 5; k++) {
        double best = 1e30;
        for (int round = 0; round < 5; round++) {
            double t0 = now();
            for (int it = 0; it < reps; it++) switch (k) {
                case 0:
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, NH, NI, 1, x, NI, W1,
                                NI, 0, y, NH);
                    break;
                case 1:
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, NH, NH, 1, h, NH, W2,
                                NH, 0, y, NH);
                    break;
                case 2:
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, NH, NI, B, 1, g, NH, x, NI,
                                1, dW1, NI);
                    break;
                case 3:
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, NH, NH, B, 1, g, NH, h, NH,
                                1, dW2, NH);
                    break;
                default:
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, NH, NH, 1, g, NH, W2,
                                NH, 0, dx, NH);
                    break;
                }
            double t = (now() - t0) / reps;
            if (t < best) best = t;
        }
        us[k] = best * 1e6;
        sum += us[k];
    }
    printf("{\"peer\": \"cblas\", \"batch\": %d", B);
    for (int k = 0; k < 5; k++) printf(", \"%s_us\": %.1f", name[k], us[k]);
    printf(", \"step_us\": %.1f}\n", sum);
    return 0;
}
