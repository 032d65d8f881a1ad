/* test_torch_npu.c — scripts written for Ascend (torch_npu, backend 'hccl')
 * on CPUs, through ddpc_torch_npu (bridges/torch_npu) and ddpc's backend:
 *   - torch.npu's calls, npu tensors bit for bit the CPU's, views, out=,
 *     refusals by name, and every collective on npu tensors through 'hccl'
 *     (tests/py/torch_npu_checks.py) at 2 ranks;
 *   - with TORCH_DEVICE_BACKEND_AUTOLOAD=0, importing ddpc_torch alone
 *     renames nothing;
 *   - the seed's program as written for Ascend (examples/ddp_mnist_npu.py),
 *     unchanged, one epoch of Fashion-MNIST (laid out where torchvision's
 *     MNIST finds it) at 2 ranks under torchrun: parameters and loss lines
 *     bit-identical to the same script edited for 'cpu' and 'gloo'; then on
 *     a shorter epoch (3200 samples) under torch.distributed.launch
 *     --use-env, ddpc-run, and two torchrun launchers as two nodes.
 *
 * Python: the venv of DDPC_TEST_TORCH_NPU_PY (make test sets it when make
 * torch-npu has installed both packages there, torch 2.14.1 and
 * torchvision 0.29.1); skipped, saying so, without it or the data. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"

#define DATA "/usr/share/datasets/fashion-mnist"

static char out[1 << 20];

#define run(timeout_s, ...) t_run_cmdf((timeout_s), out, sizeof out, __VA_ARGS__)

/* A file of the repository as an absolute path (the tests run from the
 * repository root; the runs below change directory). */
static const char *repo(const char *name) {
    static char bufs[4][PATH_MAX];
    static int next;
    char *b = bufs[next++ % 4];
    CHECK_MSG(realpath(name, b) != NULL, "%s not found (run the tests from the repository root)",
              name);
    return b;
}

/* The venv's Python, after checking it imports both packages. */
static const char *need_python(void) {
    const char *p = getenv("DDPC_TEST_TORCH_NPU_PY");
    const char *pre = getenv("DDPC_TEST_PRELOAD");
    if (pre && *pre)
        SKIP("a sanitizer build: the torch 2.14 venv holds pip's plain builds (the plain run "
             "tests them)");
    if (!p || !*p)
        SKIP("no torch 2.14.1 venv with ddpc_torch_npu (DDPC_TEST_TORCH_NPU_PY unset: "
             "DDPC_SETUP_PEERS=1 bash scripts/setup.sh; make torch-npu)");
    if (run(120, "%s -c 'import torch, torchvision; torch.npu.device_count()' 2>&1", p) != 0) {
        size_t n = strlen(out);
        while (n && out[n - 1] == '\n') out[--n] = '\0';
        const char *why = strrchr(out, '\n');
        SKIP("torch.npu is not served by %s (make torch-npu): %s", p, why ? why + 1 : out);
    }
    return p;
}

static void need_data(void) {
    if (access(DATA "/train-images-idx3-ubyte.gz", R_OK) != 0)
        SKIP("Fashion-MNIST is not installed in " DATA " (apt-get install dataset-fashion-mnist)");
}

#define ENV "HCCL_IF_IP=127.0.0.1 TORCH_CPP_LOG_LEVEL=ERROR OMP_NUM_THREADS=1"

TEST_T(torch_npu_device_and_hccl_collectives_2_ranks, 300) {
    const char *py = need_python();
    int rc = run(240, ENV " %s --nproc-per-node=2 --master-port=%d %s %s 2>&1", t_bin("ddpc-run"),
                 t_free_port(), py, repo("tests/py/torch_npu_checks.py"));
    CHECK_MSG(rc == 0, "rc=%d: %s", rc, out);
    CHECK_CONTAINS(out, "npu checks ok on 2 ranks");
}

TEST_T(torch_npu_not_loaded_by_ddpc_torch_alone, 120) {
    const char *py = need_python();
    int rc = run(100,
                 "TORCH_DEVICE_BACKEND_AUTOLOAD=0 %s -c 'import torch, ddpc_torch; "
                 "print(torch._C._get_privateuse1_backend_name(), hasattr(torch, \"npu\"))' 2>&1",
                 py);
    CHECK_MSG(rc == 0, "rc=%d: %s", rc, out);
    CHECK_CONTAINS(out, "privateuseone False");
}

/* Either package imported before torch: torch's autoload then loads
 * ddpc_torch_npu while ddpc_torch is still importing torch (this failed
 * with a circular import once). */
TEST_T(torch_npu_either_package_imported_before_torch, 120) {
    const char *py = need_python();
    const char *names[] = { "ddpc_torch", "ddpc_torch_npu" };
    for (int i = 0; i < 2; i++) {
        int rc = run(100,
                     "%s -c 'import %s, torch, torch.distributed as d; "
                     "print(\"DDPC\" in d.Backend._plugins, \"HCCL\" in d.Backend._plugins, "
                     "torch.npu.device_count() >= 1)' 2>&1",
                     py, names[i]);
        CHECK_MSG(rc == 0, "import %s first: rc=%d: %s", names[i], rc, out);
        CHECK_CONTAINS(out, "True True True");
    }
}

