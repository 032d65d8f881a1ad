/* test_nn.c — layers, loss and optimizers: finite-difference gradient checks
 * for every layer and the loss, hand-computed optimizer steps, the grad
 * hook's order, accumulation, dropout in train and eval mode, bad inputs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ddpc/nn.h"
#include "test.h"
#include "train/train.h" /* model_create_preset: ddpc-train's models */

/* ------------------------------------------------------------ helpers */

static ddpc_layer linear_nobias(int in, int out) {
    ddpc_layer l = ddpc_linear(in, out);
    l.bias = 0;
    return l;
}

static ddpc_layer conv2d_nobias(int in, int out, int kernel, int stride, int padding) {
    ddpc_layer l = ddpc_conv2d(in, out, kernel, stride, padding);
    l.bias = 0;
    return l;
}

static void fill_randn(ddpc_rng *r, float *x, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) {
        float u = ddpc_rng_uniform(r) + 1e-7f, v = ddpc_rng_uniform(r);
        x[i] = scale * sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
    }
}

/* Loss of one forward pass, with the dropout RNG rewound to *rng so every
 * evaluation sees the same mask. */
static double loss_at(ddpc_model *m, const ddpc_rng *rng, const float *x, const int32_t *y, int B) {
    *ddpc_model_rng(m) = *rng;
    const float *out;
    CHECK_OK(ddpc_model_forward(m, x, B, &out));
    float loss;
    CHECK_OK(ddpc_cross_entropy(out, y, B, (int)ddpc_model_out_features(m), NULL, &loss, NULL));
    return loss;
}

/*
 * Backward once, then for every parameter element (all of them; the nets are
 * small) compare the analytic gradient with the central difference
 * (L(p+h) - L(p-h)) / 2h, taken at h and h/2 (elements where the two
 * disagree straddle a kink and are skipped; at most 5% may). Fails naming the
 * parameter and element when |num - ana| > atol + rtol*|num|. Returns the
 * largest error seen.
 */
static double grad_check(ddpc_model *m, const float *x, const int32_t *y, int B, float h,
                         double atol, double rtol) {
    ddpc_rng rng0 = *ddpc_model_rng(m);
    ddpc_model_zero_grad(m);
    const float *out;
    CHECK_OK(ddpc_model_forward(m, x, B, &out));
    CHECK_OK(ddpc_model_loss(m, DDPC_CROSS_ENTROPY, y, NULL));
    CHECK_OK(ddpc_model_backward(m));
    double worst = 0;
    int kinks = 0, checked = 0;
    for (int i = 0; i < ddpc_model_num_params(m); i++) {
        const ddpc_param *p = ddpc_model_param(m, i);
        for (size_t j = 0; j < p->numel; j++) {
            float keep = p->data[j];
            double num[2];
            for (int k = 0; k < 2; k++) {
                float hk = k ? h / 2 : h;
                p->data[j] = keep + hk;
                double lp = loss_at(m, &rng0, x, y, B);
                p->data[j] = keep - hk;
                double lm = loss_at(m, &rng0, x, y, B);
                p->data[j] = keep;
                num[k] = (lp - lm) / (2.0 * hk);
            }
            /* Two step sizes that disagree mean a ReLU or max kink inside the
             * stencil: that element's difference quotient is not a derivative. */
            if (fabs(num[0] - num[1]) > atol + rtol * fabs(num[1])) {
                kinks++;
                continue;
            }
            checked++;
            double ana = p->grad[j], err = fabs(num[1] - ana);
            if (err > worst) worst = err;
            CHECK_MSG(err <= atol + rtol * fabs(num[1]), "%s[%zu]: analytic %.6g, numeric %.6g",
                      p->name, j, ana, num[1]);
        }
    }
    *ddpc_model_rng(m) = rng0;
    CHECK_MSG(kinks * 20 <= checked, "%d of %d elements sat on a kink", kinks, kinks + checked);
    return worst;
}

/* Backward from a given d loss / d output g (n floats), through the
 * custom-loss path. */
static ddpc_status backward_with(ddpc_model *m, const float *g, size_t n) {
    memcpy(ddpc_model_output_grad(m), g, n * sizeof(float));
    return ddpc_model_backward(m);
}

static void rand_batch(uint64_t seed, float *x, size_t n, int32_t *y, int B, int K) {
    ddpc_rng r;
    ddpc_rng_seed(&r, seed);
    fill_randn(&r, x, n, 1.0f);
    for (int i = 0; i < B; i++) y[i] = (int32_t)(ddpc_rng_next(&r) % (uint64_t)K);
}

/* Weights scaled up so the loss is far from flat and gradients are O(0.1). */
static void scale_params(ddpc_model *m, float s) {
    size_t n;
    float *p = ddpc_model_param_block(m, &n);
    for (size_t i = 0; i < n; i++) p[i] *= s;
}

/* ---------------------------------------------------------------- loss */

TEST(nn_cross_entropy_values) {
    float z[2 * 4] = { 0, 0, 0, 0, 1, 2, 3, 4 };
    int32_t y[2] = { 2, 3 };
    float d[8], loss;
    int ok;
    CHECK_OK(ddpc_cross_entropy(z, y, 2, 4, d, &loss, &ok));
    /* row 0: log 4; row 1: log(e+e^2+e^3+e^4) - 4 */
    double r1 = log(exp(1) + exp(2) + exp(3) + exp(4)) - 4;
    CHECK_NEAR(loss, (log(4.0) + r1) / 2, 1e-6);
    CHECK_EQ(ok, 1); /* row 0's argmax is the first maximum, 0 != 2; row 1 is right */
    CHECK_NEAR(d[0], 0.25 / 2, 1e-7);
    CHECK_NEAR(d[2], (0.25 - 1) / 2, 1e-7);
    double s1 = exp(1) + exp(2) + exp(3) + exp(4);
    CHECK_NEAR(d[7], (exp(4) / s1 - 1) / 2, 1e-7);
    /* huge logits stay finite (the max is subtracted) */
    float big[3] = { 1000, 1001, 999 };
    int32_t yb = 0;
    CHECK_OK(ddpc_cross_entropy(big, &yb, 1, 3, d, &loss, NULL));
    CHECK(isfinite(loss));
    CHECK_NEAR(loss, log(exp(-1.0) + 1 + exp(-2.0)) + 1, 1e-4);
    /* bad labels are named */
    int32_t bad[2] = { 0, 4 };
    CHECK_STATUS(ddpc_cross_entropy(z, bad, 2, 4, d, &loss, NULL), DDPC_ERR_INVALID_ARG);
    CHECK_CONTAINS(ddpc_last_error(), "label 4 of row 1");
}

