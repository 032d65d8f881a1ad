/* test_data_sampler.c — the distributed sampler: its properties, and its order against
 * PyTorch's DistributedSampler. */
#include "data_fixtures.h"

/* -------------------------------------------------------------- sampler */

/* Checks the sampler's contract for one (len, R, drop_last, shuffle, seed,
 * epoch): equal shares of the right size; the ranks' indices, interleaved,
 * form torch's padded list (a permutation of 0..len-1 followed by its head
 * repeated) or, with drop_last, a duplicate-free prefix of a permutation. */
static void check_shards(size_t len, int R, int drop_last, int shuffle, uint64_t seed,
                         uint64_t epoch) {
    size_t want =
        (drop_last && len % (size_t)R) ? len / (size_t)R : (len + (size_t)R - 1) / (size_t)R;
    size_t total = want * (size_t)R;
    int64_t *padded = malloc((total + 1) * sizeof *padded);
    for (int r = 0; r < R; r++) {
        ddpc_sampler *s = NULL;
        CHECK_OK(mk_sampler(len, R, r, shuffle, seed, drop_last, &s));
        ddpc_sampler_set_epoch(s, epoch);
        CHECK_EQ(ddpc_sampler_len(s), want);
        const int64_t *ix = ddpc_sampler_indices(s);
        for (size_t i = 0; i < want; i++) padded[(size_t)r + i * (size_t)R] = ix[i];
        ddpc_sampler_destroy(s);
    }
    size_t head = total < len ? total : len;
    char *seen = calloc(len + 1, 1);
    for (size_t j = 0; j < head; j++) {
        CHECK_MSG(padded[j] >= 0 && (size_t)padded[j] < len,
                  "len %zu R %d: index %lld out of range", len, R, (long long)padded[j]);
        CHECK_MSG(!seen[padded[j]], "len %zu R %d drop_last %d: index %lld twice", len, R,
                  drop_last, (long long)padded[j]);
        seen[padded[j]] = 1;
        if (!shuffle) CHECK_EQ(padded[j], (int64_t)j);
    }
    if (!drop_last) {
        for (size_t i = 0; i < len; i++)
            CHECK_MSG(seen[i], "len %zu R %d: index %zu not covered", len, R, i);
        for (size_t j = len; j < total; j++) CHECK_EQ(padded[j], padded[j % len]);
    } else {
        CHECK(total <= len);
        CHECK(len - total < (size_t)R);
    }
    free(seen);
    free(padded);
}

TEST(data_sampler_properties) {
    const size_t lens[] = { 0, 1, 2, 3, 5, 7, 10, 16, 17, 31, 100, 101, 1000, 4097 };
    const int reps[] = { 1, 2, 3, 4, 7, 8, 16 };
    for (size_t a = 0; a < sizeof lens / sizeof lens[0]; a++)
        for (size_t b = 0; b < sizeof reps / sizeof reps[0]; b++)
            for (int dl = 0; dl < 2; dl++)
                for (int sh = 0; sh < 2; sh++)
                    check_shards(lens[a], reps[b], dl, sh, 7 * a + b, (uint64_t)dl);
}

TEST(data_sampler_epochs_and_args) {
    ddpc_sampler *s = NULL;
    CHECK_STATUS(mk_sampler(10, 4, 4, 1, 0, 0, &s), DDPC_ERR_INVALID_ARG);
    CHECK_CONTAINS(ddpc_last_error(), "rank 4");
    CHECK_STATUS(mk_sampler(10, 4, -1, 1, 0, 0, &s), DDPC_ERR_INVALID_ARG);
    CHECK_CONTAINS(ddpc_last_error(), "rank -1");
    CHECK_STATUS(mk_sampler(10, 0, 0, 1, 0, 0, &s), DDPC_ERR_INVALID_ARG);
    CHECK_CONTAINS(ddpc_last_error(), "num_replicas=0");
    CHECK(s == NULL);
    /* reshuffle per epoch, same order again for the same epoch, ranks agree */
    const size_t n = 1000;
    CHECK_OK(mk_sampler(n, 1, 0, 1, 0, 0, &s));
    int64_t *e0 = malloc(n * sizeof *e0);
    memcpy(e0, ddpc_sampler_indices(s), n * sizeof *e0);
    ddpc_sampler_set_epoch(s, 1);
    const int64_t *e1 = ddpc_sampler_indices(s);
    size_t same = 0;
    long long sum0 = 0, sum1 = 0;
    for (size_t i = 0; i < n; i++) {
        same += e0[i] == e1[i];
        sum0 += e0[i];
        sum1 += e1[i];
    }
    CHECK(same < 20);
    CHECK_EQ(sum0, sum1);
    ddpc_sampler_set_epoch(s, 0);
    CHECK(memcmp(ddpc_sampler_indices(s), e0, n * sizeof *e0) == 0);
    /* the order depends on seed + epoch only, as torch's */
    ddpc_sampler *t = NULL;
    CHECK_OK(mk_sampler(n, 1, 0, 1, 1, 0, &t));
    ddpc_sampler_set_epoch(s, 1);
    CHECK(memcmp(ddpc_sampler_indices(s), ddpc_sampler_indices(t), n * sizeof *e0) == 0);
    ddpc_sampler_destroy(t);
    /* shuffle off: epoch does not matter */
    CHECK_OK(mk_sampler(n, 3, 2, 0, 0, 0, &t));
    ddpc_sampler_set_epoch(t, 5);
    CHECK_EQ(ddpc_sampler_len(t), 334);
    CHECK_EQ(ddpc_sampler_indices(t)[0], 2);
    CHECK_EQ(ddpc_sampler_indices(t)[333], 1); /* 2 + 333*3 = 1001 wraps to 1 */
    ddpc_sampler_destroy(t);
    ddpc_sampler_destroy(s);
    ddpc_sampler_destroy(NULL);
    free(e0);
}

