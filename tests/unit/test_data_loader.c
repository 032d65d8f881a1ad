/* test_data_loader.c — the prefetching loader: batches in the sampler's order, prefetch,
 * errors and deadlines. */
#include "data_fixtures.h"

/* --------------------------------------------------------------- loader */

/* A synthetic dataset of n <= 256 samples of 3x5 pixels: label i, pixel j
 * of sample i = (i * 31 + j * 7) & 255, so a batch shows which samples it holds. */
static ddpc_dataset *synth(int n) {
    ddpc_dataset *ds = calloc(1, sizeof *ds);
    ds->n = n;
    ds->rows = 3;
    ds->cols = 5;
    ds->images = malloc((size_t)n * 15);
    ds->labels = malloc((size_t)n);
    for (int i = 0; i < n; i++) {
        ds->labels[i] = (uint8_t)i;
        for (int j = 0; j < 15; j++) ds->images[i * 15 + j] = (uint8_t)((i * 31 + j * 7) & 255);
    }
    ds->num_classes = n;
    return ds;
}

/* Runs one epoch and checks that the batches are the order's samples in
 * order, transformed, with the right sizes and count. */
static void check_epoch(ddpc_loader *l, const ddpc_dataset *ds, const int64_t *order, size_t len,
                        int bs, int drop_last, float mean, float std) {
    size_t want_nb = drop_last ? len / (size_t)bs : (len + (size_t)bs - 1) / (size_t)bs;
    CHECK_EQ(ddpc_loader_num_batches(l), want_nb);
    size_t pos = 0, nb = 0;
    for (;;) {
        const ddpc_batch *b = (const ddpc_batch *)1;
        CHECK_OK(ddpc_loader_next(l, &b));
        if (!b) break;
        nb++;
        CHECK(nb <= want_nb);
        size_t want = len - pos < (size_t)bs ? len - pos : (size_t)bs;
        CHECK_EQ(b->size, want);
        CHECK_EQ(b->index, nb - 1); /* enumerate(loader)'s count */
        for (int i = 0; i < b->size; i++, pos++) {
            int64_t s = order[pos];
            CHECK_EQ(b->y[i], ds->labels[s]);
            for (int j = 0; j < 15; j += 7) {
                float w = ((float)ds->images[s * 15 + j] / 255.0f - mean) / std;
                CHECK_MSG(b->x[i * 15 + j] == w, "batch %zu row %d px %d: %g, want %g", nb, i, j,
                          (double)b->x[i * 15 + j], (double)w);
            }
        }
    }
    CHECK_EQ(nb, want_nb);
    CHECK_EQ(pos, drop_last ? want_nb * (size_t)bs : len);
    const ddpc_batch *b = (const ddpc_batch *)1;
    CHECK_OK(ddpc_loader_next(l, &b)); /* still the end */
    CHECK(b == NULL);
}

TEST(data_loader_order_sizes_drop_last) {
    ddpc_dataset *ds = synth(250);
    int64_t ident[250];
    for (int i = 0; i < 250; i++) ident[i] = i;
    const int bss[] = { 1, 7, 32, 250, 300 };
    for (size_t a = 0; a < sizeof bss / sizeof bss[0]; a++)
        for (int dl = 0; dl < 2; dl++)
            for (int pf = 0; pf <= 3; pf += 1 + (pf == 1)) {
                /* all samples in order */
                ddpc_loader *l = NULL;
                CHECK_OK(mk_loader(ds, NULL, bss[a], dl, 0.5f, 0.5f, pf, &l));
                CHECK_OK(ddpc_loader_start_epoch(l, 0));
                check_epoch(l, ds, ident, 250, bss[a], dl, 0.5f, 0.5f);
                ddpc_loader_destroy(l);
                /* a shard of a shuffled sampler, two epochs */
                ddpc_sampler *s = NULL;
                CHECK_OK(mk_sampler(250, 3, 1, 1, 5, 0, &s));
                CHECK_OK(mk_loader(ds, s, bss[a], dl, 0.1307f, 0.3081f, pf, &l));
                for (uint64_t e = 0; e < 2; e++) {
                    CHECK_OK(ddpc_loader_start_epoch(l, e));
                    check_epoch(l, ds, ddpc_sampler_indices(s), ddpc_sampler_len(s), bss[a], dl,
                                0.1307f, 0.3081f);
                }
                ddpc_loader_destroy(l);
                ddpc_sampler_destroy(s);
            }
    ddpc_dataset_destroy(ds);
}

