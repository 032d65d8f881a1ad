/* test_nn_train.c — ddpc-train end to end on the real Fashion-MNIST files:
 * bad options, a short run that learns, metrics and checkpoints, and resume
 * giving the same parameters as training straight through. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ddpc/nn.h"
#include "test.h"
#include "train/train.h" /* model_create_preset: ddpc-train's models */

#define DATA "/usr/share/datasets/fashion-mnist"

static void need_data(void) {
    if (access(DATA "/train-images-idx3-ubyte.gz", R_OK) != 0 &&
        access(DATA "/train-images-idx3-ubyte", R_OK) != 0)
        SKIP("Fashion-MNIST is not installed in " DATA " (apt-get install dataset-fashion-mnist)");
}

/* Runs ddpc-train with args; returns its exit code, output in out. */
static int train(const char *args, char *out, size_t outlen) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s --threads 1 %s 2>&1", t_bin("ddpc-train"), args);
    return t_run_cmd(cmd, 240, out, outlen);
}

TEST(train_bad_options) {
    static const struct {
        const char *args, *needle;
    } cases[] = {
        { "--model resnet", "--model 'resnet' is not one of linear, mlp, cnn" },
        { "--epochs x", "--epochs='x' is not an integer" },
        { "--epochs 0", "out of range" },
        { "--bogus 1", "unknown option '--bogus'" },
        { "--lr", "--lr needs a value" },
        { "--optimizer rmsprop", "unknown optimizer 'rmsprop'" },
        { "--optimizer adam --momentum 0.9", "--momentum is for --optimizer sgd" },
        { "--nesterov", "--nesterov needs --momentum > 0" },
        { "stray", "unexpected argument 'stray'" },
        { "--max-eval-batches -1", "out of range" },
        { "--checkpoint-every 5",
          "--checkpoint-every N writes --checkpoint FILE, and there is none" },
        { "--checkpoint c.st --checkpoint-every -1", "out of range" },
    };
    char out[4096];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = train(cases[i].args, out, sizeof out);
        CHECK_MSG(rc == 2, "'%s' exited %d: %s", cases[i].args, rc, out);
        CHECK_CONTAINS(out, cases[i].needle);
        CHECK_MSG(strchr(out, '\n') == out + strlen(out) - 1, "'%s': not one line: %s",
                  cases[i].args, out);
    }
    CHECK_EQ(train("--help", out, sizeof out), 0);
    CHECK_CONTAINS(out, "--batch-size");
    /* a missing data directory is a runtime error naming it, exit 1 */
    CHECK_EQ(train("--data /nonexistent-ddpc --epochs 1", out, sizeof out), 1);
    CHECK_CONTAINS(out, "/nonexistent-ddpc");
}

static double json_field(const char *line, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(line, pat);
    CHECK_MSG(p != NULL, "no %s in %s", key, line);
    return atof(p + strlen(pat));
}

TEST_T(train_learns_and_writes_metrics, 300) {
    need_data();
    const char *metrics = t_tmp_path("m.jsonl"), *ckpt = t_tmp_path("c.safetensors");
    char args[1024], out[16384];
    snprintf(args, sizeof args,
             "--epochs 2 --max-batches 400 --log-every 100 --metrics %s --checkpoint %s", metrics,
             ckpt);
    CHECK_MSG(train(args, out, sizeof out) == 0, "%s", out);
    CHECK_CONTAINS(out, "Epoch: 0 | Batch: 100 | Loss: ");
    CHECK_CONTAINS(out, "epoch 1: loss ");
    CHECK_CONTAINS(out, "samples/s");
    FILE *f = fopen(metrics, "r");
    CHECK(f != NULL);
    char line[1024];
    int n = 0;
    double acc = 0;
    while (fgets(line, sizeof line, f)) {
        CHECK_EQ(json_field(line, "epoch"), n);
        acc = json_field(line, "test_accuracy");
        CHECK(json_field(line, "samples_per_s") > 0);
        CHECK(json_field(line, "seconds") > 0);
        CHECK(json_field(line, "loss") > 0);
        CHECK(json_field(line, "train_accuracy") > 0.5);
        CHECK_EQ(json_field(line, "test_samples"), 10000);
        n++;
    }
    fclose(f);
    CHECK_EQ(n, 2);
    CHECK_MSG(acc > 0.75, "test accuracy %.3f after 800 batches", acc); /* chance is 0.1 */
    /* the checkpoint holds the linear model, its optimizer and the epoch */
    ddpc_model *m;
    CHECK_OK(model_create_preset("linear", 0, &m));
    ddpc_ckpt_meta meta;
    CHECK_OK(ddpc_checkpoint_load(ckpt, m, NULL, &meta));
    CHECK_EQ(meta.epoch, 2);
    CHECK_EQ(meta.step, 800);
    ddpc_model_destroy(m);
    /* --resume of a finished run does nothing; of another model, names the mismatch */
    snprintf(args, sizeof args, "--epochs 2 --resume %s", ckpt);
    CHECK_EQ(train(args, out, sizeof out), 0);
    CHECK_CONTAINS(out, "nothing to do");
    snprintf(args, sizeof args, "--model mlp --epochs 3 --resume %s", ckpt);
    CHECK_EQ(train(args, out, sizeof out), 1);
    CHECK_CONTAINS(out, "tensor '1.weight' has shape [10, 784], the model's has [512, 784]");
    t_tmp_remove();
}

/* 2 epochs straight == 1 epoch, stop, resume for the 2nd (SGD with momentum,
 * so the optimizer state matters): bit-identical parameters. */
