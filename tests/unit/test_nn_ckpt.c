/* test_nn_ckpt.c — safetensors checkpoints: round trip with optimizer state,
 * mismatches named, malformed files refused, atomic replacement, and the
 * format read back by PyTorch (json + struct + torch.frombuffer). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ddpc/nn.h"
#include "test.h"
#include "train/train.h" /* model_create_preset: ddpc-train's models */

/* A few SGD-with-momentum steps on random data, so parameters and state are
 * non-trivial. */
static void train_steps(ddpc_model *m, ddpc_optim *o, int steps, uint64_t seed) {
    int B = 4;
    size_t in = ddpc_model_in_features(m);
    float *x = malloc((size_t)B * in * sizeof(float));
    int32_t *y = malloc((size_t)B * sizeof(int32_t));
    ddpc_rng r;
    ddpc_rng_seed(&r, seed);
    for (int s = 0; s < steps; s++) {
        for (size_t i = 0; i < (size_t)B * in; i++) x[i] = ddpc_rng_uniform(&r) - 0.5f;
        for (int i = 0; i < B; i++) y[i] = (int32_t)(ddpc_rng_next(&r) % 10);
        const float *out;
        ddpc_model_zero_grad(m);
        CHECK_OK(ddpc_model_forward(m, x, B, &out));
        CHECK_OK(ddpc_model_loss(m, DDPC_CROSS_ENTROPY, y, NULL));
        CHECK_OK(ddpc_model_backward(m));
        CHECK_OK(ddpc_optim_step(o));
    }
    free(x);
    free(y);
}

static void make(const char *preset, ddpc_optim_kind k, uint64_t seed, ddpc_model **m,
                 ddpc_optim **o) {
    CHECK_OK(model_create_preset(preset, seed, m));
    ddpc_optim_options oo = ddpc_optim_options_default(k);
    oo.momentum = k == DDPC_OPTIM_SGD ? 0.9f : 0.0f;
    CHECK_OK(ddpc_optim_create(*m, &oo, o));
}

static int same_block(ddpc_model *a, ddpc_model *b) {
    size_t na, nb;
    float *pa = ddpc_model_param_block(a, &na), *pb = ddpc_model_param_block(b, &nb);
    return na == nb && memcmp(pa, pb, na * sizeof(float)) == 0;
}

TEST(ckpt_roundtrip_resumes_exactly) {
    for (int k = 0; k < 3; k++) {
        ddpc_model *a, *b, *c;
        ddpc_optim *oa, *ob, *oc;
        make("mlp", (ddpc_optim_kind)k, 1, &a, &oa);
        make("mlp", (ddpc_optim_kind)k, 2, &b, &ob);
        make("mlp", (ddpc_optim_kind)k, 1, &c, &oc);
        /* a: 3 steps, save, 2 more. b: load, 2 more. c: 5 straight. All equal. */
        train_steps(a, oa, 3, 10);
        ddpc_ckpt_meta meta = { .epoch = 7, .step = 3, .metrics_bytes = 1234, .metrics_kept = 1 },
                       got;
        const char *path = t_tmp_path("rt.safetensors");
        CHECK_OK(ddpc_checkpoint_save(path, a, oa, &meta));
        CHECK_OK(ddpc_checkpoint_load(path, b, ob, &got));
        CHECK_EQ(got.epoch, 7);
        CHECK_EQ(got.step, 3);
        CHECK_EQ(got.metrics_bytes, 1234);
        CHECK_EQ(got.metrics_kept, 1);
        CHECK_EQ(ddpc_optim_steps(ob), 3);
        CHECK(same_block(a, b));
        for (int j = 0; j < ddpc_optim_num_state(oa); j++) {
            size_t n;
            ddpc_model_param_block(a, &n);
            CHECK(memcmp(ddpc_optim_state(oa, j, NULL), ddpc_optim_state(ob, j, NULL), n * 4) == 0);
        }
        train_steps(a, oa, 2, 11);
        train_steps(b, ob, 2, 11);
        train_steps(c, oc, 3, 10);
        train_steps(c, oc, 2, 11);
        CHECK_MSG(same_block(a, b) && same_block(a, c), "optimizer %s did not resume exactly",
                  ddpc_optim_kind_name((ddpc_optim_kind)k));
        ddpc_optim_destroy(oa);
        ddpc_optim_destroy(ob);
        ddpc_optim_destroy(oc);
        ddpc_model_destroy(a);
        ddpc_model_destroy(b);
        ddpc_model_destroy(c);
    }
    t_tmp_remove();
}

