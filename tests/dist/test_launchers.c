/* test_launchers.c — torchrun and ddpc-run are interchangeable: ddpc's
 * programs (ddpc-train, the example) under PyTorch's launchers (torchrun
 * with its agent's store, 1 and 2 nodes, and with its c10d rendezvous;
 * torch.distributed.launch, which passes --local_rank; an elastic restart),
 * giving ddpc-run's model bit for bit, and a PyTorch gloo DDP program under
 * ddpc-run (1 and 2 nodes, a restart), everything on loopback; torch 2.x's
 * torchrun and a torch 2.x gloo program too when DDPC_TEST_TORCH2_PY names
 * a Python with torch 2.x (they skip otherwise).
 *
 * PyTorch's launchers run from /usr/bin/python3 through tests/py/torchrun.py,
 * which fixes the one parser that breaks Debian 12's torch 1.13 on Python
 * 3.11 and runs them otherwise unchanged. Each test skips when
 * /usr/bin/python3 cannot import torch; those that train skip without the
 * Fashion-MNIST data. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"

#define DATA   "/usr/share/datasets/fashion-mnist"
#define PYTHON "/usr/bin/python3"

static char out[1 << 20];

/* Runs a shell command line built from fmt; returns its exit code (-1 on
 * the deadline), its output in out. */
#define run(timeout_s, ...) t_run_cmdf((timeout_s), out, sizeof out, __VA_ARGS__)

/* tests/py, found from this file's path (the tests run from the repository
 * root, where make compiles them as tests/dist/test_launchers.c). */
static const char *py(const char *name) {
    static char bufs[4][1024];
    static int next;
    char *b = bufs[next++ % 4];
    const char *f = __FILE__, *slash = strrchr(f, '/');
    int dir = slash ? (int)(slash - f) : 0; /* .../tests/dist */
    snprintf(b, sizeof bufs[0], "%.*s%spy/%s", dir, f, dir ? "/../" : "../", name);
    CHECK_MSG(access(b, R_OK) == 0, "%s not found (run the tests from the repository root)", b);
    return b;
}

static void need_torch(void) {
    if (run(30, PYTHON " -c 'import torch.distributed.run, torch.distributed.launch' 2>&1") != 0) {
        size_t n = strlen(out); /* the traceback's last line says why */
        while (n && out[n - 1] == '\n') out[--n] = '\0';
        const char *why = strrchr(out, '\n');
        SKIP(PYTHON " cannot import torch (apt-get install python3-torch): %s",
             why ? why + 1 : out);
    }
}

/* The torch 2.x Python named by DDPC_TEST_TORCH2_PY (the Makefile's venv);
 * skips the test when it is unset or cannot import torch 2.x. */
static const char *need_torch2(void) {
    const char *p = getenv("DDPC_TEST_TORCH2_PY");
    if (!p || !*p)
        SKIP("DDPC_TEST_TORCH2_PY is unset: it names a Python with torch 2.x (the Makefile sets "
             "build/venv-torch2/bin/python)");
    if (run(30,
            "%s -c 'import sys, torch.distributed.run; "
            "sys.exit(torch.__version__.startswith(\"1.\"))' 2>&1",
            p) != 0)
        SKIP("DDPC_TEST_TORCH2_PY=%s cannot import torch 2.x: %.300s", p, out);
    return p;
}

static void need_data(void) {
    if (access(DATA "/train-images-idx3-ubyte.gz", R_OK) != 0)
        SKIP("Fashion-MNIST is not installed in " DATA " (apt-get install dataset-fashion-mnist)");
}

/* A tool of ours, built. */
static const char *bin(const char *name) {
    const char *b = t_bin(name);
    CHECK_MSG(access(b, X_OK) == 0, "%s is not built (make tools examples)", b);
    return b;
}

/* torchrun (or, with launch, torch.distributed.launch) through the wrapper,
 * on loopback, checking its workers every 0.2 s (the default 5 s would make
 * every run last 5 s). */
