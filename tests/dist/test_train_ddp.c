/* test_train_ddp.c — ddpc-train under ddpc-run on the real Fashion-MNIST
 * data: it learns with 2 processes; resuming from a checkpoint equals a
 * straight run; 2 nodes x 2 processes (loopback, and two network namespaces)
 * give the same model as 1 node x 4 processes; the example runs, and prints
 * the lines its PyTorch twin prints. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ddpc/nn.h"
#include "test.h"
#include "train/train.h" /* model_create_preset: ddpc-train's models */

#define DATA "/usr/share/datasets/fashion-mnist"

static char out[1 << 16];

static int run(double secs, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int run(double secs, const char *fmt, ...) {
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    return t_run_cmd(cmd, secs, out, sizeof out);
}

static void need_data(void) {
    if (access(DATA "/train-images-idx3-ubyte.gz", R_OK) != 0)
        SKIP("Fashion-MNIST is not installed in " DATA " (apt-get install dataset-fashion-mnist)");
}

static const char *tmp(const char *name) {
    static char buf[8][256];
    static int k;
    char *b = buf[k++ % 8];
    snprintf(b, 256, "/tmp/ddpc_ttd_%d_%s", (int)getpid(), name);
    return b;
}

/* The parameters stored in a checkpoint of the linear model. */
static void load_params(const char *path, float *p, size_t *n) {
    ddpc_model *m;
    CHECK_OK(model_create_preset("linear", 0, &m));
    CHECK_OK(ddpc_checkpoint_load(path, m, NULL, NULL));
    const float *b = ddpc_model_param_block(m, n);
    memcpy(p, b, *n * sizeof *p);
    ddpc_model_destroy(m);
}

static void same_params(const char *a, const char *b, double tol) {
    static float pa[8192], pb[8192];
    size_t na, nb;
    load_params(a, pa, &na);
    load_params(b, pb, &nb);
    CHECK_EQ(na, nb);
    double worst = 0;
    for (size_t k = 0; k < na; k++) {
        double d = fabs((double)pa[k] - (double)pb[k]);
        if (d > worst) worst = d;
    }
    CHECK_MSG(worst <= tol, "%s and %s differ by up to %.3g (> %.3g)", a, b, worst, tol);
}

/* The test accuracy on ddpc-train's last epoch line. */
static double last_test_acc(const char *text) {
    double acc = -1;
    for (const char *p = text; (p = strstr(p, "test acc ")); p++) acc = atof(p + 9);
    return acc;
}

TEST_T(train_ddp_two_processes_learn, 120) {
    need_data();
    int rc = run(100, "%s --standalone --nproc-per-node=2 %s --epochs 1 --log-every 0 2>&1",
                 t_bin("ddpc-run"), t_bin("ddpc-train"));
    CHECK_MSG(rc == 0, "rc=%d: %s", rc, out);
    CHECK_CONTAINS(out, "batch 32 x 2 process(es)");
    double acc = last_test_acc(out);
    CHECK_MSG(acc > 78.0, "test accuracy %.2f%% after one epoch with 2 processes: %s", acc, out);
}

TEST_T(train_ddp_resume_matches_straight_run, 240) {
    need_data();
    const char *straight = tmp("straight.st"), *resumed = tmp("resumed.st");
    const char *common = "--epochs %d --max-batches 40 --momentum 0.9 --lr 0.02 --log-every 0";
    char args[256];
    snprintf(args, sizeof args, common, 4);
    int rc = run(100, "%s --standalone --nproc-per-node=2 %s %s --checkpoint %s 2>&1",
                 t_bin("ddpc-run"), t_bin("ddpc-train"), args, straight);
    CHECK_MSG(rc == 0, "straight run: rc=%d: %s", rc, out);
    snprintf(args, sizeof args, common, 2);
    rc = run(100, "%s --standalone --nproc-per-node=2 %s %s --checkpoint %s 2>&1",
             t_bin("ddpc-run"), t_bin("ddpc-train"), args, resumed);
    CHECK_MSG(rc == 0, "first half: rc=%d: %s", rc, out);
    snprintf(args, sizeof args, common, 4);
    rc = run(100, "%s --standalone --nproc-per-node=2 %s %s --resume %s --checkpoint %s 2>&1",
             t_bin("ddpc-run"), t_bin("ddpc-train"), args, resumed, resumed);
    CHECK_MSG(rc == 0, "second half: rc=%d: %s", rc, out);
    CHECK_CONTAINS(out, "resumed from");
    same_params(straight, resumed, 1e-6);
    unlink(straight);
    unlink(resumed);
}

/* One node with 4 processes; the reference for the two-node runs. */
static void one_node_four(const char *ckpt, double *acc) {
    int rc = run(100,
                 "%s --standalone --nproc-per-node=4 %s --epochs 1 --max-batches 60 --log-every 0 "
                 "--checkpoint %s 2>&1",
                 t_bin("ddpc-run"), t_bin("ddpc-train"), ckpt);
    CHECK_MSG(rc == 0, "1 node x 4: rc=%d: %s", rc, out);
    *acc = last_test_acc(out);
    CHECK(*acc > 0);
}

TEST_T(train_ddp_two_nodes_loopback_match_one_node, 240) {
    need_data();
    const char *one = tmp("one.st"), *two = tmp("two.st");
    double acc1, acc2;
    one_node_four(one, &acc1);
    int port = t_free_port_pair();
    int rc = run(150,
                 "%s --nnodes=2 --node-rank=1 --nproc-per-node=2 --master-port=%d %s --epochs 1 "
                 "--max-batches 60 --log-every 0 >/dev/null 2>&1 & "
                 "%s --nnodes=2 --node-rank=0 --nproc-per-node=2 --master-port=%d %s --epochs 1 "
                 "--max-batches 60 --log-every 0 --checkpoint %s 2>&1; r0=$?; wait $!; echo "
                 "\"rc0=$r0 rc1=$?\"",
                 t_bin("ddpc-run"), port, t_bin("ddpc-train"), t_bin("ddpc-run"), port,
                 t_bin("ddpc-train"), two);
    CHECK_MSG(rc == 0, "2 nodes x 2: rc=%d: %s", rc, out);
    CHECK_CONTAINS(out, "rc0=0 rc1=0");
    CHECK_CONTAINS(out, "batch 32 x 4 process(es)");
    acc2 = last_test_acc(out);
    CHECK_NEAR(acc2, acc1, 1e-9);
    same_params(one, two, 1e-6);
    unlink(one);
    unlink(two);
}

TEST_T(train_ddp_two_nodes_in_network_namespaces, 240) {
    need_data();
    char a[32], b[32];
    t_netns_pair("T", 9, a, b);
    int rc;
    const char *one = tmp("one_ns.st"), *two = tmp("two_ns.st");
    double acc1;
    one_node_four(one, &acc1);
    rc = run(
        150,
        "ip netns exec %s %s --nnodes=2 --node-rank=1 --nproc-per-node=2 --master-addr=198.18.9.1 "
        "--master-port=29470 %s --epochs 1 --max-batches 60 --log-every 0 >/dev/null 2>&1 & "
        "ip netns exec %s %s --nnodes=2 --node-rank=0 --nproc-per-node=2 --master-addr=198.18.9.1 "
        "--master-port=29470 %s --epochs 1 --max-batches 60 --log-every 0 --checkpoint %s 2>&1; "
        "r0=$?; wait $!; echo \"rc0=$r0 rc1=$?\"",
        b, t_bin("ddpc-run"), t_bin("ddpc-train"), a, t_bin("ddpc-run"), t_bin("ddpc-train"), two);
    static char saved[sizeof out];
    snprintf(saved, sizeof saved, "%s", out);
    t_netns_del(a, b);
    CHECK_MSG(rc == 0, "2 nodes x 2 in namespaces: rc=%d: %s", rc, saved);
    CHECK_CONTAINS(saved, "rc0=0 rc1=0");
    CHECK_NEAR(last_test_acc(saved), acc1, 1e-9);
    same_params(one, two, 1e-6);
    unlink(one);
    unlink(two);
}

TEST_T(train_ddp_example_runs, 120) {
    need_data();
    /* the seed's program, its 10 epochs' output from rank 0 */
    int rc = run(100, "%s --standalone --nproc-per-node=2 %s 2>&1", t_bin("ddpc-run"),
                 t_bin("ddp_mnist"));
    CHECK_MSG(rc == 0, "rc=%d: %s", rc, out);
    CHECK_CONTAINS(out, "[0]: Epoch: 0 | Batch: 0 | Loss: ");
    CHECK_CONTAINS(out, "[0]: Epoch: 9 | Batch: 900 | Loss: ");
    CHECK_CONTAINS(out, "[0]: Epoch: 9 | ddpc | ");
    CHECK(strstr(out, "[1]: Epoch:") == NULL); /* only rank 0 prints */
}

/* Rank 0's "Epoch: ..." lines with every decimal fraction as '#' and the
 * backend's name as '*': what the two examples must print alike. */
static void line_shapes(const char *text, char *dst, size_t len) {
    size_t k = 0;
    for (const char *l = strstr(text, "[0]: Epoch: "); l && k + 1 < len;
         l = strstr(l + 1, "[0]: Epoch: ")) {
        const char *end = strchr(l, '\n');
        if (!end) end = l + strlen(l);
        for (const char *c = l; c < end && k + 2 < len; c++) {
            if (!strncmp(c, "| ddpc |", 8) || !strncmp(c, "| gloo |", 8)) {
                k += (size_t)snprintf(dst + k, len - k, "| * |");
                c += 7;
            } else if (*c >= '0' && *c <= '9') {
                const char *d = c;
                while (d < end && ((*d >= '0' && *d <= '9') || *d == '.')) d++;
                if (memchr(c, '.', (size_t)(d - c))) { /* a measurement: its shape only */
                    dst[k++] = '#';
                    c = d - 1;
                } else {
                    dst[k++] = *c; /* an epoch or batch number: must be equal */
                }
            } else {
                dst[k++] = *c;
            }
        }
        dst[k++] = '\n';
    }
    dst[k] = '\0';
}

/* The two examples are one program (issue 31): examples/ddp_mnist.c and
 * examples/ddp_mnist.py (PyTorch, backend gloo), given the same arguments,
 * run the same epochs and print the same lines from rank 0 (the loss every
 * 100 batches, each epoch's seconds, mean loss and test accuracy),
 * measurements aside. */
TEST_T(train_ddp_example_twins_print_alike, 180) {
    need_data();
    if (run(30, "/usr/bin/python3 -c 'import torch.distributed' 2>&1") != 0)
        SKIP("/usr/bin/python3 cannot import torch (apt-get install python3-torch)");
    const char *f = __FILE__, *slash = strrchr(f, '/');
    char py[1024];
    snprintf(py, sizeof py, "%.*s%sexamples/ddp_mnist.py", slash ? (int)(slash - f) : 0, f,
             slash ? "/../../" : "../../");
    const char *args = "--limit 12800 --data " DATA; /* their default epochs, 10 */
    static char c_lines[8192], py_lines[8192];
    int rc = run(100, "%s --standalone --nproc-per-node=2 %s %s 2>&1", t_bin("ddpc-run"),
                 t_bin("ddp_mnist"), args);
    CHECK_MSG(rc == 0, "ddp_mnist: rc=%d: %s", rc, out);
    line_shapes(out, c_lines, sizeof c_lines);
    rc = run(150, "%s --standalone --nproc-per-node=2 /usr/bin/python3 %s --backend gloo %s 2>&1",
             t_bin("ddpc-run"), py, args);
    CHECK_MSG(rc == 0, "ddp_mnist.py: rc=%d: %s", rc, out);
    line_shapes(out, py_lines, sizeof py_lines);
    CHECK_CONTAINS(c_lines, "[0]: Epoch: 9 | Batch: 100 | Loss: #\n"
                            "[0]: Epoch: 9 | * | # s | loss # | test accuracy #\n");
    CHECK_MSG(!strcmp(c_lines, py_lines),
              "the examples print different lines:\n"
              "ddp_mnist.c:\n%s\nddp_mnist.py:\n%s",
              c_lines, py_lines);
}
