/* test_sched.c — ddpc started the way cluster schedulers start programs,
 * everything on loopback:
 *
 *   Kubernetes  a Kubeflow PyTorchJob runs `torchrun` (here `ddpc-run`) in
 *               each pod with its settings as PET_* variables (torchrun's
 *               environment form of its options); two ddpc-runs given only
 *               those variables train the model of a one-node run
 *   mpirun      Open MPI's mpirun starting ddpc-train itself (ranks from
 *               OMPI_COMM_WORLD_*), the model of ddpc-run's
 *   Slurm       a real slurmctld + slurmd on this host (root, and only with
 *               DDPC_TEST_SLURM=1: it installs Debian's slurm-wlm); srun
 *               starting ddpc-train, and ddpc-run as one task per node
 *
 * A test skips, saying why, when its scheduler or the Fashion-MNIST data
 * is missing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"

#define DATA "/usr/share/datasets/fashion-mnist"

static char out[1 << 20];

/* Runs a shell command line built from fmt; returns its exit code (-1 on
 * the deadline), its output in out. */
#define run(timeout_s, ...) t_run_cmdf((timeout_s), out, sizeof out, __VA_ARGS__)

static void need_data(void) {
    if (access(DATA "/train-images-idx3-ubyte.gz", R_OK) != 0)
        SKIP("Fashion-MNIST is not installed in " DATA " (apt-get install dataset-fashion-mnist)");
}

/* A tool of ours, built. */
static const char *bin(const char *name) {
    const char *b = t_bin(name);
    CHECK_MSG(access(b, X_OK) == 0, "%s is not built (make tools)", b);
    return b;
}

static const char *TRAIN_ARGS = "--epochs 1 --max-batches 20 --max-eval-batches 5 --log-every 10";

/* The job under ddpc-run on one node, for the checkpoint to compare with. */
static void ddpc_run_reference(int nproc, const char *ckpt) {
    int rc = run(90, "%s --nproc-per-node=%d --master-port=%d %s %s --checkpoint %s 2>&1",
                 bin("ddpc-run"), nproc, t_free_port_pair(), bin("ddpc-train"), TRAIN_ARGS, ckpt);
    CHECK_MSG(rc == 0, "ddpc-run reference: rc=%d: %s", rc, out);
}

static void same_file(const char *a, const char *b) {
    static char o[1024];
    int rc = t_run_cmdf(10, o, sizeof o, "cmp %s %s 2>&1", a, b);
    CHECK_MSG(rc == 0, "checkpoints differ (the job did not train the reference's model): %s", o);
}

/* ------------------------------------------------------------ Kubernetes */

/* A worker that says what it was given. */
#define SAY_ENV "sh -c 'echo \"w rank=$RANK world=$WORLD_SIZE port=$MASTER_PORT\"'"

