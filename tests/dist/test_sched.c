/* test_sched.c — ddpc started the way cluster schedulers start programs,
 * everything on loopback:
 *
 *   Kubernetes  a Kubeflow PyTorchJob runs `torchrun` (here `ddpc-run`) in
 *               each pod with its settings as PET_* variables (torchrun's
 *               environment form of its options); two ddpc-runs given only
 *               those variables train the model of a one-node run
 *   mpirun      Open MPI's mpirun starting ddpc-train itself (ranks from
 *               OMPI_COMM_WORLD_*), the model of ddpc-run's
 *   Slurm       a real slurmctld + slurmd on this host (root; when Slurm is
 *               missing, DDPC_TEST_SLURM=1 lets the test install Debian's
 *               slurm-wlm, else it skips; DDPC_TEST_SLURM=0 skips it):
 *               srun starting ddpc-train, and ddpc-run as one task per node
 *
 * A test skips, saying why, when its scheduler or the Fashion-MNIST data
 * is missing. */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

/* Two nodes of one job on loopback, each `env VARS[r] ddpc-run ARGS[r]
 * ddpc-train TRAIN_ARGS --checkpoint ckpt` (heartbeats every 0.2 s, by
 * PET_MONITOR_INTERVAL; node 1 first: it waits for node
 * 0's store); both must exit 0 and train ddpc-run's one-node 1 x 4 model.
 * Leaves both nodes' output in out. */
