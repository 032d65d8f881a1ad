/*
 * proto.h — the store's wire format, shared by server.c and client.c.
 *
 * A connection opens with the client's handshake, 8 bytes:
 *     u32 magic (STORE_MAGIC), u32 protocol version (STORE_VERSION)
 * answered by a reply frame (status RS_OK, payload u32 server version) or by
 * an RS_ERROR frame naming the problem, after which the server closes.
 *
 * Then requests and replies alternate, each one length-prefixed frame:
 *     request: u32 body_len, body = u8 op, op's fields
 *     reply:   u32 body_len, body = u8 status, payload
 * Integers are little-endian. A "str"/"bytes" field is u32 len + len bytes.
 *
 *   op          request fields                         OK payload
 *   OP_SET      str key, bytes value                   -
 *   OP_GET      u32 timeout_ms, str key                the value (rest of frame)
 *   OP_ADD      str key, i64 delta                     i64 new value
 *   OP_CAS      str key, bytes expected, bytes desired the value after the call
 *   OP_WAIT     u32 timeout_ms, u32 n, n x str key      -
 *   OP_CHECK    str key                                u8 exists
 *   OP_DELETE   str key                                u8 existed
 *   OP_NUM_KEYS -                                      i64 count
 *   OP_PING     -                                      -
 *
 * RS_TIMEOUT and RS_ERROR carry a message (rest of frame). The server itself
 * answers RS_TIMEOUT when a GET or WAIT's timeout passes, so a client always
 * gets exactly one reply per request and the stream never desynchronises.
 * A malformed, oversized or truncated request gets RS_ERROR, then the server
 * closes that connection.
 *
 * The same server also speaks PyTorch's c10d TCPStore protocol (torch 1.13),
 * told apart by a connection's first byte: 'D' opens ddpc's handshake, a
 * byte below TQ_COUNT is a TCPStore query. TCPStore requests have no frame
 * and no handshake; integers are little-endian, a "str"/"bytes" field is
 * u64 len + len bytes, and the reply depends on the query:
 *
 *   query           request fields                 reply
 *   TQ_SET          str key, bytes value            -
 *   TQ_COMPARE_SET  str key, bytes expected, desired bytes: the value after the call
 *   TQ_GET          str key                        bytes (absent key: connection closed)
 *   TQ_ADD          str key, i64 delta             i64 new value
 *   TQ_CHECK        u64 n, n x str key             u8 0 = all exist, 1 = not
 *   TQ_WAIT         u64 n, n x str key             u8 0 once all exist (no timeout:
 *                                                  the client gives up and closes)
 *   TQ_GETNUMKEYS   -                              i64 count
 *   TQ_DELETE_KEY   str key                        i64 keys deleted (0 or 1)
 *
 * TCPStore has no error reply: where ddpc's protocol answers RS_ERROR (a
 * malformed request, add on a value that is not an integer, a get of an
 * absent key) the server closes the connection, as torch's own server does.
 * TQ_WATCH_KEY is not served (torch 1.13 uses it only from C++ callbacks).
 *
 * torch 2.x renumbered the queries (T2_*) and added some. Its client opens
 * every connection with T2_VALIDATE (byte 0, then u32 TORCH_VALIDATE_MAGIC,
 * no reply). The server tells the dialects apart by a TCPStore connection's
 * first 5 bytes: 0 followed by the magic is 2.x. A 1.13 query starting with
 * byte 0 is TQ_SET, whose next 8 bytes are its key's length: with the magic
 * as their low half that length is over 1 GB, far past DDPC_STORE_MAX_KEY,
 * so no request a 1.13 client can make looks like a VALIDATE. Any other
 * first byte is 1.13. The 2.x queries, as torch's libuv server (its default)
 * serves them:
 *
 *   query           request fields                 reply
 *   T2_SET .. T2_DELETE_KEY                        as in 1.13, except: GET of an
 *                                                  absent key answers empty bytes;
 *                                                  CHECK/WAIT also count a queue
 *                                                  that holds items as a key
 *   T2_APPEND       str key, bytes value            - (creates the key if absent)
 *   T2_MULTI_GET    u64 n, n x str key             n x bytes (absent: empty)
 *   T2_MULTI_SET    u64 n, n x (str key, bytes)     -
 *   T2_CANCEL_WAIT  -                              u8 1 (WAIT_CANCELED): the parked
 *                                                  WAIT or BARRIER is dropped
 *   T2_PING         u32 nonce                      u32 the same nonce
 *   T2_QUEUE_PUSH   str key, bytes value            - (wakes one WAIT on the key)
 *   T2_QUEUE_POP    str key                        i64 items before the pop, then
 *                                                  (if > 0) bytes: the first item
 *   T2_QUEUE_LEN    str key                        i64 items
 *   T2_LIST_KEYS    -                              i64 n, n x bytes: the keys
 *   T2_BARRIER      str key, i64 world size        u8 0 once the key's counter
 *                                                  (add 1 each) reaches the size
 *
 * A 2.x client cancels a WAIT or BARRIER that timed out with CANCEL_WAIT
 * and reads STOP_WAITING first if it had come meanwhile. Queues are apart
 * from keys (num_keys and list_keys do not count them).
 *
 * Both protocols decode into one store_req, which the server executes
 * (decode.c decodes, server.c executes and encodes the reply).
 */
