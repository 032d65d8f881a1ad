/*
 * auth.h — who may connect: the job token's challenge-response, and HCCL's
 * whitelist of peer addresses. Every listener of ddpc (the store's server,
 * a rank's data listener) runs both on each connection before it accepts
 * anything else on it; every connecting side (the store's client, a rank
 * connecting to a peer) runs the client half. docs/SECURITY.md says what
 * this protects and what it does not.
 *
 * The exchange, when DDPC_JOB_TOKEN is set (integers little-endian; nc and
 * ns are 32 bytes from getrandom; mac(role) = HMAC-SHA256 under the token
 * of "ddpc job token v1 " role || u32 purpose || nc || ns):
 *
 *   client -> server  hello      u32 AUTH_MAGIC, u32 version, u32 purpose, u32 0, nc
 *   server -> client  challenge  u32 AUTH_MAGIC, u32 version, ns, mac("server")
 *                     (or 8 bytes: AUTH_MAGIC, AUTH_NO_TOKEN when the
 *                     server has no token, and it closes)
 *   client -> server  proof      mac("client")
 *   server -> client  verdict    u32 AUTH_MAGIC, u32 AUTH_ACCEPTED / AUTH_REFUSED
 *
 * Each side proves the token over both nonces and its own role, so a
 * recorded handshake is useless on a new connection (the other side's
 * nonce is new) and one side's proof cannot be reflected as the other's.
 * purpose (store or data) keeps a store handshake from opening a data
 * connection. Nothing after the handshake is authenticated or encrypted.
 *
 * Internal header (not installed).
 */
#ifndef DDPC_BASE_AUTH_H
#define DDPC_BASE_AUTH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "base/base.h"

#define DDPC_AUTH_MAGIC     0x41504444u /* "DDPA" as little-endian bytes */
#define DDPC_AUTH_VERSION   1u
#define DDPC_AUTH_NO_TOKEN  0x80000001u /* the server has no token */
#define DDPC_AUTH_ACCEPTED  0u
#define DDPC_AUTH_REFUSED   0x80000002u
#define DDPC_AUTH_HELLO     48 /* bytes of each message */
#define DDPC_AUTH_CHALLENGE 72
#define DDPC_AUTH_PROOF     32
#define DDPC_AUTH_VERDICT   8
#define DDPC_AUTH_MIN_TOKEN 16 /* characters a token needs at least */

/* What a connection is for: one purpose's handshake does not open another's. */
enum { DDPC_AUTH_STORE = 1, DDPC_AUTH_DATA = 2 };

/* The job token: *token = DDPC_JOB_TOKEN's value, or NULL when it is unset
 * (said once per process at INFO: connections are then not
 * authenticated). A token shorter than DDPC_AUTH_MIN_TOKEN characters is
 * DDPC_ERR_ENV naming the variable. */
ddpc_status ddpc__auth_token(const char **token);

/* The client half on a connected socket fd, before deadline (abort_fd as
 * for ddpc__sock_read_full; -1 = none). peer ("store at host:port", "rank
 * 3 at ip:port") names the other side in errors. A server that refuses
 * the token is DDPC_ERR_DENIED; one that closes or answers something else,
 * DDPC_ERR_PEER_LOST / DDPC_ERR_PROTOCOL, each naming the peer and the
 * likely cause. */
ddpc_status ddpc__auth_client(int fd, const char *token, int purpose, double deadline, int abort_fd,
                              const char *peer);

/* The client half as a state machine, for a connecting side that must not
 * wait for the server to answer (a lazy link, which the peer answers from
 * its progress engine: comm/link.c). start makes the hello to send (a new
 * nonce); then, until need is 0, read need bytes into a->in + a->have (add
 * them to a->have) and step: it checks what came and may give *olen bytes
 * to send (the proof). Errors name peer: DDPC_ERR_DENIED (a server without
 * the token, or not proving it, or refusing this one's), DDPC_ERR_PROTOCOL.
 * A failed read or write (status s) becomes lost(a, s, peer)'s error. */
typedef struct ddpc__auth_cli {
    unsigned char in[DDPC_AUTH_CHALLENGE]; /* the message being read */
    size_t have;                           /* bytes of it read */
    int stage;                             /* 0: the challenge; 1: the verdict; 2: done */
    int purpose;
    unsigned char nc[32];
} ddpc__auth_cli;

ddpc_status ddpc__auth_cli_start(ddpc__auth_cli *a, int purpose,
                                 unsigned char hello[DDPC_AUTH_HELLO]);
size_t ddpc__auth_cli_need(const ddpc__auth_cli *a);
ddpc_status ddpc__auth_cli_step(ddpc__auth_cli *a, const char *token, const char *peer,
                                unsigned char out[DDPC_AUTH_PROOF], size_t *olen);
ddpc_status ddpc__auth_cli_lost(const ddpc__auth_cli *a, ddpc_status s, const char *peer);

/* The server half as a state machine, for servers that read what arrives
 * (the store's poll loop, the data listener's pending connections). */
typedef struct ddpc__auth_srv {
    unsigned char in[DDPC_AUTH_HELLO]; /* the message being read */
    size_t have;                       /* bytes of it read */
    int stage;                         /* 0: reading the hello; 1: the proof; 2: done */
    int purpose;                       /* the purpose this listener serves */
    unsigned char nc[32], ns[32];
} ddpc__auth_srv;

void ddpc__auth_srv_init(ddpc__auth_srv *a, int purpose);
/* Bytes to read into a->in + a->have before the next step (> 0 until done). */
size_t ddpc__auth_srv_need(const ddpc__auth_srv *a);
/* After a read added to a->have: 0 = read more; 1 = send out[0, *olen)
 * (the challenge) and read more; 2 = accepted: send out (the verdict),
 * then the connection is the caller's; -1 = refused: why says why, send
 * out when *olen > 0, then close. token may be NULL (the server has none:
 * the client is told so). out holds DDPC_AUTH_CHALLENGE bytes. */
int ddpc__auth_srv_step(ddpc__auth_srv *a, const char *token, unsigned char *out, size_t *olen,
                        char *why, size_t whylen);

/* HCCL's whitelist: when HCCL_WHITELIST_DISABLE=0, the addresses listed
 * in HCCL_WHITELIST_FILE ({"host_ip": ["10.0.0.1", ...]}) are the only
 * ones a listener accepts connections from. ddpc__whitelist_load reads it
 * (once per file; again when the variables change): a missing or
 * malformed file, or HCCL_WHITELIST_FILE unset, is DDPC_ERR_ENV naming
 * the problem; DDPC_OK with nothing to do when the whitelist is off.
 * ddpc__whitelist_allows: 1 when sa may connect (always, when off or when
 * no list loaded). */
ddpc_status ddpc__whitelist_load(void);
int ddpc__whitelist_allows(const struct sockaddr *sa);

/* Both checks on one accepted connection's address, as a listener does
 * before anything else: 1 when sa passes the whitelist; else logs a WARN
 * naming what (e.g. "store"), the address and the rule, and returns 0. */
int ddpc__admit_addr(const char *what, const struct sockaddr *sa);

#endif /* DDPC_BASE_AUTH_H */
