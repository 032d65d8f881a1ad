/* test_comm_p2p.c — point to point: send/recv, a large exchange both ways, many queued
 * operations, receives from any source, alltoallv. */
#include "comm_fixtures.h"

/* ------------------------------------------------------------ point to point */

static void p2p_body(int rank, int world, void *arg) {
    ddpc_comm *c = env_comm(rank, world);
    int32_t a[100], b[100];
    for (int i = 0; i < 100; i++) a[i] = rank * 1000 + i;
    if (rank == 0) {
        CHECK_OK(ddpc_send(c, a, 100, DDPC_INT32, 1));
        CHECK_OK(ddpc_recv(c, b, 100, DDPC_INT32, 1));
        for (int i = 0; i < 100; i++) CHECK_EQ(b[i], 1000 + i);
        CHECK_OK(ddpc_send(c, a, 10, DDPC_INT32, 1)); /* receiver expects 11 */
    } else {
        CHECK_OK(ddpc_recv(c, b, 100, DDPC_INT32, 0));
        for (int i = 0; i < 100; i++) CHECK_EQ(b[i], i);
        CHECK_OK(ddpc_send(c, a, 100, DDPC_INT32, 0));
        CHECK_STATUS(ddpc_recv(c, b, 11, DDPC_INT32, 0), DDPC_ERR_MISMATCH);
        CHECK_CONTAINS(ddpc_last_error(), "count=10");
    }
    CHECK_STATUS(ddpc_send(c, a, 1, DDPC_INT32, rank), DDPC_ERR_INVALID_ARG);
    ddpc_comm_destroy(c);
}

TEST_T(comm_send_recv, 30) {
    g_port = t_free_port();
    t_run_ranks(2, 25, p2p_body, NULL);
}

/* Both ranks send each other 16 MiB before receiving, as torch's
 * batch_isend_irecv does: the queued sends and receives progress together
 * (one would otherwise wait forever on the other's full buffers), and a
 * collective after them still runs in order. */
static void p2p_exchange_body(int rank, int world, void *arg) {
    setenv("DDPC_TIMEOUT", "20", 1);
    ddpc_comm *c = env_comm(rank, world);
    size_t n = 4u << 20;
    float *out = malloc(sizeof(float) * n), *in = malloc(sizeof(float) * n);
    CHECK(out && in);
    for (size_t i = 0; i < n; i++) out[i] = (float)(rank * 7 + (int)(i % 1000));
    int peer = 1 - rank;
    for (int round = 0; round < 3; round++) {
        ddpc_work *ws, *wr, *wa;
        memset(in, 0, sizeof(float) * n);
        CHECK_OK(ddpc_send_async(c, out, n, DDPC_FLOAT32, peer, &ws));
        CHECK_OK(ddpc_recv_async(c, in, n, DDPC_FLOAT32, peer, &wr));
        int32_t x = 1, y = 0;
        CHECK_OK(ddpc_allreduce_async(c, &x, &y, 1, DDPC_INT32, DDPC_SUM, &wa));
        /* round 1 waits for the receive first, round 2 for the collective */
        if (round == 1) CHECK_OK(ddpc_work_wait(wr, -1));
        if (round == 2) CHECK_OK(ddpc_work_wait(wa, -1));
        CHECK_OK(ddpc_work_wait(ws, -1));
        CHECK_OK(ddpc_work_wait(wr, -1));
        CHECK_OK(ddpc_work_wait(wa, -1));
        ddpc_work_destroy(ws);
        ddpc_work_destroy(wr);
        ddpc_work_destroy(wa);
        CHECK_EQ(y, 2);
        for (size_t i = 0; i < n; i += 4099)
            CHECK_NEAR(in[i], (float)(peer * 7 + (int)(i % 1000)), 0);
        CHECK_NEAR(in[n - 1], (float)(peer * 7 + (int)((n - 1) % 1000)), 0);
    }
    free(out);
    free(in);
    CHECK_OK(ddpc_comm_destroy(c));
}

