/*
 * ddpc-soak — the endurance benchmark: many collectives of random kind,
 * dtype, op, count, root and placement (in place or not), every result
 * checked, with a rank killed midway and the job restarted.
 *
 *   ddpc-run --standalone --nproc-per-node=4 --max-restarts=1 \
 *       build/bin/ddpc-soak [--ops N] [--seed S] [--kill-at K] [--kill-rank R]
 *                            [--record FILE] [--every M] [--verbose]
 *
 * Call i (0 <= i < N) is drawn from (seed, i) alone, so every rank draws the
 * same one and a restarted job can start at any i. Each call is run and
 * checked by the collective tests' own checker (tests/dist/coll_check.h's
 * run_one: inputs hashed from call, rank and element; every element of
 * every result against a reference; guards after every buffer; untouched
 * send buffers and non-root receive buffers). Every M calls (1,000) the
 * ranks sum their wrong results and rank 0 records, atomically, the next
 * call, the sums and the resident set sizes in FILE.
 *
 * On the first attempt rank R (the last) kills itself with SIGKILL on
 * reaching call K (N/2 + M/3); the others' calls fail on the lost peer and they
 * exit, and the launcher restarts the job. A restarted attempt
 * (TORCHELASTIC_RESTART_COUNT >= 1) continues from the call FILE records
 * (calls after it are run again). A collective that fails otherwise (a
 * DDPC_TIMEOUT: a hang) ends the attempt, and the summary counts the
 * restarts beyond the one planned.
 *
 * Rank 0 ends with one line (the figures of docs/BENCHMARKS.md):
 *   ddpc-soak: N collectives on W ranks, 0 wrong, restarts 1 (1 planned),
 *   resumed at call C, slowest call X ms; RSS (max over ranks) A MiB after
 *   the first M calls, B at the kill's last record, C after the restart's
 *   first M, D at the end; T s
 * Exit status 0 when nothing was wrong, 1 otherwise, 2 for a bad option.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "base/env.h"
#include "dist/coll_check.h"

/* coll_check.h's allocator reports through the test harness's t_fail;
 * here it ends the rank. */
void t_fail(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ddpc-soak: %s:%d: ", file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    _exit(1);
}

typedef struct opts {
    uint64_t ops, seed, kill_at, every;
    int kill_rank; /* -1: the last */
    int verbose;   /* a line per record */
    const char *record;
} opts;

static void usage(FILE *f) {
    fprintf(f,
            "usage: ddpc-soak [--ops N] [--seed S] [--kill-at K] [--kill-rank R] [--record FILE]\n"
            "                 [--every M] [--verbose]\n"
            "  --ops N        collectives in all (default 100000)\n"
            "  --seed S       draws every call's kind, dtype, op, count, root (default 1)\n"
            "  --kill-at K    on the first attempt, rank R SIGKILLs itself at call K\n"
            "                 (default N/2 + M/3; N or more: no kill)\n"
            "  --kill-rank R  (default the last rank)\n"
            "  --record FILE  progress record, rewritten atomically (default ddpc-soak.rec)\n"
            "  --every M      calls between records (default 1000)\n"
            "  --verbose      rank 0 prints each record (call, wrong, RSS)\n"
            "Run every rank under ddpc-run --max-restarts=1 (or torchrun): a restarted\n"
            "attempt continues from the call FILE records.\n");
}

static void bad(const char *what, const char *v) {
    fprintf(stderr, "ddpc-soak: %s '%s' (see --help)\n", what, v ? v : "");
    exit(2);
}

static uint64_t num(const char *name, const char *v, long lo, long hi) {
    long x;
    if (!v) bad("missing value for", name);
    if (ddpc__parse_long(name, v, lo, hi, &x) != DDPC_OK) bad(ddpc_last_error(), v);
    return (uint64_t)x;
}

static void parse(int argc, char **argv, opts *o) {
    *o = (opts){ 100000, 1, UINT64_MAX, 1000, -1, 0, "ddpc-soak.rec" };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        } else if (!strcmp(a, "--ops")) {
            o->ops = num(a, v, 1, 1L << 40), i++;
        } else if (!strcmp(a, "--seed")) {
            o->seed = num(a, v, 0, INT64_MAX), i++;
        } else if (!strcmp(a, "--kill-at")) {
            o->kill_at = num(a, v, 0, INT64_MAX), i++;
        } else if (!strcmp(a, "--kill-rank")) {
            o->kill_rank = (int)num(a, v, 0, 1 << 20), i++;
        } else if (!strcmp(a, "--verbose")) {
            o->verbose = 1;
        } else if (!strcmp(a, "--every")) {
            o->every = num(a, v, 1, 1L << 30), i++;
        } else if (!strcmp(a, "--record")) {
            if (!v || !*v) bad("--record needs a file", v);
            o->record = v, i++;
        } else {
            bad("unknown option", a);
        }
    }
    /* between two records, so that the restart runs some calls again */
    if (o->kill_at == UINT64_MAX) o->kill_at = o->ops / 2 + o->every / 3;
}

