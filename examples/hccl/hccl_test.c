/*
 * hccl_test.c — HCCL's collective benchmark (hccl_test) on CPUs: the same
 * command line, the same table, timed with ACL events as HCCL's is; an HCCL
 * program written against hccl/hccl.h and acl/acl.h only.
 *
 *   mpirun -np 4 all_reduce_test -b 8K -e 64M -f 2 -d fp32 -o sum -n 20 -w 5 -c 1
 *   ddpc-run --nproc-per-node=4 all_reduce_test -b 8 -e 1M -f 4
 *
 * The operation is the program's name (all_reduce_test, all_gather_test,
 * broadcast_test, reduce_test, reduce_scatter_test, alltoall_test,
 * scatter_test: links to one binary), or --op NAME. Options, as hccl_test's:
 *   -b MIN  -e MAX   data sizes in bytes (K, M, G suffixes)     (64M both)
 *   -f F    sizes grow by factor F (default 2); -i STEP: by STEP bytes
 *   -d TYPE int8 int16 int32 fp16 fp32 int64 uint64 uint8 uint16 uint32 fp64 bfp16
 *   -o OP   sum prod max min (reductions)      -r ROOT  root rank (0)
 *   -n N    timed iterations (20)   -w N  warm-up iterations (5)
 *   -c 0|1  check the result (1)    -p N  devices per node (device = rank % N)
 * Ranks: MPI's (built with mpicc: the root info goes out by MPI_Bcast), else
 * RANK / WORLD_SIZE (ddpc-run, torchrun) with the root info through the
 * file $HCCL_TEST_ROOT_INFO (default /tmp/hccl_test_root_info.$MASTER_PORT).
 * data_size is one rank's send buffer (allgather, scatter: its receive).
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep, with -std=c11 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hccl/hccl.h"
#include "hccl_values.h"
#ifdef HCCL_TEST_MPI
#include <mpi.h>
#endif

static const struct {
    const char *name;
    HcclDataType t;
    size_t size;
} TYPES[] = { { "int8", HCCL_DATA_TYPE_INT8, 1 },     { "int16", HCCL_DATA_TYPE_INT16, 2 },
              { "int32", HCCL_DATA_TYPE_INT32, 4 },   { "fp16", HCCL_DATA_TYPE_FP16, 2 },
              { "fp32", HCCL_DATA_TYPE_FP32, 4 },     { "int64", HCCL_DATA_TYPE_INT64, 8 },
              { "uint64", HCCL_DATA_TYPE_UINT64, 8 }, { "uint8", HCCL_DATA_TYPE_UINT8, 1 },
              { "uint16", HCCL_DATA_TYPE_UINT16, 2 }, { "uint32", HCCL_DATA_TYPE_UINT32, 4 },
              { "fp64", HCCL_DATA_TYPE_FP64, 8 },     { "bfp16", HCCL_DATA_TYPE_BFP16, 2 } };
#define NTYPES (int)(sizeof TYPES / sizeof TYPES[0])
static const char *const OPS[] = { "sum", "prod", "max", "min" };
static const char *const COLLS[] = { "all_reduce",     "all_gather", "broadcast", "reduce",
                                     "reduce_scatter", "alltoall",   "scatter" };
enum { ALL_REDUCE, ALL_GATHER, BROADCAST, REDUCE, REDUCE_SCATTER, ALLTOALL, SCATTER, NCOLLS };

typedef struct opts {
    int coll, type, op, root, iters, warmup, check, per_node;
    unsigned long long min, max, step;
    double factor;
} opts;

static void usage(const char *why) {
    fprintf(
        stderr,
        "hccl_test: %s\nusage: all_reduce_test|all_gather_test|broadcast_test|reduce_test|"
        "reduce_scatter_test|alltoall_test|scatter_test [-b MIN] [-e MAX] [-f FACTOR | -i STEP] "
        "[-d TYPE] [-o OP] [-r ROOT] [-n ITERS] [-w WARMUP] [-c 0|1] [-p DEVICES_PER_NODE]\n",
        why);
    exit(2);
}

static unsigned long long bytes_arg(const char *s) {
    char *end;
    double v = strtod(s, &end);
    switch (*end) {
    case 'k':
    case 'K':
        v *= 1024;
        end++;
        break;
    case 'm':
    case 'M':
        v *= 1024 * 1024;
        end++;
        break;
    case 'g':
    case 'G':
        v *= 1024.0 * 1024 * 1024;
        end++;
        break;
    }
    if (*end || v < 0) usage("a size is a number of bytes with an optional K, M or G");
    return (unsigned long long)v;
}

static int name_arg(const char *s, const char *const *names, int n, const char *what) {
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0) return i;
    char why[128];
    snprintf(why, sizeof why, "unknown %s \"%s\"", what, s);
    usage(why);
    return -1;
}

static opts parse(int argc, char **argv) {
    opts o = { .coll = -1,
               .type = 4,
               .iters = 20,
               .warmup = 5,
               .check = 1,
               .per_node = 0,
               .min = 64ull << 20,
               .max = 64ull << 20,
               .factor = 2 };
    const char *base = strrchr(argv[0], '/');
    base = base ? base + 1 : argv[0];
    for (int i = 0; i < NCOLLS; i++) {
        size_t l = strlen(COLLS[i]);
        if (strncmp(base, COLLS[i], l) == 0 && strcmp(base + l, "_test") == 0) o.coll = i;
    }
    const char *type_names[NTYPES];
    for (int i = 0; i < NTYPES; i++) type_names[i] = TYPES[i].name;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) usage("an option lacks its value");
        i++;
        if (!strcmp(a, "-b"))
            o.min = bytes_arg(v);
        else if (!strcmp(a, "-e"))
            o.max = bytes_arg(v);
        else if (!strcmp(a, "-f"))
            o.factor = atof(v), o.step = 0;
        else if (!strcmp(a, "-i"))
            o.step = bytes_arg(v), o.factor = 0;
        else if (!strcmp(a, "-d"))
            o.type = name_arg(v, type_names, NTYPES, "type (-d)");
        else if (!strcmp(a, "-o"))
            o.op = name_arg(v, OPS, 4, "reduction (-o)");
        else if (!strcmp(a, "-r"))
            o.root = atoi(v);
        else if (!strcmp(a, "-n"))
            o.iters = atoi(v);
        else if (!strcmp(a, "-w"))
            o.warmup = atoi(v);
        else if (!strcmp(a, "-c"))
            o.check = atoi(v);
        else if (!strcmp(a, "-p"))
            o.per_node = atoi(v);
        else if (!strcmp(a, "--op"))
            o.coll = name_arg(v, COLLS, NCOLLS, "operation (--op)");
        else
            usage("unknown option");
    }
    if (o.coll < 0) usage("which operation? name the program all_reduce_test, ... or give --op");
    if (o.iters < 1 || o.warmup < 0 || o.min > o.max || (o.factor <= 1 && o.step == 0))
        usage("-n >= 1, -w >= 0, -b <= -e, and -f > 1 or -i > 0");
    return o;
}

/* ------------------------------------------------------------ one size */

