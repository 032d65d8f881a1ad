/* test_ddp.c — DDP: N ranks at batch b equal 1 rank at batch N*b; no_sync
 * accumulation; compression; buckets; a model mismatch is named. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ddp/ddp_test.h"
#include "ddpc/ddp.h"
#include "ddpc/nn.h"
#include "test.h"

enum { IN = 20, HID = 16, OUT = 4, B = 6, STEPS = 5, MICRO = 2 };

/* A small MLP: two Linear layers, so there are several buckets. */
static ddpc_model *small_mlp(int hidden) {
    ddpc_model *m;
    ddpc_model_options mo = ddpc_model_options_default();
    mo.seed = 7;
    CHECK_OK(ddpc_model_create(DDPC_LAYERS(ddpc_input(1, 1, IN), ddpc_linear(IN, hidden),
                                           ddpc_relu(), ddpc_linear(hidden, OUT)),
                               &mo, &m));
    return m;
}

/* Sample i of a fixed synthetic data set, the same in every process. */
static void sample(int i, float *x, int32_t *y) {
    for (int k = 0; k < IN; k++) x[k] = sinf(0.37f * (float)(i * IN + k)) * 2.0f;
    *y = (i * 7 + 3) % OUT;
}

typedef struct {
    int port;
    int micro; /* micro-batches per step (no_sync for all but the last) */
    ddpc_compress compress;
    ddpc_overlap overlap;
    const char *out; /* rank 0 writes its final parameters here */
} run_arg;

/* One training run: world ranks, rank r takes samples [r*B, (r+1)*B) of
 * each global batch of world*B. With world 1 and batch world*B this is the
 * reference. */
static void train(int rank, int world, int batch, const run_arg *a, ddpc_comm *comm) {
    ddpc_model *m = small_mlp(HID);
    if (rank != 0) { /* DDP must overwrite a rank's own start with rank 0's */
        size_t n;
        float *p = ddpc_model_param_block(m, &n);
        for (size_t k = 0; k < n; k++) p[k] += 0.5f;
    }
    ddpc_ddp *ddp = NULL;
    if (comm) {
        ddpc_ddp_options o = ddpc_ddp_options_default();
        o.first_bucket_mb = 60.0 * 4 / 1048576; /* 60 floats: two buckets */
        o.bucket_mb = 400.0 * 4 / 1048576;
        o.compress = a->compress;
        o.overlap = a->overlap;
        CHECK_OK(ddpc_ddp_create(comm, m, &o, &ddp));
        CHECK(ddpc_ddp_num_buckets(ddp) >= 2);
        if (a->overlap != DDPC_OVERLAP_AUTO)
            CHECK_EQ(ddpc_ddp_overlaps(ddp), a->overlap == DDPC_OVERLAP_ON);
    }
    ddpc_optim_options oo = ddpc_optim_options_default(DDPC_OPTIM_SGD);
    oo.lr = 0.1f;
    oo.momentum = 0.9f;
    ddpc_optim *opt;
    CHECK_OK(ddpc_optim_create(m, &oo, &opt));
    float x[B * 8 * IN];
    int32_t y[B * 8];
    int global = world * batch; /* samples per micro-batch over all ranks */
    for (int step = 0; step < STEPS; step++) {
        ddpc_model_zero_grad(m);
        for (int mb = 0; mb < a->micro; mb++) {
            if (ddp) ddpc_ddp_set_sync(ddp, mb == a->micro - 1);
            int base = (step * a->micro + mb) * global + rank * batch;
            for (int i = 0; i < batch; i++) sample(base + i, x + i * IN, y + i);
            const float *logits;
            CHECK_OK(ddpc_model_forward(m, x, batch, &logits));
            CHECK_OK(ddpc_model_loss(m, DDPC_CROSS_ENTROPY, y, NULL));
            CHECK_OK(ddpc_model_backward(m)); /* under DDP: returns with averaged gradients */
        }
        CHECK_OK(ddpc_optim_step(opt));
    }
    if (rank == 0) {
        size_t n;
        float *p = ddpc_model_param_block(m, &n);
        FILE *f = fopen(a->out, "wb");
        CHECK(f && fwrite(p, sizeof *p, n, f) == n);
        fclose(f);
    }
    ddpc_ddp_destroy(ddp);
    ddpc_optim_destroy(opt);
    ddpc_model_destroy(m);
}

static void ddp_rank(int rank, int world, void *arg) {
    const run_arg *a = arg;
    t_set_rank_env(rank, world, a->port);
    ddpc_comm *c;
    CHECK_OK(ddpc_comm_create_env(&c));
    train(rank, world, B, a, c);
    CHECK_OK(ddpc_comm_destroy(c));
}

