/* test_torch_backend.c — torch.distributed's 'ddpc' backend (bridges/torch)
 * from PyTorch itself, on Debian's torch 1.13 (make torch) and on pip's
 * torch 2.13 (make torch2: a venv, DDPC_TEST_TORCH2_PY): every collective,
 * dtype and size against references at world sizes 2 and 3
 * (tests/py/torch_backend.py), a collective inside a future's callback
 * among them; a lost and a silent peer fail the survivors' calls within the
 * group's timeout, naming it, and a call's own timeout bounds that call
 * (tests/py/torch_fail.py), with env:// and file:// initialisation; DDP and
 * its hooks, ZeRO, FSDP, FSDP2, DTensor and groups train to the same
 * parameters as on 'gloo' (tests/py/torch_features.py); the seed's program
 * (examples/ddp_mnist.py) trained on 'ddpc' ends with the same parameters as
 * on 'gloo'; a CI-sized part of PyTorch's own distributed test suite
 * (tests/py/dist_suite.py --subset ci), on both torches; and on torch 2.13 a
 * CI-sized part of upstream's DTensor tests (tests/py/upstream_suite.py
 * --subset ci), where their files are copied in (tests/py/upstream).
 *
 * Every test skips when its Python cannot import torch or the module is not
 * built; the training one without Fashion-MNIST. In a sanitizer build
 * Python runs with the sanitizers' runtimes preloaded (torch 1.13 only: the
 * venv's module is pip's plain build), and the seed's program, the features
 * and PyTorch's suite are left to the plain build. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"

#define DATA   "/usr/share/datasets/fashion-mnist"
#define PYTHON "/usr/bin/python3"

static char out[1 << 20];

#define run(timeout_s, ...) t_run_cmdf((timeout_s), out, sizeof out, __VA_ARGS__)

/* A file of the repository, found from this file's path (the tests run
 * from the repository root, where make compiles tests/dist/...). */
static const char *repo(const char *name) {
    static char bufs[4][1024];
    static int next;
    char *b = bufs[next++ % 4];
    const char *f = __FILE__, *slash = strrchr(f, '/');
    int dir = slash ? (int)(slash - f) : 0; /* .../tests/dist */
    snprintf(b, sizeof bufs[0], "%.*s%s%s", dir, f, dir ? "/../../" : "../../", name);
    CHECK_MSG(access(b, R_OK) == 0, "%s not found (run the tests from the repository root)", b);
    return b;
}

/* The Python a test runs: Debian's with torch 1.13, or the venv's with
 * torch 2.13 (DDPC_TEST_TORCH2_PY, set by make test when make torch2 has
 * installed ddpc_torch there). */
static int torch2;
static const char *python(void) {
    const char *p = getenv("DDPC_TEST_TORCH2_PY");
    return torch2 ? (p && *p ? p : "") : PYTHON;
}
#define PY python()

/* The environment Python runs in: for torch 1.13, PYTHONPATH=<build>/python,
 * where make torch puts ddpc_torch (the venv has it installed); in a
 * sanitizer build also the sanitizers' runtimes preloaded
 * (DDPC_TEST_PRELOAD, which make sets: Python itself is not built with them,
 * and a module that is cannot load otherwise), Python's own leaks not
 * reported. */
static const char *py_env(void) {
    static char b[4096];
    const char *pre = getenv("DDPC_TEST_PRELOAD");
    int n = torch2 ? snprintf(b, sizeof b, "TORCH_CPP_LOG_LEVEL=ERROR")
                   : snprintf(b, sizeof b, "PYTHONPATH=%s/../python", t_bin(""));
    if (pre && *pre) {
        const char *asan = getenv("ASAN_OPTIONS");
        snprintf(b + n, sizeof b - (size_t)n, " LD_PRELOAD='%s' ASAN_OPTIONS='%s%sdetect_leaks=0'",
                 pre, asan ? asan : "", asan && *asan ? ":" : "");
    }
    return b;
}

/* Whether this is a sanitizer build (make sets DDPC_TEST_PRELOAD there). */
static int sanitized(void) {
    const char *pre = getenv("DDPC_TEST_PRELOAD");
    return pre && *pre;
}