TEST(data_loader_args) {
    ddpc_dataset *ds = synth(10);
    ddpc_loader *l = NULL;
    CHECK_STATUS(mk_loader(ds, NULL, 0, 0, 0.5f, 0.5f, 1, &l), DDPC_ERR_INVALID_ARG);
    CHECK_CONTAINS(ddpc_last_error(), "batch_size=0");
    CHECK_STATUS(mk_loader(ds, NULL, 4, 0, 0.5f, 0.5f, -1, &l), DDPC_ERR_INVALID_ARG);
    CHECK_CONTAINS(ddpc_last_error(), "prefetch=-1");
    CHECK_STATUS(mk_loader(ds, NULL, 4, 0, 0.5f, 0.0f, 1, &l), DDPC_ERR_INVALID_ARG);
    CHECK_CONTAINS(ddpc_last_error(), "std=0");
    CHECK_STATUS(mk_loader(NULL, NULL, 4, 0, 0.5f, 0.5f, 1, &l), DDPC_ERR_INVALID_ARG);
    ddpc_sampler *s = NULL;
    CHECK_OK(mk_sampler(11, 1, 0, 1, 0, 0, &s));
    CHECK_STATUS(mk_loader(ds, s, 4, 0, 0.5f, 0.5f, 1, &l), DDPC_ERR_INVALID_ARG);
    CHECK_CONTAINS(ddpc_last_error(), "11 samples");
    CHECK(l == NULL);
    CHECK_OK(mk_loader(ds, NULL, 4, 0, 0.5f, 0.5f, 2, &l));
    const ddpc_batch *b;
    CHECK_STATUS(ddpc_loader_next(l, &b), DDPC_ERR_INVALID_ARG);
    CHECK_CONTAINS(ddpc_last_error(), "ddpc_loader_start_epoch");
    ddpc_loader_destroy(l);
    /* a bad DDPC_DATA_TIMEOUT is named */
    setenv("DDPC_DATA_TIMEOUT", "soon", 1);
    CHECK_STATUS(mk_loader(ds, NULL, 4, 0, 0.5f, 0.5f, 2, &l), DDPC_ERR_ENV);
    CHECK_CONTAINS(ddpc_last_error(), "DDPC_DATA_TIMEOUT");
    unsetenv("DDPC_DATA_TIMEOUT");
    ddpc_loader_destroy(NULL);
    ddpc_sampler_destroy(s);
    /* an empty shard (drop_last with more replicas than samples): no batches */
    CHECK_OK(mk_sampler(5, 8, 7, 1, 0, 1, &s));
    CHECK_EQ(ddpc_sampler_len(s), 0);
    for (int pf = 0; pf < 3; pf += 2) {
        CHECK_OK(mk_loader(ds, s, 4, 0, 0.5f, 0.5f, pf, &l));
        CHECK_EQ(ddpc_loader_num_batches(l), 0);
        CHECK_OK(ddpc_loader_start_epoch(l, 3));
        b = (const ddpc_batch *)1;
        CHECK_OK(ddpc_loader_next(l, &b));
        CHECK(b == NULL);
        ddpc_loader_destroy(l);
    }
    ddpc_sampler_destroy(s);
    ddpc_dataset_destroy(ds);
}

/* Copies a whole epoch's batches (x and y) into one buffer. */
static size_t epoch_bytes(ddpc_loader *l, uint64_t epoch, size_t d, float *x, int32_t *y) {
    CHECK_OK(ddpc_loader_start_epoch(l, epoch));
    size_t pos = 0;
    const ddpc_batch *b;
    for (;;) {
        CHECK_OK(ddpc_loader_next(l, &b));
        if (!b) break;
        memcpy(x + pos * d, b->x, (size_t)b->size * d * sizeof(float));
        memcpy(y + pos, b->y, (size_t)b->size * sizeof(int32_t));
        pos += (size_t)b->size;
    }
    return pos;
}