static size_t read_params(const char *path, float *p, size_t cap) {
    FILE *f = fopen(path, "rb");
    CHECK_MSG(f, "no parameters written to %s", path);
    size_t n = fread(p, sizeof *p, cap, f);
    fclose(f);
    return n;
}

/* Runs world ranks with DDP and one process at batch world*B; compares. */
static void equivalence(int world, int micro, ddpc_compress compress, ddpc_overlap overlap,
                        double tol) {
    char dist[64], ref[64];
    snprintf(dist, sizeof dist, "/tmp/ddpc_ddp_%d_dist.bin", (int)getpid());
    snprintf(ref, sizeof ref, "/tmp/ddpc_ddp_%d_ref.bin", (int)getpid());
    run_arg a = { t_free_port(), micro, compress, overlap, dist };
    t_run_ranks(world, 60, ddp_rank, &a);
    run_arg r = { 0, micro, DDPC_COMPRESS_NONE, overlap, ref };
    train(0, 1, world * B, &r, NULL);
    static float pd[4096], pr[4096];
    size_t nd = read_params(dist, pd, 4096), nr = read_params(ref, pr, 4096);
    unlink(dist);
    unlink(ref);
    CHECK_EQ(nd, nr);
    CHECK(nd > 0);
    double worst = 0;
    for (size_t k = 0; k < nd; k++) {
        double d = fabs((double)pd[k] - (double)pr[k]) / (1.0 + fabs((double)pr[k]));
        if (d > worst) worst = d;
    }
    CHECK_MSG(worst <= tol,
              "world %d: parameters differ from the single-process run by %.3g (> %.3g)", world,
              worst, tol);
}

/* With buckets reduced by the progress thread (overlap on), then by
 * backward's thread (off); auto picks one of the two for this host. */
static void equivalence_both(int world, int micro, ddpc_compress compress, double tol) {
    equivalence(world, micro, compress, DDPC_OVERLAP_ON, tol);
    equivalence(world, micro, compress, DDPC_OVERLAP_OFF, tol);
}

TEST_T(ddp_equivalence_2_ranks, 90) { equivalence_both(2, 1, DDPC_COMPRESS_NONE, 1e-5); }
TEST_T(ddp_equivalence_3_ranks, 90) { equivalence_both(3, 1, DDPC_COMPRESS_NONE, 1e-5); }
TEST_T(ddp_equivalence_4_ranks, 90) {
    equivalence(4, 1, DDPC_COMPRESS_NONE, DDPC_OVERLAP_AUTO, 1e-5);
}
TEST_T(ddp_no_sync_accumulation, 90) { equivalence_both(2, MICRO, DDPC_COMPRESS_NONE, 1e-5); }
/* float16 keeps 11 bits: after 5 steps the parameters stay within ~1e-2. */
TEST_T(ddp_compress_fp16, 90) { equivalence_both(2, 1, DDPC_COMPRESS_FP16, 2e-2); }
TEST_T(ddp_compress_bf16, 90) { equivalence_both(3, 1, DDPC_COMPRESS_BF16, 5e-2); }

/* Wraps DDP's hooks to look at the buckets as backward ends, before DDP's
 * backward_end runs. */
static struct {
    ddpc_model_hooks ddp; /* DDP's own hooks */
    ddpc_ddp *d;
    ddpc_comm *c;
    ddpc_model *m;
    int in_flight;     /* buckets in flight as backward ended */
    int check_buckets; /* also gather a checksum of bucket 0 and the last */
    float all[4];      /* {bucket 0, last} of rank 0, then of rank 1 */
} spy;

static void spy_grad_ready(void *ctx, int i) { spy.ddp.grad_ready(ctx, i); }

static ddpc_status spy_backward_end(void *ctx) {
    spy.in_flight = ddpc__ddp_buckets_in_flight(spy.d);
    if (spy.check_buckets) {
        size_t n, f0, c0, fl, cl;
        float *g = ddpc_model_grad_block(spy.m, &n), mine[2] = { 0, 0 };
        ddpc_ddp_bucket_range(spy.d, 0, &f0, &c0);
        ddpc_ddp_bucket_range(spy.d, ddpc_ddp_num_buckets(spy.d) - 1, &fl, &cl);
        for (size_t k = 0; k < c0; k++) mine[0] += g[f0 + k] * (float)(k + 1);
        for (size_t k = 0; k < cl; k++) mine[1] += g[fl + k] * (float)(k + 1);
        CHECK_OK(ddpc_allgather(spy.c, mine, spy.all, 2, DDPC_FLOAT32));
    }
    return spy.ddp.backward_end(ctx);
}

