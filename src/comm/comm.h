/*
 * comm.h — the communicator's insides: shared by its own files (comm.c
 * lifecycle, bootstrap.c, link.c, iface.c, queue.c, progress.c, fail.c,
 * tags.c, stall.c, split.c) and by the
 * algorithms above it, which drive the sockets through the post/wait calls
 * below and hand the queue their executor with each operation.
 *
 * Execution model. Operations on one communicator run one at a time, in the
 * order issued: a blocking call with nothing queued runs on the caller's
 * thread; everything else goes through the communicator's queue and its
 * progress thread. Whichever thread runs an operation owns an "exec" (its
 * sequence number, fingerprint and deadline) and drives the sockets itself
 * through ddpc__post_send / ddpc__post_recv / ddpc__wait.
 *
 * Wire format: every message is a 40-byte header followed by its payload.
 * The header carries {magic, kind, dtype, op, flags, root, seq, count,
 * nbytes}; a receiver compares it with what its own call expects, so ranks
 * that issued different collectives (or a different number of them) get
 * DDPC_ERR_MISMATCH naming both calls instead of wrong results. Both ends
 * are assumed to share byte order (as every other CCL does).
 */
#ifndef DDPC_COMM_COMM_H
#define DDPC_COMM_COMM_H

#include <pthread.h>
#include <stdint.h>

#include "base/base.h"
#include "comm/link.h"
#include "ddpc/store.h"
#include "transport/transport.h"

#define DDPC_MSG_MAGIC  0x4d504444u /* "DDPM" little-endian */
#define DDPC_BUSY_POLLS 256 /* most tries a wait makes before yielding: microseconds over shm */

/* What an operation is; the first field of every fingerprint. */
typedef enum ddpc__kind {
    DDPC_K_ALLREDUCE = 1,
    DDPC_K_BROADCAST,
    DDPC_K_REDUCE,
    DDPC_K_ALLGATHER,
    DDPC_K_REDUCE_SCATTER,
    DDPC_K_GATHER,
    DDPC_K_SCATTER,
    DDPC_K_ALLTOALL,
    DDPC_K_BARRIER,
    DDPC_K_SEND,
    DDPC_K_RECV,
    DDPC_K_ALLTOALLV,
    DDPC_K_COUNT
} ddpc__kind;

/* Header flags: what a message is within its operation. */
enum {
    DDPC_F_DATA = 0,  /* payload of the operation */
    DDPC_F_CHECK = 1, /* fingerprint-only message (rooted collectives) */
    DDPC_F_BYE = 2,   /* the sender destroyed its communicator cleanly */
    DDPC_F_FAIL = 3,  /* the sender failed: nbytes = its status, rsvd = the rank it lost,
                       * disagreed with or found silent; the fingerprint is the sender's call */
    DDPC_F_WAIT = 4,  /* the sender timed out waiting on rank rsvd and collects its peers'
                       * notices before naming the silent rank (stall.c, settle) */
    DDPC_F_RELAY = 5, /* after the sender's own DDPC_F_WAIT: it passes on rank root's,
                       * which waits on rank rsvd (stall.c) */
};

typedef struct ddpc__hdr {
    uint32_t magic;
    uint8_t kind, dtype, op, flags;
    int32_t root; /* root of rooted collectives, the tag of a point-to-point message, else -1 */
    uint32_t rsvd;
    uint64_t seq;    /* collective sequence number, or per-pair p2p number */
    uint64_t count;  /* elements, as the caller passed them */
    uint64_t nbytes; /* payload bytes that follow this header */
} ddpc__hdr;

struct ddpc__exec;
/* An executor: runs one operation on the calling thread, given its exec
 * (arguments, fingerprint, deadline), driving the sockets through
 * ddpc__post_send / ddpc__post_recv / ddpc__wait. The collectives' executor
 * is handed in with each operation by the layer that issues it (so the
 * queue runs algorithms it does not know); split's exchange is comm's own. */
typedef ddpc_status (*ddpc__run_fn)(struct ddpc__exec *e);