TEST(ckpt_weights_only_and_dropout_rng) {
    ddpc_model *a, *b;
    ddpc_model_options mo = ddpc_model_options_default();
    mo.seed = 3;
    CHECK_OK(ddpc_model_create(
        DDPC_LAYERS(ddpc_input(1, 1, 8), ddpc_linear(8, 8), ddpc_dropout(0.5f)), &mo, &a));
    mo.seed = 4;
    CHECK_OK(ddpc_model_create(
        DDPC_LAYERS(ddpc_input(1, 1, 8), ddpc_linear(8, 8), ddpc_dropout(0.5f)), &mo, &b));
    float x[16] = { 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8 };
    const float *out;
    CHECK_OK(ddpc_model_forward(a, x, 2, &out)); /* advances a's dropout stream */
    const char *path = t_tmp_path("w.safetensors");
    CHECK_OK(ddpc_checkpoint_save(path, a, NULL, NULL));
    CHECK_OK(ddpc_checkpoint_load(path, b, NULL, NULL));
    float oa[16];
    CHECK_OK(ddpc_model_forward(a, x, 2, &out));
    memcpy(oa, out, sizeof oa);
    CHECK_OK(ddpc_model_forward(b, x, 2, &out));
    CHECK(memcmp(oa, out, sizeof oa) == 0); /* same weights, same next mask */
    /* a weights-only file cannot restore an optimizer */
    ddpc_optim *o;
    ddpc_optim_options oo = ddpc_optim_options_default(DDPC_OPTIM_SGD);
    CHECK_OK(ddpc_optim_create(b, &oo, &o));
    CHECK_STATUS(ddpc_checkpoint_load(path, b, o, NULL), DDPC_ERR_MISMATCH);
    CHECK_CONTAINS(ddpc_last_error(), "no optimizer state");
    ddpc_optim_destroy(o);
    ddpc_model_destroy(a);
    ddpc_model_destroy(b);
    t_tmp_remove();
}

TEST(ckpt_mismatch_named) {
    ddpc_model *mlp, *lin, *cnn;
    ddpc_optim *omlp, *olin, *ocnn;
    make("mlp", DDPC_OPTIM_SGD, 1, &mlp, &omlp);
    make("linear", DDPC_OPTIM_SGD, 1, &lin, &olin);
    make("cnn", DDPC_OPTIM_ADAM, 1, &cnn, &ocnn);
    train_steps(mlp, omlp, 1, 1);
    const char *path = t_tmp_path("mlp.safetensors");
    CHECK_OK(ddpc_checkpoint_save(path, mlp, omlp, NULL));
    float before[7850];
    size_t n;
    memcpy(before, ddpc_model_param_block(lin, &n), sizeof before);
    /* linear's "1.weight" is (10, 784), mlp's is (512, 784) */
    CHECK_STATUS(ddpc_checkpoint_load(path, lin, olin, NULL), DDPC_ERR_MISMATCH);
    CHECK_CONTAINS(ddpc_last_error(),
                   "tensor '1.weight' has shape [512, 784], the model's has [10, 784]");
    CHECK(memcmp(before, ddpc_model_param_block(lin, &n), sizeof before) == 0); /* untouched */
    /* cnn's first parameter "0.weight" is not in the mlp's file */
    CHECK_STATUS(ddpc_checkpoint_load(path, cnn, NULL, NULL), DDPC_ERR_MISMATCH);
    CHECK_CONTAINS(ddpc_last_error(), "no tensor '0.weight'");
    /* another optimizer kind */
    ddpc_model *mlp2;
    ddpc_optim *adam;
    make("mlp", DDPC_OPTIM_ADAM, 1, &mlp2, &adam);
    CHECK_STATUS(ddpc_checkpoint_load(path, mlp2, adam, NULL), DDPC_ERR_MISMATCH);
    CHECK_CONTAINS(ddpc_last_error(), "holds sgd optimizer state, the optimizer is adam");
    /* SGD without momentum keeps no state: the file's momentum is named */
    ddpc_model *mlp3;
    ddpc_optim *plain;
    CHECK_OK(model_create_preset("mlp", 1, &mlp3));
    ddpc_optim_options po = ddpc_optim_options_default(DDPC_OPTIM_SGD);
    CHECK_OK(ddpc_optim_create(mlp3, &po, &plain));
    CHECK_STATUS(ddpc_checkpoint_load(path, mlp3, plain, NULL), DDPC_ERR_MISMATCH);
    CHECK_CONTAINS(ddpc_last_error(), "tensor 'optim.1.weight.momentum' is optimizer state that "
                                      "this sgd optimizer does not keep (it has no momentum)");
    ddpc_optim_destroy(plain);
    ddpc_model_destroy(mlp3);
    /* a smaller model: the file's extra tensors are named */
    ddpc_model *small;
    ddpc_model_options mo = ddpc_model_options_default();
    mo.seed = 0;
    CHECK_OK(ddpc_model_create(
        DDPC_LAYERS(ddpc_input(1, 28, 28), ddpc_flatten(), ddpc_linear(784, 512)), &mo, &small));
    CHECK_STATUS(ddpc_checkpoint_load(path, small, NULL, NULL), DDPC_ERR_MISMATCH);
    CHECK_CONTAINS(ddpc_last_error(), "tensor '3.weight' matches nothing");
    ddpc_model_destroy(small);
    ddpc_optim_destroy(adam);
    ddpc_model_destroy(mlp2);
    ddpc_optim_destroy(omlp);
    ddpc_optim_destroy(olin);
    ddpc_optim_destroy(ocnn);
    ddpc_model_destroy(mlp);
    ddpc_model_destroy(lin);
    ddpc_model_destroy(cnn);
    t_tmp_remove();
}