typedef struct bench {
    opts o;
    uint32_t rank, size;
    HcclComm comm;
    aclrtStream stream;
    void *send, *recv;
    size_t esize;
} bench;

/* n elements of buf set to v. */
static void fill(void *buf, size_t n, HcclDataType t, double v) {
    for (size_t i = 0; i < n; i++) put(buf, t, i, v);
}

/* Queues the operation once on the stream. count: elements, as in HCCL's call. */
static void launch(bench *b, uint64_t count) {
    HcclDataType t = TYPES[b->o.type].t;
    HcclReduceOp op = (HcclReduceOp)b->o.op;
    uint32_t root = (uint32_t)b->o.root;
    switch (b->o.coll) {
    case ALL_REDUCE:
        HCCL_OK(HcclAllReduce(b->send, b->recv, count, t, op, b->comm, b->stream));
        break;
    case ALL_GATHER: HCCL_OK(HcclAllGather(b->send, b->recv, count, t, b->comm, b->stream)); break;
    case BROADCAST: HCCL_OK(HcclBroadcast(b->send, count, t, root, b->comm, b->stream)); break;
    case REDUCE:
        HCCL_OK(HcclReduce(b->send, b->recv, count, t, op, root, b->comm, b->stream));
        break;
    case REDUCE_SCATTER:
        HCCL_OK(HcclReduceScatter(b->send, b->recv, count / b->size, t, op, b->comm, b->stream));
        break;
    case ALLTOALL:
        HCCL_OK(HcclAlltoAll(b->send, count / b->size, t, b->recv, count / b->size, t, b->comm,
                             b->stream));
        break;
    case SCATTER: HCCL_OK(HcclScatter(b->send, b->recv, count, t, root, b->comm, b->stream)); break;
    }
}