/* The arguments of one operation, as the caller passed them. */
typedef struct ddpc__args {
    ddpc__kind kind;
    const void *send; /* borrowed */
    void *recv;       /* borrowed */
    size_t count;
    ddpc_dtype dtype;
    ddpc_op op;
    int root;         /* root, or peer for send/recv; -1 when none */
    size_t *vec;      /* alltoallv: sendcounts, sdispls, recvcounts, rdispls (size
                  * entries each) in one block owned by the operation; else NULL */
    ddpc__run_fn run; /* executes it (a send or receive that waits in the queue
                      * is run by the queue's own batching instead) */
    uint64_t rec;     /* its flight-recorder entry once queued (recorder.c), else 0 */
    int tag;          /* send/recv: the message's tag (matched by (peer, tag)); else 0 */
} ddpc__args;

/* One posted send or receive of a message to or from one peer. Lives in the
 * algorithm's frame (or scratch) until done; queued FIFO per peer. */
typedef struct ddpc__req {
    ddpc__xfer x;   /* iov[0] = hdr, iov[1] = payload */
    ddpc__hdr hdr;  /* send: the header sent; recv: the header received */
    ddpc__hdr want; /* recv: the header expected */
    int peer;
    int is_send;
    int done;
    int checked;  /* recv: header compared with want */
    int tagged;   /* recv: point to point, matched by (peer, want.root = tag) (progress.c) */
    int ux;       /* an unexpected message's own receive (owned by the peer, progress.c) */
    void *ux_buf; /* ux: its payload (owned) */
    struct ddpc__req *next;
} ddpc__req;

typedef struct ddpc__peer {
    ddpc__conn *conn;             /* owned; NULL for this rank itself, and until the link is up */
    const ddpc__transport *tp;    /* the transport carrying conn */
    int link;                     /* DDPC_LINK_*: where the pair's state machine stands (link.h) */
    ddpc__link_setup set;         /* the pair's set-up under way (link.c's alone) */
    ddpc__endpoint ep;            /* what the peer published: host, address, settings */
    ddpc__req *sq, *sq_tail;      /* posted sends, in order */
    ddpc__req *rq, *rq_tail;      /* posted receives, in order */
    int rx_future;                /* the next message waiting is for a later operation */
    ddpc__req *ux_head, *ux_tail; /* unexpected point-to-point messages from it, whole, in
                                  * arrival order, waiting for a receive of their tag (owned) */
    ddpc__req *ux_in;             /* the unexpected message being read from it, at rq's head
                                  * (owned), or NULL */
    int bye;                      /* the peer said goodbye (destroyed cleanly) */
    double last_rx;               /* ddpc__now() when bytes last came from it (0: never) */
    int noted;    /* it sent a DDPC_F_WAIT notice: no longer driven; only its further
                       notices are read (stall.c) */
    int heard;    /* its notice came, from it or passed on by another rank */
    int waits_on; /* heard: the rank its notice says it waits on */
    struct ddpc__notes {
        ddpc__hdr in;        /* noted: the next notice being read from it */
        size_t have;         /* bytes of it read */
        unsigned char *more; /* bytes read past its notice with it (owned), to read first */
        size_t nmore, off;   /* their length, and how far read */
        int done;            /* nothing more to read from it (a failure, gone, settled) */
        int told, deaf;      /* this rank sent it its notice; a relay to it failed */
    } notes;
} ddpc__peer;

struct ddpc_work;
typedef struct ddpc__srv_ref ddpc__srv_ref; /* comm.c: a store server shared by splits */

/* The settings and state of the tuner (coll/tuner.c, tuner_cost.c): comm.c
 * fills the settings at init; only the tuner reads them. */
typedef struct ddpc__tuner {
    int algo;              /* DDPC_ALGO_* */
    int algo_inter;        /* hierarchical allreduce's inter-host step: AUTO, RING, RHD */
    double net_alpha;      /* DDPC_NET_US: s per message across hosts (the cost model) */
    double net_beta;       /* DDPC_NET_GBIT: s per byte on a host's link */
    unsigned plans_logged; /* the allreduce choices already logged at INFO (tuner_cost.c) */
} ddpc__tuner;