static const char *torchrun(int launch) {
    static char b[2][1200];
    snprintf(b[launch], sizeof b[0], PYTHON " %s%s --monitor_interval=0.2 --master_addr=127.0.0.1",
             py("torchrun.py"), launch ? " --launch" : "");
    return b[launch];
}

/* An executable shell script name in the test's scratch directory; returns
 * its path (one of t_tmp_path's 8 buffers). */
static const char *script(const char *name, const char *body) {
    const char *p = t_tmp_path(name);
    FILE *f = fopen(p, "w");
    CHECK(f != NULL);
    fprintf(f, "#!/bin/sh\n%s", body);
    fclose(f);
    CHECK(chmod(p, 0755) == 0);
    return p;
}

/* The worker wrapper: runs "$@", then says which worker it was, what the
 * launcher gave it, its first argument and how the program ended. torchrun
 * stops a worker by signalling only the process it started, so the wrapper
 * passes SIGTERM on to the program (else it would outlive the launcher). */
static const char *worker_sh(void) {
    return script(
        "worker.sh",
        "\"$@\" &\n"
        "pid=$!\n"
        "trap 'kill -TERM $pid 2>/dev/null' TERM INT\n"
        "while :; do wait $pid; rc=$?; kill -0 $pid 2>/dev/null || break; done\n"
        "echo \"worker rank=$RANK local=$LOCAL_RANK world=$WORLD_SIZE "
        "agent=$TORCHELASTIC_USE_AGENT_STORE attempt=$TORCHELASTIC_RESTART_COUNT arg1=$2 rc=$rc\"\n"
        "exit $rc\n");
}

/* Runs "$@", except in rank 1's first attempt, which fails (exit 3). */
static const char *fail_once_sh(void) {
    return script("fail_once.sh",
                  "if [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ] && [ \"$RANK\" = 1 ]; then\n"
                  "  echo \"rank 1 fails attempt 0 on purpose\"; exit 3\n"
                  "fi\n"
                  "exec \"$@\"\n");
}

/* Fails unless out has "worker rank=R ... world=W agent=AGENT attempt=A
 * ... rc=0" for every rank R of W, 2 a node (agent: the launcher's agent
 * hosts the store; torchrun says True for its default static rendezvous). */
static void workers_ok(int world, const char *agent, int attempt, const char *what) {
    for (int r = 0; r < world; r++) {
        char want[160];
        snprintf(want, sizeof want, "worker rank=%d local=%d world=%d agent=%s attempt=%d ", r,
                 r % 2, world, agent, attempt);
        const char *p = strstr(out, want);
        CHECK_MSG(p != NULL, "%s: no line \"%s...\" in: %s", what, want, out);
        const char *e = strchr(p, '\n');
        CHECK_MSG(e && e - p >= 5 && !strncmp(e - 5, " rc=0", 5), "%s: rank %d failed: %.*s\n%s",
                  what, r, e ? (int)(e - p) : 80, p, out);
    }
}

static void all_workers_ok(int world, int attempt, const char *what) {
    workers_ok(world, "True", attempt, what);
}

static const char *TRAIN_ARGS = "--epochs 1 --max-batches 20 --max-eval-batches 5 --log-every 10";

/* The same job under ddpc-run, for the checkpoint to compare with. */
static void ddpc_run_reference(int nproc, const char *ckpt) {
    int rc = run(60, "%s --nproc-per-node=%d --master-port=%d %s %s --checkpoint %s 2>&1",
                 bin("ddpc-run"), nproc, t_free_port(), bin("ddpc-train"), TRAIN_ARGS, ckpt);
    CHECK_MSG(rc == 0, "ddpc-run reference: rc=%d: %s", rc, out);
}