static void spy_install(ddpc_model *m, ddpc_ddp *d, ddpc_comm *c) {
    memset(&spy, 0, sizeof spy);
    spy.ddp = ddpc_model_hooks_of(m);
    spy.d = d;
    spy.c = c;
    spy.m = m;
    ddpc_model_hooks h = { spy_grad_ready, spy_backward_end, spy.ddp.ctx };
    ddpc_model_set_hooks(m, &h);
}

/* The buckets cover the gradient block exactly, in reverse order. */
static void bucket_rank(int rank, int world, void *arg) {
    t_set_rank_env(rank, world, *(int *)arg);
    ddpc_comm *c;
    CHECK_OK(ddpc_comm_create_env(&c));
    ddpc_model *m = small_mlp(HID);
    ddpc_ddp_options o = ddpc_ddp_options_default();
    o.first_bucket_mb = 20.0 * 4 / 1048576;
    o.bucket_mb = 100.0 * 4 / 1048576;
    o.overlap = DDPC_OVERLAP_ON;
    ddpc_ddp *d;
    CHECK_OK(ddpc_ddp_create(c, m, &o, &d));
    size_t n, end;
    ddpc_model_grad_block(m, &n);
    end = n;
    for (int b = 0; b < ddpc_ddp_num_buckets(d); b++) {
        size_t first, count;
        ddpc_ddp_bucket_range(d, b, &first, &count);
        CHECK_EQ(first + count, end); /* contiguous, from the end of the block down */
        end = first;
    }
    CHECK_EQ(end, 0);
    /* backward issues every bucket's allreduce as its gradients become final,
     * but the last (the end of backward reduces it on the calling thread,
     * then waits for all); under no_sync it issues none. A spy wrapping DDP's
     * backward_end hook sees the buckets in flight as backward ends. */
    float x[2 * IN];
    int32_t y[2];
    for (int i = 0; i < 2; i++) sample(i + rank * 2, x + i * IN, y + i);
    spy_install(m, d, c);
    for (int pass = 0; pass < 2; pass++) {
        ddpc_ddp_set_sync(d, pass == 1);
        CHECK_OK(ddpc_model_forward(m, x, 2, NULL));
        CHECK_OK(ddpc_model_loss(m, DDPC_CROSS_ENTROPY, y, NULL));
        CHECK_EQ(ddpc__ddp_buckets_in_flight(d), 0);
        CHECK_OK(ddpc_model_backward(m));
        CHECK_EQ(spy.in_flight, pass == 1 ? ddpc_ddp_num_buckets(d) - 1 : 0);
        CHECK_EQ(ddpc__ddp_buckets_in_flight(d), 0);
    }
    /* sync after backward is harmless: the gradients stay as they are */
    float *g = ddpc_model_grad_block(m, &n), *before = malloc(n * sizeof(float));
    memcpy(before, g, n * sizeof(float));
    CHECK_OK(ddpc_ddp_sync(d));
    CHECK(memcmp(before, g, n * sizeof(float)) == 0);
    free(before);
    /* parameters, last first: 2.bias (4 floats), 2.weight (64), 0.bias (16),
     * 0.weight (320); a bucket closes once it holds at least its limit */
    CHECK_EQ(ddpc_ddp_num_buckets(d), 2);
    ddpc_ddp_destroy(d);
    /* without overlap, backward itself has reduced every bucket but the last
     * as it ends (seen by the spy): bucket 0 is the same on every rank, the
     * last is not (each rank saw other samples) until DDP's hook has run */
    o.overlap = DDPC_OVERLAP_OFF;
    CHECK_OK(ddpc_ddp_create(c, m, &o, &d));
    CHECK_EQ(ddpc_ddp_overlaps(d), 0);
    spy_install(m, d, c);
    spy.check_buckets = 1;
    ddpc_model_zero_grad(m);
    CHECK_OK(ddpc_model_forward(m, x, 2, NULL));
    CHECK_OK(ddpc_model_loss(m, DDPC_CROSS_ENTROPY, y, NULL));
    CHECK_OK(ddpc_model_backward(m));
    CHECK_EQ(spy.in_flight, 0);
    CHECK_MSG(spy.all[0] == spy.all[2], "bucket 0 not reduced by backward: %g vs %g", spy.all[0],
              spy.all[2]);
    CHECK_MSG(spy.all[1] != spy.all[3], "the last bucket was reduced before the end: %g",
              spy.all[1]);
    float mine[2] = { 0, 0 }, all[2 * 2];
    size_t fl, cl;
    ddpc_ddp_bucket_range(d, ddpc_ddp_num_buckets(d) - 1, &fl, &cl);
    for (size_t k = 0; k < cl; k++) mine[1] += g[fl + k] * (float)(k + 1);
    CHECK_OK(ddpc_allgather(c, mine, all, 2, DDPC_FLOAT32));
    CHECK_MSG(all[1] == all[3], "the last bucket differs after backward: %g vs %g", all[1], all[3]);
    ddpc_ddp_destroy(d);
    /* the layouts PyTorch 1.13 gives for the same sizes and limits:
     * torch.distributed._compute_bucket_assignment_by_size(params, [first, rest], ...)
     * [80, 400] bytes -> [[0, 1], [2, 3]]; [16, 400] -> [[0], [1, 2, 3]];
     * [16, 64] -> [[0], [1], [2], [3]] */
    static const struct {
        double first_b, rest_b;
        int n;
        size_t counts[4];
    } want[] = { { 80, 400, 2, { 68, 336 } },
                 { 16, 400, 2, { 4, 400 } },
                 { 16, 64, 4, { 4, 64, 16, 320 } } };
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        o.first_bucket_mb = want[k].first_b / 1048576;
        o.bucket_mb = want[k].rest_b / 1048576;
        CHECK_OK(ddpc_ddp_create(c, m, &o, &d));
        CHECK_EQ(ddpc_ddp_num_buckets(d), want[k].n);
        for (int b = 0; b < want[k].n && b < ddpc_ddp_num_buckets(d); b++) {
            size_t first, count;
            ddpc_ddp_bucket_range(d, b, &first, &count);
            CHECK_EQ(count, want[k].counts[b]);
        }
        ddpc_ddp_destroy(d);
    }
    ddpc_model_destroy(m);
    CHECK_OK(ddpc_comm_destroy(c));
}