TEST(nn_cross_entropy_gradcheck) {
    enum { B = 5, K = 7 };
    float z[B * K], d[B * K];
    int32_t y[B];
    rand_batch(3, z, B * K, y, B, K);
    CHECK_OK(ddpc_cross_entropy(z, y, B, K, d, NULL, NULL));
    for (int i = 0; i < B * K; i++) {
        float keep = z[i], lp, lm;
        z[i] = keep + 1e-2f;
        CHECK_OK(ddpc_cross_entropy(z, y, B, K, NULL, &lp, NULL));
        z[i] = keep - 1e-2f;
        CHECK_OK(ddpc_cross_entropy(z, y, B, K, NULL, &lm, NULL));
        z[i] = keep;
        double num = ((double)lp - lm) / 2e-2;
        CHECK_MSG(fabs(num - d[i]) < 2e-4, "dz[%d]: analytic %g numeric %g", i, d[i], num);
    }
}

/* -------------------------------------------------------------- layers */

TEST(nn_linear_forward_values) {
    ddpc_model *m;
    ddpc_model_options mo = ddpc_model_options_default();
    mo.seed = 0;
    CHECK_OK(ddpc_model_create(DDPC_LAYERS(ddpc_input(1, 1, 3), ddpc_linear(3, 2)), &mo, &m));
    CHECK_EQ(ddpc_model_num_params(m), 2);
    const ddpc_param *W = ddpc_model_param(m, 0), *b = ddpc_model_param(m, 1);
    CHECK_STR(W->name, "0.weight");
    CHECK_STR(b->name, "0.bias");
    CHECK_EQ(W->shape[0], 2);
    CHECK_EQ(W->shape[1], 3);
    CHECK_EQ(b->offset, 6);
    float w[6] = { 1, 2, 3, -1, 0, 1 }, bb[2] = { 0.5f, -0.5f };
    memcpy(W->data, w, sizeof w);
    memcpy(b->data, bb, sizeof bb);
    float x[6] = { 1, 1, 1, 2, 0, -1 };
    const float *out;
    CHECK_OK(ddpc_model_forward(m, x, 2, &out));
    CHECK_NEAR(out[0], 6.5, 1e-6);
    CHECK_NEAR(out[1], -0.5, 1e-6);
    CHECK_NEAR(out[2], -0.5, 1e-6);
    CHECK_NEAR(out[3], -3.5, 1e-6);
    /* a larger batch grows the buffers; a smaller one reuses them */
    float x3[9] = { 1, 1, 1, 2, 0, -1, 0, 0, 1 };
    CHECK_OK(ddpc_model_forward(m, x3, 3, &out));
    CHECK_NEAR(out[3], -3.5, 1e-6);
    CHECK_NEAR(out[4], 3.5, 1e-6);
    CHECK_NEAR(out[5], 0.5, 1e-6);
    CHECK_OK(ddpc_model_forward(m, x, 1, &out));
    CHECK_NEAR(out[0], 6.5, 1e-6);
    ddpc_model_destroy(m);
}

TEST(nn_init_bounds) {
    /* PyTorch's defaults: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weights and biases */
    ddpc_model *m;
    ddpc_model_options mo = ddpc_model_options_default();
    mo.seed = 7;
    CHECK_OK(ddpc_model_create(DDPC_LAYERS(ddpc_input(4, 6, 6), ddpc_conv2d(4, 8, 3, 1, 0),
                                           ddpc_flatten(), ddpc_linear(8 * 4 * 4, 50)),
                               &mo, &m));
    double fan[4] = { 36, 36, 128, 128 };
    for (int i = 0; i < 4; i++) {
        const ddpc_param *p = ddpc_model_param(m, i);
        double bound = 1 / sqrt(fan[i]), mx = 0, sum = 0;
        for (size_t j = 0; j < p->numel; j++) {
            mx = fmax(mx, fabs(p->data[j]));
            sum += p->data[j];
        }
        CHECK_MSG(mx <= bound && mx > 0.8 * bound, "%s: max |w| %g, bound %g", p->name, mx, bound);
        if (p->numel > 100) CHECK(fabs(sum / p->numel) < 0.1 * bound);
    }
    /* the same seed gives the same parameters; another seed others */
    ddpc_model *m2, *m3;
    CHECK_OK(model_create_preset("mlp", 7, &m2));
    CHECK_OK(model_create_preset("mlp", 7, &m3));
    size_t n2, n3;
    float *p2 = ddpc_model_param_block(m2, &n2), *p3 = ddpc_model_param_block(m3, &n3);
    CHECK_EQ(n2, 784 * 512 + 512 + 512 * 512 + 512 + 512 * 10 + 10);
    CHECK(n2 == n3 && memcmp(p2, p3, n2 * 4) == 0);
    ddpc_model_destroy(m3);
    CHECK_OK(model_create_preset("mlp", 8, &m3));
    p3 = ddpc_model_param_block(m3, &n3);
    CHECK(memcmp(p2, p3, n2 * 4) != 0);
    ddpc_model_destroy(m);
    ddpc_model_destroy(m2);
    ddpc_model_destroy(m3);
}