/* A sched_yield that keeps a waiting thread off its CPU this long (s)
 * gave the CPU to another program for a time slice: the wait sleeps
 * instead of yielding on (progress.c's spin, queue.c's work wait). */
#define DDPC_YIELD_LOST_S 200e-6

struct ddpc_comm {
    int rank, size;
    int local_rank, local_size;
    ddpc__peer *peers; /* [size] */

    /* host layout (bootstrap.c): ranks publishing the same host id (DDPC_HOST_ID,
     * else hostname/boot id/network namespace) form a host; hosts are numbered
     * in the order of their lowest rank, local ranks in rank order */
    int nhosts;
    int host;      /* this rank's host index */
    int *host_of;  /* [size] host index of each rank; owned (with local_of) */
    int *local_of; /* [size] local rank of each rank on its host (points into host_of) */
    int max_local; /* most ranks on any one host */

    /* settings (read once at init) */
    double connect_timeout; /* s */
    double exec_timeout;    /* s; 0 = no limit */
    ddpc__tuner tuner;      /* what picks the algorithms reads (coll/tuner.c's) */
    size_t chunk;           /* bytes per pipelined chunk */
    double spin_s;          /* seconds to spin before sleeping in poll */
    int busy_polls;         /* most retries without yielding the core first (choose_spin) */
    int poll_budget;        /* how many the next wait makes (ddpc__progress adapts it) */
    unsigned poll_waits;    /* waits that reached the busy polls */
    unsigned yield_skip;    /* waits left that sleep without yielding first (spin) */
    unsigned yield_backoff; /* the next such run's length, doubled at each lost yield */
    int shm;                /* DDPC_SHM: same-host peers over shared memory */
    long shm_bytes;         /* DDPC_SHM_BYTES: ring bytes per direction per pair */
    int shm_copy;           /* DDPC_SHM_COPY, as ddpc__shm_copy_policy gives it */
    char ip[64];            /* the address this rank listens on */
    char ifname[64];
    int lazy;    /* DDPC_LAZY_CONNECT as rank 0 published it: connect on first use */
    int auth;    /* DDPC_JOB_TOKEN is set: connections prove it (tcp.c) */
    int streams; /* DDPC_SOCKETS_PER_PEER as rank 0 published it: TCP connections a pair
                  * on different hosts uses (the streams transport's can_connect) */
#define DDPC_LAZY_AUTO_ABOVE 16 /* DDPC_LAZY_CONNECT=auto: lazy above this many ranks */

    /* connections (link.c): the listener (kept open when lazy), and the
     * connections accepted on it whose hello has not come yet */
    ddpc__listener *lis; /* owned; NULL once an eager communicator is made, or for one rank */
    struct ddpc__incoming *inc;
    int ninc;
    uint64_t hello_uid; /* the communicator id every hello carries */
    unsigned link_tick; /* progress calls, to look at the listener now and then */

    /* store: where this communicator's keys live */
    char store_host[256];
    int store_port;
    char prefix[320];      /* key namespace, ends with '/' */
    ddpc__srv_ref *srv;    /* the store this rank hosts (shared with splits), or NULL */
    ddpc_store *ext_store; /* the caller's store (ddpc_comm_create_store), borrowed, or NULL */
    uint64_t nsplit;       /* splits done so far (namespaces children) */

    /* state */
    uint64_t seq;                   /* collectives executed */
    uint64_t *p2p_sent, *p2p_recvd; /* [size] point-to-point counters */
    size_t ux_bytes;                /* payload bytes of every peer's unexpected messages */
    size_t ux_max;                  /* DDPC_P2P_UNEXPECTED_BYTES: the most ux_bytes may reach */
    int abort_fd;                   /* eventfd: readable once aborted */
    int aborted;                    /* atomic */
    ddpc_status failed;             /* sticky: once a transfer fails the comm is dead */
#define DDPC_PARKED 16
    ddpc__req parked[DDPC_PARKED]; /* rooted collectives' check receives, finishing during
                                    * later waits (ddpc__check_ring_post), used in turn */
    uint64_t nparked;              /* receives parked so far */