static void need_module(void) {
    if (torch2 && !*python())
        SKIP("no torch 2.x venv (DDPC_TEST_TORCH2_PY unset: DDPC_SETUP_PEERS=1 bash "
             "scripts/setup.sh; "
             "make torch2)");
    if (torch2 && sanitized())
        SKIP("a sanitizer build: the torch 2.x venv holds pip's plain build of ddpc_torch (the "
             "plain "
             "run tests it)");
    if (run(60, "%s %s -c 'import ddpc_torch' 2>&1", py_env(), PY) != 0) {
        size_t n = strlen(out);
        while (n && out[n - 1] == '\n') out[--n] = '\0';
        const char *why = strrchr(out, '\n');
        SKIP("cannot import ddpc_torch with %s (make torch or torch2; DDPC_SETUP_PEERS=1 bash "
             "scripts/setup.sh): %s",
             PY, why ? why + 1 : out);
    }
}

static void need_data(void) {
    if (access(DATA "/train-images-idx3-ubyte.gz", R_OK) != 0)
        SKIP("Fashion-MNIST is not installed in " DATA " (apt-get install dataset-fashion-mnist)");
}

static void checks(int world) {
    need_module();
    int rc = run(240, "%s %s --nproc-per-node=%d --master-port=%d %s %s 2>&1", py_env(),
                 t_bin("ddpc-run"), world, t_free_port(), PY, repo("tests/py/torch_backend.py"));
    CHECK_MSG(rc == 0, "rc=%d: %s", rc, out);
    char want[64];
    snprintf(want, sizeof want, "checks ok on %d ranks (ddpc)", world);
    CHECK_CONTAINS(out, want);
}

TEST_T(torch_backend_collectives_world2, 300) { checks(2); }
TEST_T(torch_backend_collectives_world3, 300) { checks(3); }
TEST_T(torch2_backend_collectives_world2, 300) {
    torch2 = 1;
    checks(2);
}
TEST_T(torch2_backend_collectives_world3, 300) {
    torch2 = 1;
    checks(3);
}

/* mode: exit or silent; init: env:// or a file:// URL. */
static void peer_fails(const char *mode, const char *init) {
    need_module();
    int rc = run(90,
                 "%s TORCH_FAIL_MODE=%s TORCH_FAIL_INIT=%s %s --nproc-per-node=3 "
                 "--master-port=%d %s %s 2>&1",
                 py_env(), mode, init, t_bin("ddpc-run"), t_free_port(), PY,
                 repo("tests/py/torch_fail.py"));
    CHECK_MSG(rc == 0, "rc=%d: %s", rc, out);
    for (int r = 0; r < 3; r += 2) {
        char want[64];
        snprintf(want, sizeof want, "[%d]: rank %d: failed after ", r, r);
        CHECK_CONTAINS(out, want);
    }
    if (strcmp(mode, "call_timeout")) /* that one fails on its own clock, naming none */
        CHECK_CONTAINS(out, "rank 1");
    CHECK(strstr(out, "succeeded without rank 1") == NULL);
}

TEST_T(torch_backend_lost_peer, 120) { peer_fails("exit", "env://"); }
TEST_T(torch_backend_silent_peer_times_out, 120) {
    peer_fails("silent", "env://");
    CHECK_CONTAINS(out, "timed out after 5 s");
}
TEST_T(torch_backend_file_init, 120) {
    char url[1100];
    snprintf(url, sizeof url, "file://%s", t_tmp_path("filestore"));
    peer_fails("exit", url);
    t_tmp_remove();
}
/* A call's own timeout (2 s, the group's 60 s) fails that call in time. */
static void call_timeout(void) {
    peer_fails("call_timeout", "env://");
    CHECK_CONTAINS(out, "did not complete within its timeout (2000 ms)");
}
TEST_T(torch_backend_call_timeout, 120) { call_timeout(); }
TEST_T(torch2_backend_lost_peer, 120) {
    torch2 = 1;
    peer_fails("exit", "env://");
}
TEST_T(torch2_backend_call_timeout, 120) {
    torch2 = 1;
    call_timeout();
}