/* Writes a file: 8-byte length of hdr (or hl_override when >= 0), hdr, then
 * ndata bytes of zeros. */
static const char *write_raw(const char *name, const char *hdr, long long hl_override,
                             size_t ndata) {
    const char *path = t_tmp_path(name);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    uint64_t hl = hl_override >= 0 ? (uint64_t)hl_override : strlen(hdr);
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)(hl >> (8 * i));
    fwrite(len8, 1, 8, f);
    fwrite(hdr, 1, strlen(hdr), f);
    for (size_t i = 0; i < ndata; i++) fputc(0, f);
    fclose(f);
    return path;
}

#define BAD(name, hdr, hl, ndata, want_status, needle)                       \
    do {                                                                     \
        const char *p__ = write_raw(name, hdr, hl, ndata);                   \
        CHECK_STATUS(ddpc_checkpoint_load(p__, m, NULL, NULL), want_status); \
        CHECK_CONTAINS(ddpc_last_error(), needle);                           \
    } while (0)

TEST(ckpt_malformed_files) {
    ddpc_model *m;
    ddpc_model_options mo = ddpc_model_options_default();
    mo.seed = 0;
    CHECK_OK(ddpc_model_create(DDPC_LAYERS(ddpc_input(1, 1, 2), ddpc_linear(2, 1)), &mo, &m));
    const char *good = "{\"0.weight\":{\"dtype\":\"F32\",\"shape\":[1,2],\"data_offsets\":[0,8]},"
                       "\"0.bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}";
    {
        const char *p = write_raw("good.st", good, -1, 12);
        CHECK_OK(ddpc_checkpoint_load(p, m, NULL, NULL));
        CHECK(ddpc_model_param(m, 0)->data[0] == 0.0f);
    }
    {
        const char *p = t_tmp_path("short.st");
        FILE *f = fopen(p, "wb");
        CHECK(f != NULL);
        fwrite("\x10\0\0", 1, 3, f);
        fclose(f);
        CHECK_STATUS(ddpc_checkpoint_load(p, m, NULL, NULL), DDPC_ERR_IO);
        CHECK_CONTAINS(ddpc_last_error(), "3 bytes is too short");
    }
    CHECK_STATUS(ddpc_checkpoint_load(t_tmp_path("nonexistent"), m, NULL, NULL),
                 DDPC_ERR_NOT_FOUND);
    BAD("empty.st", "", -1, 0, DDPC_ERR_IO, "header length 0");
    BAD("hugelen.st", good, 1LL << 40, 12, DDPC_ERR_IO, "impossible");
    BAD("truncated.st", good, -1, 11, DDPC_ERR_IO, "truncated");
    BAD("trailing.st", good, -1, 13, DDPC_ERR_IO, "file holds 13");
    BAD("notjson.st", "hello, world", -1, 0, DDPC_ERR_IO, "at byte 8: expected '{'");
    BAD("unterminated.st", "{\"0.weight\":{\"dtype\":\"F32", -1, 0, DDPC_ERR_IO,
        "unterminated string");
    BAD("trailing_json.st", "{} x", -1, 0, DDPC_ERR_IO, "trailing bytes");
    BAD("badoff.st",
        "{\"0.weight\":{\"dtype\":\"F32\",\"shape\":[1,2],\"data_offsets\":[0,4]},"
        "\"0.bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
        -1, 8, DDPC_ERR_IO, "do not hold 2 F32 values");
    BAD("overlap.st",
        "{\"0.weight\":{\"dtype\":\"F32\",\"shape\":[1,2],\"data_offsets\":[0,8]},"
        "\"0.bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
        -1, 8, DDPC_ERR_IO, "without gaps or overlaps");
    BAD("dtype.st",
        "{\"0.weight\":{\"dtype\":\"F16\",\"shape\":[1,2],\"data_offsets\":[0,4]},"
        "\"0.bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
        -1, 8, DDPC_ERR_MISMATCH, "tensor '0.weight' is F16");
    BAD("unkdtype.st", "{\"0.weight\":{\"dtype\":\"Q7\",\"shape\":[1,2],\"data_offsets\":[0,4]}}",
        -1, 4, DDPC_ERR_IO, "unknown dtype \"Q7\"");
    BAD("field.st",
        "{\"0.weight\":{\"dtype\":\"F32\",\"shape\":[1,2],\"data_offsets\":[0,8],\"x\":1}}", -1, 8,
        DDPC_ERR_IO, "unknown field \"x\"");
    BAD("lacks.st", "{\"0.weight\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", -1, 8, DDPC_ERR_IO,
        "lacks \"shape\"");
    BAD("neg.st", "{\"0.weight\":{\"dtype\":\"F32\",\"shape\":[-1,2],\"data_offsets\":[0,8]}}", -1,
        8, DDPC_ERR_IO, "non-negative integer");
    BAD("frac.st", "{\"0.weight\":{\"dtype\":\"F32\",\"shape\":[1.5,2],\"data_offsets\":[0,8]}}",
        -1, 8, DDPC_ERR_IO, "fraction");
    BAD("dup.st",
        "{\"0.bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
        "\"0.bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
        -1, 8, DDPC_ERR_IO, "appears twice");
    BAD("meta.st", "{\"__metadata__\":{\"epoch\":3}}", -1, 0, DDPC_ERR_IO, "must be strings");
    BAD("epoch.st",
        "{\"__metadata__\":{\"epoch\":\"three\"},"
        "\"0.weight\":{\"dtype\":\"F32\",\"shape\":[1,2],\"data_offsets\":[0,8]},"
        "\"0.bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
        -1, 12, DDPC_ERR_IO, "\"epoch\" = \"three\" is not an integer");
    /* a flipped byte in the length prefix, and random bytes: errors, not crashes */
    ddpc_rng r;
    ddpc_rng_seed(&r, 1);
    for (int t = 0; t < 300; t++) {
        char hdr[160];
        strncpy(hdr, good, sizeof hdr - 1);
        hdr[sizeof hdr - 1] = 0;
        size_t len = strlen(hdr);
        int flips = 1 + (int)(ddpc_rng_next(&r) % 3);
        for (int f = 0; f < flips; f++)
            hdr[ddpc_rng_next(&r) % len] = (char)(32 + ddpc_rng_next(&r) % 95);
        const char *p = write_raw("fuzz.st", hdr, -1, 12);
        ddpc_status s = ddpc_checkpoint_load(p, m, NULL, NULL);
        CHECK(s == DDPC_OK || s == DDPC_ERR_IO || s == DDPC_ERR_MISMATCH);
        if (s != DDPC_OK) CHECK(strlen(ddpc_last_error()) > 0);
    }
    ddpc_model_destroy(m);
    t_tmp_remove();
}