    /* scratch memory for the executing thread */
    void *scratch;
    size_t scratch_len;

    /* queue of operations and its progress thread */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct ddpc_work *qhead, *qtail; /* written under mu; qhead atomically (queue.c) */
    int busy; /* atomic: the right to execute, held while an operation runs (queue.c) */
    int stop; /* written under mu, atomically */
    int thread_started;
    int no_thread; /* ddpc_comm_options.progress_thread == 0: waiters run the queue */
    pthread_t thread;

    /* last error, for ddpc_comm_last_error */
    pthread_mutex_t err_mu;
    char last_err[1024];

    /* flight recorder (recorder.c): the last operations; NULL when
     * DDPC_TRACE_BUFFER=0 */
    struct ddpc__rec *rec;
    double settle_s; /* DDPC_STALL_SETTLE: seconds a timed-out rank collects notices */
};

/* DDPC_ALGO: auto chooses per call (hierarchical across hosts where some
 * host has several ranks); flat: never hierarchical, else as auto; hier:
 * hierarchical wherever the communicator spans several hosts. */
enum {
    DDPC_ALGO_AUTO = 0,
    DDPC_ALGO_RING,
    DDPC_ALGO_RHD,
    DDPC_ALGO_TREE,
    DDPC_ALGO_FLAT,
    DDPC_ALGO_HIER
};

/* What DDPC_ALGO (or its alias HCCL_ALGO) asks for: algo (DDPC_ALGO_*),
 * and the algorithm of the hierarchical allreduce's inter-host step
 * (AUTO, RING or RHD: HCCL_ALGO's level1). */
typedef struct ddpc__algo_choice {
    int algo, inter;
} ddpc__algo_choice;

/* algo.c: parses value v of variable var (named in errors and warnings)
 * in ddpc's words or HCCL_ALGO's syntax; what does not map is a WARN and
 * left to auto, what is malformed DDPC_ERR_ENV naming it. NULL or "" is
 * auto. */
ddpc_status ddpc__algo_parse(const char *var, const char *v, ddpc__algo_choice *out);

/* One operation being executed: fingerprint, deadline, and its status. */
typedef struct ddpc__exec {
    ddpc_comm *c;
    ddpc__args a;
    ddpc__hdr fp;        /* header template: kind, dtype, op, root, seq, count */
    double deadline;     /* absolute */
    int lost;            /* the rank whose loss failed this operation, or -1 */
    int culprit;         /* the rank whose call differed from this one's, or -1 */
    double nap;          /* > 0: a blocking progress sleeps at most this long (s)
                      * and returns, so its caller can look at the queue */
    const char *algo;    /* the algorithm chosen (static text, for the recorder), or NULL */
    uint64_t rec;        /* its flight-recorder entry, or 0 */
    double settle_until; /* > 0: timed out; collecting peers' notices until then */
    int waits_on;        /* while settling: the peer this rank waits on, or -1 */
    double now;          /* ddpc__now() when it started or last waited: the time a
                          * receive stamps on its peer's last_rx (no clock read a
                          * message; at most a busy poll's span behind) */
    int boot;            /* not an operation: bootstrap connecting every pair (link.c);
                          * a failure is the creation's error, not ddpc__fail's */
} ddpc__exec;

/* ------------------------------------------------------------ progress */

/* stall.c: an operation timed out (finds the silent rank with the peers'
 * notices and fails it); a peer's DDPC_F_WAIT notice arrived. */
ddpc_status ddpc__stall_timed_out(ddpc__exec *e);
/* Sends note to every connected peer (progress.c); close: then hangs up. */
void ddpc__send_notes(ddpc__exec *e, const ddpc__hdr *note, int close);
/* more[0, nmore): bytes the peer sent after its notice, already read with
 * it (into a receive's payload), NULL when none. */
