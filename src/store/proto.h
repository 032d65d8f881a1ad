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
 */
#ifndef DDPC_STORE_PROTO_H
#define DDPC_STORE_PROTO_H

#include <stdint.h>
#include <string.h>

#include "ddpc/store.h"

#define STORE_MAGIC 0x53504444u /* "DDPS" as little-endian bytes */
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
    OP_COUNT
};

enum { RS_OK = 0, RS_TIMEOUT = 1, RS_ERROR = 2 };

/* Largest keys list one WAIT may carry. */
#define STORE_MAX_WAIT_KEYS 65536
/* Largest request body: a compare-set carries two values and a key. */
#define STORE_MAX_REQUEST ((uint64_t)2 * DDPC_STORE_MAX_VALUE + DDPC_STORE_MAX_KEY + 64)
/* Largest reply body: a value, or a message. */
#define STORE_MAX_REPLY ((uint64_t)DDPC_STORE_MAX_VALUE + 64)

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

#endif /* DDPC_STORE_PROTO_H */