/* Ranks that disagree get ddpc's mismatch error, also under torch's
 * TORCH_DISTRIBUTED_DEBUG=DETAIL. */
TEST_T(torch_backend_mismatch_named, 120) {
    need_module();
    int rc = run(90,
                 "%s TORCH_FAIL_MODE=mismatch TORCH_DISTRIBUTED_DEBUG=DETAIL %s "
                 "--nproc-per-node=3 "
                 "--master-port=%d %s %s 2>&1",
                 py_env(), t_bin("ddpc-run"), t_free_port(), PY, repo("tests/py/torch_fail.py"));
    CHECK_MSG(rc == 0, "rc=%d: %s", rc, out);
    CHECK_CONTAINS(out, "[1]: rank 1: mismatch: ddpc: ");
    CHECK_CONTAINS(out, "collective mismatch");
    CHECK_CONTAINS(out, "allreduce(count=5, float32, sum)");
}

/* The seed's program on both backends, 2 ranks: the same parameters, bit
 * for bit (a two-rank sum is exact whatever the order); 3 ranks: within
 * float tolerance. */
static void seed(int world, int exact) {
    if (sanitized())
        SKIP("a sanitizer build: an epoch of PyTorch under the preloaded sanitizers takes minutes; "
             "the collectives tests run the same calls of the backend (the plain build runs it)");
    need_module();
    need_data();
    const char *p[2] = { t_tmp_path("gloo.pt"), t_tmp_path("ddpc.pt") };
    const char *backend[2] = { "gloo", "ddpc" };
    for (int b = 0; b < 2; b++) {
        int rc = run(240,
                     "%s %s --nproc-per-node=%d --master-port=%d " PYTHON " %s --backend %s "
                     "--epochs 1 --save %s 2>&1",
                     py_env(), t_bin("ddpc-run"), world, t_free_port(),
                     repo("examples/ddp_mnist.py"), backend[b], p[b]);
        CHECK_MSG(rc == 0, "%s: rc=%d: %s", backend[b], rc, out);
    }
    int rc = run(60,
                 PYTHON " -c \"import torch,sys; a=torch.load('%s'); b=torch.load('%s'); "
                        "same=all(torch.equal(a[k],b[k]) for k in a); "
                        "close=all(torch.allclose(a[k],b[k],rtol=1e-4,atol=1e-5) for k in a); "
                        "print('same' if same else 'close' if close else 'differ', "
                        "max((a[k]-b[k]).abs().max().item() for k in a))\" 2>&1",
                 p[0], p[1]);
    CHECK_MSG(rc == 0, "compare: rc=%d: %s", rc, out);
    if (exact)
        CHECK_MSG(!strncmp(out, "same", 4), "2 ranks: ddpc's parameters differ from gloo's: %s",
                  out);
    else
        CHECK_MSG(!strncmp(out, "same", 4) || !strncmp(out, "close", 5), "parameters differ: %s",
                  out);
    t_tmp_remove();
}

TEST_T(torch_backend_seed_program_2_ranks_bit_identical_to_gloo, 600) { seed(2, 1); }
TEST_T(torch_backend_seed_program_3_ranks_close_to_gloo, 600) { seed(3, 0); }

/* PyTorch's data-parallel features (tests/py/torch_features.py) on both
 * backends: 2 ranks bit-identical, more within float tolerance. only: a
 * comma-separated subset, or NULL for all. */