TEST_T(comm_send_recv_exchange_large, 60) {
    g_port = t_free_port();
    t_run_ranks(2, 55, p2p_exchange_body, NULL);
}

/* Many sends and receives queued while a batch of them runs: the batch
 * takes them in as they come and grows past its first room with requests
 * already posted, which must stay where they were posted. */
static void p2p_many_body(int rank, int world, void *arg) {
    enum { K = 96, N = 16384 };
    ddpc_comm *c = env_comm(rank, world);
    float *out = malloc(sizeof(float) * N * K), *in = calloc((size_t)N * K, sizeof(float));
    CHECK(out && in);
    ddpc_work *ws[K], *wr[K];
    int peer = 1 - rank;
    for (int k = 0; k < K; k++) {
        for (int i = 0; i < N; i++) out[(size_t)k * N + i] = (float)(rank * 1000 + k + i % 7);
        CHECK_OK(ddpc_send_async(c, out + (size_t)k * N, N, DDPC_FLOAT32, peer, &ws[k]));
        CHECK_OK(ddpc_recv_async(c, in + (size_t)k * N, N, DDPC_FLOAT32, peer, &wr[k]));
    }
    for (int k = 0; k < K; k++) {
        CHECK_OK(ddpc_work_wait(ws[k], -1));
        CHECK_OK(ddpc_work_wait(wr[k], -1));
        ddpc_work_destroy(ws[k]);
        ddpc_work_destroy(wr[k]);
        for (int i = 0; i < N; i += 997)
            CHECK_NEAR(in[(size_t)k * N + i], (float)(peer * 1000 + k + i % 7), 0);
    }
    free(out);
    free(in);
    CHECK_OK(ddpc_comm_destroy(c));
}

TEST_T(comm_send_recv_many_queued, 30) {
    g_port = t_free_port();
    t_run_ranks(2, 25, p2p_many_body, NULL);
}

/* Receives from any source: rank 0 takes one message from each other rank
 * in whatever order they come (rank r sleeps (world - r) * 30 ms first, so
 * the last rank's usually comes first), learns each sender, then a receive
 * from a named rank queued behind an any-source one still gets that rank's
 * next message, in order. Rank 1 sends those only once rank 0 says go: an
 * any-source receive of the first round would take them otherwise, when
 * rank 1 runs ahead (under valgrind it did). */
static void any_source_body(int rank, int world, void *arg) {
    ddpc_comm *c = env_comm(rank, world);
    int32_t v[2];
    if (rank == 0) {
        int seen[8] = { 0 };
        for (int k = 1; k < world; k++) {
            ddpc_work *w;
            CHECK_OK(ddpc_recv_async(c, v, 2, DDPC_INT32, DDPC_ANY_SOURCE, &w));
            CHECK_EQ(ddpc_work_source(w) == -1 || ddpc_work_source(w) > 0, 1);
            CHECK_OK(ddpc_work_wait(w, -1));
            int src = ddpc_work_source(w);
            ddpc_work_destroy(w);
            CHECK(src >= 1 && src < world);
            CHECK_EQ(v[0], src);
            CHECK_EQ(v[1], 100);
            seen[src]++;
        }
        for (int r = 1; r < world; r++) CHECK_EQ(seen[r], 1);
        CHECK_OK(ddpc_send(c, v, 2, DDPC_INT32, 1)); /* go */
        /* rank 1 sends 200 then 300: any-source takes the first, rank 1's
         * named receive the second */
        ddpc_work *wa, *wn;
        int32_t u[2];
        CHECK_OK(ddpc_recv_async(c, v, 2, DDPC_INT32, DDPC_ANY_SOURCE, &wa));
        CHECK_OK(ddpc_recv_async(c, u, 2, DDPC_INT32, 1, &wn));
        CHECK_OK(ddpc_work_wait(wn, -1));
        CHECK_OK(ddpc_work_wait(wa, -1));
        CHECK_EQ(ddpc_work_source(wa), 1);
        CHECK_EQ(v[1], 200);
        CHECK_EQ(u[1], 300);
        ddpc_work_destroy(wa);
        ddpc_work_destroy(wn);
        CHECK_OK(ddpc_recv(c, v, 2, DDPC_INT32, DDPC_ANY_SOURCE)); /* blocking form */
        CHECK_EQ(v[1], 400);
    } else {
        ddpc__sleep(0.03 * (world - rank));
        v[0] = rank, v[1] = 100;
        CHECK_OK(ddpc_send(c, v, 2, DDPC_INT32, 0));
        if (rank == 1) {
            CHECK_OK(ddpc_recv(c, v, 2, DDPC_INT32, 0)); /* go */
            v[1] = 200;
            CHECK_OK(ddpc_send(c, v, 2, DDPC_INT32, 0));
            v[1] = 300;
            CHECK_OK(ddpc_send(c, v, 2, DDPC_INT32, 0));
            v[1] = 400;
            CHECK_OK(ddpc_send(c, v, 2, DDPC_INT32, 0));
        }
    }
    CHECK_STATUS(ddpc_send(c, v, 2, DDPC_INT32, DDPC_ANY_SOURCE), DDPC_ERR_INVALID_ARG);
    CHECK_OK(ddpc_barrier(c));
    CHECK_OK(ddpc_comm_destroy(c));
}