/* On the real training set: prefetch 0 and 4 give the same bytes; two
 * epochs differ; the shard's labels are those the sampler names. */
TEST_T(data_loader_prefetch_identical_real, 120) {
    if (!have_fmnist()) SKIP("%s not installed", FMNIST);
    ddpc_dataset *ds = NULL;
    CHECK_OK(ddpc_dataset_create_mnist(FMNIST, "train", &ds));
    const size_t d = 784, n = 30000;
    float *x0 = malloc(n * d * sizeof(float)), *x1 = malloc(n * d * sizeof(float));
    int32_t *y0 = malloc(n * sizeof(int32_t)), *y1 = malloc(n * sizeof(int32_t));
    int32_t *ylab0 = malloc(n * sizeof(int32_t));
    ddpc_sampler *s0 = NULL, *s1 = NULL;
    CHECK_OK(mk_sampler(60000, 2, 1, 1, 0, 0, &s0));
    CHECK_OK(mk_sampler(60000, 2, 1, 1, 0, 0, &s1));
    ddpc_loader *inl = NULL, *pre = NULL;
    CHECK_OK(mk_loader(ds, s0, 64, 0, 0.5f, 0.5f, 0, &inl));
    CHECK_OK(mk_loader(ds, s1, 64, 0, 0.5f, 0.5f, 4, &pre));
    CHECK_EQ(ddpc_loader_num_batches(pre), 469); /* ceil(30000 / 64) */
    for (uint64_t e = 0; e < 2; e++) {
        CHECK_EQ(epoch_bytes(inl, e, d, x0, y0), n);
        CHECK_EQ(epoch_bytes(pre, e, d, x1, y1), n);
        CHECK(memcmp(x0, x1, n * d * sizeof(float)) == 0);
        CHECK(memcmp(y0, y1, n * sizeof(int32_t)) == 0);
        const int64_t *ix = ddpc_sampler_indices(s1);
        for (size_t i = 0; i < n; i += 997) {
            CHECK_EQ(y1[i], ds->labels[ix[i]]);
            CHECK(x1[i * d + 400] == ((float)ds->images[ix[i] * d + 400] / 255.0f - 0.5f) / 0.5f);
        }
        if (e == 0) memcpy(ylab0, y1, n * sizeof(int32_t)); /* keep epoch 0's labels */
    }
    size_t same = 0;
    for (size_t i = 0; i < n; i++) same += ylab0[i] == y1[i];
    CHECK(same < n / 5); /* labels agree by chance about 1 in 10 */
    ddpc_loader_destroy(inl);
    ddpc_loader_destroy(pre);
    ddpc_sampler_destroy(s0);
    ddpc_sampler_destroy(s1);
    ddpc_dataset_destroy(ds);
    free(x0);
    free(x1);
    free(y0);
    free(y1);
    free(ylab0);
}

/* A caller that sometimes takes its next batch at once and sometimes only
 * after 1 ms, longer than the thread watches for it before sleeping: every
 * hand-over path (the batch ready, the caller's watch, the caller's sleep;
 * the thread's watch and its sleep until the caller drains the ring) runs,
 * and the batches are those of the inline loader, in order. A lost wake-up
 * costs 0.5 s (the thread's timed wait), so the deadline catches a few. */