TEST(ddp_bucket_layout_and_overlap) {
    int port = t_free_port();
    t_run_ranks(2, 30, bucket_rank, &port);
}

/* Ranks whose models differ: every rank gets an error naming the parameter. */
static void mismatch_rank(int rank, int world, void *arg) {
    t_set_rank_env(rank, world, *(int *)arg);
    ddpc_comm *c;
    CHECK_OK(ddpc_comm_create_env(&c));
    ddpc_model *m = small_mlp(rank == 2 ? HID + 1 : HID);
    ddpc_ddp *d = NULL;
    CHECK_STATUS(ddpc_ddp_create(c, m, NULL, &d), DDPC_ERR_MISMATCH);
    CHECK(d == NULL);
    CHECK_CONTAINS(ddpc_last_error(), "parameter 0");
    CHECK_CONTAINS(ddpc_last_error(), "rank(s) 2");
    ddpc_model_destroy(m);
    CHECK_OK(ddpc_comm_destroy(c));
}

TEST(ddp_model_mismatch_named) {
    int port = t_free_port();
    t_run_ranks(3, 30, mismatch_rank, &port);
}

/* Metric sums are global on every rank. */
static void metrics_rank(int rank, int world, void *arg) {
    t_set_rank_env(rank, world, *(int *)arg);
    ddpc_comm *c;
    CHECK_OK(ddpc_comm_create_env(&c));
    ddpc_model *m = small_mlp(HID);
    ddpc_ddp *d;
    CHECK_OK(ddpc_ddp_create(c, m, NULL, &d));
    double v[3] = { rank + 0.5, 10.0 * rank, 1 };
    CHECK_OK(ddpc_ddp_allreduce_sum(d, v, 3));
    CHECK_NEAR(v[0], world * (world - 1) / 2.0 + 0.5 * world, 1e-12);
    CHECK_NEAR(v[1], 10.0 * world * (world - 1) / 2.0, 1e-12);
    CHECK_NEAR(v[2], world, 0);
    ddpc_ddp_destroy(d);
    ddpc_model_destroy(m);
    CHECK_OK(ddpc_comm_destroy(c));
}

TEST(ddp_metric_sums) {
    int port = t_free_port();
    t_run_ranks(3, 30, metrics_rank, &port);
}

TEST(ddp_compress_and_overlap_parse) {
    ddpc_compress c;
    CHECK_OK(ddpc_compress_parse("bf16", &c));
    CHECK_EQ(c, DDPC_COMPRESS_BF16);
    CHECK_STATUS(ddpc_compress_parse("int4", &c), DDPC_ERR_INVALID_ARG);
    CHECK_CONTAINS(ddpc_last_error(), "int4");
    ddpc_overlap o;
    CHECK_OK(ddpc_overlap_parse("OFF", &o));
    CHECK_EQ(o, DDPC_OVERLAP_OFF);
    CHECK_OK(ddpc_overlap_parse("auto", &o));
    CHECK_EQ(o, DDPC_OVERLAP_AUTO);
    CHECK_STATUS(ddpc_overlap_parse("sometimes", &o), DDPC_ERR_INVALID_ARG);
    CHECK_CONTAINS(ddpc_last_error(), "sometimes");
}