TEST_T(comm_recv_any_source, 30) {
    g_port = t_free_port();
    t_run_ranks(4, 25, any_source_body, NULL);
}

/* Uneven all-to-all: rank r sends (r + j) % 3 + (j == 0) elements to rank
 * j, value 1000 r + 10 j + k; a receive count that disagrees with the
 * sender's is DDPC_ERR_MISMATCH naming both sizes. */
static size_t a2av_n(int from, int to) { return (size_t)((from + to) % 3 + (to == 0)); }

static void alltoallv_body(int rank, int world, void *arg) {
    ddpc_comm *c = env_comm(rank, world);
    size_t sc[8], sd[8], rc[8], rd[8], st = 0, rt = 0;
    for (int j = 0; j < world; j++) {
        sc[j] = a2av_n(rank, j), sd[j] = st, st += sc[j] + 1; /* a gap after each block */
        rc[j] = a2av_n(j, rank), rd[j] = rt, rt += rc[j];
    }
    int64_t *send = calloc(st + 1, 8), *recv = calloc(rt + 1, 8);
    for (int j = 0; j < world; j++)
        for (size_t k = 0; k < sc[j]; k++) send[sd[j] + k] = 1000 * rank + 10 * j + (int64_t)k;
    CHECK_OK(ddpc_alltoallv(c, send, sc, sd, recv, rc, rd, DDPC_INT64));
    for (int j = 0; j < world; j++)
        for (size_t k = 0; k < rc[j]; k++)
            CHECK_EQ(recv[rd[j] + k], 1000 * j + 10 * rank + (int64_t)k);
    ddpc_work *w;
    CHECK_OK(ddpc_alltoallv_async(c, send, sc, sd, recv, rc, rd, DDPC_INT64, &w));
    memset(sc, 0xff, sizeof sc); /* the arrays were copied */
    CHECK_OK(ddpc_work_wait(w, -1));
    ddpc_work_destroy(w);
    for (int j = 0; j < world; j++) sc[j] = a2av_n(rank, j);
    if (rank == 1) rc[0]++; /* expects one more from rank 0 than it sends */
    ddpc_status s = ddpc_alltoallv(c, send, sc, sd, recv, rc, rd, DDPC_INT64);
    if (rank == 1) { /* the others may have finished their part first */
        CHECK_STATUS(s, DDPC_ERR_MISMATCH);
        CHECK_CONTAINS(ddpc_last_error(), "alltoallv: rank 0 sends this rank (1) ");
    }
    CHECK_STATUS(ddpc_alltoallv(c, send, NULL, sd, recv, rc, rd, DDPC_INT64), DDPC_ERR_INVALID_ARG);
    free(send);
    free(recv);
    ddpc_comm_destroy(c);
}