static void same_file(const char *a, const char *b) {
    char cmd[2200];
    snprintf(cmd, sizeof cmd, "cmp %s %s 2>&1", a, b);
    static char o[1024];
    int rc = t_run_cmd(cmd, 10, o, sizeof o);
    CHECK_MSG(rc == 0, "checkpoints differ: %s", o);
}

/* a. ddpc-train, 1 node x 2 processes under torchrun: both ranks train over
 * the agent's store (keys under ddpc/attempt_0/) and end with the same
 * checkpoint as under ddpc-run. */
TEST_T(launchers_torchrun_ddpc_train_1x2, 90) {
    need_torch();
    need_data();
    const char *w = worker_sh(), *ckpt = t_tmp_path("torchrun.st"),
               *ref = t_tmp_path("ddpc-run.st");
    int rc = run(
        60,
        "DDPC_DEBUG=INFO DDPC_DEBUG_SUBSYS=INIT %s --nproc_per_node=2 --master_port=%d --no_python "
        "%s %s %s --checkpoint %s 2>&1",
        torchrun(0), t_free_port(), w, bin("ddpc-train"), TRAIN_ARGS, ckpt);
    CHECK_MSG(rc == 0, "rc=%d: %s", rc, out);
    all_workers_ok(2, 0, "torchrun 1x2");
    CHECK_CONTAINS(out, "batch 32 x 2 process(es)");
    CHECK_CONTAINS(out, "epoch 0: loss ");
    CHECK_CONTAINS(out, "keys under ddpc/attempt_0/");
    CHECK(strstr(out, "attempt_1") == NULL);
    ddpc_run_reference(2, ref);
    same_file(ckpt, ref);
    t_tmp_remove();
}

/* a3. the same under torch 2.x's torchrun (DDPC_TEST_TORCH2_PY), run as it
 * comes: its agent's store is torch 2.x's TCPStore, which ddpc's client
 * finds silent to ddpc's handshake and answering 2.x's VALIDATE. */
TEST_T(launchers_torchrun2_ddpc_train_1x2, 90) {
    const char *py2 = need_torch2();
    need_data();
    const char *w = worker_sh(), *ckpt = t_tmp_path("torchrun.st"),
               *ref = t_tmp_path("ddpc-run.st");
    int rc = run(60,
                 "DDPC_DEBUG=INFO DDPC_DEBUG_SUBSYS=INIT %s -m torch.distributed.run "
                 "--monitor_interval=0.2 --master_addr=127.0.0.1 --nproc_per_node=2 "
                 "--master_port=%d --no_python %s %s %s --checkpoint %s 2>&1",
                 py2, t_free_port(), w, bin("ddpc-train"), TRAIN_ARGS, ckpt);
    CHECK_MSG(rc == 0, "rc=%d: %s", rc, out);
    all_workers_ok(2, 0, "torch 2.x torchrun 1x2");
    CHECK_CONTAINS(out, "batch 32 x 2 process(es)");
    CHECK_CONTAINS(out, "epoch 0: loss ");
    CHECK_CONTAINS(out, "keys under ddpc/attempt_0/");
    ddpc_run_reference(2, ref);
    same_file(ckpt, ref);
    t_tmp_remove();
}

/* b. ddpc-train, 2 nodes x 2 processes: two torchruns on loopback started
 * together (node 1 first), node 0's agent hosting the store; the model is
 * ddpc-run's 1 x 4 one. */