/* A resume mid-epoch (set_start): with the first `start` positions of the
 * epoch done at world size R0, the ranks of any world size R take exactly
 * the positions left, each once (plus torch's padding from the epoch's
 * head); at R0 itself, the indices a sampler never stopped takes from
 * there. */
static void check_start(size_t len, int R0, int R, size_t start, int drop_last) {
    int64_t *perm = malloc((len + 1) * sizeof *perm);
    ddpc_randperm(len, 3 + 1, perm); /* seed 3, epoch 1 */
    size_t left = len - start;
    size_t want =
        (drop_last && left % (size_t)R) ? left / (size_t)R : (left + (size_t)R - 1) / (size_t)R;
    char *seen = calloc(len + 1, 1);
    size_t taken = 0;
    for (int r = 0; r < R; r++) {
        ddpc_sampler *s = NULL;
        CHECK_OK(mk_sampler(len, R, r, 1, 3, drop_last, &s));
        ddpc_sampler_set_epoch(s, 1);
        ddpc_sampler_set_start(s, start);
        CHECK_EQ(ddpc_sampler_len(s), want);
        const int64_t *ix = ddpc_sampler_indices(s);
        for (size_t i = 0; i < want; i++) {
            size_t j = start + (size_t)r + i * (size_t)R;
            CHECK_EQ(ix[i], perm[j % len]);
            if (j >= len) continue; /* padding: the epoch's head again, as torch pads */
            CHECK_MSG(!seen[ix[i]], "len %zu R %d start %zu: index %lld twice", len, R, start,
                      (long long)ix[i]);
            seen[ix[i]] = 1;
            taken++;
        }
        if (R == R0) { /* the same as a sampler never stopped, from step start / R */
            ddpc_sampler *u = NULL;
            CHECK_OK(mk_sampler(len, R, r, 1, 3, drop_last, &u));
            ddpc_sampler_set_epoch(u, 1);
            size_t skip = start / (size_t)R;
            CHECK_EQ(ddpc_sampler_len(u), skip + want);
            CHECK(memcmp(ddpc_sampler_indices(u) + skip, ix, want * sizeof *ix) == 0);
            ddpc_sampler_destroy(u);
        }
        ddpc_sampler_set_epoch(s, 1); /* clears the start */
        if (ddpc_sampler_len(s)) CHECK_EQ(ddpc_sampler_indices(s)[0], perm[(size_t)r % len]);
        ddpc_sampler_destroy(s);
    }
    if (!drop_last) CHECK_EQ(taken, left);
    for (size_t i = 0; i < start; i++) CHECK_MSG(!seen[perm[i]], "position %zu taken again", i);
    free(seen);
    free(perm);
}

TEST(data_sampler_start_reshards) {
    const size_t lens[] = { 1, 7, 100, 1001 };
    const int reps[] = { 1, 2, 3, 4 };
    for (size_t a = 0; a < 4; a++)
        for (size_t b = 0; b < 4; b++)
            for (size_t c = 0; c < 4; c++)
                for (int dl = 0; dl < 2; dl++) {
                    int R0 = reps[b];
                    /* k steps of batch 2 at R0 done (never past the epoch) */
                    size_t start = (size_t)(3 * c) * 2 * (size_t)R0;
                    if (start >= lens[a] || (dl && lens[a] % (size_t)R0)) continue;
                    for (size_t d = 0; d < 4; d++) check_start(lens[a], R0, reps[d], start, dl);
                }
    ddpc_sampler_set_start(NULL, 5); /* harmless */
}

/* torch.randperm(10, generator=manual_seed(0)) as printed by PyTorch 1.13. */
TEST(data_randperm_known_values) {
    int64_t p[10];
    ddpc_randperm(10, 0, p);
    const int64_t want[10] = { 4, 1, 7, 5, 3, 9, 0, 8, 6, 2 };
    for (int i = 0; i < 10; i++) CHECK_EQ(p[i], want[i]);
}