ddpc_status ddpc__stall_notice(ddpc__exec *e, int peer, const ddpc__hdr *h, const void *more,
                               size_t nmore);
/* A noted peer: reads the notices it passes on, as far as they have come. */
ddpc_status ddpc__stall_read(ddpc__exec *e, int peer);

/* Posts a message of nbytes from buf to peer (a DATA message unless flags
 * says otherwise). r must stay valid until done. */
void ddpc__post_send(ddpc__exec *e, ddpc__req *r, int peer, const void *buf, size_t nbytes);
void ddpc__post_send_flags(ddpc__exec *e, ddpc__req *r, int peer, const void *buf, size_t nbytes,
                           int flags);
/* Posts a receive of exactly nbytes from peer into buf. */
void ddpc__post_recv(ddpc__exec *e, ddpc__req *r, int peer, void *buf, size_t nbytes);
void ddpc__post_recv_flags(ddpc__exec *e, ddpc__req *r, int peer, void *buf, size_t nbytes,
                           int flags);
/* Posts a receive of exactly nbytes from peer whose payload is combined
 * into buf as it arrives (fn(dst, src, n, ctx), unit bytes at a time; see
 * ddpc__xfer) instead of copied there. Only where ddpc__peer_combines. */
void ddpc__post_recv_combine(ddpc__exec *e, ddpc__req *r, int peer, void *buf, size_t nbytes,
                             ddpc__combine_fn fn, void *ctx, size_t unit);
/* Posts a point-to-point receive of exactly nbytes from peer into buf,
 * matched by (peer, tag = e->fp.root): it takes the earliest message from
 * peer with that tag, held as unexpected or yet to come (progress.c). */
void ddpc__post_recv_tagged(ddpc__exec *e, ddpc__req *r, int peer, void *buf, size_t nbytes);
/* For a receive from any source: 1 when a message with tag from peer is
 * held as unexpected or next on its stream; 0 when not; -1 when the next
 * message on its stream is one of another tag, which ddpc__p2p_drain can
 * take aside (as unexpected) to look behind it. Does not block. */
int ddpc__p2p_waiting(ddpc_comm *c, int peer, int tag);
/* Posts a receive of peer's next message as unexpected (its rq must be empty). */
ddpc_status ddpc__p2p_drain(ddpc_comm *c, int peer);
/* Frees every peer's unexpected messages (destroy). */
void ddpc__ux_free(ddpc_comm *c);
/* 1 when peer's transport can combine on receive (shared memory). */
int ddpc__peer_combines(const ddpc__exec *e, int peer);
/* Drives every posted transfer once without blocking; when block is set and
 * nothing moved, spins briefly and then sleeps in poll until something can
 * move, the deadline passes, or the communicator is aborted. On any error
 * the communicator is failed (see ddpc__fail) and the error returned. */
ddpc_status ddpc__progress(ddpc__exec *e, int block);
/* Progress until r is done / until all n requests are done. */
ddpc_status ddpc__wait(ddpc__exec *e, ddpc__req *r);
ddpc_status ddpc__wait_all(ddpc__exec *e, ddpc__req *rs, int n);
/* Exchanges a fingerprint-only message with the ring neighbours, so that a
 * collective in which some rank only sends still catches a mismatch. Each
 * check message is checked as it arrives, during any wait, and precedes
 * the data on its link, so a mismatch still fails before a mismatched
 * message is read.
 * check_ring waits for the whole exchange. check_ring_post is the rooted
 * collectives' form: it posts the sends (up to 2 requests in r, *n of
 * them) before the caller moves its data, and parks the receives in the
 * communicator (c->parked): they finish during later operations' waits,
 * so a rank that only sends runs ahead of its neighbours as OpenMPI's
 * broadcast root does, and a mismatch it alone would see fails its next
 * operation (or ddpc_comm_destroy). Fails only when every slot is taken
 * and the oldest parked check fails. from -> to (ranks, or -1 for none)
 * is a link the caller's data crosses whatever the algorithm (a message
 * from `from` straight to `to`): it carries no check, the data's header
 * being checked instead. check_ring_wait ends the sends: s is the data's
 * outcome, returned as is unless DDPC_OK. */