TEST(nn_gradcheck_linear_relu) {
    enum { B = 4, IN = 6, H = 8, K = 3 };
    ddpc_model *m;
    ddpc_model_options mo = ddpc_model_options_default();
    mo.seed = 11;
    CHECK_OK(ddpc_model_create(
        DDPC_LAYERS(ddpc_input(1, 1, IN), ddpc_linear(IN, H), ddpc_relu(), ddpc_linear(H, K)), &mo,
        &m));
    scale_params(m, 2.0f);
    float x[B * IN];
    int32_t y[B];
    rand_batch(5, x, B * IN, y, B, K);
    grad_check(m, x, y, B, 2e-3f, 3e-4, 1e-2);
    ddpc_model_destroy(m);
}

TEST(nn_gradcheck_conv_pool) {
    /* conv (with padding) -> relu -> pool -> strided conv -> flatten -> linear:
     * the second conv's and the pool's input gradients reach the first conv */
    enum { B = 2, K = 3 };
    ddpc_model *m;
    ddpc_model_options mo = ddpc_model_options_default();
    mo.seed = 12;
    CHECK_OK(
        ddpc_model_create(DDPC_LAYERS(ddpc_input(2, 7, 7), ddpc_conv2d(2, 3, 3, 1, 1), /* 3x7x7 */
                                      ddpc_relu(), ddpc_maxpool2d(2, 2),               /* 3x3x3 */
                                      ddpc_conv2d(3, 4, 2, 2, 1),                      /* 4x2x2 */
                                      ddpc_flatten(), ddpc_linear(16, K)),
                          &mo, &m));
    scale_params(m, 2.0f);
    float x[B * 2 * 7 * 7];
    int32_t y[B];
    rand_batch(6, x, sizeof x / sizeof x[0], y, B, K);
    grad_check(m, x, y, B, 2e-3f, 3e-4, 1e-2);
    ddpc_model_destroy(m);
}

TEST(nn_gradcheck_conv_nobias_overlapping_pool) {
    /* no bias, pool windows overlapping (k 3, stride 2), conv stride 2 */
    enum { B = 3, K = 4 };
    ddpc_model *m;
    ddpc_model_options mo = ddpc_model_options_default();
    mo.seed = 13;
    CHECK_OK(
        ddpc_model_create(DDPC_LAYERS(ddpc_input(1, 9, 9), conv2d_nobias(1, 2, 3, 2, 0), /* 2x4x4 */
                                      ddpc_relu(), ddpc_conv2d(2, 3, 2, 1, 1),           /* 3x5x5 */
                                      ddpc_maxpool2d(3, 2),                              /* 3x2x2 */
                                      ddpc_flatten(), linear_nobias(12, K)),
                          &mo, &m));
    CHECK_EQ(ddpc_model_num_params(m), 4);
    scale_params(m, 2.0f);
    float x[B * 81];
    int32_t y[B];
    rand_batch(7, x, sizeof x / sizeof x[0], y, B, K);
    grad_check(m, x, y, B, 2e-3f, 3e-4, 1e-2);
    ddpc_model_destroy(m);
}

TEST(nn_gradcheck_dropout) {
    enum { B = 4, IN = 5, H = 10, K = 3 };
    ddpc_model *m;
    ddpc_model_options mo = ddpc_model_options_default();
    mo.seed = 14;
    CHECK_OK(ddpc_model_create(DDPC_LAYERS(ddpc_input(1, 1, IN), ddpc_linear(IN, H),
                                           ddpc_dropout(0.4f), ddpc_linear(H, K)),
                               &mo, &m));
    scale_params(m, 2.0f);
    float x[B * IN];
    int32_t y[B];
    rand_batch(8, x, B * IN, y, B, K);
    grad_check(m, x, y, B, 2e-3f, 3e-4, 1e-2);
    ddpc_model_destroy(m);
}

/* The tolerances of grad_check catch a gradient 5% off: for every weight of
 * a small Linear, the numeric derivative matches the analytic one within the
 * tolerance, and misses 1.05x the analytic one. */
TEST(nn_gradcheck_catches_errors) {
    enum { B = 3, IN = 4, K = 3 };
    ddpc_model *m;
    ddpc_model_options mo = ddpc_model_options_default();
    mo.seed = 15;
    CHECK_OK(ddpc_model_create(DDPC_LAYERS(ddpc_input(1, 1, IN), ddpc_linear(IN, K)), &mo, &m));
    scale_params(m, 2.0f);
    float x[B * IN];
    int32_t y[B];
    rand_batch(9, x, B * IN, y, B, K);
    const float *out;
    ddpc_model_zero_grad(m);
    CHECK_OK(ddpc_model_forward(m, x, B, &out));
    CHECK_OK(ddpc_model_loss(m, DDPC_CROSS_ENTROPY, y, NULL));
    CHECK_OK(ddpc_model_backward(m));
    const ddpc_param *W = ddpc_model_param(m, 0);
    ddpc_rng rng0 = *ddpc_model_rng(m);
    int caught = 0;
    for (size_t j = 0; j < W->numel; j++) {
        float keep = W->data[j], h = 1e-3f;
        W->data[j] = keep + h;
        double lp = loss_at(m, &rng0, x, y, B);
        W->data[j] = keep - h;
        double lm = loss_at(m, &rng0, x, y, B);
        W->data[j] = keep;
        double num = (lp - lm) / (2.0 * h), ana = W->grad[j], tol = 3e-4 + 1e-2 * fabs(num);
        CHECK_MSG(fabs(num - ana) <= tol, "W[%zu]: %g vs %g", j, num, ana);
        caught += fabs(num - 1.05 * ana) > tol;
    }
    CHECK_MSG(caught * 4 >= (int)W->numel * 3, "a 5%% error is caught on only %d of %zu weights",
              caught, W->numel);
    ddpc_model_destroy(m);
}