TEST_T(launchers_torchrun_ddpc_train_2x2, 120) {
    need_torch();
    need_data();
    const char *w = worker_sh(), *ckpt = t_tmp_path("torchrun.st"),
               *ref = t_tmp_path("ddpc-run.st");
    int port = t_free_port();
    int rc =
        run(90,
            "%s --nnodes=2 --node_rank=1 --nproc_per_node=2 --master_port=%d --no_python %s %s %s "
            "2>&1 & "
            "%s --nnodes=2 --node_rank=0 --nproc_per_node=2 --master_port=%d --no_python %s %s %s "
            "--checkpoint %s 2>&1; r0=$?; wait $!; echo \"rc0=$r0 rc1=$?\"",
            torchrun(0), port, w, bin("ddpc-train"), TRAIN_ARGS, torchrun(0), port, w,
            bin("ddpc-train"), TRAIN_ARGS, ckpt);
    CHECK_MSG(rc == 0, "rc=%d: %s", rc, out);
    CHECK_MSG(strstr(out, "rc0=0 rc1=0") != NULL, "a node failed: %s", out);
    all_workers_ok(4, 0, "torchrun 2x2");
    CHECK_CONTAINS(out, "batch 32 x 4 process(es)");
    ddpc_run_reference(4, ref);
    same_file(ckpt, ref);
    t_tmp_remove();
}

/* a2. torchrun's c10d rendezvous (what --standalone uses; here on a port
 * of our own): no agent store (TORCHELASTIC_USE_AGENT_STORE=False), so
 * ddpc's rank 0 hosts the store at MASTER_PORT, a port torchrun chose. */
TEST_T(launchers_torchrun_c10d_rendezvous_1x2, 90) {
    need_torch();
    need_data();
    const char *w = worker_sh(), *ckpt = t_tmp_path("torchrun.st"),
               *ref = t_tmp_path("ddpc-run.st");
    int rc =
        run(60,
            "%s --nproc_per_node=2 --rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:%d --rdzv_id=c10d "
            "--no_python %s %s %s --checkpoint %s 2>&1",
            torchrun(0), t_free_port(), w, bin("ddpc-train"), TRAIN_ARGS, ckpt);
    CHECK_MSG(rc == 0, "rc=%d: %s", rc, out);
    workers_ok(2, "False", 0, "torchrun c10d 1x2");
    CHECK_CONTAINS(out, "batch 32 x 2 process(es)");
    ddpc_run_reference(2, ref);
    same_file(ckpt, ref);
    t_tmp_remove();
}

/* c. the example, the classic DDP MNIST program in C, under torchrun 1x2:
 * its 10 epochs, rank 0 printing. */
TEST_T(launchers_torchrun_example_1x2, 120) {
    need_torch();
    need_data();
    const char *w = worker_sh();
    int rc = run(100, "%s --nproc_per_node=2 --master_port=%d --no_python %s %s 2>&1", torchrun(0),
                 t_free_port(), w, bin("ddp_mnist"));
    CHECK_MSG(rc == 0, "rc=%d: %s", rc, out);
    all_workers_ok(2, 0, "example under torchrun");
    CHECK_CONTAINS(out, "Epoch: 0 | Batch: 0 | Loss: ");
    CHECK_CONTAINS(out, "Epoch: 9 | Batch: 900 | Loss: ");
    t_tmp_remove();
}

/* A Python script name that runs "worker.sh PROGRAM ARGS": what
 * torch.distributed.launch (without --use_env) starts as
 * "python -u SCRIPT --local_rank=N ARGS", since its --no_python needs
 * --use_env. */
static const char *launch_script(const char *name, const char *worker, const char *program) {
    const char *p = t_tmp_path(name);
    FILE *f = fopen(p, "w");
    CHECK(f != NULL);
    fprintf(f, "import os, sys\nos.execv('/bin/sh', ['sh', '%s', '%s'] + sys.argv[1:])\n", worker,
            program);
    fclose(f);
    return p;
}

/* d. torch.distributed.launch without --use_env passes --local_rank=N
 * first: ddpc-train and the example accept it. Then the spelling of newer
 * launchers, --local-rank=N, given to ddpc-train under ddpc-run. */