static void features(int world, int exact, const char *only) {
    if (sanitized())
        SKIP("a sanitizer build: training under the preloaded sanitizers takes minutes; the "
             "collectives tests run the same calls of the backend (the plain build runs it)");
    need_module();
    const char *p[2] = { t_tmp_path("gloo.pt"), t_tmp_path("ddpc.pt") };
    const char *backend[2] = { "gloo", "ddpc" };
    for (int b = 0; b < 2; b++) {
        int rc = run(
            400, "%s %s --nproc-per-node=%d --master-port=%d %s %s --backend %s --save %s%s%s 2>&1",
            py_env(), t_bin("ddpc-run"), world, t_free_port(), PY,
            repo("tests/py/torch_features.py"), backend[b], p[b], only ? " --only " : "",
            only ? only : "");
        CHECK_MSG(rc == 0, "%s: rc=%d: %s", backend[b], rc, out);
        CHECK_CONTAINS(out, "features: ");
    }
    int rc = run(60, "%s %s %s --compare %s %s%s 2>&1", py_env(), PY,
                 repo("tests/py/torch_features.py"), p[0], p[1], exact ? " --exact" : "");
    CHECK_MSG(rc == 0, "ddpc's results differ from gloo's: %s", out);
    CHECK_CONTAINS(out, ", same (");
    t_tmp_remove();
}

TEST_T(torch_backend_features_2_ranks_bit_identical_to_gloo, 900) { features(2, 1, NULL); }
TEST_T(torch_backend_features_3_ranks_close_to_gloo, 900) { features(3, 0, NULL); }
TEST_T(torch2_backend_features_2_ranks_bit_identical_to_gloo, 900) {
    torch2 = 1;
    features(2, 1, NULL);
}
TEST_T(torch2_backend_features_3_ranks_close_to_gloo, 900) {
    torch2 = 1;
    features(3, 0, NULL);
}
/* DTensor on a 2 x 2 mesh, FSDP2 on 4 ranks */
TEST_T(torch2_backend_dtensor_2d_mesh_4_ranks, 900) {
    torch2 = 1;
    features(4, 0, "dtensor_ops,fsdp2_fully_shard");
}

/* torch.distributed.checkpoint (tests/py/torch_dcp.py): an FSDP2 model and
 * its Adam state saved sharded on 2 ranks, loaded on 3 and found equal to
 * what was saved, bit for bit, on each backend; the two backends' saved
 * states bit-identical. */
TEST_T(torch2_backend_dcp_save_2_ranks_load_3, 600) {
    torch2 = 1;
    if (sanitized())
        SKIP("a sanitizer build: the torch 2.x venv holds pip's plain build of ddpc_torch");
    need_module();
    const char *dir[2] = { t_tmp_path("dcp-gloo"), t_tmp_path("dcp-ddpc") };
    const char *backend[2] = { "gloo", "ddpc" };
    for (int b = 0; b < 2; b++) {
        const char *step[2] = { "save", "load" };
        for (int s = 0; s < 2; s++) {
            int rc = run(
                240,
                "%s %s --nproc-per-node=%d --master-port=%d %s %s --backend %s --dir %s --%s 2>&1",
                py_env(), t_bin("ddpc-run"), 2 + s, t_free_port(), PY,
                repo("tests/py/torch_dcp.py"), backend[b], dir[b], step[s]);
            CHECK_MSG(rc == 0, "%s: %s: rc=%d: %s", backend[b], step[s], rc, out);
        }
        CHECK_CONTAINS(out, "equal to what was saved");
    }
    int rc = run(60, "%s %s %s --compare %s %s 2>&1", py_env(), PY, repo("tests/py/torch_dcp.py"),
                 dir[0], dir[1]);
    CHECK_MSG(rc == 0, "ddpc's saved state differs from gloo's: %s", out);
    CHECK_CONTAINS(out, ", same (");
    for (int b = 0; b < 2; b++) run(30, "rm -rf '%s'", dir[b]);
    t_tmp_remove();
}

/* A PYTHONPATH left at make torch's build (torch 1.13) while pip's torch
 * 2.x runs: importing torch (which autoloads the backend) or ddpc_torch
 * fails with an error naming both versions and the way out, instead of
 * loading the 1.13 module into torch 2.x's libraries (that aborted the
 * process: "terminate called after throwing an instance of
 * 'std::system_error'"). */