/* ------------------------------------------------------------ the record */

/* What rank 0 records every M calls (RSS in KiB, the maximum over ranks). */
typedef struct record {
    uint64_t next;      /* calls 0..next-1 are done and checked */
    uint64_t wrong;     /* wrong results in them, all ranks */
    uint64_t rss_first; /* after the first M calls of the first attempt */
    uint64_t rss_last;  /* at the latest record of the first attempt */
    uint64_t resumed;   /* the call the latest restart continued from */
} record;

#define RECORD_MAGIC "ddpc-soak-record 1"

static int record_write(const opts *o, int world, const record *r) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", o->record, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return -1;
    fprintf(f,
            RECORD_MAGIC " seed=%" PRIu64 " ops=%" PRIu64 " world=%d next=%" PRIu64
                         " wrong=%" PRIu64 " rss_first=%" PRIu64 " rss_last=%" PRIu64
                         " resumed=%" PRIu64 "\n",
            o->seed, o->ops, world, r->next, r->wrong, r->rss_first, r->rss_last, r->resumed);
    int bad_write = fflush(f) != 0 || fsync(fileno(f)) != 0;
    if (fclose(f) != 0 || bad_write || rename(tmp, o->record) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* 1: read; 0: no record; -1: not this soak's (said why). */
static int record_read(const opts *o, int world, record *r) {
    FILE *f = fopen(o->record, "r");
    if (!f) return 0;
    uint64_t seed, ops;
    int w,
        n = fscanf(f,
                   RECORD_MAGIC " seed=%" SCNu64 " ops=%" SCNu64 " world=%d next=%" SCNu64
                                " wrong=%" SCNu64 " rss_first=%" SCNu64 " rss_last=%" SCNu64
                                " resumed=%" SCNu64,
                   &seed, &ops, &w, &r->next, &r->wrong, &r->rss_first, &r->rss_last, &r->resumed);
    fclose(f);
    if (n != 8) {
        fprintf(stderr, "ddpc-soak: %s is not a record of ddpc-soak (" RECORD_MAGIC ")\n",
                o->record);
        return -1;
    }
    if (seed != o->seed || ops != o->ops || w != world || r->next > ops) {
        fprintf(stderr,
                "ddpc-soak: %s records another soak (seed %" PRIu64 ", %" PRIu64
                " calls, %d ranks)\n",
                o->record, seed, ops, w);
        return -1;
    }
    return 1;
}

/* This process's resident set, KiB. */
static uint64_t rss_kib(void) {
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
        fclose(f);
    }
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE) / 1024;
}

/* ------------------------------------------------------------ the calls */

/* Call i: kind, dtype, op, count (log-uniform, 0 to 32767 elements per
 * block), root, in place or not. */
static combo draw(const opts *o, uint64_t i, int world) {
    uint64_t h = mix64(o->seed * 0x9e3779b97f4a7c15ull ^ mix64(i));
    uint64_t h2 = mix64(h);
    combo k;
    k.coll = range(h, C_NCOLL);
    k.t = (ddpc_dtype)range(h << 8, DDPC_DTYPE_COUNT);
    int nops = is_int(k.t) ? DDPC_OP_COUNT : DDPC_BAND; /* bitwise: integers only */
    k.op = (ddpc_op)range(h << 16, nops);
    int bits = range(h << 24, 16);
    k.count = bits == 0 ? 0 : ((size_t)1 << (bits - 1)) + (size_t)range(h2, 1 << (bits - 1));
    k.root = range(h2 << 16, world);
    k.inplace = has_inplace(k.coll) && (h2 >> 60) % 2;
    return k;
}

/* Sums of the ranks' wrong results and maxima of their RSS and slowest call. */
static ddpc_status totals(ctx *x, uint64_t *wrong, uint64_t *rss, double *slowest) {
    DDPC_CHECK(ddpc_allreduce(x->c, wrong, wrong, 1, DDPC_UINT64, DDPC_SUM));
    DDPC_CHECK(ddpc_allreduce(x->c, rss, rss, 1, DDPC_UINT64, DDPC_MAX));
    return ddpc_allreduce(x->c, slowest, slowest, 1, DDPC_FLOAT64, DDPC_MAX);
}