TEST_T(launchers_launch_passes_local_rank, 90) {
    need_torch();
    need_data();
    const char *w = worker_sh();
    int rc = run(60, "%s --nproc_per_node=2 --master_port=%d %s %s 2>&1", torchrun(1),
                 t_free_port(), launch_script("train.py", w, bin("ddpc-train")), TRAIN_ARGS);
    CHECK_MSG(rc == 0, "rc=%d: %s", rc, out);
    all_workers_ok(2, 0, "ddpc-train under torch.distributed.launch");
    CHECK_CONTAINS(out,
                   "worker rank=0 local=0 world=2 agent=True attempt=0 arg1=--local_rank=0 rc=0");
    CHECK_CONTAINS(out,
                   "worker rank=1 local=1 world=2 agent=True attempt=0 arg1=--local_rank=1 rc=0");
    CHECK_CONTAINS(out, "batch 32 x 2 process(es)");
    /* the example, its --data after --local_rank=N */
    rc = run(60, "%s --nproc_per_node=2 --master_port=%d %s --data " DATA " 2>&1", torchrun(1),
             t_free_port(), launch_script("example.py", w, bin("ddp_mnist")));
    CHECK_MSG(rc == 0, "example under torch.distributed.launch: rc=%d: %s", rc, out);
    CHECK_CONTAINS(out,
                   "worker rank=0 local=0 world=2 agent=True attempt=0 arg1=--local_rank=0 rc=0");
    CHECK_CONTAINS(out,
                   "worker rank=1 local=1 world=2 agent=True attempt=0 arg1=--local_rank=1 rc=0");
    CHECK_CONTAINS(out, "Epoch: 9 | Batch: 900 | Loss: ");
    /* --local-rank=N (torch >= 2.0's launch), under ddpc-run */
    rc = run(60,
             "%s --nproc-per-node=2 --master-port=%d /bin/sh -c 'exec \"$0\" "
             "--local-rank=$LOCAL_RANK \"$@\"' "
             "%s %s 2>&1",
             bin("ddpc-run"), t_free_port(), bin("ddpc-train"), TRAIN_ARGS);
    CHECK_MSG(rc == 0, "--local-rank under ddpc-run: rc=%d: %s", rc, out);
    CHECK_CONTAINS(out, "batch 32 x 2 process(es)");
    t_tmp_remove();
}

/* e. an elastic restart: rank 1 fails its first attempt, torchrun
 * (--max_restarts=1) stops rank 0 and starts both again; the second
 * attempt's ranks meet under ddpc/attempt_1/ in the same agent store. */
TEST_T(launchers_torchrun_restart, 120) {
    need_torch();
    need_data();
    const char *w = worker_sh();
    const char *fail = fail_once_sh();
    int rc = run(90,
                 "DDPC_DEBUG=INFO DDPC_DEBUG_SUBSYS=INIT %s --nproc_per_node=2 --max_restarts=1 "
                 "--master_port=%d "
                 "--no_python %s %s %s %s 2>&1",
                 torchrun(0), t_free_port(), w, fail, bin("ddpc-train"), TRAIN_ARGS);
    CHECK_MSG(rc == 0, "rc=%d: %s", rc, out);
    CHECK_CONTAINS(out, "rank 1 fails attempt 0 on purpose");
    CHECK_CONTAINS(out, "worker rank=1 local=1 world=2 agent=True attempt=0 arg1=");
    all_workers_ok(2, 1, "attempt 1 after a restart");
    CHECK_CONTAINS(out, "keys under ddpc/attempt_1/");
    CHECK_CONTAINS(out, "batch 32 x 2 process(es)");
    CHECK_CONTAINS(out, "epoch 0: loss ");
    t_tmp_remove();
}

/* f. a PyTorch program (gloo DDP, init_method='env://') under ddpc-run,
 * 1 node x 2 processes: told TORCHELASTIC_USE_AGENT_STORE=True, every rank's
 * TCPStore is a client of ddpc-run's store at MASTER_ADDR:MASTER_PORT (it
 * would wait in vain for a store nobody hosts otherwise); its replicas agree
 * and its all_reduce adds up. */