#ifndef DDPC_STORE_PROTO_H
#define DDPC_STORE_PROTO_H

#include <stdint.h>
#include <string.h>

#include "ddpc/store.h"

#define STORE_MAGIC   0x53504444u /* "DDPS" as little-endian bytes */
#define STORE_VERSION 1u

enum {
    OP_SET = 1,
    OP_GET,
    OP_ADD,
    OP_CAS,
    OP_WAIT,
    OP_CHECK,
    OP_DELETE,
    OP_NUM_KEYS,
    OP_PING,
    OP_DDPC_COUNT, /* ddpc's protocol has the operations above; torch 2.x's also these: */
    OP_APPEND = OP_DDPC_COUNT,
    OP_MULTI_GET,
    OP_MULTI_SET,
    OP_CANCEL_WAIT,
    OP_QUEUE_PUSH,
    OP_QUEUE_POP,
    OP_QUEUE_LEN,
    OP_LIST_KEYS,
    OP_BARRIER,
    OP_COUNT
};

enum { RS_OK = 0, RS_TIMEOUT = 1, RS_ERROR = 2 };

/* c10d TCPStore's QueryType values (torch 1.13, TCPStore.cpp). */
enum {
    TQ_SET = 0,
    TQ_COMPARE_SET,
    TQ_GET,
    TQ_ADD,
    TQ_CHECK,
    TQ_WAIT,
    TQ_GETNUMKEYS,
    TQ_WATCH_KEY,
    TQ_DELETE_KEY,
    TQ_COUNT
};
enum { TCHECK_READY = 0, TCHECK_NOT_READY = 1 };
enum { TWAIT_STOP_WAITING = 0, TWAIT_CANCELED = 1 };

/* c10d TCPStore's QueryType values since torch 2.x (TCPStoreBackend.hpp). */
enum {
    T2_VALIDATE = 0,
    T2_SET,
    T2_COMPARE_SET,
    T2_GET,
    T2_ADD,
    T2_CHECK,
    T2_WAIT,
    T2_GETNUMKEYS,
    T2_DELETE_KEY,
    T2_APPEND,
    T2_MULTI_GET,
    T2_MULTI_SET,
    T2_CANCEL_WAIT,
    T2_PING,
    T2_QUEUE_PUSH,
    T2_QUEUE_POP,
    T2_QUEUE_LEN,
    T2_LIST_KEYS,
    T2_BARRIER,
    T2_COUNT
};
#define TORCH_VALIDATE_MAGIC 0x3C85F7CEu
#define TORCH_VALIDATE_LEN   5 /* T2_VALIDATE + the magic */