TEST_T(comm_alltoallv, 30) {
    g_port = t_free_port();
    t_run_ranks(3, 25, alltoallv_body, NULL);
}

/* ------------------------------------------------------------------ tags */

/* Sets the rank up over shared memory (arg NULL), TCP only (arg "tcp"), or
 * as if on a host of its own with 4 TCP streams per pair ("streams": a
 * large message is split across them by its length, so a receive must
 * read it as it was sent). */
static ddpc_comm *tag_comm(int rank, int world, void *arg) {
    if (arg) setenv("DDPC_SHM", "0", 1);
    if (!arg || strcmp(arg, "streams") != 0) return env_comm(rank, world);
    char id[32];
    snprintf(id, sizeof id, "tags-host-%d", rank);
    setenv("DDPC_HOST_ID", id, 1);
    setenv("DDPC_SOCKETS_PER_PEER", "4", 1);
    ddpc_comm *c = env_comm_unchecked(rank, world);
    CHECK_EQ(ddpc__peer_sockets(c, 1 - rank), 4);
    return c;
}

static void fill_bytes(uint8_t *b, size_t n, int seed) {
    for (size_t i = 0; i < n; i++) b[i] = (uint8_t)(seed * 31 + i * 7 + i / 251);
}

static void check_bytes(const uint8_t *b, size_t n, int seed) {
    for (size_t i = 0; i < n; i++)
        if (b[i] != (uint8_t)(seed * 31 + i * 7 + i / 251)) {
            CHECK_MSG(0, "byte %zu of message %d is %d, want %d", i, seed, b[i],
                      (uint8_t)(seed * 31 + i * 7 + i / 251));
            return;
        }
}

/* Rank 0 sends tag 1 then tag 2 (blocking); rank 1 receives tag 2 first:
 * the tag-1 message is held aside, not matched to the tag-2 receive, and
 * the tag-2 receive does not wait behind it. Sizes 0, 1, odd and several
 * MiB (larger than a shared-memory ring and the socket buffers). Then many
 * tags interleaved: rank 0 sends 60 messages with tags k % 5, rank 1 posts
 * the receives tag by tag from the last one, and per tag in order. */