ddpc_status ddpc__check_ring(ddpc__exec *e);
ddpc_status ddpc__check_ring_post(ddpc__exec *e, ddpc__req r[2], int *n, int from, int to);
ddpc_status ddpc__check_ring_wait(ddpc__exec *e, ddpc__req r[2], int n, ddpc_status s);
/* Waits for every parked check (destroy), within the communicator's
 * operation timeout; a mismatch or a lost peer is returned. */
ddpc_status ddpc__check_parked_finish(ddpc_comm *c);

/* Marks the communicator failed with status s: records the error text
 * (prefixed with the rank and the operation) as the comm's last error and
 * this thread's, drops every posted request and shuts every connection
 * down so that the peers notice at once. Returns s. */
ddpc_status ddpc__fail(ddpc__exec *e, ddpc_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* "allreduce(count=10, float32, sum)" for a header. */
void ddpc__describe(const ddpc__hdr *h, char *buf, size_t len);

/* Scratch memory of at least nbytes owned by c (valid until the next call);
 * NULL on out of memory. */
void *ddpc__scratch(ddpc_comm *c, size_t nbytes);

/* ------------------------------------------------------------ recorder */

/* The flight recorder (recorder.c): each communicator keeps its last
 * DDPC_TRACE_BUFFER operations (sequence number, op, dtype, count, root or
 * peer, algorithm, queued/start/end times, state) in a ring, and writes
 * them, with every communicator of the process, to DDPC_TRACE_DIR/
 * flight-<rank>.txt on a timeout, a lost peer, an abort, or SIGUSR1. */
typedef enum {
    DDPC_REC_QUEUED = 1,
    DDPC_REC_RUNNING,
    DDPC_REC_DONE,
    DDPC_REC_FAILED
} ddpc__rec_state;

/* Creates c->rec (DDPC_TRACE_BUFFER entries; none when 0) and reads
 * DDPC_STALL_SETTLE. Errors only for bad settings. */
ddpc_status ddpc__rec_init(ddpc_comm *c);
/* c is made (its peers' addresses known): its record is written from now
 * on; reads DDPC_TRACE_DIR and installs the SIGUSR1 handler once. */
void ddpc__rec_register(ddpc_comm *c);
/* Unregisters c and frees its recorder (destroy; harmless when none). */
void ddpc__rec_fini(ddpc_comm *c);
/* a was queued: a new entry, its id returned (0 when not recording). */
uint64_t ddpc__rec_queued(ddpc_comm *c, const ddpc__args *a);
/* e starts executing at now (ddpc__now()): its entry from the queue, else a
 * new one. */
void ddpc__rec_start(ddpc__exec *e, double now);
/* e ended with status s. */
void ddpc__rec_end(ddpc__exec *e, ddpc_status s);
/* Writes every registered communicator's record to the trace directory
 * (when one is set), saying why; not from a signal handler. */
void ddpc__rec_dump(const char *why);
/* "allreduce" for a kind. */
const char *ddpc__kind_name(int kind);

/* ------------------------------------------------------------ links */

/* A pair's connection, made at creation or at first use: link.h. */

/* ------------------------------------------------------------ queue */

/* Runs or queues one operation (queue.c) with its executor a->run. w ==
 * NULL: blocking (runs on the caller's thread when nothing is queued, else
 * waits its turn); otherwise *w gets a work handle. Arguments are already
 * validated. ddpc__submit owns a->vec, whatever it returns. */
ddpc_status ddpc__submit(ddpc_comm *c, const ddpc__args *a, struct ddpc_work **w);
/* Refuses new operations, runs or waits out the queued ones (on this
 * thread when c has no progress thread) and joins the progress thread
 * (queue.c; ddpc_comm_destroy's first step). */
void ddpc__queue_stop(ddpc_comm *c);

/* ------------------------------------------------------------ lifecycle */

/* Creates a communicator whose store is at host:port under key prefix
 * (comm.c). host_store: rank 0 starts the server there (unless srv is
 * given, which is then shared). who names the variables the address came
 * from, for error texts. opt (may be NULL) overrides the environment. */
ddpc_status ddpc__comm_create(int rank, int size, const char *host, int port, int host_store,
                              ddpc__srv_ref *srv, const char *prefix, const char *who,
                              const ddpc_comm_options *opt, ddpc_comm **out);
/* Creates a communicator that meets its peers through st, the caller's
 * store (borrowed; kept in ext_store for splits), under prefix. opt (may be
 * NULL) overrides the environment's timeouts. The address to listen on
 * routes to MASTER_ADDR when it is set (else loopback), unless DDPC_IF_IP /
 * DDPC_SOCKET_IFNAME choose it. */
ddpc_status ddpc__comm_create_store(int rank, int size, ddpc_store *st, const char *prefix,
                                    const ddpc_comm_options *opt, ddpc_comm **out);

/* ------------------------------------------------------------ bootstrap */

/* Meets c's peers (bootstrap.c): through the store at host:port (who names
 * where the address came from) or through the caller's store st, under
 * c->prefix, before c->connect_timeout. On return c has a connection to
 * every peer, its local group and its spin settings. */
ddpc_status ddpc__bootstrap_addr(ddpc_comm *c, const char *host, int port, const char *who);
ddpc_status ddpc__bootstrap_store(ddpc_comm *c, ddpc_store *st);

/* ------------------------------------------------------------ ports, rank tables */

/* HCCL_HOST_SOCKET_PORT_RANGE's syntax ("60000-60050", "56000,56005-56010",
 * "auto") into p; DDPC_ERR_ENV naming name and the bad item (ports.c). */
ddpc_status ddpc__ports_parse(const char *name, const char *spec, ddpc__ports *p);
/* The ports of the data listeners: HCCL_HOST_SOCKET_PORT_RANGE, else
 * DDPC_IF_BASE_PORT's 1024, else any. */
ddpc_status ddpc__ports_data(ddpc__ports *p);
/* The ports of a unique id's store: HCCL_HOST_SOCKET_PORT_RANGE, else the
 * 32 from HCCL_IF_BASE_PORT, else from dflt_base (> 0), else any; the local
 * rank's port first. */
ddpc_status ddpc__ports_id(int dflt_base, ddpc__ports *p);

/* ddpc_comm_create_env's part when RANK_TABLE_FILE is set (ranktable.c):
 * the table, and this rank from RANK_ID, else RANK, OMPI_COMM_WORLD_RANK or
 * SLURM_PROCID; a WORLD_SIZE that disagrees with the table is an error. */
ddpc_status ddpc__rank_table_env(ddpc_rank_table **t, long *rank);
/* The file t was read from. */
const char *ddpc__rank_table_path(const ddpc_rank_table *t);

/* Picks the address to listen on (DDPC_IF_IP, DDPC_SOCKET_IFNAME, else the
 * route towards peer_host) into ip/ifname (src/comm/iface.c). */
ddpc_status ddpc__choose_ip(const char *peer_host, char *ip, size_t iplen, char *ifname,
                            size_t iflen);
/* Matches an interface name against an HCCL_SOCKET_IFNAME-style spec. */
int ddpc__ifname_match(const char *spec, const char *name);
/* The transport this rank uses to peer: "tcp", "shm", "self" for its own
 * rank, NULL when peer is out of range (for tests and logs). */
const char *ddpc__peer_transport(const ddpc_comm *c, int peer);
/* The TCP connections the link to peer carries messages on: 0 for this
 * rank itself, shared memory, or no link yet (for tests and logs). */
int ddpc__peer_sockets(const ddpc_comm *c, int peer);

#endif /* DDPC_COMM_COMM_H */
