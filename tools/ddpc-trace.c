/*
 * ddpc-trace — reads what ranks left behind and explains it.
 *
 *     ddpc-trace DIR | FILE...           the flight records (flight-RANK.txt,
 *                                        written by each rank to DDPC_TRACE_DIR
 *                                        on a timeout, a lost peer, an abort or
 *                                        SIGUSR1): one paragraph per
 *                                        communicator saying where each rank
 *                                        stopped, which collective they
 *                                        disagree on, who is silent and who
 *                                        was seen last
 *     ddpc-trace --merge OUT FILE...     Chrome trace-event files (ddpc-train
 *                                        --trace, one per rank) merged into one
 *                                        that Perfetto and chrome://tracing open
 *
 * Exit status: 0 when done, 1 for a file it cannot read or parse (named, with
 * the line), 2 for bad usage.
 */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifdef DDPC_HAVE_CJSON
#include <cJSON.h>
#endif

#define MAX_FILES 4096
#define MAX_COMMS 64

static void usage(FILE *f) {
    fputs("usage: ddpc-trace DIR | FILE...         explain the flight records (flight-RANK.txt)\n"
          "       ddpc-trace --merge OUT FILE...   merge Chrome trace files (ddpc-train --trace)\n"
          "                                        into OUT, one process row per rank\n"
          "  --help\n",
          f);
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("ddpc-trace: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

/* ------------------------------------------------------------ records */

typedef struct op_rec {
    unsigned long long seq, count;
    char kind[24], dtype[16], op[16], algo[24], state[12], status[48];
    int root;
    double start, end;
} op_rec;

typedef struct peer_rec {
    int rank;
    double last_rx;
    char addr[96];
} peer_rec;

/* One communicator as one rank recorded it. */
typedef struct comm_rec {
    char id[320];
    int rank, size;
    char addr[96];
    char error[1024];
    op_rec *ops;
    int nops, cap;
    peer_rec *peers;
    int npeers, pcap;
    double time; /* when the file was written */
    char reason[256];
} comm_rec;

static comm_rec *recs;
static int nrecs, recs_cap;

/* value of key=... in line (up to a space) into out; 0 when absent. */
static int field(const char *line, const char *key, char *out, size_t len) {
    size_t k = strlen(key);
    for (const char *p = line; (p = strstr(p, key)); p++) {
        if ((p != line && p[-1] != ' ') || p[k] != '=') continue;
        p += k + 1;
        size_t n = strcspn(p, " \n");
        if (n >= len) n = len - 1;
        memcpy(out, p, n);
        out[n] = '\0';
        return 1;
    }
    return 0;
}

static double field_d(const char *line, const char *key) {
    char v[64];
    return field(line, key, v, sizeof v) ? atof(v) : 0;
}

static void *grow(void *p, int *cap, int need, size_t elem) {
    if (need <= *cap) return p;
    int nc = *cap ? *cap * 2 : 16;
    while (nc < need) nc *= 2;
    void *q = realloc(p, (size_t)nc * elem);
    if (!q) die("out of memory");
    *cap = nc;
    return q;
}

static void read_flight(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) die("cannot read %s: %s", path, strerror(errno));
    char line[4096], reason[256] = "", v[64];
    double time = 0;
    comm_rec *cur = NULL;
    int ln = 0;
    while (fgets(line, sizeof line, f)) {
        ln++;
        if (ln == 1) {
            if (strncmp(line, "ddpc-flight 1", 13) != 0)
                die("%s:1: not a ddpc flight record (it starts '%.20s')", path, line);
            continue;
        }
        if (!strncmp(line, "process ", 8)) {
            time = field_d(line, "time");
            const char *r = strstr(line, "reason=");
            snprintf(reason, sizeof reason, "%s", r ? r + 7 : "-");
            reason[strcspn(reason, "\n")] = '\0';
        } else if (!strncmp(line, "comm ", 5)) {
            recs = grow(recs, &recs_cap, nrecs + 1, sizeof *recs);
            cur = &recs[nrecs++];
            memset(cur, 0, sizeof *cur);
            if (!field(line, "id", cur->id, sizeof cur->id) || !field(line, "rank", v, sizeof v))
                die("%s:%d: a comm line without id= or rank=", path, ln);
            cur->rank = atoi(v);
            cur->size = field(line, "size", v, sizeof v) ? atoi(v) : 0;
            if (cur->size < 1 || cur->rank < 0 || cur->rank >= cur->size)
                die("%s:%d: rank %d of size %d", path, ln, cur->rank, cur->size);
            field(line, "addr", cur->addr, sizeof cur->addr);
            cur->time = time;
            snprintf(cur->reason, sizeof cur->reason, "%s", reason);
        } else if (!cur && strncmp(line, "end", 3) != 0) {
            die("%s:%d: '%.20s' before any comm line", path, ln, line);
        } else if (!strncmp(line, "error ", 6)) {
            snprintf(cur->error, sizeof cur->error, "%.1000s", line + 6);
            cur->error[strcspn(cur->error, "\n")] = '\0';
        } else if (!strncmp(line, "peer ", 5)) {
            cur->peers = grow(cur->peers, &cur->pcap, cur->npeers + 1, sizeof *cur->peers);
            peer_rec *p = &cur->peers[cur->npeers++];
            p->rank = field(line, "rank", v, sizeof v) ? atoi(v) : -1;
            p->last_rx = field_d(line, "last_rx");
            field(line, "addr", p->addr, sizeof p->addr);
        } else if (!strncmp(line, "op ", 3)) {
            cur->ops = grow(cur->ops, &cur->cap, cur->nops + 1, sizeof *cur->ops);
            op_rec *o = &cur->ops[cur->nops++];
            memset(o, 0, sizeof *o);
            if (!field(line, "seq", v, sizeof v) || !field(line, "kind", o->kind, sizeof o->kind) ||
                !field(line, "state", o->state, sizeof o->state))
                die("%s:%d: an op line without seq=, kind= or state=", path, ln);
            o->seq = strtoull(v, NULL, 10);
            o->count = field(line, "count", v, sizeof v) ? strtoull(v, NULL, 10) : 0;
            field(line, "dtype", o->dtype, sizeof o->dtype);
            field(line, "op", o->op, sizeof o->op);
            field(line, "algo", o->algo, sizeof o->algo);
            field(line, "status", o->status, sizeof o->status);
            for (char *p = o->status; *p; p++)
                if (*p == '_') *p = ' ';
            o->root = field(line, "root", v, sizeof v) ? atoi(v) : -1;
            o->start = field_d(line, "start");
            o->end = field_d(line, "end");
        } else if (!strncmp(line, "end", 3)) {
            cur = NULL;
        } else {
            die("%s:%d: unknown line '%.30s'", path, ln, line);
        }
    }
    fclose(f);
    if (ln == 0) die("%s is empty", path);
}

/* "allreduce(count=8, float32, sum)" as ddpc's errors write it. */
static void describe(const op_rec *o, char *buf, size_t len) {
    const char *k = o->kind;
    if (!strcmp(k, "allreduce") || !strcmp(k, "reduce_scatter"))
        snprintf(buf, len, "%s(count=%llu, %s, %s)", k, o->count, o->dtype, o->op);
    else if (!strcmp(k, "reduce"))
        snprintf(buf, len, "%s(count=%llu, %s, %s, root=%d)", k, o->count, o->dtype, o->op,
                 o->root);
    else if (!strcmp(k, "broadcast") || !strcmp(k, "gather") || !strcmp(k, "scatter"))
        snprintf(buf, len, "%s(count=%llu, %s, root=%d)", k, o->count, o->dtype, o->root);
    else if (!strcmp(k, "barrier"))
        snprintf(buf, len, "barrier()");
    else if (!strcmp(k, "send/recv"))
        snprintf(buf, len, "send/recv(count=%llu, %s, peer=%d)", o->count, o->dtype, o->root);
    else
        snprintf(buf, len, "%s(count=%llu, %s)", k, o->count, o->dtype);
}

/* Where a rank stopped: its first operation not done (the oldest still
 * queued, running or failed), else its last. NULL when it recorded none. */
static const op_rec *stop_point(const comm_rec *r) {
    for (int i = 0; i < r->nops; i++)
        if (strcmp(r->ops[i].state, "done") != 0 && strcmp(r->ops[i].kind, "send/recv") != 0)
            return &r->ops[i];
    for (int i = 0; i < r->nops; i++)
        if (strcmp(r->ops[i].state, "done") != 0) return &r->ops[i];
    return r->nops ? &r->ops[r->nops - 1] : NULL;
}

/* Appends " 0, 1, 3" style lists. */
static void list_add(char *buf, size_t len, int v) {
    size_t n = strlen(buf);
    snprintf(buf + n, len - n, "%s%d", n ? ", " : "", v);
}

/* One paragraph about the communicator id, from its ranks' records. */
static void explain(const char *id) {
    int size = 0;
    comm_rec *by_rank[4096] = { 0 };
    for (int i = 0; i < nrecs; i++) {
        if (strcmp(recs[i].id, id) != 0) continue;
        if (recs[i].size > size) size = recs[i].size;
        if (recs[i].rank < 4096) by_rank[recs[i].rank] = &recs[i];
    }
    if (size > 4096) size = 4096;
    char missing[1024] = "";
    int have = 0;
    for (int r = 0; r < size; r++) {
        if (by_rank[r])
            have++;
        else
            list_add(missing, sizeof missing, r);
    }
    printf("%s: %d ranks, records from %d", id, size, have);
    if (missing[0])
        printf(" (rank%s %s left no record: frozen, killed, cut off, or it never failed)",
               strchr(missing, ',') ? "s" : "", missing);
    printf(".");
    /* where each rank stopped, grouped by the call */
    int done[4096] = { 0 };
    for (int r = 0; r < size; r++) {
        if (!by_rank[r] || done[r]) continue;
        const op_rec *o = stop_point(by_rank[r]);
        char who[1024] = "", d[256];
        if (!o) {
            for (int q = r; q < size; q++)
                if (by_rank[q] && !done[q] && !stop_point(by_rank[q])) {
                    done[q] = 1;
                    list_add(who, sizeof who, q);
                }
            printf(" Rank%s %s recorded no operation.", strchr(who, ',') ? "s" : "", who);
            continue;
        }
        describe(o, d, sizeof d);
        for (int q = r; q < size; q++) {
            if (!by_rank[q] || done[q]) continue;
            const op_rec *p = stop_point(by_rank[q]);
            char dq[256];
            if (!p) continue;
            describe(p, dq, sizeof dq);
            if (p->seq == o->seq && !strcmp(dq, d) && !strcmp(p->state, o->state)) {
                done[q] = 1;
                list_add(who, sizeof who, q);
            }
        }
        printf(" Rank%s %s stopped in %s #%llu (%s%s%s%s%s).", strchr(who, ',') ? "s" : "", who, d,
               o->seq, o->state, o->status[0] && strcmp(o->status, "ok") ? ": " : "",
               o->status[0] && strcmp(o->status, "ok") ? o->status : "",
               o->algo[0] && strcmp(o->algo, "-") ? ", " : "",
               o->algo[0] && strcmp(o->algo, "-") ? o->algo : "");
    }
    /* a collective the ranks disagree on: same sequence number, different call */
    int disagree = 0;
    for (int r = 0; r < size && !disagree; r++)
        for (int i = 0; by_rank[r] && i < by_rank[r]->nops && !disagree; i++) {
            const op_rec *a = &by_rank[r]->ops[i];
            if (!strcmp(a->kind, "send/recv")) continue;
            for (int q = r + 1; q < size && !disagree; q++)
                for (int j = 0; by_rank[q] && j < by_rank[q]->nops; j++) {
                    const op_rec *b = &by_rank[q]->ops[j];
                    char da[256], db[256];
                    if (b->seq != a->seq || !strcmp(b->kind, "send/recv")) continue;
                    describe(a, da, sizeof da);
                    describe(b, db, sizeof db);
                    if (strcmp(da, db) != 0) {
                        printf(" They disagree on collective #%llu: rank %d called %s, rank %d "
                               "called %s.",
                               a->seq, r, da, q, db);
                        disagree = 1;
                    }
                    break;
                }
        }
    if (!disagree) printf(" They agree on every collective they both recorded.");
    /* the silent rank: the one the errors name */
    int votes[4096] = { 0 }, best = -1;
    char voters[1024] = "";
    for (int r = 0; r < size; r++) {
        const char *e = by_rank[r] ? strstr(by_rank[r]->error, "rank ") : NULL;
        for (; e; e = strstr(e + 5, "rank ")) {
            int s;
            char tail[16];
            if (sscanf(e, "rank %d is %15s", &s, tail) == 2 && !strncmp(tail, "silent", 6) &&
                s >= 0 && s < size) {
                votes[s]++;
                if (best < 0 || votes[s] > votes[best]) best = s;
                break;
            }
        }
    }
    if (best >= 0) {
        for (int r = 0; r < size; r++) {
            const char *e = by_rank[r] ? by_rank[r]->error : "";
            char want[32];
            snprintf(want, sizeof want, "rank %d is silent", best);
            if (strstr(e, want)) list_add(voters, sizeof voters, r);
        }
        printf(" Silent: rank %d (named by rank%s %s).", best, strchr(voters, ',') ? "s" : "",
               voters);
    }
    /* who was last seen: per rank, when it wrote its record (it was alive),
     * else when any peer last heard from it */
    double heard[4096], first_fail = 0;
    for (int r = 0; r < size; r++) heard[r] = by_rank[r] ? by_rank[r]->time : 0;
    for (int r = 0; r < size; r++) {
        if (!by_rank[r]) continue;
        for (int i = 0; i < by_rank[r]->npeers; i++) {
            const peer_rec *p = &by_rank[r]->peers[i];
            if (p->rank >= 0 && p->rank < size && p->last_rx > heard[p->rank])
                heard[p->rank] = p->last_rx;
        }
        for (int i = 0; i < by_rank[r]->nops; i++)
            if (!strcmp(by_rank[r]->ops[i].state, "failed") && by_rank[r]->ops[i].end > 0 &&
                (first_fail == 0 || by_rank[r]->ops[i].end < first_fail))
                first_fail = by_rank[r]->ops[i].end;
    }
    int last = -1;
    for (int r = 0; r < size; r++)
        if (last < 0 || heard[r] < heard[last]) last = r;
    if (last >= 0 && size > 1) {
        if (heard[last] == 0)
            printf(" Last seen: rank %d, never heard from by a rank that left a record.", last);
        else if (first_fail > 0)
            printf(" Last seen: rank %d, whose peers last heard from it %.2f s before the first "
                   "failure.",
                   last, first_fail - heard[last]);
        else
            printf(" Last seen: rank %d, the peer heard from longest ago.", last);
        if (best < 0 && first_fail > 0) printf(" Silent, by the records: rank %d.", last);
    }
    putchar('\n');
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int explain_all(int argc, char **argv) {
    char *files[MAX_FILES];
    int nf = 0; /* every path malloc'd */
    for (int i = 0; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) die("cannot read %s: %s", argv[i], strerror(errno));
        if (!S_ISDIR(st.st_mode)) {
            if (nf < MAX_FILES && !(files[nf++] = strdup(argv[i]))) die("out of memory");
            continue;
        }
        DIR *d = opendir(argv[i]);
        if (!d) die("cannot read %s: %s", argv[i], strerror(errno));
        struct dirent *e;
        while ((e = readdir(d)) && nf < MAX_FILES) {
            size_t n = strlen(e->d_name);
            if (strncmp(e->d_name, "flight-", 7) != 0 || n < 4 ||
                strcmp(e->d_name + n - 4, ".txt") != 0)
                continue;
            char *p = malloc(strlen(argv[i]) + n + 2);
            if (!p) die("out of memory");
            sprintf(p, "%s/%s", argv[i], e->d_name);
            files[nf++] = p;
        }
        closedir(d);
    }
    if (nf == 0) die("no flight records (flight-RANK.txt) in %s", argc ? argv[0] : ".");
    qsort(files, (size_t)nf, sizeof *files, cmp_str);
    for (int i = 0; i < nf; i++) read_flight(files[i]);
    const char *ids[MAX_COMMS];
    int nids = 0;
    for (int i = 0; i < nrecs; i++) {
        int seen = 0;
        for (int k = 0; k < nids; k++) seen |= !strcmp(ids[k], recs[i].id);
        if (!seen && nids < MAX_COMMS) ids[nids++] = recs[i].id;
    }
    printf("%d flight record%s.\n", nf, nf > 1 ? "s" : "");
    for (int k = 0; k < nids; k++) explain(ids[k]);
    for (int i = 0; i < nf; i++) free(files[i]);
    for (int i = 0; i < nrecs; i++) {
        free(recs[i].ops);
        free(recs[i].peers);
    }
    free(recs);
    return 0;
}

/* ------------------------------------------------------------ --merge */

#ifdef DDPC_HAVE_CJSON
static char *read_all(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) die("cannot read %s: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf) die("out of memory reading %s", path);
        n += fread(buf + n, 1, cap - n - 1, f);
        if (n < cap - 1) break;
        cap *= 2;
        buf = realloc(buf, cap);
    }
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static int merge(const char *out, int argc, char **argv) {
    cJSON *all = cJSON_CreateObject(), *events = cJSON_AddArrayToObject(all, "traceEvents");
    if (!all || !events) die("out of memory");
    long total = 0;
    for (int i = 0; i < argc; i++) {
        char *txt = read_all(argv[i]);
        cJSON *doc = cJSON_Parse(txt);
        if (!doc) die("%s is not JSON (near '%.20s')", argv[i], cJSON_GetErrorPtr());
        free(txt); /* the error pointer above points into it */
        cJSON *ev = cJSON_IsArray(doc) ? doc : cJSON_GetObjectItem(doc, "traceEvents");
        if (!cJSON_IsArray(ev))
            die("%s has no traceEvents array: not a Chrome trace-event file", argv[i]);
        cJSON *e;
        int k = 0;
        cJSON_ArrayForEach(e, ev) {
            k++;
            if (!cJSON_IsObject(e) || !cJSON_IsString(cJSON_GetObjectItem(e, "ph")) ||
                !cJSON_IsNumber(cJSON_GetObjectItem(e, "pid")))
                die("%s: event %d lacks ph or pid", argv[i], k);
            cJSON_AddItemToArray(events, cJSON_Duplicate(e, 1));
            total++;
        }
        cJSON_Delete(doc);
    }
    cJSON_AddStringToObject(all, "displayTimeUnit", "ms");
    char *txt = cJSON_PrintUnformatted(all);
    cJSON_Delete(all);
    if (!txt) die("out of memory");
    FILE *f = fopen(out, "w");
    if (!f) die("cannot write %s: %s", out, strerror(errno));
    fputs(txt, f);
    fputc('\n', f);
    free(txt);
    if (fclose(f) != 0) die("cannot write %s: %s", out, strerror(errno));
    printf("merged %d files, %ld events into %s\n", argc, total, out);
    return 0;
}
#else
static int merge(const char *out, int argc, char **argv) {
    die("--merge needs cJSON, which this build lacks (apt-get install libcjson-dev; make)");
}
#endif

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--merge")) {
        if (argc < 4) {
            fputs("ddpc-trace: --merge needs OUT and at least one FILE (see --help)\n", stderr);
            return 2;
        }
        return merge(argv[2], argc - 3, argv + 3);
    }
    if (argv[1][0] == '-' && argv[1][1]) {
        fprintf(stderr, "ddpc-trace: unknown option '%s' (see --help)\n", argv[1]);
        return 2;
    }
    return explain_all(argc - 1, argv + 1);
}