/* ------------------------------------------------- hooks, accumulation */

typedef struct hook_log {
    int order[16];
    int n;
    ddpc_model *m;
    int grads_final; /* each fired gradient already equals its value after backward */
} hook_log;

static void on_ready(void *ctx, int i) {
    hook_log *h = ctx;
    if (h->n < 16) h->order[h->n++] = i;
}

TEST(nn_grad_hook_order) {
    ddpc_model *m;
    CHECK_OK(model_create_preset("cnn", 1, &m));
    CHECK_EQ(ddpc_model_num_params(m), 8);
    const char *names[8] = { "0.weight", "0.bias", "3.weight", "3.bias",
                             "7.weight", "7.bias", "9.weight", "9.bias" };
    for (int i = 0; i < 8; i++) CHECK_STR(ddpc_model_param(m, i)->name, names[i]);
    hook_log h = { .n = 0, .m = m };
    ddpc_model_set_hooks(m, &(ddpc_model_hooks){ on_ready, NULL, &h });
    float x[2 * 784];
    int32_t y[2];
    rand_batch(1, x, 2 * 784, y, 2, 10);
    const float *out;
    CHECK_OK(ddpc_model_forward(m, x, 2, &out));
    CHECK_OK(ddpc_model_loss(m, DDPC_CROSS_ENTROPY, y, NULL));
    CHECK_OK(ddpc_model_backward(m));
    CHECK_EQ(h.n, 8);
    int want[8] = { 7, 6, 5, 4, 3, 2, 1, 0 };
    for (int i = 0; i < 8; i++) CHECK_EQ(h.order[i], want[i]);
    /* offsets tile the blocks in registration order */
    size_t n, at = 0;
    ddpc_model_grad_block(m, &n);
    for (int i = 0; i < 8; i++) {
        CHECK_EQ(ddpc_model_param(m, i)->offset, at);
        at += ddpc_model_param(m, i)->numel;
    }
    CHECK_EQ(at, n);
    ddpc_model_destroy(m);
}

/* The hook fires when the gradient is final: a copy taken inside the hook
 * equals the gradient after backward returns. */
typedef struct snap {
    ddpc_model *m;
    float *copy;
} snap;

static void on_ready_copy(void *ctx, int i) {
    snap *s = ctx;
    const ddpc_param *p = ddpc_model_param(s->m, i);
    memcpy(s->copy + p->offset, p->grad, p->numel * sizeof(float));
}

TEST(nn_grad_hook_sees_final_grads) {
    ddpc_model *m;
    CHECK_OK(model_create_preset("mlp", 2, &m));
    size_t n;
    float *g = ddpc_model_grad_block(m, &n);
    snap s = { m, calloc(n, sizeof(float)) };
    ddpc_model_set_hooks(m, &(ddpc_model_hooks){ on_ready_copy, NULL, &s });
    float x[8 * 784];
    int32_t y[8];
    rand_batch(2, x, 8 * 784, y, 8, 10);
    const float *out;
    CHECK_OK(ddpc_model_forward(m, x, 8, &out));
    CHECK_OK(ddpc_model_loss(m, DDPC_CROSS_ENTROPY, y, NULL));
    CHECK_OK(ddpc_model_backward(m));
    CHECK(memcmp(g, s.copy, n * sizeof(float)) == 0);
    free(s.copy);
    ddpc_model_destroy(m);
}

TEST(nn_grad_accumulation) {
    /* two backward passes on halves of a batch, mean-loss scaled by 1/2 each,
     * equal one pass over the whole batch; zero_grad clears */
    enum { B = 8 };
    ddpc_model *m;
    CHECK_OK(model_create_preset("mlp", 3, &m));
    float x[B * 784];
    int32_t y[B];
    rand_batch(4, x, B * 784, y, B, 10);
    size_t n;
    float *g = ddpc_model_grad_block(m, &n);
    const float *out;
    ddpc_model_zero_grad(m);
    CHECK_OK(ddpc_model_forward(m, x, B, &out));
    CHECK_OK(ddpc_model_loss(m, DDPC_CROSS_ENTROPY, y, NULL));
    CHECK_OK(ddpc_model_backward(m));
    float *full = malloc(n * sizeof(float));
    memcpy(full, g, n * sizeof(float));
    ddpc_model_zero_grad(m);
    for (size_t i = 0; i < n; i++) CHECK(g[i] == 0.0f);
    for (int half = 0; half < 2; half++) {
        /* a loss of the caller's own, through ddpc_model_output_grad */
        CHECK_OK(ddpc_model_forward(m, x + half * (B / 2) * 784, B / 2, &out));
        float *d = ddpc_model_output_grad(m);
        CHECK_OK(ddpc_cross_entropy(out, y + half * (B / 2), B / 2, 10, d, NULL, NULL));
        for (int i = 0; i < (B / 2) * 10; i++) d[i] *= 0.5f;
        CHECK_OK(ddpc_model_backward(m));
    }
    double worst = 0, scale = 0;
    for (size_t i = 0; i < n; i++) {
        worst = fmax(worst, fabs(g[i] - full[i]));
        scale = fmax(scale, fabs(full[i]));
    }
    CHECK(scale > 1e-3);
    CHECK_MSG(worst <= 1e-5 * scale + 1e-7, "accumulated grads differ by %g (scale %g)", worst,
              scale);
    free(full);
    ddpc_model_destroy(m);
}

