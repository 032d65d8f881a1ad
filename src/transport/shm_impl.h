/*
 * shm_impl.h — what the shared-memory transport's two files share: the
 * segment's layout (two ring headers, then the rings' data), the set-up
 * messages, and a connection's insides. shm_segment.c makes segments and
 * connections over them; shm.c moves bytes through the rings.
 */
#ifndef DDPC_TRANSPORT_SHM_IMPL_H
#define DDPC_TRANSPORT_SHM_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "transport/transport.h"

#define SHM_MAGIC    0x53504444u /* "DDPS" */
#define SHM_VERSION  1u
#define SHM_DATA_OFF 4096 /* both ring headers fit below; the data starts page aligned */

/* A side's state in the rings' gone flags. What is sent to a side that shut
 * down is dropped, as a TCP socket shut down for reading takes it, and so is
 * what is sent to one that closed while its last bytes are still unread, as
 * TCP takes the first send after a FIN: the sender goes on to read those
 * (a goodbye, a failure notice naming the rank really lost). After that,
 * and to a killed peer, sending is an error, as TCP's reset. */
enum { GONE_NO = 0, GONE_SHUT = 1, GONE_CLOSED = 2 };

/* One direction. Fields written by different sides live on different cache
 * lines; the sleeping flags are written by both (set by the waiter, cleared
 * by the side that wakes it). */
typedef struct shm_ring {
    _Alignas(64) uint32_t magic; /* constant after creation */
    uint32_t version;
    uint64_t capacity;                   /* data bytes */
    _Alignas(64) uint64_t head;          /* bytes written so far (producer) */
    _Alignas(64) uint64_t tail;          /* bytes read so far (consumer) */
    _Alignas(64) uint32_t cons_sleeping; /* the consumer waits for data */
    _Alignas(64) uint32_t prod_sleeping; /* the producer waits for room */
    _Alignas(64) uint32_t prod_gone;     /* the producer: GONE_SHUT or GONE_CLOSED */
    uint32_t cons_gone;                  /* the consumer: GONE_SHUT or GONE_CLOSED */
} shm_ring;

_Static_assert(2 * sizeof(shm_ring) <= SHM_DATA_OFF, "ring headers overflow the header page");

/* The offer (step 1) and the answer (step 2), sent over the TCP connection. */
typedef struct shm_offer_msg {
    uint32_t magic, version;
    uint32_t ok;       /* 1: a segment is offered; 0: refused (stay on TCP) */
    int32_t pid;       /* the creator's, for messages */
    uint64_t capacity; /* data bytes of each ring */
    char name[64];     /* "/ddpc-<pid>-<32 hex digits>" */
    char why[160];     /* refused: the reason */
} shm_offer_msg;

typedef struct shm_answer_msg {
    uint32_t magic, version;
    uint32_t ok; /* 1: mapped, the pair uses shared memory */
    uint32_t pad;
    char why[160];
} shm_answer_msg;

struct ddpc__conn {
    int fd;     /* the pair's TCP socket (owned): doorbell and liveness */
    char *base; /* the mapping (owned) */
    size_t len;
    shm_ring *tx, *rx; /* the ring this side writes / reads */
    char *txd, *rxd;   /* their data */
    uint64_t cap;
    uint64_t tx_head; /* this side's copy of tx->head */
    uint64_t tx_tail; /* tx->tail as last read: room is looked up again only when
                       * this copy shows too little (the line the reader writes
                       * is not fetched at every send) */
    uint64_t rx_tail; /* this side's copy of rx->tail */
    int peer_eof;     /* the socket said EOF or reset (driving thread only) */
    int shut;         /* atomic: shutdown() was called */
    /* how send copies into the ring (driving thread only; see pick_copy) */
    int copy_policy; /* COPY_AUTO, COPY_CACHED or COPY_STREAM */
    int stream;      /* auto: the kind in use, 1 = streaming */
    double
        ns_per_kib[2]; /* auto: recent cost of cached [0] and streaming [1] copies; 0 = none yet */
    unsigned large_copies; /* auto: copies of COPY_LARGE bytes or more so far */
    char peer_name[48];    /* for the trace of a change of kind */
};

/* DDPC_SHM_COPY */
enum { COPY_AUTO, COPY_CACHED, COPY_STREAM };
#define COPY_LARGE       (64u << 10) /* auto times copies this large */
#define COPY_PROBE       (32u << 10) /* the slice copied the other way */
#define COPY_PROBE_EVERY 16          /* large copies per probe */

/* The creator's segment between offer and finish (setup's res). */
typedef struct shm_pending {
    char name[64];
    char *base;
    size_t len;
    uint64_t cap;
} shm_pending;

/* The table's set-up functions (transport.h), in shm_segment.c. */
int ddpc__shm_can_connect(const ddpc__pair *pair);
ddpc_status ddpc__shm_setup(const ddpc__pair *pair, ddpc__conn *base, double deadline, int abort_fd,
                            void **res);
ddpc_status ddpc__shm_connect(const ddpc__pair *pair, ddpc__conn **conns, int n, void *res,
                              double deadline, int abort_fd, ddpc__conn **out,
                              const ddpc__transport **used);
void ddpc__shm_free(void *res);

#endif /* DDPC_TRANSPORT_SHM_IMPL_H */
