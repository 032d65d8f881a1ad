/*
 * split.c — ddpc_comm_split: ranks of a communicator with the same colour
 * form a new one, ordered by (key, rank).
 *
 * As NCCL's bootstrap does, the (colour, key) exchange and the closing
 * barrier do not use the collectives (a layer above this one): they are an
 * exchange of comm's own over the parent's connections, run as operations
 * of the parent. The child meets its peers through the parent's store
 * (bootstrap.c), under a key prefix of its own.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"

/* Split's own exchange, an executor of comm's (no collective): every rank's
 * count elements reach every rank's recv, in rank order, over the parent's
 * connections; with count 0 it is a barrier. A dissemination (Bruck)
 * allgather: in round d = 1, 2, 4, ... each rank sends the blocks it holds
 * to rank + d and receives as many from rank - d, so it talks to log2(size)
 * peers (the barrier's), not all of them: a lazy communicator connects no
 * more pairs for a split than its collectives do. tmp[j] holds the block of
 * rank - j. Run as an operation of the parent, it keeps its place in the
 * queue, its sequence number and fingerprint, and fails as any operation
 * does (a lost peer, DDPC_TIMEOUT, abort). */
static ddpc_status exchange_all(ddpc__exec *e) {
    ddpc_comm *c = e->c;
    int n = c->size, me = c->rank;
    size_t nb = e->a.count * ddpc_dtype_size(e->a.dtype);
    char *tmp = nb ? malloc(nb * (size_t)n) : NULL;
    if (nb && !tmp) return ddpc__fail(e, DDPC_ERR_NOMEM, "out of memory");
    if (nb) memcpy(tmp, e->a.send, nb);
    ddpc_status s = DDPC_OK;
    for (int d = 1; d < n && s == DDPC_OK; d *= 2) {
        size_t m = (size_t)(d < n - d ? d : n - d);
        ddpc__req r[2];
        ddpc__post_send(e, &r[0], (me + d) % n, tmp, m * nb);
        ddpc__post_recv(e, &r[1], (me - d + n) % n, tmp ? tmp + (size_t)d * nb : NULL, m * nb);
        s = ddpc__wait_all(e, r, 2);
    }
    for (int j = 0; s == DDPC_OK && nb && j < n; j++)
        memcpy((char *)e->a.recv + (size_t)((me - j + n) % n) * nb, tmp + (size_t)j * nb, nb);
    free(tmp);
    return s;
}

/* Runs split's exchange of count int32 per rank (an allgather), or of
 * nothing (a barrier), on c as one blocking operation. */
static ddpc_status split_exchange(ddpc_comm *c, ddpc__kind kind, const int32_t *mine, int32_t *all,
                                  size_t count) {
    ddpc__args a = { kind, mine, all, count, DDPC_INT32, DDPC_SUM, -1, NULL, exchange_all, 0, 0 };
    return ddpc__submit(c, &a, NULL);
}

typedef struct member {
    int color, key, rank;
} member;

static int member_cmp(const void *a, const void *b) {
    const member *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

/* This rank's place in its colour's communicator: *newrank of *n (colour
 * < 0: none, *n = 0), from everyone's (colour, key) (one operation on c). */
static ddpc_status split_place(ddpc_comm *c, int color, int key, int *newrank, int *n) {
    int32_t mine[2] = { color < 0 ? -1 : color, key };
    int32_t *all = malloc(sizeof(int32_t) * 2 * (size_t)c->size);
    member *m = malloc(sizeof *m * (size_t)c->size);
    ddpc_status s = DDPC_OK;
    *newrank = -1;
    *n = 0;
    if (!all || !m) {
        s = ddpc__err(DDPC_ERR_NOMEM, "out of memory");
        goto out;
    }
    DDPC_CHECK_GOTO(split_exchange(c, DDPC_K_ALLGATHER, mine, all, 2), s, out);
    for (int r = 0; r < c->size; r++)
        if (color >= 0 && all[2 * r] == mine[0])
            m[(*n)++] = (member){ all[2 * r], all[2 * r + 1], r };
    qsort(m, (size_t)*n, sizeof *m, member_cmp);
    for (int i = 0; i < *n; i++)
        if (m[i].rank == c->rank) *newrank = i;
out:
    free(all);
    free(m);
    return s;
}

/* Creates the child communicator of split number nsplit for color, through
 * the parent's store (the caller's, or the one at store_host:store_port). */
static ddpc_status create_child(ddpc_comm *c, int color, int newrank, int n, uint64_t nsplit,
                                ddpc_comm **child) {
    char prefix[320], who[320];
    snprintf(prefix, sizeof prefix, "%.200ssplit%" PRIu64 "/c%d/", c->prefix, nsplit, color);
    snprintf(who, sizeof who, "the store %s:%d", c->store_host, c->store_port);
    ddpc_comm_options opt = ddpc_comm_options_default(); /* the parent's settings */
    opt.connect_timeout_s = c->connect_timeout;
    opt.exec_timeout_s = c->exec_timeout;
    opt.progress_thread = !c->no_thread;
    if (c->ext_store) return ddpc__comm_create_store(newrank, n, c->ext_store, prefix, &opt, child);
    return ddpc__comm_create(newrank, n, c->store_host, c->store_port, 0, c->srv, prefix, who, &opt,
                             child);
}

ddpc_status ddpc_comm_split(ddpc_comm *c, int color, int key, ddpc_comm **out) {
    if (!c || !out)
        return ddpc__err(DDPC_ERR_INVALID_ARG,
                         "ddpc_comm_split: communicator and out must be non-NULL");
    *out = NULL;
    int newrank, n;
    DDPC_CHECK(split_place(c, color, key, &newrank, &n));
    uint64_t nsplit = c->nsplit++;
    ddpc_comm *child = NULL;
    ddpc_status cs = DDPC_OK;
    char keep[1024] = "";
    if (color >= 0) {
        cs = create_child(c, color, newrank, n, nsplit, &child);
        if (cs != DDPC_OK) snprintf(keep, sizeof keep, "%s", ddpc_last_error());
        ddpc__log_set_rank(c->rank);
    }
    /* every child is connected before anyone may stop the store */
    ddpc_status s = split_exchange(c, DDPC_K_BARRIER, NULL, NULL, 0);
    if (cs != DDPC_OK) s = ddpc__err(cs, "split: %s", keep);
    if (s != DDPC_OK) {
        ddpc_comm_destroy(child);
        return s;
    }
    *out = child;
    return DDPC_OK;
}