TEST(ckpt_atomic_replace) {
    ddpc_model *m;
    ddpc_optim *o;
    make("linear", DDPC_OPTIM_SGD, 1, &m, &o);
    const char *p = t_tmp_path("atomic.safetensors");
    char path[256];
    snprintf(path, sizeof path, "%s", p);
    CHECK_OK(ddpc_checkpoint_save(path, m, o, NULL));
    struct stat st1;
    CHECK(stat(path, &st1) == 0);
    train_steps(m, o, 1, 3);
    ddpc_ckpt_meta meta = { .epoch = 1, .step = 1 };
    CHECK_OK(ddpc_checkpoint_save(path, m, o, &meta));
    struct stat st2;
    CHECK(stat(path, &st2) == 0);
    CHECK(st1.st_ino != st2.st_ino); /* replaced by rename, not rewritten in place */
    /* no temporary left behind */
    char cmd[512], out[256];
    snprintf(cmd, sizeof cmd, "ls %s | grep -c tmp || true", t_tmp_dir());
    CHECK_EQ(t_run_cmd(cmd, 10, out, sizeof out), 0);
    CHECK_EQ(atoi(out), 0);
    /* a directory that does not exist: an error naming the temporary */
    CHECK_STATUS(ddpc_checkpoint_save("/nonexistent-dir/x.safetensors", m, o, NULL), DDPC_ERR_IO);
    CHECK_CONTAINS(ddpc_last_error(), "/nonexistent-dir/x.safetensors.tmp");
    ddpc_optim_destroy(o);
    ddpc_model_destroy(m);
    t_tmp_remove();
}