int main(int argc, char **argv) {
    opts o;
    parse(argc, argv, &o);
    long restart = 0;
    if (ddpc__env_long(DDPC_ENV_RESTART_COUNT, &restart) != DDPC_OK) bad(ddpc_last_error(), "");
    double t0 = ddpc__now();
    ctx x = { .algo = "auto" };
    ddpc_status s = ddpc_comm_create_env(&x.c);
    if (s != DDPC_OK) {
        fprintf(stderr, "ddpc-soak: %s: %s\n", ddpc_status_str(s), ddpc_last_error());
        return 1;
    }
    x.rank = ddpc_comm_rank(x.c);
    x.world = ddpc_comm_size(x.c);
    int kill_rank = o.kill_rank < 0 ? x.world - 1 : o.kill_rank;

    /* 1. where to start: rank 0 reads the record on a restart and tells all */
    record rec = { 0, 0, 0, 0, 0 };
    uint64_t start[2] = { 0, 0 }; /* first call; 1: the record could not be used */
    if (x.rank == 0 && restart > 0) {
        int got = record_read(&o, x.world, &rec);
        if (got < 0) start[1] = 1;
        if (got > 0) start[0] = rec.resumed = rec.next;
        printf("ddpc-soak: restart %ld: %s at call %" PRIu64 "\n", restart,
               got > 0 ? "continuing from the record" : "no record, starting", start[0]);
        fflush(stdout);
    }
    s = ddpc_broadcast(x.c, start, start, 2, DDPC_UINT64, 0);
    if (s == DDPC_OK && start[1]) s = DDPC_ERR_IO;

    /* 2. the calls, a record every M */
    uint64_t wrong_here = 0, rss_start = 0, rss_lo = UINT64_MAX, rss_hi = 0;
    int any_wrong = 0;
    double slowest = 0;
    for (uint64_t i = start[0]; s == DDPC_OK && i < o.ops; i++) {
        if (restart == 0 && i == o.kill_at && x.rank == kill_rank) {
            printf("ddpc-soak: rank %d kills itself at call %" PRIu64 "\n", x.rank, i);
            fflush(stdout);
            raise(SIGKILL);
        }
        combo k = draw(&o, i, x.world);
        x.salt = mix64(o.seed ^ (i << 1));
        double c0 = ddpc__now();
        run_one(&x, &k); /* a failed call ends the rank (call_failed) */
        double dt = ddpc__now() - c0;
        if (dt > slowest) slowest = dt;
        if ((i + 1) % o.every == 0 || i + 1 == o.ops) {
            uint64_t wrong = (uint64_t)x.fails - wrong_here, rss = rss_kib();
            double slow = slowest;
            wrong_here = (uint64_t)x.fails;
            if ((s = totals(&x, &wrong, &rss, &slow)) != DDPC_OK) break;
            if (!rss_start) rss_start = rss;
            if (rss < rss_lo) rss_lo = rss;
            if (rss > rss_hi) rss_hi = rss;
            if (x.rank == 0) {
                rec.next = i + 1;
                rec.wrong += wrong;
                if (restart == 0 && !rec.rss_first) rec.rss_first = rss;
                if (restart == 0) rec.rss_last = rss;
                if (o.verbose)
                    printf("ddpc-soak: call %" PRIu64 ": %" PRIu64 " wrong, RSS %" PRIu64
                           " KiB (max over ranks), slowest call %.1f ms\n",
                           i + 1, rec.wrong, rss, slow * 1e3);
                if (record_write(&o, x.world, &rec) != 0) {
                    fprintf(stderr, "ddpc-soak: cannot write %s: %s\n", o.record, strerror(errno));
                    s = DDPC_ERR_IO;
                }
                if (i + 1 == o.ops) {
                    printf("ddpc-soak: %" PRIu64 " collectives on %d ranks, %" PRIu64
                           " wrong, restarts %ld (%d planned), resumed at call %" PRIu64
                           ", slowest call %.1f ms; RSS (max over ranks) %.1f MiB after the "
                           "first %" PRIu64 " calls, %.1f at the kill's last record, %.1f "
                           "after the restart's first %" PRIu64 ", %.1f at the end (%.1f-%.1f "
                           "at this attempt's records); this attempt %.1f s\n",
                           o.ops, x.world, rec.wrong, restart, o.kill_at < o.ops, rec.resumed,
                           slow * 1e3, rec.rss_first / 1024.0, o.every, rec.rss_last / 1024.0,
                           rss_start / 1024.0, o.every, rss / 1024.0, rss_lo / 1024.0,
                           rss_hi / 1024.0, ddpc__now() - t0);
                    fflush(stdout);
                    any_wrong = rec.wrong != 0;
                }
            }
            /* every rank agrees on whether the record was written */
            uint64_t ok = s == DDPC_OK;
            ddpc_status b = ddpc_broadcast(x.c, &ok, &ok, 1, DDPC_UINT64, 0);
            if (b != DDPC_OK)
                s = b;
            else if (!ok && s == DDPC_OK)
                s = DDPC_ERR_IO;
        }
    }
    if (s != DDPC_OK)
        fprintf(stderr, "ddpc-soak: rank %d: %s: %s\n", x.rank, ddpc_status_str(s),
                ddpc_last_error());
    ddpc_comm_destroy(x.c);
    return s == DDPC_OK && !any_wrong ? 0 : 1;
}