TEST_T(train_resume_matches_straight_run, 300) {
    need_data();
    const char *a = t_tmp_path("a.safetensors"), *b = t_tmp_path("b.safetensors");
    const char *metrics = t_tmp_path("m.jsonl");
    /* 20 of the 625 test batches: the whole test set made this test take 30
     * minutes under valgrind */
    const char *common =
        "--model mlp --batch-size 16 --max-batches 40 --max-eval-batches 20 --momentum 0.9 "
        "--lr 0.05 --log-every 0 --seed 3";
    char args[1024], out[8192];
    snprintf(args, sizeof args, "%s --epochs 2 --checkpoint %s --metrics %s", common, a, metrics);
    CHECK_MSG(train(args, out, sizeof out) == 0, "%s", out);
    CHECK_CONTAINS(out, "test accuracy over at most 20 batches a process");
    FILE *f = fopen(metrics, "r");
    CHECK(f != NULL);
    char line[1024];
    int lines = 0;
    for (; fgets(line, sizeof line, f); lines++)
        CHECK_EQ(json_field(line, "test_samples"), 20 * 16);
    fclose(f);
    CHECK_EQ(lines, 2);
    snprintf(args, sizeof args, "%s --epochs 1 --checkpoint %s", common, b);
    CHECK_MSG(train(args, out, sizeof out) == 0, "%s", out);
    snprintf(args, sizeof args, "%s --epochs 2 --resume %s --checkpoint %s", common, b, b);
    CHECK_MSG(train(args, out, sizeof out) == 0, "%s", out);
    CHECK_CONTAINS(out, "resumed from");
    ddpc_model *ma, *mb;
    CHECK_OK(model_create_preset("mlp", 0, &ma));
    CHECK_OK(model_create_preset("mlp", 1, &mb));
    ddpc_optim_options o = ddpc_optim_options_default(DDPC_OPTIM_SGD);
    o.momentum = 0.9f;
    ddpc_optim *oa, *ob;
    CHECK_OK(ddpc_optim_create(ma, &o, &oa));
    CHECK_OK(ddpc_optim_create(mb, &o, &ob));
    ddpc_ckpt_meta meta_a, meta_b;
    CHECK_OK(ddpc_checkpoint_load(a, ma, oa, &meta_a));
    CHECK_OK(ddpc_checkpoint_load(b, mb, ob, &meta_b));
    CHECK_EQ(meta_a.epoch, 2);
    CHECK_EQ(meta_b.epoch, 2);
    CHECK_EQ(meta_a.step, 80);
    CHECK_EQ(meta_b.step, 80);
    size_t n;
    float *pa = ddpc_model_param_block(ma, &n), *pb = ddpc_model_param_block(mb, &n);
    CHECK(memcmp(pa, pb, n * sizeof(float)) == 0);
    CHECK(memcmp(ddpc_optim_state(oa, 0, NULL), ddpc_optim_state(ob, 0, NULL), n * sizeof(float)) ==
          0);
    ddpc_optim_destroy(oa);
    ddpc_optim_destroy(ob);
    ddpc_model_destroy(ma);
    ddpc_model_destroy(mb);
    t_tmp_remove();
}

/* The progress bar's contract (ddpc-run's side is in test_run): with stderr
 * not a terminal there is none, unless DDPC_PROGRESS=1 (ddpc-run sets it for
 * rank 0 when its own stderr is a terminal) or --progress; the bar is '\r'
 * updates without a newline, ended by one newline, and replaces the
 * "Epoch | Batch | Loss" lines; --no-progress wins over DDPC_PROGRESS. */
TEST_T(train_progress_bar_contract, 120) {
    need_data();
    char out[16384], cmd[1024];
    const char *common =
        "--threads 1 --epochs 1 --max-batches 30 --max-eval-batches 2 --log-every 10";
    snprintf(cmd, sizeof cmd, "env -u DDPC_PROGRESS %s %s 2>&1 >/dev/null", t_bin("ddpc-train"),
             common);
    CHECK_EQ(t_run_cmd(cmd, 120, out, sizeof out), 0);
    CHECK_MSG(strchr(out, '\r') == NULL, "a bar with stderr not a terminal: %s", out);
    snprintf(cmd, sizeof cmd, "DDPC_PROGRESS=1 %s %s 2>&1 >/dev/null", t_bin("ddpc-train"), common);
    CHECK_EQ(t_run_cmd(cmd, 120, out, sizeof out), 0);
    CHECK_MSG(strncmp(out, "\r[", 2) == 0, "no bar under DDPC_PROGRESS=1: %s", out);
    CHECK_CONTAINS(out, "30/30 loss");
    char *nl = strchr(out, '\n');
    CHECK_MSG(nl && nl[1] == 0, "the bar is not ended by exactly one newline: %s", out);
    snprintf(cmd, sizeof cmd, "DDPC_PROGRESS=1 %s %s 2>/dev/null", t_bin("ddpc-train"), common);
    CHECK_EQ(t_run_cmd(cmd, 120, out, sizeof out), 0);
    CHECK_MSG(strstr(out, "| Batch:") == NULL, "log lines beside the bar: %s", out);
    snprintf(cmd, sizeof cmd, "DDPC_PROGRESS=1 %s %s --no-progress 2>&1 >/dev/null",
             t_bin("ddpc-train"), common);
    CHECK_EQ(t_run_cmd(cmd, 120, out, sizeof out), 0);
    CHECK_MSG(strchr(out, '\r') == NULL, "--no-progress drew a bar: %s", out);
}