/* PyTorch reads the file with json + struct + torch.frombuffer (Debian has
 * no safetensors package): every tensor's name, shape and sum must agree. */
TEST_T(ckpt_read_by_pytorch, 120) {
    char out[8192];
    if (t_run_cmd("/usr/bin/python3 -c 'import torch' 2>&1", 60, out, sizeof out) != 0)
        SKIP("python3-torch is not installed (/usr/bin/python3 -c 'import torch' failed)");
    ddpc_model *m;
    ddpc_optim *o;
    make("cnn", DDPC_OPTIM_ADAMW, 5, &m, &o);
    train_steps(m, o, 2, 4);
    const char *p = t_tmp_path("torch.safetensors");
    char path[256];
    snprintf(path, sizeof path, "%s", p);
    ddpc_ckpt_meta meta = { .epoch = 2, .step = 2 };
    CHECK_OK(ddpc_checkpoint_save(path, m, o, &meta));
    const char *py_path = t_tmp_path("read.py");
    char py[256];
    snprintf(py, sizeof py, "%s", py_path);
    FILE *f = fopen(py, "w");
    CHECK(f != NULL);
    fputs("import json, struct, sys, torch\n"
          "b = open(sys.argv[1], 'rb').read()\n"
          "n = struct.unpack('<Q', b[:8])[0]\n"
          "h = json.loads(b[8:8+n])\n"
          "meta = h.pop('__metadata__')\n"
          "print('meta', meta['format'], meta['epoch'], meta['step'], meta['optim'])\n"
          "data = bytearray(b[8+n:])\n"
          "for k, v in h.items():\n"
          "    s, e = v['data_offsets']\n"
          "    assert v['dtype'] == 'F32'\n"
          "    t = torch.frombuffer(data[s:e], dtype=torch.float32).reshape(v['shape'])\n"
          "    print(k, list(t.shape), '%.6e' % t.double().sum().item())\n",
          f);
    fclose(f);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s %s 2>&1", py, path);
    CHECK_EQ(t_run_cmd(cmd, 90, out, sizeof out), 0);
    CHECK_CONTAINS(out, "meta ddpc 2 2 adamw");
    for (int i = 0; i < ddpc_model_num_params(m); i++) {
        const ddpc_param *q = ddpc_model_param(m, i);
        double sum = 0;
        for (size_t j = 0; j < q->numel; j++) sum += q->data[j];
        char line[160], shape[64] = "[";
        for (int d = 0; d < q->ndim; d++)
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%d", d ? ", " : "",
                     q->shape[d]);
        snprintf(line, sizeof line, "%s %s] %.6e", q->name, shape, sum);
        CHECK_CONTAINS(out, line);
    }
    CHECK_CONTAINS(out, "optim.0.weight.exp_avg [16, 1, 3, 3]");
    CHECK_CONTAINS(out, "optim.9.bias.exp_avg_sq [10]");
    ddpc_optim_destroy(o);
    ddpc_model_destroy(m);
    t_tmp_remove();
}