/* The value every checked element must hold after one launch, or -1 when
 * this rank has no result to check. Every rank's send holds rank + 1. */
static double expected(const bench *b) {
    double n = b->size;
    switch (b->o.coll) {
    case ALL_REDUCE:
    case REDUCE:
    case REDUCE_SCATTER:
        if (b->o.coll == REDUCE && b->rank != (uint32_t)b->o.root) return -1;
        switch (b->o.op) {
        case 0: return n * (n + 1) / 2;
        case 1: {
            double p = 1;
            for (int i = 2; i <= (int)n; i++) p *= i;
            return p;
        }
        case 2: return n;
        default: return 1;
        }
    case BROADCAST:
    case SCATTER: return b->o.root + 1;
    default: return -2; /* all_gather, alltoall: block i holds i + 1 */
    }
}

/* One launch on fresh data, then every element of the result compared. */
static int check(bench *b, uint64_t count) {
    HcclDataType t = TYPES[b->o.type].t;
    size_t sendn = b->o.coll == SCATTER ? count * b->size : count, recvn = count;
    if (b->o.coll == ALL_GATHER) recvn = count * b->size;
    if (b->o.coll == REDUCE_SCATTER) recvn = count / b->size;
    if (b->o.coll == ALLTOALL) recvn = count / b->size * b->size;
    fill(b->send, sendn, t, b->rank + 1);
    launch(b, count);
    ACL_OK(aclrtSynchronizeStream(b->stream));
    double want = expected(b);
    if (want == -1) return 1;
    const void *res = b->o.coll == BROADCAST ? b->send : b->recv;
    size_t block = b->o.coll == ALL_GATHER ? count : b->o.coll == ALLTOALL ? count / b->size : 0;
    for (size_t i = 0; i < recvn; i++) {
        double w = want == -2 ? (double)(i / block + 1) : want;
        if (get(res, t, i) != w) return 0;
    }
    return 1;
}

int main(int argc, char **argv) {
    bench b = { .o = parse(argc, argv) };
    HcclRootInfo id;
    ACL_OK(aclInit(NULL));
#ifdef HCCL_TEST_MPI
    int r, s;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &s);
    b.rank = (uint32_t)r, b.size = (uint32_t)s;
    if (b.rank == 0) HCCL_OK(HcclGetRootInfo(&id));
    MPI_Bcast(&id, HCCL_ROOT_INFO_BYTES, MPI_CHAR, 0, MPI_COMM_WORLD);
#else
    const char *rk = getenv("RANK"), *ws = getenv("WORLD_SIZE"),
               *path = getenv("HCCL_TEST_ROOT_INFO");
    char def[256];
    if (!rk || !ws)
        usage("no RANK and WORLD_SIZE: start it with ddpc-run (or build with mpicc, run with "
              "mpirun)");
    b.rank = (uint32_t)atoi(rk), b.size = (uint32_t)atoi(ws);
    if (!path) {
        snprintf(def, sizeof def, "/tmp/hccl_test_root_info.%s",
                 getenv("MASTER_PORT") ? getenv("MASTER_PORT") : "0");
        path = def;
    }
    if (b.rank == 0) {
        HCCL_OK(HcclGetRootInfo(&id));
        char tmp[300];
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        FILE *f = fopen(tmp, "wb");
        if (!f || fwrite(&id, sizeof id, 1, f) != 1 || fclose(f) || rename(tmp, path))
            perror(path), exit(1);
    } else {
        int got = 0;
        for (int tries = 0; tries < 6000 && !got; tries++) { /* 60 s */
            FILE *f = fopen(path, "rb");
            if (f) got = fread(&id, sizeof id, 1, f) == 1, fclose(f);
            struct timespec ts = { 0, 10 * 1000 * 1000 };
            if (!got) nanosleep(&ts, NULL);
        }
        if (!got) fprintf(stderr, "rank %u: no root info in %s\n", b.rank, path), exit(1);
    }