static void two_nodes_train_1x4(const char *vars[2], const char *args[2], const char *what) {
    const char *ckpt = t_tmp_path("job.st"), *ref = t_tmp_path("ddpc-run.st"),
               *log1 = t_tmp_path("node1.log");
    char cmd[2][2048];
    for (int r = 0; r < 2; r++)
        snprintf(cmd[r], sizeof cmd[r],
                 "env PET_MONITOR_INTERVAL=0.2 %s %s %s %s %s --checkpoint %s", vars[r],
                 bin("ddpc-run"), args[r], bin("ddpc-train"), TRAIN_ARGS, ckpt);
    int rc = run(120,
                 "%s > %s 2>&1 & %s 2>&1; r0=$?; wait $!; r1=$?; echo '--- node 1:'; cat %s; "
                 "echo \"rc0=$r0 rc1=$r1\"",
                 cmd[1], log1, cmd[0], log1);
    CHECK_MSG(rc == 0 && strstr(out, "rc0=0 rc1=0"), "%s: a node failed: rc=%d: %s", what, rc, out);
    CHECK_CONTAINS(out, "node 0: all 2 nodes joined");
    CHECK_CONTAINS(out, "node 1: all 2 nodes joined");
    CHECK_CONTAINS(out, "batch 32 x 4 process(es)");
    static char saved[sizeof out];
    memcpy(saved, out, sizeof out);
    ddpc_run_reference(4, ref);
    same_file(ckpt, ref);
    memcpy(out, saved, sizeof out);
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

    /* a PyTorchJob with an elasticPolicy: c10d, 2 nodes, no node rank (its
     * c10d rendezvous would rank the nodes as they join; ddpc-run's does
     * not): said at once, not a hang */
    rc = run(30,
             "PET_RDZV_BACKEND=c10d PET_RDZV_ENDPOINT=job-worker-0:29400 PET_NNODES=2 "
             "PET_NPROC_PER_NODE=2 PET_RDZV_ID=job %s true 2>&1",
             R);
    CHECK_MSG(rc == 2 && strstr(out, "give each node its --node-rank (PET_NODE_RANK)"),
              "elastic PyTorchJob: rc=%d: %s", rc, out);
    /* PET_RDZV_CONF's join_timeout is the join timeout */
    rc = run(30,
             "PET_RDZV_CONF=join_timeout=0.3,read_timeout=60 PET_NNODES=2 %s --master-port=%d "
             "true 2>&1",
             R, p);
    CHECK_MSG(rc == 1 && strstr(out, "never joined within 0.3 s"), "PET_RDZV_CONF: rc=%d: %s", rc,
              out);

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
 * pod the master's service name; here the worker pod says 127.0.0.1, the
 * loopback stand-in for the service: the ranks spell the store's host
 * differently and must still meet. */
TEST_T(sched_pytorchjob_two_pods_train_one_nodes_model, 180) {
    need_data();
    int port = t_free_port_pair();
    char pod[2][512];
    for (int r = 0; r < 2; r++)
        snprintf(pod[r], sizeof pod[r],
                 "PYTHONUNBUFFERED=0 MASTER_ADDR=%s MASTER_PORT=%d "
                 "PET_MASTER_ADDR=%s PET_MASTER_PORT=%d WORLD_SIZE=2 RANK=%d "
                 "PET_NNODES=2 PET_NPROC_PER_NODE=2 PET_NODE_RANK=%d",
                 r ? "127.0.0.1" : "localhost", port, r ? "127.0.0.1" : "localhost", port, r, r);
    /* the same container command in both pods: no launcher option */
    two_nodes_train_1x4((const char *[]){ pod[0], pod[1] }, (const char *[]){ "", "" },
                        "PyTorchJob");
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

/* ----------------------------------------------------------------- Slurm */

/* A one-node Slurm of our own: slurmctld and slurmd in the foreground, in
 * this test's process group (so the harness's kill of the group ends them
 * whatever happens), configured in the test's scratch directory, on free
 * ports, with no munge (auth/none) and no cgroups (proctrack/pgid). */
typedef struct slurm {
    char conf[1024], node[64];
    pid_t ctld, d;
} slurm;

static void need_slurm(void) {
    const char *allow = getenv("DDPC_TEST_SLURM");
    if (allow && !strcmp(allow, "0")) SKIP("DDPC_TEST_SLURM=0");
    if (geteuid() != 0) SKIP("a real Slurm needs root (slurmd starts tasks as their users)");
    if (run(10, "command -v slurmctld && command -v slurmd && command -v srun") == 0) return;
    if (!allow || strcmp(allow, "1") != 0)
        SKIP("Slurm is not installed: DDPC_TEST_SLURM=1 lets this test install Debian's "
             "slurm-wlm (apt-get install slurm-wlm)");
    int rc = run(600, "export DEBIAN_FRONTEND=noninteractive; apt-get install -y slurm-wlm || "
                      "{ apt-get update && apt-get install -y slurm-wlm; } 2>&1");
    CHECK_MSG(rc == 0, "apt-get install slurm-wlm: rc=%d: %s", rc, out);
}

/* Starts prog with args, its output to log; returns its pid. */
static pid_t start_daemon(const char *log, char *const argv[]) {
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        FILE *f = freopen(log, "w", stdout);
        if (f) dup2(1, 2);
        execvp(argv[0], argv);
        _exit(127);
    }
    return pid;
}

/* Ends pid (ours): SIGTERM, then SIGKILL after 5 s. */
static void stop_daemon(pid_t pid) {
    if (pid <= 0) return;
    kill(pid, SIGTERM);
    for (int i = 0; i < 100; i++) {
        if (waitpid(pid, NULL, WNOHANG) == pid) return;
        usleep(50000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* Writes the configuration, starts both daemons and waits for the node to
 * be idle. 0, or -1 with why in out (the daemons started are stopped). */
static int slurm_start(slurm *S, int cpus) {
    /* the node is called localhost (slurmd -N), so that the step's node
     * list, ddpc-run's master under srun, names loopback */
    snprintf(S->node, sizeof S->node, "localhost");
    const char *dir = t_tmp_dir();
    snprintf(S->conf, sizeof S->conf, "%s/slurm.conf", dir);
    char d[900];
    snprintf(d, sizeof d, "%s/state", dir);
    mkdir(d, 0755);
    snprintf(d, sizeof d, "%s/spool", dir);
    mkdir(d, 0755);
    int ports = t_free_port_pair(); /* slurmctld's, and slurmd's next to it */
    FILE *f = fopen(S->conf, "w");
    CHECK(f != NULL);
    fprintf(f,
            "ClusterName=ddpctest\nSlurmctldHost=%s(127.0.0.1)\n"
            "AuthType=auth/none\nCredType=cred/none\nSlurmUser=root\nSlurmdUser=root\n"
            "SlurmctldPort=%d\nSlurmdPort=%d\n"
            "StateSaveLocation=%s/state\nSlurmdSpoolDir=%s/spool\n"
            "SlurmctldPidFile=%s/slurmctld.pid\nSlurmdPidFile=%s/slurmd.pid\n"
            "SlurmctldLogFile=%s/slurmctld.log\nSlurmdLogFile=%s/slurmd.log\n"
            "ProctrackType=proctrack/pgid\nTaskPlugin=task/none\n"
            "SelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\n"
            "SchedulerType=sched/builtin\nJobAcctGatherType=jobacct_gather/none\n"
            "AccountingStorageType=accounting_storage/none\nMpiDefault=none\n"
            "ReturnToService=2\nSlurmdParameters=config_overrides\n"
            "NodeName=%s NodeAddr=127.0.0.1 CPUs=%d State=UNKNOWN\n"
            "PartitionName=debug Nodes=%s Default=YES MaxTime=10 State=UP OverSubscribe=YES\n",
            S->node, ports, ports + 1, dir, dir, dir, dir, dir, dir, S->node, cpus, S->node);
    CHECK(fclose(f) == 0);
    setenv("SLURM_CONF", S->conf, 1);
    char ctld_log[900], d_log[900];
    snprintf(ctld_log, sizeof ctld_log, "%s/slurmctld.out", dir);
    snprintf(d_log, sizeof d_log, "%s/slurmd.out", dir);
    S->ctld = start_daemon(ctld_log, (char *[]){ "slurmctld", "-D", "-i", "-f", S->conf, NULL });
    S->d = start_daemon(d_log, (char *[]){ "slurmd", "-D", "-f", S->conf, "-N", S->node, NULL });
    for (int i = 0; i < 150; i++) { /* 30 s for the node to be idle */
        if (waitpid(S->ctld, NULL, WNOHANG) == S->ctld) S->ctld = 0;
        if (waitpid(S->d, NULL, WNOHANG) == S->d) S->d = 0;
        if (!S->ctld || !S->d) break;
        if (run(5, "sinfo -h -o %%t 2>&1") == 0 && !strncmp(out, "idle", 4)) return 0;
        usleep(200000);
    }
    stop_daemon(S->ctld), stop_daemon(S->d);
    S->ctld = S->d = 0;
    run(5, "echo '%s'; tail -n 15 %s %s %s/slurmctld.log %s/slurmd.log 2>&1",
        "Slurm did not come up", ctld_log, d_log, dir, dir);
    return -1;
}

/* Calls fn(pid) for every process but this one whose command line
 * contains marker; returns how many. */
static int each_proc(const char *marker, void (*fn)(int pid)) {
    int n = 0;
    DIR *proc = opendir("/proc");
    for (struct dirent *e; proc && (e = readdir(proc));) {
        int pid = atoi(e->d_name);
        if (pid <= 0 || pid == getpid()) continue;
        char path[64], cmd[4096];
        snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        size_t k = fread(cmd, 1, sizeof cmd - 1, f);
        fclose(f);
        for (size_t i = 0; i < k; i++)
            if (!cmd[i]) cmd[i] = ' ';
        cmd[k] = 0;
        if (k && strstr(cmd, marker)) {
            n++;
            if (fn) fn(pid);
        }
    }
    if (proc) closedir(proc);
    return n;
}

static int count_procs(const char *marker) { return each_proc(marker, NULL); }
static void kill_pid(int pid) { kill(pid, SIGKILL); }

/* Stops both daemons, and then any process still running from this test's
 * scratch directory (a task a dying slurmd left behind). */
static void slurm_stop(slurm *S) {
    stop_daemon(S->d), stop_daemon(S->ctld);
    S->d = S->ctld = 0;
    each_proc(t_tmp_dir(), kill_pid);
}

/* The variables srun gives a task of `srun -N NODES --ntasks-per-node=1`
 * (job 42), as a shell prefix. */
static const char *srun_env(int nodes, int tasks, int node, const char *list) {
    static char b[4][512];
    static int next;
    char *e = b[next++ % 4];
    snprintf(e, sizeof b[0],
             "SLURM_JOB_ID=42 SLURM_STEP_ID=0 SLURM_STEP_NUM_NODES=%d SLURM_STEP_NUM_TASKS=%d "
             "SLURM_NNODES=%d SLURM_NTASKS=%d SLURM_NODEID=%d SLURM_PROCID=%d SLURM_LOCALID=0 "
             "SLURM_STEP_NODELIST='%s' SLURM_JOB_NODELIST='%s'",
             nodes, tasks, nodes, tasks, node, node, list, list);
    return e;
}

/* ddpc-run as one srun task per node takes --nnodes, --node-rank, the
 * step's first node as --master-addr (Slurm's hostlist syntax) and the job
 * as --run-id; PET_ variables and the command line still win; several
 * tasks per node: a note, and Slurm's variables left alone. */
TEST_T(sched_srun_variables_give_ddpc_run_its_node, 60) {
    const char *R = bin("ddpc-run");
    static const char *const lists[][2] = {
        { "node[07-09,11],gpu1", "node07" },
        { "r[1-2]-n[3,5],gpu1", "r1-n3" },
        { "gpu1,node[1-2]", "gpu1" },
    };
    char want[256];
    for (int k = 0; k < 3; k++) {
        /* node 1 never reaches a store at a made-up host: only the line counts */
        run(30, "%s %s --join-timeout=0.2 true 2>&1", srun_env(2, 2, 1, lists[k][0]), R);
        snprintf(want, sizeof want,
                 "srun, one task per node: --nnodes=2 --node-rank=1 --master-addr=%s --run-id=42",
                 lists[k][1]);
        CHECK_MSG(strstr(out, want), "SLURM_STEP_NODELIST=%s: want \"%s\" in: %s", lists[k][0],
                  want, out);
    }
    int p = t_free_port_pair();
    int rc =
        run(30,
            "%s PET_MASTER_ADDR=127.0.0.1 %s --nnodes=1 --node-rank 0 --master-port=%d " SAY_ENV
            " 2>&1",
            srun_env(2, 2, 1, "nodea,nodeb"), R, p);
    CHECK_MSG(rc == 0 &&
                  strstr(out, "--nnodes=1 --node-rank=0 --master-addr=127.0.0.1 --run-id=42") &&
                  strstr(out, "w rank=0 world=1"),
              "PET_ and the command line over Slurm's: rc=%d: %s", rc, out);
    rc = run(30, "%s %s --master-port=%d " SAY_ENV " 2>&1", srun_env(1, 4, 0, "nodea"), R, p);
    CHECK_MSG(rc == 0 && strstr(out, "srun started 4 tasks on 1 node(s)") &&
                  !strstr(out, "one task per node: --nnodes") && strstr(out, "w rank=0 world=1"),
              "4 tasks on 1 node: rc=%d: %s", rc, out);
}

/* `srun -N 2 --ntasks-per-node=1 ddpc-run --nproc-per-node=2 ddpc-train`
 * as srun would start it, by hand: two ddpc-runs on loopback given only
 * Slurm's variables (the step's first node: localhost) train ddpc-run's
 * one-node 1 x 4 model. */
TEST_T(sched_srun_one_task_per_node_two_nodes_train_one_nodes_model, 180) {
    need_data();
    char args[64];
    snprintf(args, sizeof args, "--nproc-per-node=2 --master-port=%d", t_free_port_pair());
    two_nodes_train_1x4((const char *[]){ srun_env(2, 2, 0, "localhost,nodeb"),
                                          srun_env(2, 2, 1, "localhost,nodeb") },
                        (const char *[]){ args, args }, "srun");
    CHECK_CONTAINS(out, "--nnodes=2 --node-rank=0 --master-addr=localhost --run-id=42");
    CHECK_CONTAINS(out, "--nnodes=2 --node-rank=1 --master-addr=localhost --run-id=42");
    t_tmp_remove();
}

/* A real Slurm on this host (one node of 8 CPUs' worth of tasks):
 *   srun -n 4 ddpc-train (ranks from SLURM_PROCID/SLURM_NTASKS, rank 0
 *     hosting the store at MASTER_ADDR:MASTER_PORT) trains ddpc-run's
 *     1 x 4 model;
 *   srun -N 1 -n 1 ddpc-run --nproc-per-node=2 ddpc-train (ddpc-run as one
 *     task per node) trains ddpc-run's 1 x 2 model.
 * The daemons are stopped before anything is checked (and by the harness,
 * with the test's process group, whatever happens). Root only; installs
 * slurm-wlm when missing only with DDPC_TEST_SLURM=1. */
TEST_T(sched_slurm_srun_trains_ddpc_runs_model, 900) {
    need_data();
    need_slurm();
    const char *ck4 = t_tmp_path("srun4.st"), *ck2 = t_tmp_path("srun-ddpc-run2.st");
    static char out4[1 << 16], out2[1 << 16];
    slurm S = { 0 };
    if (slurm_start(&S, 8) != 0) t_fail(__FILE__, __LINE__, "%s", out);
    int rc4 = t_run_cmdf(120, out4, sizeof out4,
                         "MASTER_ADDR=127.0.0.1 MASTER_PORT=%d srun -n 4 --kill-on-bad-exit=1 "
                         "--time=2 %s %s --checkpoint %s 2>&1",
                         t_free_port_pair(), bin("ddpc-train"), TRAIN_ARGS, ck4);
    int rc2 = t_run_cmdf(120, out2, sizeof out2,
                         "srun -N 1 -n 1 --time=2 %s --nproc-per-node=2 --master-port=%d "
                         "--monitor-interval=0.2 %s %s --checkpoint %s 2>&1",
                         bin("ddpc-run"), t_free_port_pair(), bin("ddpc-train"), TRAIN_ARGS, ck2);
    slurm_stop(&S);
    usleep(200000);
    int left = count_procs(t_tmp_dir()); /* the daemons (-f our slurm.conf) and their tasks */
    CHECK_MSG(left == 0, "%d Slurm process(es) outlived slurm_stop", left);
    CHECK_MSG(rc4 == 0, "srun -n 4 ddpc-train: rc=%d: %s", rc4, out4);
    CHECK_CONTAINS(out4, "batch 32 x 4 process(es)");
    CHECK_MSG(rc2 == 0, "srun -N 1 -n 1 ddpc-run: rc=%d: %s", rc2, out2);
    CHECK_CONTAINS(out2, "srun, one task per node: --nnodes=1 --node-rank=0 "
                         "--master-addr=localhost --run-id=");
    CHECK_CONTAINS(out2, "batch 32 x 2 process(es)");
    const char *ref = t_tmp_path("ddpc-run.st");
    ddpc_run_reference(4, ref);
    same_file(ck4, ref);
    ddpc_run_reference(2, ref);
    same_file(ck2, ref);
    t_tmp_remove();
}