static void tags_body(int rank, int world, void *arg) {
    ddpc_comm *c = tag_comm(rank, world, arg);
    static const size_t sizes[] = { 0, 1, 13, 4099, (3u << 20) + 5 };
    size_t big = (3u << 20) + 5;
    uint8_t *a = malloc(big), *b = malloc(big);
    CHECK(a && b);
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        size_t n = sizes[k];
        if (rank == 0) {
            fill_bytes(a, n, 1);
            fill_bytes(b, n, 2);
            CHECK_OK(ddpc_send_tagged(c, a, n, DDPC_UINT8, 1, 1));
            CHECK_OK(ddpc_send_tagged(c, b, n, DDPC_UINT8, 1, 2));
        } else {
            memset(a, 0, n);
            memset(b, 0, n);
            CHECK_OK(ddpc_recv_tagged(c, b, n, DDPC_UINT8, 0, 2));
            check_bytes(b, n, 2);
            CHECK_OK(ddpc_recv_tagged(c, a, n, DDPC_UINT8, 0, 1));
            check_bytes(a, n, 1);
        }
    }
    enum { M = 60, T = 5 };
    size_t len[M], off[M], tot = 0;
    for (int i = 0; i < M; i++) len[i] = (size_t)(i * 997) % 70001, off[i] = tot, tot += len[i];
    uint8_t *all = malloc(tot);
    CHECK(all);
    ddpc_work *w[M];
    if (rank == 0) {
        for (int i = 0; i < M; i++) fill_bytes(all + off[i], len[i], i);
        for (int i = 0; i < M; i++)
            CHECK_OK(
                ddpc_send_tagged_async(c, all + off[i], len[i], DDPC_UINT8, 1, 100 + i % T, &w[i]));
    } else {
        memset(all, 0, tot);
        int k = 0;
        for (int t = T - 1; t >= 0; t--)
            for (int i = t; i < M; i += T)
                CHECK_OK(ddpc_recv_tagged_async(c, all + off[i], len[i], DDPC_UINT8, 0, 100 + t,
                                                &w[k++]));
    }
    for (int i = 0; i < M; i++) {
        CHECK_OK(ddpc_work_wait(w[i], -1));
        ddpc_work_destroy(w[i]);
    }
    if (rank == 1)
        for (int i = 0; i < M; i++) check_bytes(all + off[i], len[i], i);
    /* untagged ones still match in order (tag 0), and a collective after
     * them finds the streams in step */
    int32_t x = rank + 1, y = 0;
    if (rank == 0) {
        CHECK_OK(ddpc_send(c, &x, 1, DDPC_INT32, 1));
        x = 7;
        CHECK_OK(ddpc_send(c, &x, 1, DDPC_INT32, 1));
    } else {
        CHECK_OK(ddpc_recv(c, &y, 1, DDPC_INT32, 0));
        CHECK_EQ(y, 1);
        CHECK_OK(ddpc_recv(c, &y, 1, DDPC_INT32, 0));
        CHECK_EQ(y, 7);
    }
    x = 1;
    CHECK_OK(ddpc_allreduce(c, &x, &y, 1, DDPC_INT32, DDPC_SUM));
    CHECK_EQ(y, 2);
    /* a count that differs on the matching tag is a mismatch naming the tag */
    if (rank == 0)
        CHECK_OK(ddpc_send_tagged(c, a, 10, DDPC_UINT8, 1, 5));
    else {
        CHECK_STATUS(ddpc_recv_tagged(c, a, 11, DDPC_UINT8, 0, 5), DDPC_ERR_MISMATCH);
        CHECK_CONTAINS(ddpc_last_error(), "count=10, uint8, tag=5");
    }
    free(all);
    free(a);
    free(b);
    ddpc_comm_destroy(c);
}

TEST_T(comm_send_recv_tags_shm, 60) {
    g_port = t_free_port();
    t_run_ranks(2, 55, tags_body, NULL);
}

TEST_T(comm_send_recv_tags_tcp, 60) {
    g_port = t_free_port();
    t_run_ranks(2, 55, tags_body, (void *)"tcp");
}

TEST_T(comm_send_recv_tags_tcp_streams, 60) {
    g_port = t_free_port();
    t_run_ranks(2, 55, tags_body, (void *)"streams");
}

/* A receive from any source takes the first message of its tag: rank 1
 * sends tags 3 then 7, rank 2 tag 5; rank 0's any-source receive of tag 7
 * looks behind rank 1's tag 3 (held aside) and chooses rank 1. */
static void any_source_tags_body(int rank, int world, void *arg) {
    ddpc_comm *c = tag_comm(rank, world, arg);
    int32_t v[2] = { rank, 0 };
    if (rank == 0) {
        ddpc_work *w;
        CHECK_OK(ddpc_recv_tagged_async(c, v, 2, DDPC_INT32, DDPC_ANY_SOURCE, 7, &w));
        CHECK_OK(ddpc_work_wait(w, -1));
        CHECK_EQ(ddpc_work_source(w), 1);
        CHECK_EQ(v[1], 7);
        ddpc_work_destroy(w);
        CHECK_OK(ddpc_recv_tagged(c, v, 2, DDPC_INT32, DDPC_ANY_SOURCE, 5));
        CHECK_EQ(v[0], 2);
        CHECK_EQ(v[1], 5);
        CHECK_OK(ddpc_recv_tagged(c, v, 2, DDPC_INT32, 1, 3));
        CHECK_EQ(v[0], 1);
        CHECK_EQ(v[1], 3);
    } else if (rank == 1) {
        v[1] = 3;
        CHECK_OK(ddpc_send_tagged(c, v, 2, DDPC_INT32, 0, 3));
        v[1] = 7;
        CHECK_OK(ddpc_send_tagged(c, v, 2, DDPC_INT32, 0, 7));
    } else {
        ddpc__sleep(0.05);
        v[1] = 5;
        CHECK_OK(ddpc_send_tagged(c, v, 2, DDPC_INT32, 0, 5));
    }
    CHECK_OK(ddpc_barrier(c));
    CHECK_OK(ddpc_comm_destroy(c));
}