/* The sampler against PyTorch's DistributedSampler (python3-torch). */
static const char *torch_script =
    "import sys\n"
    "try:\n"
    "    import torch\n"
    "    from torch.utils.data.distributed import DistributedSampler\n"
    "except Exception as e:\n"
    "    print('no torch:', e); sys.exit(77)\n"
    "print('torch', torch.__version__)\n"
    "out = open(sys.argv[2], 'w')\n"
    "for line in open(sys.argv[1]):\n"
    "    n, seed, epoch, R, dl, sh = map(int, line.split())\n"
    "    for r in range(R):\n"
    "        s = DistributedSampler(range(n), num_replicas=R, rank=r, shuffle=bool(sh), seed=seed, "
    "drop_last=bool(dl))\n"
    "        s.set_epoch(epoch)\n"
    "        out.write(' '.join(map(str, list(s))) + '\\n')\n";

TEST_T(data_sampler_vs_torch, 180) {
    static const uint64_t cases[][6] = {
        /* n, seed, epoch, replicas, drop_last, shuffle */
        { 1, 0, 0, 1, 0, 1 },
        { 1, 0, 0, 3, 0, 1 },
        { 2, 7, 1, 5, 0, 1 },
        { 10, 0, 0, 1, 0, 1 },
        { 10, 0, 0, 3, 0, 1 },
        { 10, 0, 0, 3, 1, 1 },
        { 17, 42, 3, 4, 0, 1 },
        { 17, 42, 3, 4, 1, 1 },
        { 100, 0, 0, 8, 0, 0 },
        { 5, 0, 0, 8, 1, 1 },
        { 1000, 123, 5, 7, 0, 1 },
        { 624, 3, 0, 1, 0, 1 },
        { 625, 3, 0, 2, 0, 1 },
        { 1249, 11, 2, 3, 0, 1 },
        { 60000, 0, 0, 1, 0, 1 },
        { 60000, 0, 1, 4, 0, 1 },
        { 60000, 4294967301ull, 0, 2, 0, 1 },
        { 70000, 1, 2, 3, 1, 1 },
        { 65537, 9, 0, 6, 0, 1 },
        { 10000, 2024, 9, 8, 0, 1 },
    };
    const int nc = (int)(sizeof cases / sizeof cases[0]);
    const char *py = tpath("sampler_ref.py"), *in = tpath("cases.txt"),
               *res = tpath("torch_out.txt");
    write_file(py, torch_script, strlen(torch_script), 0);
    FILE *f = fopen(in, "w");
    for (int c = 0; c < nc; c++)
        fprintf(f, "%llu %llu %llu %llu %llu %llu\n", (unsigned long long)cases[c][0],
                (unsigned long long)cases[c][1], (unsigned long long)cases[c][2],
                (unsigned long long)cases[c][3], (unsigned long long)cases[c][4],
                (unsigned long long)cases[c][5]);
    fclose(f);
    char cmd[2048], out[4096];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s %s %s", py, in, res);
    int rc = t_run_cmd(cmd, 150, out, sizeof out);
    if (rc == 77 || rc == 127) {
        rm_tmpdir();
        SKIP("PyTorch not available for /usr/bin/python3 (install python3-torch): %s", out);
    }
    CHECK_MSG(rc == 0, "%s exited %d: %s", cmd, rc, out);
    f = fopen(res, "r");
    CHECK(f != NULL);
    size_t cap = 1 << 20;
    char *line = malloc(cap);
    int lines = 0;
    for (int c = 0; c < nc; c++) {
        for (int r = 0; r < (int)cases[c][3]; r++) {
            CHECK_MSG(fgets(line, (int)cap, f) != NULL, "torch output ends early at case %d", c);
            lines++;
            ddpc_sampler *s = NULL;
            CHECK_OK(mk_sampler(cases[c][0], (int)cases[c][3], r, (int)cases[c][5], cases[c][1],
                                (int)cases[c][4], &s));
            ddpc_sampler_set_epoch(s, cases[c][2]);
            const int64_t *ix = ddpc_sampler_indices(s);
            size_t k = 0;
            char *p = line, *end;
            for (;;) {
                long long v = strtoll(p, &end, 10);
                if (end == p) break;
                CHECK_MSG(k < ddpc_sampler_len(s),
                          "case %d rank %d: torch has more than %zu indices", c, r,
                          ddpc_sampler_len(s));
                CHECK_MSG(ix[k] == v,
                          "case %d (n %llu seed %llu epoch %llu R %llu) rank %d: index %zu is "
                          "%lld, torch %lld",
                          c, (unsigned long long)cases[c][0], (unsigned long long)cases[c][1],
                          (unsigned long long)cases[c][2], (unsigned long long)cases[c][3], r, k,
                          (long long)ix[k], v);
                k++;
                p = end;
            }
            CHECK_EQ(k, ddpc_sampler_len(s));
            ddpc_sampler_destroy(s);
        }
    }
    CHECK(lines > 60);
    free(line);
    fclose(f);
    rm_tmpdir();
}