/* Runs the seed's program (its cpu/gloo edit when gloo) in dir/name under
 * launch, a printf format taking (python, port, script): rank 0's loss
 * lines go to dir/name/losses.txt, its parameters to dir/name/mnist_ddp.pt. */
static void seed_run(const char *dir, const char *name, const char *py, int gloo,
                     const char *launch) {
    char copy[2048], cmd[4096];
    const char *script = repo("examples/ddp_mnist_npu.py");
    if (gloo)
        snprintf(copy, sizeof copy, "sh %s gloo %s", repo("tests/py/npu_seed_edit.sh"), script);
    else
        snprintf(copy, sizeof copy, "cat %s", script);
    int rc = run(60, "set -e; mkdir -p %s/%s; cd %s/%s; ln -sfn ../data data; %s > seed.py", dir,
                 name, dir, name, copy);
    CHECK_MSG(rc == 0, "%s: rc=%d: %s", name, rc, out);
    snprintf(cmd, sizeof cmd, launch, py, t_free_port(), "seed.py");
    rc = run(400,
             "cd %s/%s && export " ENV
             " && { %s; } > out.txt 2>&1; rc=$?; grep -o 'Epoch: .*' out.txt > losses.txt; "
             "[ $rc = 0 ] || tail -30 out.txt; exit $rc",
             dir, name, cmd);
    CHECK_MSG(rc == 0, "%s: rc=%d: %s", name, rc, out);
}

/* dir/name's parameters and loss lines are dir/ref's, bit for bit. */
static void seed_same(const char *dir, const char *name, const char *py) {
    int rc = run(100,
                 "cd %s && cmp ref/losses.txt %s/losses.txt && [ -s ref/losses.txt ] && "
                 "%s -c \"import torch; a=torch.load('ref/mnist_ddp.pt'); "
                 "b=torch.load('%s/mnist_ddp.pt', map_location='cpu'); "
                 "print('same' if all(torch.equal(a[k], b[k]) for k in a) else 'differ', "
                 "max((a[k]-b[k]).abs().max().item() for k in a))\" 2>&1",
                 dir, name, py, name);
    CHECK_MSG(rc == 0, "%s: the loss lines or parameters differ from cpu/gloo's: rc=%d: %s", name,
              rc, out);
    CHECK_MSG(!strncmp(out, "same", 4), "%s: the parameters differ from cpu/gloo's: %s", name, out);
}

static const char *seed_dir(const char *py, int samples) {
    need_data();
    const char *dir = t_tmp_path("seed");
    int rc = run(120, "%s %s " DATA " %s/data %d 2>&1", py, repo("tests/py/npu_seed_data.py"), dir,
                 samples);
    CHECK_MSG(rc == 0, "data: rc=%d: %s", rc, out);
    return dir;
}

#define TORCHRUN "%s -m torch.distributed.run --nproc_per_node=2 --master_port=%d %s"

TEST_T(torch_npu_seed_program_epoch_bit_identical_to_cpu_gloo, 600) {
    const char *py = need_python();
    const char *dir = seed_dir(py, 0);
    seed_run(dir, "ref", py, 1, TORCHRUN);
    seed_run(dir, "torchrun", py, 0, TORCHRUN);
    seed_same(dir, "torchrun", py);
    run(60, "rm -rf %s", dir);
}

TEST_T(torch_npu_seed_program_launchers_bit_identical_to_cpu_gloo, 600) {
    const char *py = need_python();
    const char *dir = seed_dir(py, 3200);
    char ddpc_run[1024], nodes[2048];
    snprintf(ddpc_run, sizeof ddpc_run, "%s --nproc-per-node=2 --master-port=%%2$d %%1$s %%3$s",
             t_bin("ddpc-run"));
    /* two launchers, one process each, node 1 in the background */
    snprintf(nodes, sizeof nodes,
             "(N='-m torch.distributed.run --nnodes=2 --nproc_per_node=1 --master_addr=127.0.0.1 "
             "--master_port=%%2$d'; %%1$s $N --node_rank=1 %%3$s > node1.txt 2>&1 & n1=$!; "
             "%%1$s $N --node_rank=0 %%3$s; rc=$?; wait $n1 || rc=$?; exit $rc)");
    seed_run(dir, "ref", py, 1, TORCHRUN);
    seed_run(dir, "launch", py, 0,
             "%s -m torch.distributed.launch --use-env --nproc_per_node=2 --master_port=%d %s");
    seed_same(dir, "launch", py);
    seed_run(dir, "ddpc-run", py, 0, ddpc_run);
    seed_same(dir, "ddpc-run", py);
    seed_run(dir, "nodes", py, 0, nodes);
    seed_same(dir, "nodes", py);
    run(60, "rm -rf %s", dir);
}