TEST_T(data_loader_prefetch_slow_and_fast_caller, 60) {
    ddpc_dataset *ds = synth(300);
    const size_t d = 15;
    for (int prefetch = 1; prefetch <= 3; prefetch++) {
        ddpc_sampler *s0 = NULL, *s1 = NULL;
        CHECK_OK(mk_sampler(300, 1, 0, 1, 5, 0, &s0));
        CHECK_OK(mk_sampler(300, 1, 0, 1, 5, 0, &s1));
        ddpc_loader *inl = NULL, *pre = NULL;
        CHECK_OK(mk_loader(ds, s0, 7, 0, 0.5f, 0.5f, 0, &inl));
        CHECK_OK(mk_loader(ds, s1, 7, 0, 0.5f, 0.5f, prefetch, &pre));
        double t0 = ddpc__now();
        for (uint64_t e = 0; e < 2; e++) {
            CHECK_OK(ddpc_loader_start_epoch(inl, e));
            CHECK_OK(ddpc_loader_start_epoch(pre, e));
            size_t nb = 0;
            for (;;) {
                const ddpc_batch *a, *b;
                if (nb % 3 != 0) ddpc__sleep(0.001); /* slow twice, fast once */
                CHECK_OK(ddpc_loader_next(inl, &a));
                CHECK_OK(ddpc_loader_next(pre, &b));
                CHECK((a == NULL) == (b == NULL));
                if (!a) break;
                CHECK_EQ(a->size, b->size);
                CHECK(memcmp(a->x, b->x, (size_t)a->size * d * sizeof(float)) == 0);
                CHECK(memcmp(a->y, b->y, (size_t)a->size * sizeof(int32_t)) == 0);
                nb++;
            }
            CHECK_EQ(nb, 43); /* ceil(300 / 7) */
        }
        double secs = ddpc__now() - t0;
        CHECK_MSG(secs < 4.0 * t_slow(),
                  "prefetch %d: 2 epochs of 43 batches took %.2f s (lost wake-ups?)", prefetch,
                  secs);
        ddpc_loader_destroy(inl);
        ddpc_loader_destroy(pre);
        ddpc_sampler_destroy(s0);
        ddpc_sampler_destroy(s1);
    }
    ddpc_dataset_destroy(ds);
}

/* start_epoch mid-way (while the thread is decoding ahead) starts cleanly at
 * batch 0 of the new epoch; free mid-epoch joins the thread. */
TEST_T(data_loader_restart_mid_epoch, 120) {
    ddpc_dataset *ds = synth(256);
    ddpc_sampler *s = NULL;
    CHECK_OK(mk_sampler(256, 2, 0, 1, 3, 0, &s));
    ddpc_loader *l = NULL;
    CHECK_OK(mk_loader(ds, s, 5, 0, 0.5f, 0.5f, 3, &l));
    srand(7);
    for (int it = 0; it < 300; it++) {
        uint64_t e = (uint64_t)(rand() % 4);
        CHECK_OK(ddpc_loader_start_epoch(l, e));
        int take = rand() % 30;
        const int64_t *ix = ddpc_sampler_indices(s);
        for (int k = 0; k < take; k++) {
            const ddpc_batch *b;
            CHECK_OK(ddpc_loader_next(l, &b));
            if (!b) {
                CHECK_EQ(k, 26); /* ceil(128 / 5) */
                break;
            }
            for (int i = 0; i < b->size; i++) CHECK_EQ(b->y[i], ix[k * 5 + i]);
        }
        if (it % 50 == 0) { /* and one full epoch now and then */
            CHECK_OK(ddpc_loader_start_epoch(l, e));
            check_epoch(l, ds, ix, 128, 5, 0, 0.5f, 0.5f);
        }
    }
    /* free while the thread is mid-epoch */
    for (int it = 0; it < 50; it++) {
        ddpc_loader *m = NULL;
        CHECK_OK(mk_loader(ds, NULL, 1, 0, 0.5f, 0.5f, 1 + it % 8, &m));
        CHECK_OK(ddpc_loader_start_epoch(m, 0));
        const ddpc_batch *b;
        for (int k = 0; k < it % 5; k++) CHECK_OK(ddpc_loader_next(m, &b));
        ddpc_loader_destroy(m);
    }
    ddpc_loader_destroy(l);
    ddpc_sampler_destroy(s);
    ddpc_dataset_destroy(ds);
}

/* The wide (AVX2) path and the table agree with plain float32 arithmetic
 * for every pixel value, at 28x28 (784 = 98 x 8) and at an odd width. */