TEST_T(launchers_ddpc_run_pytorch_gloo_1x2, 90) {
    need_torch();
    int rc = run(60, "%s --nproc-per-node=2 --master-port=%d " PYTHON " %s 2>&1", bin("ddpc-run"),
                 t_free_port(), py("ddp_gloo.py"));
    CHECK_MSG(rc == 0, "rc=%d: %s", rc, out);
    CHECK_CONTAINS(out, "[0]: ddp_gloo ok rank 0 world 2 store agent attempt 0 ");
    CHECK_CONTAINS(out, "[1]: ddp_gloo ok rank 1 world 2 store agent attempt 0 ");
}

/* f2. the same program under torch 2.x (DDPC_TEST_TORCH2_PY): its
 * TCPStore client validates, then speaks 2.x's queries to ddpc-run's store. */
TEST_T(launchers_ddpc_run_pytorch2_gloo_1x2, 90) {
    const char *py2 = need_torch2();
    int rc = run(60, "%s --nproc-per-node=2 --master-port=%d %s %s 2>&1", bin("ddpc-run"),
                 t_free_port(), py2, py("ddp_gloo.py"));
    CHECK_MSG(rc == 0, "rc=%d: %s", rc, out);
    CHECK_CONTAINS(out, "[0]: ddp_gloo ok rank 0 world 2 store agent attempt 0 ");
    CHECK_CONTAINS(out, "[1]: ddp_gloo ok rank 1 world 2 store agent attempt 0 ");
}

/* g. the same, 2 nodes x 2 processes: two ddpc-runs on loopback. */
TEST_T(launchers_ddpc_run_pytorch_gloo_2x2, 90) {
    need_torch();
    int port = t_free_port();
    int rc =
        run(60,
            "%s --nnodes=2 --node-rank=1 --nproc-per-node=2 --master-port=%d " PYTHON " %s 2>&1 & "
            "%s --nnodes=2 --node-rank=0 --nproc-per-node=2 --master-port=%d " PYTHON " %s 2>&1; "
            "r0=$?; wait $!; echo \"rc0=$r0 rc1=$?\"",
            bin("ddpc-run"), port, py("ddp_gloo.py"), bin("ddpc-run"), port, py("ddp_gloo.py"));
    CHECK_MSG(rc == 0, "rc=%d: %s", rc, out);
    CHECK_MSG(strstr(out, "rc0=0 rc1=0") != NULL, "a node failed: %s", out);
    for (int r = 0; r < 4; r++) {
        char want[64];
        snprintf(want, sizeof want, "ddp_gloo ok rank %d world 4 store agent attempt 0 ", r);
        CHECK_CONTAINS(out, want);
    }
}

/* h. the PyTorch program restarted by ddpc-run: rank 1 fails attempt 0, and
 * attempt 1's ranks meet in ddpc-run's store under torch's own
 * /worker/attempt_1 prefix (TORCHELASTIC_RESTART_COUNT). */
TEST_T(launchers_ddpc_run_pytorch_gloo_restart, 90) {
    need_torch();
    const char *fail = fail_once_sh();
    int rc = run(
        60,
        "%s --nproc-per-node=2 --max-restarts=1 --monitor-interval=0.2 --master-port=%d %s " PYTHON
        " %s 2>&1",
        bin("ddpc-run"), t_free_port(), fail, py("ddp_gloo.py"));
    CHECK_MSG(rc == 0, "rc=%d: %s", rc, out);
    CHECK_CONTAINS(out, "[1]: rank 1 fails attempt 0 on purpose");
    CHECK_CONTAINS(out, "[0]: ddp_gloo ok rank 0 world 2 store agent attempt 1 ");
    CHECK_CONTAINS(out, "[1]: ddp_gloo ok rank 1 world 2 store agent attempt 1 ");
    CHECK(strstr(out, "attempt 0 loss") == NULL);
    t_tmp_remove();
}
