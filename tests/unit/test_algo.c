/*
 * test_algo.c — DDPC_ALGO's parser (src/comm/algo.c): ddpc's words, HCCL_ALGO's
 * syntax where it maps (level1:ring, level1:H-D_R; the per-operation form's
 * allreduce entry), a WARN naming what does not map, an error naming what
 * is malformed, and HCCL_ALGO read as DDPC_ALGO's alias.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/env.h"
#include "coll/coll.h"
#include "comm/comm.h"
#include "test.h"

/* Parses v with stderr (where WARNs go) captured into log[cap]. */
static ddpc_status parse_logged(const char *v, ddpc__algo_choice *ac, char *log, size_t cap) {
    fflush(stderr);
    int saved = dup(2);
    const char *path = t_tmp_path("algo.log");
    CHECK(saved >= 0 && freopen(path, "w", stderr) != NULL);
    ddpc_status s = ddpc__algo_parse("HCCL_ALGO", v, ac);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    size_t n = fread(log, 1, cap - 1, f);
    log[n] = '\0';
    fclose(f);
    return s;
}

TEST(algo_ddpc_words) {
    static const struct {
        const char *v;
        int algo;
    } w[] = { { "auto", DDPC_ALGO_AUTO }, { "flat", DDPC_ALGO_FLAT }, { "hier", DDPC_ALGO_HIER },
              { "ring", DDPC_ALGO_RING }, { "rhd", DDPC_ALGO_RHD },   { "tree", DDPC_ALGO_TREE },
              { "", DDPC_ALGO_AUTO },     { NULL, DDPC_ALGO_AUTO } };
    for (size_t i = 0; i < sizeof w / sizeof *w; i++) {
        ddpc__algo_choice ac = { -1, -1 };
        CHECK_OK(ddpc__algo_parse("DDPC_ALGO", w[i].v, &ac));
        CHECK_EQ(ac.algo, w[i].algo);
        CHECK_EQ(ac.inter, DDPC_ALGO_AUTO);
    }
    CHECK_STATUS(ddpc__algo_parse("DDPC_ALGO", "hierarchical", &(ddpc__algo_choice){ 0 }),
                 DDPC_ERR_ENV);
    CHECK_CONTAINS(ddpc_last_error(), "DDPC_ALGO='hierarchical' is not one of auto, flat, hier");
}

TEST(algo_hccl_maps_ring_and_hd_r) {
    static const struct {
        const char *v;
        int inter;
    } w[] = { { "level0:NA;level1:ring", DDPC_ALGO_RING },
              { "level0:NA;level1:H-D_R", DDPC_ALGO_RHD },
              { "level1:H-D_R", DDPC_ALGO_RHD },
              { "level1:ring;level0:NA", DDPC_ALGO_RING },
              { "allreduce=level0:NA;level1:H-D_R", DDPC_ALGO_RHD },
              { "alltoall=level0:NA;level1:pairwise/allreduce=level0:NA;level1:ring",
                DDPC_ALGO_RING } };
    char log[4096];
    for (size_t i = 0; i < sizeof w / sizeof *w; i++) {
        ddpc__algo_choice ac = { -1, -1 };
        CHECK_OK(parse_logged(w[i].v, &ac, log, sizeof log));
        CHECK_MSG(ac.algo == DDPC_ALGO_HIER && ac.inter == w[i].inter, "%s: algo %d inter %d",
                  w[i].v, ac.algo, ac.inter);
        if (!strstr(w[i].v, "pairwise")) CHECK_MSG(!strstr(log, "WARN"), "%s: %s", w[i].v, log);
    }
}

/* What HCCL accepts but ddpc has no counterpart for: a WARN naming it,
 * and auto. The WARN is logged once per process, so each case runs in a
 * child of its own. */
TEST(algo_hccl_unmapped_warns) {
    static const char *const v[][2] = {
        { "level0:NA;level1:NHR", "level1:NHR does not map" },
        { "level0:NA;level1:NB", "level1:NB does not map" },
        { "level0:NA;level1:pipeline", "level1:pipeline does not map" },
        { "level0:ring;level1:NHR_V1", "level0:ring does not map" },
        { "level0:NA;level1:AHC;level2:AHC", "level2:AHC does not map" },
        { "allgather=level0:NA;level1:ring", "allgather=level1:ring does not map" },
    };
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            char log[4096];
            ddpc__algo_choice ac = { -1, -1 };
            CHECK_OK(parse_logged(v[i][0], &ac, log, sizeof log));
            CHECK_CONTAINS(log, v[i][1]);
            CHECK_CONTAINS(log, "HCCL_ALGO");
            CHECK_EQ(ac.algo, DDPC_ALGO_AUTO);
            CHECK_EQ(ac.inter, DDPC_ALGO_AUTO);
            _exit(0);
        }
        int st;
        CHECK(waitpid(pid, &st, 0) == pid);
        CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "case %s failed", v[i][0]);
    }
}

TEST(algo_hccl_malformed_is_an_error) {
    static const char *const v[][2] = {
        { "level0:NA;level1:Ring", "level1:Ring is not one of HCCL's algorithms" },
        { "level0:NA;level3:ring", "'level3': the levels are level0, level1, level2" },
        { "level0:NA;level1", "'level1' is not 'levelN:algorithm'" },
        { "level0:NA;level1:", "'level1:' is not 'levelN:algorithm'" },
        { "allreduce=level0:NA;level1:ring/level1:ring", "'level1:ring' has no operation" },
        { "allreduc=level0:NA;level1:ring", "'allreduc' is not one of HCCL's operations" },
    };
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        ddpc__algo_choice ac;
        CHECK_STATUS(ddpc__algo_parse("HCCL_ALGO", v[i][0], &ac), DDPC_ERR_ENV);
        CHECK_CONTAINS(ddpc_last_error(), v[i][1]);
        CHECK_CONTAINS(ddpc_last_error(), "HCCL_ALGO");
    }
}