TEST(nn_dropout_train_eval) {
    enum { B = 50, N = 100 };
    ddpc_model *m;
    ddpc_model_options mo = ddpc_model_options_default();
    mo.seed = 5;
    CHECK_OK(ddpc_model_create(DDPC_LAYERS(ddpc_input(1, 1, N), ddpc_dropout(0.25f)), &mo, &m));
    CHECK_EQ(ddpc_model_num_params(m), 0);
    float *x = malloc(B * N * sizeof(float));
    for (int i = 0; i < B * N; i++) x[i] = 1.0f + (float)(i % 7);
    const float *out;
    CHECK(ddpc_model_is_training(m));
    CHECK_OK(ddpc_model_forward(m, x, B, &out));
    int zeros = 0;
    for (int i = 0; i < B * N; i++) {
        if (out[i] == 0.0f)
            zeros++;
        else
            CHECK_NEAR(out[i], x[i] / 0.75, 1e-5);
    }
    /* 5000 draws at p 0.25: 1250 expected, sd ~31 */
    CHECK_MSG(zeros > 1100 && zeros < 1400, "dropped %d of 5000", zeros);
    /* the next pass draws a new mask; the same seed repeats the first */
    float *first = malloc(B * N * sizeof(float));
    memcpy(first, out, B * N * sizeof(float));
    CHECK_OK(ddpc_model_forward(m, x, B, &out));
    CHECK(memcmp(first, out, B * N * sizeof(float)) != 0);
    ddpc_model *m2; /* the same options: seed 5 */
    CHECK_OK(ddpc_model_create(DDPC_LAYERS(ddpc_input(1, 1, N), ddpc_dropout(0.25f)), &mo, &m2));
    CHECK_OK(ddpc_model_forward(m2, x, B, &out));
    CHECK(memcmp(first, out, B * N * sizeof(float)) == 0);
    /* eval: identity */
    ddpc_model_train(m, 0);
    CHECK_OK(ddpc_model_forward(m, x, B, &out));
    CHECK(memcmp(x, out, B * N * sizeof(float)) == 0);
    free(x);
    free(first);
    ddpc_model_destroy(m);
    ddpc_model_destroy(m2);
}

TEST(nn_shape_errors) {
    ddpc_model *m = NULL;
    CHECK_STATUS(
        ddpc_model_create(DDPC_LAYERS(ddpc_input(1, 28, 28), ddpc_linear(784, 10)), NULL, &m),
        DDPC_ERR_INVALID_ARG);
    CHECK_CONTAINS(ddpc_last_error(), "Flatten");
    CHECK(m == NULL);
    CHECK_STATUS(
        ddpc_model_create(DDPC_LAYERS(ddpc_input(1, 28, 28), ddpc_conv2d(3, 8, 3, 1, 1)), NULL, &m),
        DDPC_ERR_INVALID_ARG);
    CHECK_CONTAINS(ddpc_last_error(), "input has 1 channels");
    CHECK_STATUS(
        ddpc_model_create(DDPC_LAYERS(ddpc_input(1, 28, 28), ddpc_flatten(), ddpc_linear(100, 10)),
                          NULL, &m),
        DDPC_ERR_INVALID_ARG);
    CHECK_CONTAINS(ddpc_last_error(), "784 features");
    CHECK_STATUS(ddpc_model_create(DDPC_LAYERS(ddpc_linear(4, 4), ddpc_dropout(1.0f)), NULL, &m),
                 DDPC_ERR_INVALID_ARG);
    CHECK_STATUS(ddpc_model_create(DDPC_LAYERS(ddpc_relu()), NULL, &m), DDPC_ERR_INVALID_ARG);
    CHECK_CONTAINS(ddpc_last_error(), "ddpc_input");
    CHECK_STATUS(ddpc_model_create(DDPC_LAYERS(ddpc_linear(4, 4), ddpc_input(1, 1, 4)), NULL, &m),
                 DDPC_ERR_INVALID_ARG);
    CHECK_STATUS(model_create_preset("resnet", 0, &m), DDPC_ERR_INVALID_ARG);
    CHECK_CONTAINS(ddpc_last_error(), "resnet");
    CHECK_STATUS(ddpc_model_create(DDPC_LAYERS(ddpc_input(0, 28, 28), ddpc_flatten()), NULL, &m),
                 DDPC_ERR_INVALID_ARG);
    /* forward needs a batch, backward a loss */
    CHECK_OK(ddpc_model_create(DDPC_LAYERS(ddpc_linear(2, 2)), NULL, &m));
    float x[2] = { 1, 2 };
    int32_t y[1] = { 1 };
    CHECK_STATUS(ddpc_model_forward(m, x, 0, NULL), DDPC_ERR_INVALID_ARG);
    CHECK_STATUS(ddpc_model_loss(m, DDPC_CROSS_ENTROPY, y, NULL), DDPC_ERR_INVALID_ARG);
    CHECK_OK(ddpc_model_forward(m, x, 1, NULL));
    CHECK_STATUS(ddpc_model_backward(m), DDPC_ERR_INVALID_ARG);
    CHECK_CONTAINS(ddpc_last_error(), "no loss");
    CHECK_OK(ddpc_model_loss(m, DDPC_CROSS_ENTROPY, y, NULL));
    CHECK_OK(ddpc_model_backward(m));
    CHECK_STATUS(ddpc_model_backward(m), DDPC_ERR_INVALID_ARG); /* once per loss, as autograd */
    ddpc_model_destroy(m);
    ddpc_model_destroy(NULL);
}

/* ----------------------------------------------------------- optimizer */

/* A 2-parameter model (Linear(1, 1): weight, bias) with p = {1, -2}, stepped
 * with three fixed gradients; expected values worked out by hand from the
 * update rules (and identical to PyTorch 1.13's torch.optim in float32). */
