/* test_hccl.c — HCCL programs on CPUs: tests/hccl/hccl_check.c, written
 * against hccl/hccl.h and acl/acl.h only and linked with -lhccl -lascendcl,
 * run as HCCL programs are run: ranks as processes started by ddpc-run (the
 * root info through a file) and by mpirun (the root info broadcast with
 * MPI, as HCCL's examples do), and ranks as "devices" of one process
 * (HcclCommInitAll), at 2 and 3 ranks. The program checks every call with
 * every data type at sizes 0, 1, odd and large, and prints one line per
 * rank; these tests want every rank's "OK" line. The programs are found
 * through DDPC_BIN (make hccl builds them). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"

static char out[1 << 20];

#define run(timeout_s, ...) t_run_cmdf((timeout_s), out, sizeof out, __VA_ARGS__)

static const char *bin(const char *name) {
    const char *b = t_bin(name);
    CHECK_MSG(access(b, X_OK) == 0, "%s is not built (make hccl)", b);
    return b;
}

/* Fails unless out has "hccl_check rank R/N (how): OK" for every rank. */
static void ranks_ok(int n, const char *how) {
    for (int r = 0; r < n; r++) {
        char want[160];
        snprintf(want, sizeof want, "hccl_check rank %d/%d (%s): OK", r, n, how);
        CHECK_MSG(strstr(out, want) != NULL, "no line \"%s\" in: %s", want, out);
    }
}

TEST_T(hccl_argument_checks, 30) {
    int rc = run(20, "%s --errors 2>&1", bin("hccl_check"));
    CHECK_MSG(rc == 0 && strstr(out, "hccl_check errors: OK"), "exit %d: %s", rc, out);
}

static void init_all(int n) {
    int rc = run(120, "%s --init-all %d 2>&1", bin("hccl_check"), n);
    CHECK_MSG(rc == 0, "exit %d: %s", rc, out);
    ranks_ok(n, "HcclCommInitAll");
}
TEST_T(hccl_init_all_2, 150) { init_all(2); }
TEST_T(hccl_init_all_3, 150) { init_all(3); }

static void under_ddpc_run(int n) {
    int rc = run(120, "%s --standalone --nproc-per-node=%d %s %s 2>&1", bin("ddpc-run"), n, bin("hccl_check"),
                 t_tmp_path("root_info"));
    CHECK_MSG(rc == 0, "exit %d: %s", rc, out);
    ranks_ok(n, "root info through a file");
    t_tmp_remove();
}
TEST_T(hccl_ddpc_run_2, 150) { under_ddpc_run(2); }
TEST_T(hccl_ddpc_run_3, 150) { under_ddpc_run(3); }

static void under_mpirun(int n) {
    if (run(10, "command -v mpirun") != 0)
        SKIP("mpirun is not installed (apt-get install openmpi-bin libopenmpi-dev, or "
             "DDPC_SETUP_PEERS=1 bash scripts/setup.sh)");
    const char *b = t_bin("hccl_check_mpi");
    if (access(b, X_OK) != 0) SKIP("%s is not built: make found no mpicc (apt-get install libopenmpi-dev)", b);
    int rc = run(120, "mpirun --allow-run-as-root --oversubscribe -np %d %s 2>&1", n, b);
    CHECK_MSG(rc == 0, "exit %d: %s", rc, out);
    ranks_ok(n, "mpirun, MPI_Bcast");
}
TEST_T(hccl_mpirun_2, 150) { under_mpirun(2); }
TEST_T(hccl_mpirun_3, 150) { under_mpirun(3); }

/* Ranks that disagree on a count: every rank's aclrtSynchronizeStream fails,
 * HcclGetCommAsyncError is HCCL_E_PARA, and the text names both calls. */
TEST_T(hccl_mismatch_reported_on_every_rank, 60) {
    int rc = run(50, "%s --standalone --nproc-per-node=2 %s %s --mismatch 2>&1", bin("ddpc-run"),
                 bin("hccl_check"), t_tmp_path("root_info"));
    CHECK_MSG(rc == 0, "exit %d: %s", rc, out);
    ranks_ok(2, "root info through a file");
    CHECK_CONTAINS(out, "this rank (0) called allreduce(count=4, float32, sum)");
    CHECK_CONTAINS(out, "this rank (1) called allreduce(count=5, float32, sum)");
    t_tmp_remove();
}