/* Counts the lines of out that contain needle. */
static int count_lines(const char *needle) {
    int n = 0;
    for (const char *p = out; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
    return n;
}

/* Every option's PET_ variable sets it (torchrun's rule: PET_ + the
 * option's name in capitals, dashes as underscores; a flag's is an
 * integer); the command line wins; an empty one counts as unset; a bad
 * value is a usage error naming the variable; --help has no variable. */
TEST_T(sched_pet_variables_are_options, 60) {
    const char *R = bin("ddpc-run");
    int p = t_free_port_pair(), q = t_free_port_pair();
    char want[64];

    int rc = run(
        30, "PET_NPROC_PER_NODE=3 PET_MASTER_PORT=%d PET_MONITOR_INTERVAL=0.2 %s " SAY_ENV " 2>&1",
        p, R);
    CHECK_MSG(rc == 0, "rc=%d: %s", rc, out);
    snprintf(want, sizeof want, "world=3 port=%d", p);
    CHECK_MSG(count_lines(want) == 3, "PET_NPROC_PER_NODE=3 PET_MASTER_PORT=%d: %s", p, out);

    /* the command line wins over the variable */
    rc = run(
        30,
        "PET_NPROC_PER_NODE=3 PET_MASTER_PORT=%d %s --nproc_per_node 2 --master-port=%d " SAY_ENV
        " 2>&1",
        p, R, q);
    CHECK_MSG(rc == 0, "rc=%d: %s", rc, out);
    snprintf(want, sizeof want, "world=2 port=%d", q);
    CHECK_MSG(count_lines(want) == 2 && !strstr(out, "world=3"),
              "--nproc_per_node 2 --master-port=%d over PET_*: %s", q, out);

    /* a flag: PET_STANDALONE=1 is --standalone (free ports, not
     * PET_MASTER_PORT's); 0 leaves it off; empty is unset */
    rc = run(30, "PET_STANDALONE=1 PET_MASTER_PORT=%d %s " SAY_ENV " 2>&1", p, R);
    snprintf(want, sizeof want, "port=%d", p);
    CHECK_MSG(rc == 0 && strstr(out, "w rank=0 world=1 port=") && !strstr(out, want),
              "PET_STANDALONE=1: rc=%d: %s", rc, out);
    rc = run(30, "PET_STANDALONE=0 PET_NPROC_PER_NODE= PET_MASTER_PORT=%d %s " SAY_ENV " 2>&1", p,
             R);
    snprintf(want, sizeof want, "w rank=0 world=1 port=%d", p);
    CHECK_MSG(rc == 0 && strstr(out, want), "PET_STANDALONE=0: rc=%d: %s", rc, out);

    /* bad values: exit 2, the variable named */
    rc = run(30, "PET_NNODES=abc %s true 2>&1", R);
    CHECK_MSG(rc == 2 && strstr(out, "PET_NNODES='abc'"), "PET_NNODES=abc: rc=%d: %s", rc, out);
    rc = run(30, "PET_STANDALONE=yes %s true 2>&1", R);
    CHECK_MSG(rc == 2 && strstr(out, "PET_STANDALONE='yes'"), "PET_STANDALONE=yes: rc=%d: %s", rc,
              out);
    rc = run(30, "PET_NNODES=2 PET_NODE_RANK=2 %s true 2>&1", R);
    CHECK_MSG(rc == 2 && strstr(out, "--node-rank=2 is out of range for --nnodes=2"),
              "PET_NODE_RANK=2 of 2: rc=%d: %s", rc, out);
    rc = run(30, "PET_MAX_RESTARTS=-1 %s true 2>&1", R);
    CHECK_MSG(rc == 2 && strstr(out, "PET_MAX_RESTARTS='-1'"), "PET_MAX_RESTARTS=-1: rc=%d: %s", rc,
              out);
    /* ... unless the command line gives the option: as in torchrun's parser,
     * the variable is only its default, never read then */
    rc = run(30, "PET_MAX_RESTARTS=-1 PET_MASTER_PORT=%d %s --max-restarts=1 true 2>&1", p, R);
    CHECK_MSG(rc == 0, "PET_MAX_RESTARTS=-1 --max-restarts=1: rc=%d: %s", rc, out);

    /* --help and --env are no variables */
    rc = run(30, "PET_HELP=1 PET_ENV=1 PET_MASTER_PORT=%d %s true 2>&1", p, R);
    CHECK_MSG(rc == 0 && !strstr(out, "usage:") && !strstr(out, "DDPC_"),
              "PET_HELP=1 PET_ENV=1: rc=%d: %s", rc, out);
    /* --help says so */
    rc = run(30, "%s --help 2>&1", R);
    CHECK_MSG(rc == 0 && strstr(out, "PET_NPROC_PER_NODE"), "--help: %s", out);
}

/* A Kubeflow PyTorchJob with a Master and a Worker replica (2 "pods"),
 * nprocPerNode 2, as the training operator fills each pod's environment
 * (pkg/controller.v1/pytorch: MASTER_ADDR/PORT and their PET_ twins,
 * WORLD_SIZE and RANK counting pods, PET_NNODES, PET_NPROC_PER_NODE,
 * PET_NODE_RANK, PYTHONUNBUFFERED), and the same container command in both:
 * `ddpc-run ddpc-train ...` with no launcher option. The 4 workers train
 * ddpc-run's one-node 1 x 4 model bit for bit.
 *
 * The operator gives the master pod MASTER_ADDR=localhost and the worker
 * pod the master's service name; here both pods say 127.0.0.1, the
 * loopback stand-in for the service. */
TEST_T(sched_pytorchjob_two_pods_train_one_nodes_model, 180) {
    need_data();
    const char *ckpt = t_tmp_path("pytorchjob.st"), *ref = t_tmp_path("ddpc-run.st");
    int port = t_free_port_pair();
    char pod[2][512];
    for (int r = 0; r < 2; r++)
        snprintf(pod[r], sizeof pod[r],
                 "PYTHONUNBUFFERED=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=%d "
                 "PET_MASTER_ADDR=127.0.0.1 PET_MASTER_PORT=%d WORLD_SIZE=2 RANK=%d "
                 "PET_NNODES=2 PET_NPROC_PER_NODE=2 PET_NODE_RANK=%d PET_MONITOR_INTERVAL=0.2",
                 port, port, r, r);
    /* the worker pod first: it waits for the master's store */
    int rc =
        run(120,
            "env %s %s %s %s --checkpoint %s > %s 2>&1 & "
            "env %s %s %s %s --checkpoint %s 2>&1; r0=$?; wait $!; r1=$?; "
            "echo '--- worker pod:'; cat %s; echo \"rc0=$r0 rc1=$r1\"",
            pod[1], bin("ddpc-run"), bin("ddpc-train"), TRAIN_ARGS, ckpt, t_tmp_path("pod1.log"),
            pod[0], bin("ddpc-run"), bin("ddpc-train"), TRAIN_ARGS, ckpt, t_tmp_path("pod1.log"));
    CHECK_MSG(rc == 0 && strstr(out, "rc0=0 rc1=0"), "a pod failed: rc=%d: %s", rc, out);
    CHECK_CONTAINS(out, "node 0: all 2 nodes joined");
    CHECK_CONTAINS(out, "node 1: all 2 nodes joined");
    CHECK_CONTAINS(out, "batch 32 x 4 process(es)");
    ddpc_run_reference(4, ref);
    same_file(ckpt, ref);
    t_tmp_remove();
}

/* ---------------------------------------------------------------- mpirun */

/* mpirun -np 3 ddpc-train (ranks from OMPI_COMM_WORLD_RANK/SIZE, rank 0
 * hosting the store at MASTER_ADDR:MASTER_PORT, exported with -x) trains
 * ddpc-run --nproc-per-node=3's model bit for bit. */
TEST_T(sched_mpirun_trains_ddpc_runs_model, 180) {
    need_data();
    if (run(10, "command -v mpirun") != 0)
        SKIP("mpirun is not installed (apt-get install openmpi-bin)");
    const char *ckpt = t_tmp_path("mpirun.st"), *ref = t_tmp_path("ddpc-run.st");
    int rc = run(120,
                 "mpirun --allow-run-as-root --oversubscribe -np 3 -x MASTER_ADDR=127.0.0.1 "
                 "-x MASTER_PORT=%d -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1 "
                 "%s %s --checkpoint %s 2>&1",
                 t_free_port_pair(), bin("ddpc-train"), TRAIN_ARGS, ckpt);
    CHECK_MSG(rc == 0, "mpirun: rc=%d: %s", rc, out);
    CHECK_CONTAINS(out, "batch 32 x 3 process(es)");
    CHECK_CONTAINS(out, "epoch 0: loss ");
    ddpc_run_reference(3, ref);
    same_file(ckpt, ref);
    t_tmp_remove();
}