static void run_opt(ddpc_optim_options o, const double want[3][2]) {
    static const float G[3][2] = { { 0.5f, 0.25f }, { 0.5f, -1.0f }, { -0.25f, 0.125f } };
    ddpc_model *m;
    ddpc_model_options mo = ddpc_model_options_default();
    mo.seed = 0;
    CHECK_OK(ddpc_model_create(DDPC_LAYERS(ddpc_input(1, 1, 1), ddpc_linear(1, 1)), &mo, &m));
    size_t n;
    float *p = ddpc_model_param_block(m, &n), *g = ddpc_model_grad_block(m, &n);
    CHECK_EQ(n, 2);
    p[0] = 1.0f;
    p[1] = -2.0f;
    ddpc_optim *opt;
    CHECK_OK(ddpc_optim_create(m, &o, &opt));
    for (int s = 0; s < 3; s++) {
        g[0] = G[s][0];
        g[1] = G[s][1];
        CHECK_OK(ddpc_optim_step(opt));
        CHECK_NEAR(p[0], want[s][0], 2e-6);
        CHECK_NEAR(p[1], want[s][1], 2e-6);
    }
    CHECK_EQ(ddpc_optim_steps(opt), 3);
    ddpc_optim_destroy(opt);
    ddpc_model_destroy(m);
}

TEST(nn_sgd_steps) {
    ddpc_optim_options o = ddpc_optim_options_default(DDPC_OPTIM_SGD);
    o.lr = 0.1f;
    /* p -= lr*g */
    run_opt(o, (const double[3][2]){ { 0.95, -2.025 }, { 0.90, -1.925 }, { 0.925, -1.9375 } });
    /* g += wd*p: 0.5 + 0.1*1 = 0.6 -> 0.94 */
    o.weight_decay = 0.1f;
    run_opt(o,
            (const double[3][2]){ { 0.94, -2.005 }, { 0.8806, -1.88495 }, { 0.896794, -1.8786 } });
    /* momentum: buf = g first, then 0.9*buf + g: 0.95, 0.95-0.1*0.95 = 0.855 */
    o.weight_decay = 0;
    o.momentum = 0.9f;
    run_opt(o, (const double[3][2]){ { 0.95, -2.025 }, { 0.855, -1.9475 }, { 0.7945, -1.89025 } });
    /* dampening 0.5: buf = 0.9*0.5 + 0.5*0.5 = 0.7 on step 2 (not on step 1) */
    o.dampening = 0.5f;
    run_opt(o, (const double[3][2]){ { 0.95, -2.025 }, { 0.88, -1.9975 }, { 0.8295, -1.979 } });
    /* nesterov + wd 0.01: g = 0.51, buf = 0.51, d = 0.51 + 0.9*0.51 = 0.969 */
    o.dampening = 0;
    o.nesterov = 1;
    o.weight_decay = 0.01f;
    run_opt(o, (const double[3][2]){
                   { 0.9031, -2.0437 }, { 0.7650741, -1.8684469 }, { 0.73271, -1.8227586 } });
}

TEST(nn_adam_steps) {
    ddpc_optim_options o = ddpc_optim_options_default(DDPC_OPTIM_ADAM);
    o.lr = 0.1f;
    /* step 1 moves every parameter by lr against its gradient's sign */
    run_opt(o,
            (const double[3][2]){ { 0.9, -2.1 }, { 0.8, -2.0440495 }, { 0.74843466, -2.0088091 } });
    o.weight_decay = 0.1f; /* L2 added to the gradient */
    run_opt(o, (const double[3][2]){
                   { 0.9, -2.1 }, { 0.80004734, -2.0284147 }, { 0.7369746, -1.9690936 } });
    o = ddpc_optim_options_default(DDPC_OPTIM_ADAMW);
    o.lr = 0.1f;
    o.weight_decay = 0.1f; /* decoupled: p *= 1 - 0.01 first: 0.99 - 0.1 = 0.89 */
    run_opt(o, (const double[3][2]){
                   { 0.89, -2.08 }, { 0.78110003, -2.0032496 }, { 0.72172368, -1.9479766 } });
}

TEST(nn_optim_bad_options) {
    ddpc_model *m;
    CHECK_OK(model_create_preset("linear", 0, &m));
    ddpc_optim *opt;
    ddpc_optim_options o = ddpc_optim_options_default(DDPC_OPTIM_SGD);
    o.nesterov = 1;
    CHECK_STATUS(ddpc_optim_create(m, &o, &opt), DDPC_ERR_INVALID_ARG);
    CHECK_CONTAINS(ddpc_last_error(), "nesterov");
    o = ddpc_optim_options_default(DDPC_OPTIM_ADAM);
    o.beta2 = 1.0f;
    CHECK_STATUS(ddpc_optim_create(m, &o, &opt), DDPC_ERR_INVALID_ARG);
    CHECK_CONTAINS(ddpc_last_error(), "beta2");
    o.beta2 = 0.999f;
    o.lr = -1;
    CHECK_STATUS(ddpc_optim_create(m, &o, &opt), DDPC_ERR_INVALID_ARG);
    CHECK_CONTAINS(ddpc_last_error(), "lr");
    ddpc_optim_kind k;
    CHECK_STATUS(ddpc_optim_kind_parse("rmsprop", &k), DDPC_ERR_INVALID_ARG);
    CHECK_CONTAINS(ddpc_last_error(), "rmsprop");
    CHECK_OK(ddpc_optim_kind_parse("adamw", &k));
    CHECK_EQ(k, DDPC_OPTIM_ADAMW);
    ddpc_optim_destroy(NULL);
    ddpc_model_destroy(m);
}

/* A few hundred SGD steps on a separable synthetic problem drive the loss
 * down and the accuracy up: forward, loss, backward and step fit together. */