TEST(data_transform_all_values_paths) {
    const int dims[2][2] = { { 28, 28 }, { 7, 5 } };
    const float ms[][2] = {
        { 0.5f, 0.5f }, { 0.1307f, 0.3081f }, { 0.2860f, 0.3530f }, { -1.0f, 3.0f }, { 0.0f, 1e-3f }
    };
    for (int g = 0; g < 2; g++) {
        ddpc_dataset ds = { .rows = dims[g][0], .cols = dims[g][1] };
        int d = ds.rows * ds.cols;
        ds.n = (256 + d - 1) / d + 1;
        ds.images = malloc((size_t)ds.n * (size_t)d);
        for (int i = 0; i < ds.n * d; i++) ds.images[i] = (uint8_t)((i * 13 + i / 256) & 255);
        int64_t *idx = malloc((size_t)ds.n * sizeof *idx);
        for (int i = 0; i < ds.n; i++) idx[i] = ds.n - 1 - i;
        float *out = malloc((size_t)ds.n * (size_t)d * sizeof(float));
        for (size_t m = 0; m < sizeof ms / sizeof ms[0]; m++) {
            ddpc_transform_batch(&ds, idx, ds.n, ms[m][0], ms[m][1], out);
            for (int i = 0; i < ds.n; i++)
                for (int j = 0; j < d; j++) {
                    float x = (float)ds.images[idx[i] * d + j] / 255.0f;
                    float w = (x - ms[m][0]) / ms[m][1];
                    CHECK_MSG(memcmp(&out[i * d + j], &w, 4) == 0,
                              "%dx%d mean %g std %g px %d: %a, want %a", ds.rows, ds.cols,
                              (double)ms[m][0], (double)ms[m][1], ds.images[idx[i] * d + j],
                              (double)out[i * d + j], (double)w);
                }
        }
        free(out);
        free(idx);
        free(ds.images);
    }
}

/* Bit-identical to torchvision's ToTensor + Normalize, done in torch. */
TEST_T(data_transform_vs_torch, 120) {
    const char *py = "import sys, struct\n"
                     "try:\n"
                     "    import torch\n"
                     "except Exception as e:\n"
                     "    print('no torch:', e); sys.exit(77)\n"
                     "x = torch.arange(256, dtype=torch.uint8)\n"
                     "for mean, std in ((0.5, 0.5), (0.1307, 0.3081), (0.2860, 0.3530)):\n"
                     "    y = x.to(torch.float32).div(255)\n"
                     "    y = y.sub_(torch.as_tensor(mean, "
                     "dtype=torch.float32)).div_(torch.as_tensor(std, dtype=torch.float32))\n"
                     "    print(' '.join('%08x' % struct.unpack('<I', struct.pack('<f', v))[0] for "
                     "v in y.tolist()))\n";
    write_file(tpath("tf.py"), py, strlen(py), 0);
    char cmd[600];
    static char out[65536];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s", tpath("tf.py"));
    int rc = t_run_cmd(cmd, 100, out, sizeof out);
    if (rc == 77 || rc == 127) {
        rm_tmpdir();
        SKIP("PyTorch not available for /usr/bin/python3: %s", out);
    }
    CHECK_MSG(rc == 0, "%s: exit %d: %s", cmd, rc, out);
    const float ms[3][2] = { { 0.5f, 0.5f }, { 0.1307f, 0.3081f }, { 0.2860f, 0.3530f } };
    ddpc_dataset ds = { .n = 1, .rows = 16, .cols = 16 };
    uint8_t px[256];
    for (int v = 0; v < 256; v++) px[v] = (uint8_t)v;
    ds.images = px;
    int64_t zero = 0;
    char *p = out;
    for (int m = 0; m < 3; m++) {
        float got[256];
        ddpc_transform_batch(&ds, &zero, 1, ms[m][0], ms[m][1], got);
        for (int v = 0; v < 256; v++) {
            char *end;
            unsigned long bits = strtoul(p, &end, 16);
            CHECK_MSG(end != p, "torch output too short: %s", out);
            p = end;
            uint32_t mine;
            memcpy(&mine, &got[v], 4);
            CHECK_MSG(mine == bits, "mean %g std %g v %d: %08x, torch %08lx", (double)ms[m][0],
                      (double)ms[m][1], v, mine, bits);
        }
    }
    rm_tmpdir();
}