TEST_T(torch2_refuses_the_torch_1_13_build, 120) {
    torch2 = 0;
    need_module(); /* make torch's build, with Debian's torch 1.13 */
    torch2 = 1;
    need_module();
    const char *code[2] = { "import torch", "import torch, ddpc_torch" };
    const char *autoload[2] = { "", "TORCH_DEVICE_BACKEND_AUTOLOAD=0" };
    for (int i = 0; i < 2; i++) {
        int rc = run(120, "PYTHONPATH=%s/../python %s %s -c '%s' 2>&1", t_bin(""), autoload[i], PY,
                     code[i]);
        CHECK_MSG(rc != 0, "%s: imported: %s", code[i], out);
        CHECK_MSG(!strstr(out, "terminate called"), "%s: aborted: %s", code[i], out);
        CHECK_MSG(strstr(out, "was built against torch 1.13") && strstr(out, "PYTHONPATH"),
                  "%s: %s", code[i], out);
    }
}

/* init_process_group's device-map form (tests/py/torch_device_map.py):
 * 'cpu:ddpc' puts CPU tensors on ddpc (collectives, a new_group, DDP);
 * 'cpu:ddpc,cuda:nccl' works where torch creates an NCCL backend (a CUDA
 * build with a GPU), and elsewhere torch refuses it exactly as it refuses
 * 'cpu:gloo,cuda:nccl' (2.13's CPU build: no NCCL built in). */
TEST_T(torch2_backend_device_map, 300) {
    torch2 = 1;
    need_module();
    const char *spec[2] = { "cpu:ddpc", "cpu:ddpc,cuda:nccl" };
    for (int i = 0; i < 2; i++) {
        int rc = run(120, "%s %s --nproc-per-node=2 --master-port=%d %s %s %s 2>&1", py_env(),
                     t_bin("ddpc-run"), t_free_port(), PY, repo("tests/py/torch_device_map.py"),
                     spec[i]);
        CHECK_MSG(rc == 0, "%s: rc=%d: %s", spec[i], rc, out);
        char ok[64];
        snprintf(ok, sizeof ok, "device map %s: ok", spec[i]);
        CHECK_MSG(strstr(out, ok) || (i == 1 && strstr(out, "device map: torch ")), "%s: %s",
                  spec[i], out);
    }
}

/* PyTorch's own distributed_test.py (as the torch in use ships it: 1.13.1
 * or 2.13.0), the collectives and CPU DDP tests. */
static void pytorch_suite_ci(void) {
    if (sanitized())
        SKIP("a sanitizer build: PyTorch's suite starts a Python per test, 20-55 s each with the "
             "sanitizers preloaded, past this test's deadline (the plain build runs it)");
    need_module();
    int rc = run(840, "%s %s %s --backend ddpc --world-size 2 --subset ci 2>&1", py_env(), PY,
                 repo("tests/py/dist_suite.py"));
    CHECK_MSG(rc == 0, "rc=%d: %s", rc, out);
    CHECK_CONTAINS(out, "failed=0");
}

TEST_T(torch_backend_pytorch_suite_ci_subset, 900) { pytorch_suite_ci(); }
TEST_T(torch2_backend_pytorch_suite_ci_subset, 900) {
    torch2 = 1;
    pytorch_suite_ci();
}

/* Upstream PyTorch's DTensor tests on torch 2.13 (tests/py/upstream_suite.py
 * --subset ci: 7 tests on a 1-D and a 2-D mesh of 4 ranks, about a minute),
 * ddpc only. Their files are PyTorch's, copied into tests/py/upstream by
 * hand and not committed: without them the test skips, saying so. */
TEST_T(torch2_backend_upstream_suite_ci_subset, 300) {
    torch2 = 1;
    if (sanitized())
        SKIP("a sanitizer build: the torch 2.x venv holds pip's plain build of ddpc_torch");
    need_module();
    int rc = run(240, "%s %s %s --backend ddpc --subset ci 2>&1", py_env(), PY,
                 repo("tests/py/upstream_suite.py"));
    CHECK_MSG(rc == 0, "rc=%d: %s", rc, out);
    if (strstr(out, "upstream_suite: skipped"))
        SKIP("upstream's test files are not in tests/py/upstream (its README.md says how to copy "
             "them in)");
    CHECK_CONTAINS(out, "failed=0");
}