TEST(nn_learns_synthetic) {
    enum { B = 32, IN = 20, K = 4 };
    ddpc_model *m;
    ddpc_model_options mo = ddpc_model_options_default();
    mo.seed = 21;
    CHECK_OK(ddpc_model_create(
        DDPC_LAYERS(ddpc_input(1, 1, IN), ddpc_linear(IN, 32), ddpc_relu(), ddpc_linear(32, K)),
        &mo, &m));
    ddpc_optim_options o = ddpc_optim_options_default(DDPC_OPTIM_SGD);
    o.lr = 0.1f;
    o.momentum = 0.9f;
    ddpc_optim *opt;
    CHECK_OK(ddpc_optim_create(m, &o, &opt));
    ddpc_rng r;
    ddpc_rng_seed(&r, 99);
    float centers[K * IN];
    fill_randn(&r, centers, K * IN, 1.0f);
    float x[B * IN], first = 0, loss = 0;
    int32_t y[B];
    int correct = 0;
    for (int step = 0; step < 300; step++) {
        for (int i = 0; i < B; i++) {
            y[i] = (int32_t)(ddpc_rng_next(&r) % K);
            fill_randn(&r, x + i * IN, IN, 0.5f);
            for (int j = 0; j < IN; j++) x[i * IN + j] += centers[y[i] * IN + j];
        }
        const float *out;
        ddpc_model_zero_grad(m);
        CHECK_OK(ddpc_model_forward(m, x, B, &out));
        CHECK_OK(ddpc_model_loss(m, DDPC_CROSS_ENTROPY, y, &loss));
        correct = ddpc_model_correct(m);
        CHECK_OK(ddpc_model_backward(m));
        CHECK_OK(ddpc_optim_step(opt));
        if (step == 0) first = loss;
    }
    CHECK_MSG(loss < 0.1f * first && correct >= B - 1, "loss %g -> %g, %d/%d right", first, loss,
              correct, B);
    ddpc_optim_destroy(opt);
    ddpc_model_destroy(m);
}

/* Linear's forward and weight gradient against a double-precision reference,
 * over shapes that exercise the skinny kernels' groups and tails (N <= 16,
 * odd B, K not a multiple of 8 or 16) and the sgemm path (N > 16). */
TEST(nn_linear_matches_reference) {
    static const int shapes[][3] = {
        { 1, 1, 1 },   { 3, 37, 13 }, { 32, 784, 10 }, { 5, 16, 5 },
        { 7, 23, 16 }, { 2, 9, 4 },   { 4, 40, 17 },   { 33, 100, 1 }
    };
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int B = shapes[si][0], K = shapes[si][1], N = shapes[si][2];
        ddpc_model *m;
        ddpc_model_options mo = ddpc_model_options_default();
        mo.seed = 30 + si;
        CHECK_OK(ddpc_model_create(DDPC_LAYERS(ddpc_input(1, 1, K), ddpc_linear(K, N)), &mo, &m));
        const ddpc_param *W = ddpc_model_param(m, 0), *bias = ddpc_model_param(m, 1);
        float *x = malloc((size_t)B * K * sizeof(float)),
              *g = malloc((size_t)B * N * sizeof(float));
        ddpc_rng r;
        ddpc_rng_seed(&r, si);
        fill_randn(&r, x, (size_t)B * K, 1.0f);
        fill_randn(&r, g, (size_t)B * N, 1.0f);
        const float *out;
        CHECK_OK(ddpc_model_forward(m, x, B, &out));
        for (int i = 0; i < B; i++)
            for (int o = 0; o < N; o++) {
                double s = bias->data[o];
                for (int k = 0; k < K; k++) s += (double)x[i * K + k] * W->data[o * K + k];
                CHECK_MSG(fabs(out[i * N + o] - s) < 1e-4 * (1 + sqrt(K)),
                          "B=%d K=%d N=%d y[%d,%d]=%g want %g", B, K, N, i, o, out[i * N + o], s);
            }
        /* two backward passes accumulate: dW = 2 g^T x */
        ddpc_model_zero_grad(m);
        CHECK_OK(backward_with(m, g, (size_t)B * N));
        CHECK_OK(backward_with(m, g, (size_t)B * N));
        for (int o = 0; o < N; o++) {
            double db = 0;
            for (int i = 0; i < B; i++) db += g[i * N + o];
            CHECK_NEAR(bias->grad[o], 2 * db, 1e-4 * (1 + B));
            for (int k = 0; k < K; k++) {
                double s = 0;
                for (int i = 0; i < B; i++) s += (double)g[i * N + o] * x[i * K + k];
                CHECK_MSG(fabs(W->grad[o * K + k] - 2 * s) < 1e-4 * (1 + B),
                          "B=%d K=%d N=%d dW[%d,%d]=%g want %g", B, K, N, o, k, W->grad[o * K + k],
                          2 * s);
            }
        }
        free(x);
        free(g);
        ddpc_model_destroy(m);
    }
}

/* Conv2d and MaxPool2d forward against direct loops in double, over strides,
 * paddings and kernel sizes (gradient checks alone would accept a forward
 * pass and a backward pass that are wrong in the same way). */