#endif
    if (b.o.root < 0 || (uint32_t)b.o.root >= b.size) usage("-r: the root must be a rank");
    ACL_OK(aclrtSetDevice(b.o.per_node > 0 ? (int32_t)(b.rank % (uint32_t)b.o.per_node) : 0));
    ACL_OK(aclrtCreateStream(&b.stream));
    HCCL_OK(HcclCommInitRootInfo(b.size, &id, b.rank, &b.comm));
#ifndef HCCL_TEST_MPI
    if (b.rank == 0) remove(path); /* every rank has read it: the communicator exists */
#endif
    b.esize = TYPES[b.o.type].size;
    size_t cap = (size_t)b.o.max * (b.o.coll == SCATTER || b.o.coll == ALL_GATHER ? b.size : 1);
    cap = cap < b.esize ? b.esize : cap;
    ACL_OK(aclrtMalloc(&b.send, cap, ACL_MEM_MALLOC_HUGE_FIRST));
    ACL_OK(aclrtMalloc(&b.recv, cap, ACL_MEM_MALLOC_HUGE_FIRST));
    aclrtEvent start, end;
    ACL_OK(aclrtCreateEvent(&start));
    ACL_OK(aclrtCreateEvent(&end));
    if (b.rank == 0) {
        printf("the minbytes is %llu, maxbytes is %llu, iters is %d, warmup_iters is %d\n", b.o.min,
               b.o.max, b.o.iters, b.o.warmup);
        printf("%-18s| %-14s| %-20s| %s\n", "data_size(Bytes)", "avg_time(us)",
               "alg_bandwidth(GB/s)", "check_result");
    }
    int all_ok = 1;
    for (unsigned long long bytes = b.o.min;;) {
        uint64_t count = bytes / b.esize;
        if (b.o.coll == REDUCE_SCATTER || b.o.coll == ALLTOALL) count -= count % b.size;
        for (int i = 0; i < b.o.warmup; i++) launch(&b, count);
        ACL_OK(aclrtRecordEvent(start, b.stream));
        for (int i = 0; i < b.o.iters; i++) launch(&b, count);
        ACL_OK(aclrtRecordEvent(end, b.stream));
        ACL_OK(aclrtSynchronizeEvent(end));
        ACL_OK(aclrtSynchronizeStream(b.stream));
        float ms = 0;
        ACL_OK(aclrtEventElapsedTime(&ms, start, end));
        double us = ms * 1000.0 / b.o.iters, data = (double)count * b.esize;
        const char *verdict = "NULL";
        if (b.o.check) { /* every rank's verdict, combined */
            int32_t ok = check(&b, count);
            HCCL_OK(HcclAllReduce(&ok, &ok, 1, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_MIN, b.comm,
                                  b.stream));
            ACL_OK(aclrtSynchronizeStream(b.stream));
            all_ok &= ok;
            verdict = ok ? "success" : "failed";
        }
        if (b.rank == 0)
            printf("%-18.0f| %-14.2f| %-20.6f| %s\n", data, us, us > 0 ? data / us / 1e3 : 0.0,
                   verdict);
        fflush(stdout);
        unsigned long long next =
            b.o.factor > 1 ? (unsigned long long)(bytes * b.o.factor) : bytes + b.o.step;
        if (next <= bytes || next > b.o.max) break;
        bytes = next;
    }
    HCCL_OK(HcclCommDestroy(b.comm));
    ACL_OK(aclrtDestroyEvent(start));
    ACL_OK(aclrtDestroyEvent(end));
    ACL_OK(aclrtFree(b.send));
    ACL_OK(aclrtFree(b.recv));
    ACL_OK(aclrtDestroyStream(b.stream));
#ifdef HCCL_TEST_MPI
    MPI_Finalize();
#endif
    ACL_OK(aclFinalize());
    return all_ok ? 0 : 1;
}
