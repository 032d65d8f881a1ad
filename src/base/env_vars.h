/*
 * env_vars.h — the list of every environment variable ddpc reads: one row
 * each, its only declaration. The list makes the enum of ids (DDPC_ENV_<ID>,
 * so a misspelt name does not compile), the table the readers check ranges
 * against, and the documentation (`ddpc-run --env`, docs/ENVIRONMENT.md).
 *
 * X(ID, NAME, HCCL_ALIAS, TYPE, DEFAULT, LO, HI, MEANING)
 *   TYPE   STR (text), INT (integer) or REAL (number); LO..HI bound INT and
 *          REAL values (the one range of the variable; callers may only
 *          narrow it further against other values, e.g. LOCAL_RANK < LOCAL_WORLD_SIZE)
 *   DEFAULT  text as a user would write it, or NULL for none
 * Keep grouped: logging, network, timeouts, algorithms, job contract (read,
 * set by launchers), launcher, trainer.
 */
#ifndef DDPC_ENV_VARS_H
#define DDPC_ENV_VARS_H

#define DDPC_ENV_VARS(X)                                                                           \
    X(DEBUG, "DDPC_DEBUG", NULL, STR, "WARN", 0, 0,                                                \
      "log level: NONE, WARN, INFO (every effective setting), TRACE")                              \
    X(DEBUG_SUBSYS, "DDPC_DEBUG_SUBSYS", NULL, STR, "ALL", 0, 0,                                   \
      "subsystems to log: INIT,STORE,NET,SHM,COLL,ENV,DATA,NN,DDP,RUN or ALL; ^X,Y excludes")      \
    X(IF_IP, "DDPC_IF_IP", "HCCL_IF_IP", STR, NULL, 0, 0,                                          \
      "IP address (v4 or v6) this rank listens and advertises on")                                 \
    X(SOCKET_IFNAME, "DDPC_SOCKET_IFNAME", "HCCL_SOCKET_IFNAME", STR, NULL, 0, 0,                  \
      "interfaces by name: eth,enp prefixes; ^eth excludes a prefix; =eth0 exact; ^=eth0 "         \
      "excludes exact")                                                                            \
    X(IF_BASE_PORT, "DDPC_IF_BASE_PORT", NULL, INT, "0", 0, 65535,                                 \
      "first port data sockets listen on, the first free of 1024 from there (0 = any free port); " \
      "HCCL_HOST_SOCKET_PORT_RANGE wins when set")                                                 \
    X(HCCL_IF_BASE_PORT, "HCCL_IF_BASE_PORT", NULL, INT, NULL, 1024, 65520,                        \
      "first of the 32 ports where a root info's rendezvous store listens (HcclGetRootInfo, "      \
      "ddpc_get_unique_id): local rank (device) i tries base + i first, then the rest; unset: "    \
      "60000 for HcclGetRootInfo, any free port for ddpc_get_unique_id")                           \
    X(HCCL_HOST_SOCKET_PORT_RANGE, "HCCL_HOST_SOCKET_PORT_RANGE", NULL, STR, NULL, 0, 0,           \
      "ports listening sockets take, as HCCL writes them (60000-60050; 56000,56005-56010; auto = " \
      "any free port): the data listeners and a root info's store; wins over HCCL_IF_BASE_PORT "   \
      "and DDPC_IF_BASE_PORT")                                                                     \
    X(HCCL_SOCKET_FAMILY, "HCCL_SOCKET_FAMILY", NULL, STR, NULL, 0, 0,                             \
      "AF_INET or AF_INET6: the address family of the address chosen by HCCL_SOCKET_IFNAME or "    \
      "by the route to the store (unset: IPv4 first); HCCL_IF_IP must be of it")                   \
    X(CONNECT_TIMEOUT, "DDPC_CONNECT_TIMEOUT", "HCCL_CONNECT_TIMEOUT", REAL, "120", 0.001, 1e7,    \
      "seconds allowed for rendezvous and connection set-up")                                      \
    X(TIMEOUT, "DDPC_TIMEOUT", "HCCL_EXEC_TIMEOUT", REAL, "1836", 0, 1e7,                          \
      "seconds one collective may wait on its peers (0 = no limit)")                               \
    X(STALL_SETTLE, "DDPC_STALL_SETTLE", NULL, REAL, NULL, 0, 3600,                                \
      "seconds a rank that timed out (DDPC_TIMEOUT) spends collecting its peers' notices before "  \
      "naming the silent rank, so that every rank names the same one (default: a tenth of "        \
      "DDPC_TIMEOUT, between 0.2 and 2)")                                                          \
    X(TRACE_BUFFER, "DDPC_TRACE_BUFFER", NULL, INT, "2000", 0, 1 << 24,                            \
      "operations each communicator's flight recorder keeps (0: no recorder)")                     \
    X(TRACE_DIR, "DDPC_TRACE_DIR", NULL, STR, NULL, 0, 0,                                          \
      "directory where each rank writes its flight recorder (flight-RANK.txt) on a timeout, a "    \
      "lost peer, an abort or SIGUSR1; read by ddpc-trace (default: none; ddpc-run sets it to "    \
      "its --log-dir's attempt directory)")                                                        \
    X(BUFFSIZE, "DDPC_BUFFSIZE", "HCCL_BUFFSIZE", INT, "200", 1, 1 << 20,                          \
      "accepted for HCCL compatibility; no effect: the TCP path sends from and receives into the " \
      "user buffers, with no staging buffer")                                                      \
    X(SOCKBUF, "DDPC_SOCKBUF", NULL, INT, "4194304", 0, 1L << 30,                                  \
      "bytes of TCP send and receive buffer per socket (0 = OS default)")                          \
    X(SOCKETS_PER_PEER, "DDPC_SOCKETS_PER_PEER", NULL, INT, "1", 1, 16,                            \
      "TCP connections between two ranks on different hosts, a message split across them in "      \
      "order (NCCL_NSOCKS_PERTHREAD x NCCL_SOCKET_NTHREADS): more fill a fat link with latency; "  \
      "ranks of one host use 1. Rank 0's applies to the communicator")                             \
    X(SHM, "DDPC_SHM", NULL, INT, "1", 0, 1,                                                       \
      "1: ranks on the same host talk through shared memory (/dev/shm), falling back to TCP with " \
      "a warning where it cannot be had; 0: TCP between all ranks")                                \
    X(SHM_COPY, "DDPC_SHM_COPY", NULL, STR, "auto", 0, 0,                                          \
      "how a rank writes large messages into a shared-memory ring: cached (through its cache: "    \
      "fastest where the two cores share one), stream (non-temporal stores: fastest where they "   \
      "do "                                                                                        \
      "not, e.g. vCPUs on different chiplets or sockets), or auto (times both as it goes and "     \
      "uses "                                                                                      \
      "the cheaper)")                                                                              \
    X(SHM_BYTES, "DDPC_SHM_BYTES", NULL, INT, "1048576", 4096, 1L << 30,                           \
      "bytes of each shared-memory ring, one per direction per pair of ranks on a host (8 ranks: " \
      "28 pairs, 56 rings); every rank must set the same")                                         \
    X(P2P_UNEXPECTED_BYTES, "DDPC_P2P_UNEXPECTED_BYTES", NULL, INT, "268435456", 0, 1L << 40,      \
      "most payload bytes a rank holds of point-to-point messages that came before a receive of "  \
      "their tag was posted (sent with tags out of order); one more fails the receive")            \
    X(LAZY_CONNECT, "DDPC_LAZY_CONNECT", NULL, STR, "auto", 0, 0,                                  \
      "1: a pair of ranks connects the first time an operation needs it (a rank holds only the "   \
      "connections its collectives use); 0: every pair at creation (a full mesh: every rank sees " \
      "any peer die, and names a silent one); auto: 1 above 16 ranks, else 0. Rank 0's applies "   \
      "to the communicator")                                                                       \
    X(ALGO, "DDPC_ALGO", "HCCL_ALGO", STR, "auto", 0, 0,                                           \
      "collective algorithm: auto (hierarchical allreduce across hosts where a host has several "  \
      "ranks), flat (never hierarchical), hier (hierarchical whenever there are several hosts), "  \
      "ring, rhd (recursive halving/doubling), tree; or HCCL_ALGO's syntax: "                      \
      "level0:NA;level1:ring is hier with a ring across hosts, level1:H-D_R hier with "            \
      "recursive halving-doubling across hosts (allreduce's step); its other algorithms, "         \
      "levels and operations do not map (a WARN names each, left to auto)")                        \
    X(CHUNK, "DDPC_CHUNK", NULL, INT, "262144", 4096, 1L << 30,                                    \
      "bytes per pipelined chunk of ring algorithms")                                              \
    X(NET_US, "DDPC_NET_US", NULL, REAL, "150", 0, 1e7,                                            \
      "microseconds one message takes between hosts besides its bytes: the cost model's alpha, "   \
      "with which DDPC_ALGO=auto chooses the allreduce across hosts (docs/COSTMODEL.md; the "      \
      "default is this project's emulated cluster's fit); set alike on every rank")                \
    X(NET_GBIT, "DDPC_NET_GBIT", NULL, REAL, "1", 0.001, 1e6,                                      \
      "each host's link in Gbit/s, shared by the host's ranks: the cost model's 1/beta (see "      \
      "DDPC_NET_US); set alike on every rank")                                                     \
    X(SPIN_US, "DDPC_SPIN_US", NULL, INT, NULL, 0, 10000000,                                       \
      "microseconds a waiting collective retries its connections before sleeping in poll (0: "     \
      "sleep at once); default 1000 while this host's ranks do not outnumber its CPUs, and then "  \
      "up to 256 retries first only pause the core (fewer after waits they did not end), the "     \
      "rest yield it; else 50, each retry yielding. A yield that keeps the rank off its CPU for "  \
      "200 us or more (another program had it) ends the spin, and the next waits sleep at once")   \
    X(JOB_TOKEN, "DDPC_JOB_TOKEN", NULL, STR, NULL, 0, 0,                                          \
      "the job's secret (at least 16 characters, the same for every process of the job): every "   \
      "connection to the store and between ranks proves it knows it (HMAC-SHA256 "                 \
      "challenge-response) before anything else is accepted; unset: no authentication. ddpc-run "  \
      "generates one for a single-node job unless it is set (empty: none) (docs/SECURITY.md)")     \
    X(AUTH_TIMEOUT, "DDPC_AUTH_TIMEOUT", NULL, REAL, "10", 0.001, 1e7,                             \
      "seconds a new connection may take to prove the job token (or to send its store "            \
      "handshake) before the listener closes it")                                                  \
    X(STORE_TORCH, "DDPC_STORE_TORCH", NULL, INT, "0", 0, 1,                                       \
      "1: a store server with a job token also serves PyTorch TCPStore clients, which cannot "     \
      "authenticate (anyone who reaches the port can then read and write its keys); 0: it "        \
      "refuses them. Without a token they are always served. ddpc-run sets 1 unless set")          \
    X(STORE_ANY_ADDR, "DDPC_STORE_ANY_ADDR", NULL, INT, "0", 0, 1,                                 \
      "1: a store server listens on every address of its host, as torch's TCPStore does; 0: "      \
      "only on the address it is given (MASTER_ADDR's, --master-addr's)")                          \
    X(STORE_TIMEOUT, "DDPC_STORE_TIMEOUT", NULL, REAL, "300", 0.001, 1e7,                          \
      "seconds a store request may take beyond its own wait before the client gives up")           \
    X(STORE_PROTOCOL, "DDPC_STORE_PROTOCOL", NULL, STR, "auto", 0, 0,                              \
      "the store client's protocol: auto (ddpc's, else PyTorch's c10d TCPStore when the server "   \
      "closes on ddpc's handshake or does not answer it), ddpc, torch (TCPStore, torch 2.x's "     \
      "dialect or else 1.13's), torch1 or torch2 (TCPStore in that dialect)")                      \
    X(RANK, "RANK", NULL, INT, NULL, 0, (1 << 20) - 1,                                             \
      "global rank of this process (torchrun contract)")                                           \
    X(WORLD_SIZE, "WORLD_SIZE", NULL, INT, NULL, 1, 1 << 20, "number of processes in the job")     \
    X(LOCAL_RANK, "LOCAL_RANK", NULL, INT, NULL, 0, (1 << 20) - 1,                                 \
      "rank of this process on its node")                                                          \
    X(LOCAL_WORLD_SIZE, "LOCAL_WORLD_SIZE", NULL, INT, NULL, 1, 1 << 20,                           \
      "number of processes on this node")                                                          \
    X(GROUP_RANK, "GROUP_RANK", NULL, INT, NULL, 0, (1 << 20) - 1,                                 \
      "rank of this node (set by ddpc-run)")                                                       \
    X(CPUS, "DDPC_CPUS", NULL, INT, NULL, 1, 1 << 20,                                              \
      "CPUs this node's ranks share, for how a wait spins (DDPC_SPIN_US); set by ddpc-run when "   \
      "it binds each worker to a CPU of its own (--bind-to); default: the CPUs this process may "  \
      "run on")                                                                                    \
    X(MASTER_ADDR, "MASTER_ADDR", NULL, STR, "127.0.0.1", 0, 0,                                    \
      "host of the store (rank 0's, or the launcher's)")                                           \
    X(MASTER_PORT, "MASTER_PORT", NULL, INT, "29500", 1, 65535,                                    \
      "port of the store (rank 0's, or the launcher's)")                                           \
    X(USE_AGENT_STORE, "TORCHELASTIC_USE_AGENT_STORE", NULL, STR, NULL, 0, 0,                      \
      "True: the launcher (torchrun's agent, or ddpc-run) hosts the store at "                     \
      "MASTER_ADDR:MASTER_PORT and every rank connects to it; else rank 0 hosts it there")         \
    X(RESTART_COUNT, "TORCHELASTIC_RESTART_COUNT", NULL, INT, "0", 0, 1L << 30,                    \
      "how many times the launcher restarted the workers (torchrun, ddpc-run); each attempt "      \
      "rendezvouses under its own keys")                                                           \
    X(RANK_TABLE_FILE, "RANK_TABLE_FILE", NULL, STR, NULL, 0, 0,                                   \
      "a rank table (HCCL's JSON, version 1.0 or 1.2): ddpc_comm_create_env takes the world size " \
      "from it and this rank from RANK_ID (else RANK); ddpc-run starts this server's ranks of it") \
    X(RANK_ID, "RANK_ID", NULL, INT, NULL, 0, (1 << 20) - 1,                                       \
      "this process's rank in RANK_TABLE_FILE, as HCCL's scripts set it (else RANK)")              \
    X(RANK_SIZE, "RANK_SIZE", NULL, INT, NULL, 1, 1 << 20,                                         \
      "ranks in RANK_TABLE_FILE, as HCCL's scripts set it: a value that disagrees with the table " \
      "is an error")                                                                               \
    X(OMPI_RANK, "OMPI_COMM_WORLD_RANK", NULL, INT, NULL, 0, (1 << 20) - 1,                        \
      "global rank, read when RANK is unset (mpirun)")                                             \
    X(OMPI_SIZE, "OMPI_COMM_WORLD_SIZE", NULL, INT, NULL, 1, 1 << 20,                              \
      "number of processes, read with OMPI_COMM_WORLD_RANK (mpirun)")                              \
    X(OMPI_LOCAL_RANK, "OMPI_COMM_WORLD_LOCAL_RANK", NULL, INT, NULL, 0, (1 << 20) - 1,            \
      "rank on the node, read with OMPI_COMM_WORLD_RANK (mpirun)")                                 \
    X(OMPI_LOCAL_SIZE, "OMPI_COMM_WORLD_LOCAL_SIZE", NULL, INT, NULL, 1, 1 << 20,                  \
      "processes on the node, read with OMPI_COMM_WORLD_RANK (mpirun)")                            \
    X(SLURM_PROCID, "SLURM_PROCID", NULL, INT, NULL, 0, (1 << 20) - 1,                             \
      "global rank, read when RANK and OMPI_COMM_WORLD_RANK are unset (srun)")                     \
    X(SLURM_NTASKS, "SLURM_NTASKS", NULL, INT, NULL, 1, 1 << 20,                                   \
      "number of processes, read with SLURM_PROCID (srun)")                                        \
    X(SLURM_LOCALID, "SLURM_LOCALID", NULL, INT, NULL, 0, (1 << 20) - 1,                           \
      "rank on the node, read with SLURM_PROCID (srun)")                                           \
    X(HEARTBEAT_TIMEOUT, "DDPC_HEARTBEAT_TIMEOUT", NULL, REAL, "10", 0.001, 1e7,                   \
      "seconds without a heartbeat before ddpc-run presumes another node's launcher dead")         \
    X(KILL_GRACE, "DDPC_KILL_GRACE", NULL, REAL, "5", 0, 1e6,                                      \
      "seconds ddpc-run waits between SIGTERM and SIGKILL when stopping workers")                  \
    X(PYTHON, "DDPC_PYTHON", NULL, STR, "python3", 0, 0,                                           \
      "interpreter ddpc-run uses for a PROGRAM ending in .py (or -m)")                             \
    X(PROGRESS, "DDPC_PROGRESS", NULL, INT, NULL, 0, 1,                                            \
      "1: ddpc-train's rank 0 draws its progress bar on stderr; 0: it does not (default: when "    \
      "stderr is a terminal); ddpc-run sets 1 for rank 0 when its own stderr is a terminal")       \
    X(DATA_TIMEOUT, "DDPC_DATA_TIMEOUT", NULL, REAL, "60", 0.001, 1e7,                             \
      "seconds ddpc_loader_next waits for its prefetch thread before DDPC_ERR_TIMEOUT")            \
    X(THREADS, "DDPC_THREADS", NULL, INT, NULL, 1, 1024,                                           \
      "OpenBLAS threads per process for ddpc-train (default: the CPUs this process may run on / "  \
      "LOCAL_WORLD_SIZE)")                                                                         \
    X(CKPT_DELAY_MS, "DDPC_CKPT_DELAY_MS", NULL, INT, "0", 0, 600000,                              \
      "test hook: milliseconds a checkpoint save pauses halfway through writing its temporary "    \
      "file, so that a test's kill lands inside the write")                                        \
    X(RANK_TABLE_PORT, "DDPC_RANK_TABLE_PORT", NULL, INT, "60000", 1, 65535,                       \
      "port on which rank 0 of a communicator made from a rank table (RANK_TABLE_FILE, "           \
      "HcclCommInitClusterInfo) hosts the rendezvous store, at its server's host_ip, else "        \
      "server_id")                                                                                 \
    X(HCCL_ENTRY_LOG, "HCCL_ENTRY_LOG_ENABLE", NULL, INT, "0", 0, 1,                               \
      "1: libhccl prints a line on stderr as each HCCL operation is queued (name, communicator, "  \
      "rank, count, type, root)")                                                                  \
    X(HCCL_DETERMINISTIC, "HCCL_DETERMINISTIC", NULL, STR, "false", 0, 0,                          \
      "accepted (true, false, strict); ddpc reduces in a fixed order, so libhccl's results are "   \
      "always deterministic")                                                                      \
    X(HCCL_WHITELIST_DISABLE, "HCCL_WHITELIST_DISABLE", NULL, INT, "1", 0, 1,                      \
      "0: every listener (the store's, the ranks' data listeners) accepts connections only from "  \
      "the addresses in HCCL_WHITELIST_FILE, closing others with a warning; 1 (HCCL's default): "  \
      "no whitelist")                                                                              \
    X(HCCL_WHITELIST_FILE, "HCCL_WHITELIST_FILE", NULL, STR, NULL, 0, 0,                           \
      "the whitelist HCCL_WHITELIST_DISABLE=0 enforces: JSON {\"host_ip\": [\"10.0.0.1\", ...]} "  \
      "(IPv4 or IPv6; list every host of the job, the store's included)")                          \
    X(HOST_ID, "DDPC_HOST_ID", NULL, STR, NULL, 0, 0,                                              \
      "this rank's host identity (up to 127 characters; spaces become _): ranks with the same "    \
      "one form a host, share memory and take the intra-host steps of hierarchical collectives "   \
      "(default: hostname, boot id and network namespace); lets tests make hosts on one machine")  \
    X(SLURM_NODEID, "SLURM_NODEID", NULL, INT, NULL, 0, (1 << 20) - 1,                             \
      "this node's index in the srun step; ddpc-run's default --node-rank when srun starts it as " \
      "one task per node")                                                                         \
    X(SLURM_STEP_NUM_NODES, "SLURM_STEP_NUM_NODES", NULL, INT, NULL, 1, 1 << 20,                   \
      "nodes in the srun step; ddpc-run's default --nnodes when srun starts it as one task per "   \
      "node")                                                                                      \
    X(SLURM_STEP_NUM_TASKS, "SLURM_STEP_NUM_TASKS", NULL, INT, NULL, 1, 1 << 20,                   \
      "tasks in the srun step: ddpc-run takes Slurm's defaults only when it equals "               \
      "SLURM_STEP_NUM_NODES (one ddpc-run per node)")                                              \
    X(SLURM_STEP_NODELIST, "SLURM_STEP_NODELIST", NULL, STR, NULL, 0, 0,                           \
      "the srun step's nodes (a Slurm hostlist, e.g. node[01-04]); its first is ddpc-run's "       \
      "default --master-addr when srun starts it as one task per node")                            \
    X(SLURM_JOB_ID, "SLURM_JOB_ID", NULL, STR, NULL, 0, 0,                                         \
      "the Slurm job; ddpc-run's default --run-id when srun starts it as one task per node")

#endif /* DDPC_ENV_VARS_H */