TEST(nn_conv_pool_match_reference) {
    static const int cfg[][7] = { /* C, H, W, OC, k, stride, pad */
                                  { 1, 28, 28, 4, 3, 1, 1 },
                                  { 3, 7, 9, 5, 3, 2, 1 },
                                  { 2, 6, 6, 3, 2, 1, 2 },
                                  { 4, 5, 5, 2, 5, 1, 1 }
    };
    for (size_t ci = 0; ci < sizeof cfg / sizeof cfg[0]; ci++) {
        int C = cfg[ci][0], H = cfg[ci][1], W = cfg[ci][2], OC = cfg[ci][3], k = cfg[ci][4],
            s = cfg[ci][5], p = cfg[ci][6], B = 3;
        int OH = (H + 2 * p - k) / s + 1, OW = (W + 2 * p - k) / s + 1;
        ddpc_model *m;
        ddpc_model_options mo = ddpc_model_options_default();
        mo.seed = 40 + ci;
        CHECK_OK(ddpc_model_create(
            DDPC_LAYERS(ddpc_input(C, H, W), ddpc_conv2d(C, OC, k, s, p), ddpc_maxpool2d(2, 2)),
            &mo, &m));
        const ddpc_param *Wt = ddpc_model_param(m, 0), *bias = ddpc_model_param(m, 1);
        size_t nin = (size_t)B * C * H * W;
        float *x = malloc(nin * sizeof(float));
        double *conv = malloc((size_t)B * OC * OH * OW * sizeof(double));
        ddpc_rng r;
        ddpc_rng_seed(&r, ci);
        fill_randn(&r, x, nin, 1.0f);
        for (int b = 0; b < B; b++)
            for (int o = 0; o < OC; o++)
                for (int i = 0; i < OH; i++)
                    for (int j = 0; j < OW; j++) {
                        double acc = bias->data[o];
                        for (int c = 0; c < C; c++)
                            for (int u = 0; u < k; u++)
                                for (int v = 0; v < k; v++) {
                                    int ih = i * s - p + u, iw = j * s - p + v;
                                    if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                    acc += (double)x[((b * C + c) * H + ih) * W + iw] *
                                           Wt->data[((o * C + c) * k + u) * k + v];
                                }
                        conv[((b * OC + o) * OH + i) * OW + j] = acc;
                    }
        const float *out;
        CHECK_OK(ddpc_model_forward(m, x, B, &out));
        int PH = (OH - 2) / 2 + 1, PW = (OW - 2) / 2 + 1;
        CHECK_EQ(ddpc_model_out_features(m), (size_t)OC * PH * PW);
        for (int b = 0; b < B; b++)
            for (int o = 0; o < OC; o++)
                for (int i = 0; i < PH; i++)
                    for (int j = 0; j < PW; j++) {
                        double mx = -1e300;
                        for (int u = 0; u < 2; u++)
                            for (int v = 0; v < 2; v++)
                                mx = fmax(mx,
                                          conv[((b * OC + o) * OH + 2 * i + u) * OW + 2 * j + v]);
                        float got = out[((b * OC + o) * PH + i) * PW + j];
                        CHECK_MSG(fabs(got - mx) < 1e-4, "cfg %zu out[%d,%d,%d,%d] = %g want %g",
                                  ci, b, o, i, j, got, mx);
                    }
        free(x);
        free(conv);
        ddpc_model_destroy(m);
    }
}

/* Adam and AdamW over a block long enough for the vectorised loop (and its
 * scalar tail), against the update rules evaluated in double. */
TEST(nn_adam_vector_path) {
    for (int kind = DDPC_OPTIM_ADAM; kind <= DDPC_OPTIM_ADAMW; kind++) {
        ddpc_model *m;
        ddpc_model_options mo = ddpc_model_options_default();
        mo.seed = 3;
        CHECK_OK(ddpc_model_create(DDPC_LAYERS(ddpc_input(1, 1, 6), ddpc_linear(6, 7)), &mo,
                                   &m)); /* 49 parameters */
        size_t n;
        float *w = ddpc_model_param_block(m, &n), *g = ddpc_model_grad_block(m, &n);
        CHECK_EQ(n, 49);
        ddpc_optim_options o = ddpc_optim_options_default((ddpc_optim_kind)kind);
        o.lr = 0.05f;
        o.weight_decay = 0.1f;
        ddpc_optim *opt;
        CHECK_OK(ddpc_optim_create(m, &o, &opt));
        double rw[49], rm[49] = { 0 }, rv[49] = { 0 };
        for (size_t i = 0; i < n; i++) rw[i] = w[i];
        ddpc_rng r;
        ddpc_rng_seed(&r, 77);
        for (int t = 1; t <= 4; t++) {
            fill_randn(&r, g, n, 1.0f);
            CHECK_OK(ddpc_optim_step(opt));
            double bc1 = 1 - pow(0.9, t), bc2 = 1 - pow(0.999, t);
            for (size_t i = 0; i < n; i++) {
                double gi = g[i];
                if (kind == DDPC_OPTIM_ADAMW)
                    rw[i] *= 1 - 0.05 * 0.1;
                else
                    gi += 0.1 * rw[i];
                rm[i] = 0.9 * rm[i] + 0.1 * gi;
                rv[i] = 0.999 * rv[i] + 0.001 * gi * gi;
                rw[i] -= 0.05 / bc1 * rm[i] / (sqrt(rv[i]) / sqrt(bc2) + 1e-8);
                CHECK_MSG(fabs(w[i] - rw[i]) < 1e-5, "%s step %d w[%zu] = %.8g, want %.8g",
                          ddpc_optim_kind_name((ddpc_optim_kind)kind), t, i, w[i], rw[i]);
            }
        }
        ddpc_optim_destroy(opt);
        ddpc_model_destroy(m);
    }
}

/* ReLU forward and backward element by element, n = 37 (vector body and tail). */
TEST(nn_relu_values) {
    enum { N = 37 };
    ddpc_model *m;
    ddpc_model_options mo = ddpc_model_options_default();
    mo.seed = 0;
    CHECK_OK(ddpc_model_create(DDPC_LAYERS(ddpc_input(1, 1, N), linear_nobias(N, N), ddpc_relu()),
                               &mo, &m));
    const ddpc_param *W = ddpc_model_param(m, 0);
    memset(W->data, 0, W->numel * sizeof(float));
    for (int i = 0; i < N; i++) W->data[i * N + i] = 1.0f; /* identity */
    float x[N], g[N];
    for (int i = 0; i < N; i++) {
        x[i] = (float)(i % 5) - 2.0f + (i == 7 ? -0.0f : 0.0f); /* -2..2, zeros included */
        g[i] = (float)i + 1;
    }
    const float *out;
    CHECK_OK(ddpc_model_forward(m, x, 1, &out));
    for (int i = 0; i < N; i++) CHECK_NEAR(out[i], x[i] > 0 ? x[i] : 0, 0);
    ddpc_model_zero_grad(m);
    CHECK_OK(backward_with(m, g, N));
    /* dW[i][i] = g[i] * x[i] where x[i] > 0, else 0 */
    for (int i = 0; i < N; i++) CHECK_NEAR(W->grad[i * N + i], x[i] > 0 ? g[i] * x[i] : 0, 1e-6);
    ddpc_model_destroy(m);
}