/* HCCL_ALGO is DDPC_ALGO's alias; DDPC_ALGO wins where both are set. */
TEST(algo_hccl_algo_is_the_alias) {
    unsetenv("DDPC_ALGO");
    setenv("HCCL_ALGO", "level0:NA;level1:H-D_R", 1);
    const char *src, *v = ddpc__env(DDPC_ENV_ALGO, &src);
    CHECK(v && !strcmp(src, "HCCL_ALGO"));
    ddpc__algo_choice ac;
    CHECK_OK(ddpc__algo_parse(src, v, &ac));
    CHECK_EQ(ac.algo, DDPC_ALGO_HIER);
    CHECK_EQ(ac.inter, DDPC_ALGO_RHD);
    setenv("DDPC_ALGO", "flat", 1);
    v = ddpc__env(DDPC_ENV_ALGO, &src);
    CHECK(!strcmp(src, "DDPC_ALGO") && !strcmp(v, "flat"));
    unsetenv("DDPC_ALGO");
    unsetenv("HCCL_ALGO");
}

/* ------------------------------------------------- auto's cost model */

/* The model's choice for H hosts of L ranks (every host alike) and n
 * bytes, at the default link (DDPC_NET_US=150, DDPC_NET_GBIT=1) and chunk. */
static ddpc__cost_plan plan_of(int hosts, int local, size_t nbytes) {
    ddpc__cost_model m = { 150e-6, 8e-9, 262144 };
    ddpc__cost_plan p;
    ddpc__cost_best(&m, hosts, local, 1, nbytes, &p);
    return p;
}

/* Auto's choices on layouts and sizes at the default link: the ring
 * (pipelined where every host has several ranks) for large vectors, a
 * latency-bound algorithm with log2(hosts) steps across hosts for small
 * ones and for many hosts, and the ring on 3 hosts, where halving-doubling
 * folds 3 into 2 at the price of twice the vector on the link. */
TEST(algo_model_choices) {
    static const struct {
        int hosts, local;
        size_t nbytes;
        int x, pieces; /* pieces 0: any above 1 */
    } w[] = {
        { 2, 2, 8, DDPC_X_RD, 1 },          { 2, 2, 64 << 20, DDPC_X_RING, 0 },
        { 4, 2, 8, DDPC_X_RD, 1 },          { 4, 2, 1 << 20, DDPC_X_HD, 1 },
        { 4, 2, 64 << 20, DDPC_X_RING, 0 }, { 3, 2, 1 << 20, DDPC_X_RING, 1 },
        { 3, 2, 64 << 20, DDPC_X_RING, 0 }, { 8, 8, 8, DDPC_X_SMALL, 1 },
        { 8, 8, 4096, DDPC_X_SMALL, 1 },    { 64, 8, 1 << 20, DDPC_X_HD, 1 },
        { 1024, 8, 8, DDPC_X_SMALL, 1 },    { 1024, 8, 25 << 20, DDPC_X_HD, 1 },
        { 2, 1, 64 << 20, DDPC_X_RING, 1 }, { 4, 1, 8, DDPC_X_RD, 1 },
        { 4, 1, 1 << 20, DDPC_X_HD, 1 },    { 3, 1, 1 << 20, DDPC_X_RING, 1 },
    };
    for (size_t i = 0; i < sizeof w / sizeof *w; i++) {
        ddpc__cost_plan p = plan_of(w[i].hosts, w[i].local, w[i].nbytes);
        CHECK_MSG(p.x == w[i].x && (w[i].pieces ? p.pieces == w[i].pieces : p.pieces > 1),
                  "%d hosts x %d, %zu bytes: %s in %d pieces, not %s", w[i].hosts, w[i].local,
                  w[i].nbytes, ddpc__cost_name(p.x), p.pieces, ddpc__cost_name(w[i].x));
        for (int x = 0; x < DDPC_X_MODELED; x++) CHECK(p.t[p.x] <= p.t[x]); /* the least */
    }
    /* hosts of unequal rank counts: no pipeline; still the ring for 64
     * MiB, whose reduction overlaps its transfer (halving-doubling's 4
     * steps against the ring's 6 save less) */
    ddpc__cost_model m = { 150e-6, 8e-9, 262144 };
    ddpc__cost_plan p;
    ddpc__cost_best(&m, 4, 2, 0, 64 << 20, &p);
    CHECK_EQ(p.x, DDPC_X_RING);
    CHECK_EQ(p.pieces, 1);
    /* no latency (alpha 0): halving-doubling only ties with the ring on 4
     * hosts, and a tie stays with the ring */
    m.alpha = 0;
    ddpc__cost_best(&m, 4, 1, 1, 1 << 20, &p);
    CHECK_EQ(p.x, DDPC_X_RING);
    /* a slower link per message moves the crossover up */
    m.alpha = 150e-6;
    ddpc__cost_best(&m, 4, 2, 1, 16 << 20, &p);
    CHECK_EQ(p.x, DDPC_X_RING);
    m.alpha = 5e-3;
    ddpc__cost_best(&m, 4, 2, 1, 16 << 20, &p);
    CHECK_EQ(p.x, DDPC_X_HD);
}