/* The protocol a connection speaks, and TCPStore's dialect. */
enum { PROTO_DDPC = 1, PROTO_TORCH = 2 };
enum { TORCH_1 = 1, TORCH_2 = 2 }; /* torch 1.13's queries, torch 2.x's */

/* One decoded request of either protocol. Pointers are borrowed from the
 * buffer it was decoded from. Keys of CHECK and WAIT are read one after the
 * other with ddpc__store_req_key (each is a length field of lw bytes + bytes);
 * the first key is also in key/klen. */
typedef struct store_req {
    int op;          /* OP_* */
    int proto;       /* PROTO_*: the reply's encoding */
    int dialect;     /* TCPStore: TORCH_1 or TORCH_2 */
    double wait_s;   /* GET/WAIT: how long it may be parked; < 0: no limit */
    const char *key; /* first key (not NUL-terminated) */
    uint32_t klen;
    uint32_t nkeys;               /* keys in the request (1 but for the lists; MULTI_SET: pairs) */
    const unsigned char *keys;    /* the first key's length field (MULTI_SET: the first pair's) */
    int lw;                       /* bytes of a length field: 4 (ddpc) or 8 (torch) */
    const unsigned char *v1, *v2; /* SET: v1; CAS: expected v1, desired v2 */
    uint32_t n1, n2;
    int64_t delta;  /* ADD; BARRIER: the world size */
    uint32_t nonce; /* torch 2.x's PING */
} store_req;

/* Decodes one ddpc request body (after the u32 length). 0 on success; -1
 * with why filled (the connection is then failed). */
int ddpc__store_decode_ddpc(const unsigned char *body, size_t len, store_req *q, char *why,
                            size_t whylen);
/* Decodes one TCPStore request of dialect (TORCH_1 or TORCH_2; a 2.x
 * connection's VALIDATE is the server's, not the decoder's) from the front
 * of buf. Returns its length in
 * bytes, 0 when buf holds only part of it (read more), or -1 with why
 * filled when it is malformed or exceeds a limit (key, value, key count):
 * a partial request is refused as soon as its declared sizes are, so a
 * connection's buffer never grows past one legitimate request. */
long ddpc__store_decode_torch(const unsigned char *buf, size_t len, int dialect, store_req *q,
                              char *why, size_t whylen);
/* Iterates the keys of q: *p starts at q->keys; returns the key and its
 * length, advancing *p. Only for keys a decoder accepted. */
const char *ddpc__store_req_key(const store_req *q, const unsigned char **p, uint32_t *klen);
/* The same over MULTI_SET's pairs: returns the key, and the value in *v, *vn. */
const char *ddpc__store_req_pair(const store_req *q, const unsigned char **p, uint32_t *klen,
                                 const unsigned char **v, uint32_t *vn);
const char *ddpc__store_op_name(int op);

/* Largest keys list one WAIT may carry. */
#define STORE_MAX_WAIT_KEYS 65536
/* Largest request body: a compare-set carries two values and a key. */
#define STORE_MAX_REQUEST   ((uint64_t)2 * DDPC_STORE_MAX_VALUE + DDPC_STORE_MAX_KEY + 64)
/* Largest reply body: a value, or a message. */
#define STORE_MAX_REPLY     ((uint64_t)DDPC_STORE_MAX_VALUE + 64)

static inline void put_u32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}
static inline uint32_t get_u32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline void put_i64(unsigned char *p, int64_t v) {
    uint64_t u = (uint64_t)v;
    put_u32(p, (uint32_t)u);
    put_u32(p + 4, (uint32_t)(u >> 32));
}
static inline int64_t get_i64(const unsigned char *p) {
    return (int64_t)((uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32);
}
static inline void put_u64(unsigned char *p, uint64_t v) { put_i64(p, (int64_t)v); }
static inline uint64_t get_u64(const unsigned char *p) { return (uint64_t)get_i64(p); }

#endif /* DDPC_STORE_PROTO_H */