TEST_T(comm_recv_any_source_tags, 30) {
    g_port = t_free_port();
    t_run_ranks(3, 25, any_source_tags_body, NULL);
}

/* A receive whose tag never comes fails at DDPC_TIMEOUT naming the peer and
 * the tag (a message of another tag came, and is held aside). */
static void tag_timeout_body(int rank, int world, void *arg) {
    t_set_rank_env(rank, world, g_port);
    setenv("DDPC_CONNECT_TIMEOUT", "20", 1);
    setenv("DDPC_TIMEOUT", "1", 1);
    ddpc_comm *c = NULL;
    CHECK_OK(ddpc_comm_create_env(&c));
    int32_t v = 1;
    if (rank == 0) {
        double t0 = ddpc__now();
        CHECK_STATUS(ddpc_recv_tagged(c, &v, 1, DDPC_INT32, 1, 9), DDPC_ERR_TIMEOUT);
        CHECK(ddpc__now() - t0 < 10);
        CHECK_CONTAINS(ddpc_last_error(), "tag=9");
        CHECK_CONTAINS(ddpc_last_error(), "rank 1");
    } else {
        CHECK_OK(ddpc_send_tagged(c, &v, 1, DDPC_INT32, 0, 8));
        ddpc__sleep(4);
    }
    ddpc_comm_destroy(c);
}

TEST_T(comm_recv_tag_timeout, 30) {
    g_port = t_free_port();
    t_run_ranks(2, 25, tag_timeout_body, NULL);
}

/* Messages held aside are bounded: with DDPC_P2P_UNEXPECTED_BYTES=4096, a
 * second 3000-byte message that no receive wants yet fails the receive
 * naming the variable and the message (the first is held). */
static void tag_unexpected_limit_body(int rank, int world, void *arg) {
    setenv("DDPC_P2P_UNEXPECTED_BYTES", "4096", 1);
    ddpc_comm *c = env_comm(rank, world);
    uint8_t a[3000], b[3000], d[8];
    fill_bytes(a, sizeof a, 1);
    fill_bytes(b, sizeof b, 2);
    if (rank == 0) {
        ddpc_work *w[3];
        CHECK_OK(ddpc_send_tagged_async(c, a, sizeof a, DDPC_UINT8, 1, 1, &w[0]));
        CHECK_OK(ddpc_send_tagged_async(c, b, sizeof b, DDPC_UINT8, 1, 2, &w[1]));
        CHECK_OK(ddpc_send_tagged_async(c, d, sizeof d, DDPC_UINT8, 1, 3, &w[2]));
        for (int i = 0; i < 3; i++) {
            ddpc_work_wait(w[i], -1); /* rank 1 fails, and may hang up before the last */
            ddpc_work_destroy(w[i]);
        }
    } else {
        CHECK_STATUS(ddpc_recv_tagged(c, d, sizeof d, DDPC_UINT8, 0, 3), DDPC_ERR_NOMEM);
        CHECK_CONTAINS(ddpc_last_error(), "DDPC_P2P_UNEXPECTED_BYTES=4096");
        CHECK_CONTAINS(ddpc_last_error(), "rank 0 sent a message with tag 2 (3000 bytes)");
    }
    ddpc_comm_destroy(c);
}

TEST_T(comm_recv_tag_unexpected_limit, 30) {
    g_port = t_free_port();
    t_run_ranks(2, 25, tag_unexpected_limit_body, NULL);
}
