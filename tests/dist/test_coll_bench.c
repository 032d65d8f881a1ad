/*
 * test_coll_bench.c — ddpc-bench as 2 ranks: nccl-tests' table, verified
 * results, and refused arguments.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

/* ------------------------------------------------------------ ddpc-bench */

/* Runs ddpc-bench ARGS as 2 ranks with torchrun's variables; rank 0's output
 * into out. Returns the worse exit status of the two. */
static int bench2(const char *args, char *out, size_t outlen) {
    char cmd[2048];
    const char *b = t_bin("ddpc-bench");
    snprintf(cmd, sizeof cmd,
             "export MASTER_ADDR=127.0.0.1 MASTER_PORT=%d WORLD_SIZE=2 LOCAL_WORLD_SIZE=2; "
             "RANK=1 LOCAL_RANK=1 %s %s >/dev/null 2>&1 & p=$!; "
             "RANK=0 LOCAL_RANK=0 %s %s; a=$?; wait $p; b=$?; [ $a -ne 0 ] && exit $a; exit $b",
             t_free_port(), b, args, b, args);
    return t_run_cmd(cmd, 60, out, outlen);
}

/* Checks nccl-tests' table: a row per size from lo to hi (x4), each with
 * #wrong 0 and a positive time; the last line is the average bus bandwidth. */
static void check_table(const char *out, const char *type, const char *redop, size_t lo, size_t hi,
                        size_t multiple) {
    CHECK_CONTAINS(out, "busbw");
    CHECK_CONTAINS(out, "#wrong");
    size_t want = lo;
    int rows = 0;
    for (const char *p = out; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char line[512];
        snprintf(line, sizeof line, "%.*s", (int)(len < 511 ? len : 511), p);
        size_t size, count;
        char ty[32], op[32], wrong[32];
        int root;
        double us, alg, bus;
        if (line[0] != '#' && sscanf(line, "%zu %zu %31s %31s %d %lf %lf %lf %31s", &size, &count,
                                     ty, op, &root, &us, &alg, &bus, wrong) == 9) {
            CHECK_MSG(size == want / multiple * multiple, "row %d has size %zu, want %zu: %s", rows,
                      size, want / multiple * multiple, line);
            CHECK_STR(ty, type);
            CHECK_STR(op, redop);
            CHECK_STR(wrong, "0");
            CHECK_MSG(us > 0 && alg >= 0 && bus >= 0, "bad figures in: %s", line);
            want *= 4;
            rows++;
        }
        p += len + (nl != NULL);
    }
    CHECK_MSG(want / 4 == hi, "the table stops at %zu, want %zu:\n%s", want / 4, hi, out);
    const char *last = strstr(out, "# Avg bus bandwidth : ");
    CHECK_MSG(last && !strchr(last, '\n') ? 1 : last && strchr(last, '\n')[1] == '\0',
              "'# Avg bus bandwidth : X' is not the last line:\n%s", out);
}

TEST_T(bench_allreduce_table, 90) {
    static char out[65536];
    int rc = bench2("allreduce -b 8 -e 32K -f 4 -n 3 -w 1", out, sizeof out);
    CHECK_MSG(rc == 0, "exit %d:\n%s", rc, out);
    check_table(out, "float32", "sum", 8, 32768, 4);
    rc = bench2("reduce-scatter -b 64 -e 4K -f 4 -n 2 -w 1 -d bfloat16 -o avg", out, sizeof out);
    CHECK_MSG(rc == 0, "exit %d:\n%s", rc, out);
    check_table(out, "bfloat16", "avg", 64, 4096, 4);
    rc = bench2("allgather -b 64 -e 4K -f 4 -n 2 -w 0 -F 1", out, sizeof out);
    CHECK_MSG(rc == 0, "exit %d:\n%s", rc, out);
    check_table(out, "float32", "none", 64, 4096, 8);
    CHECK_CONTAINS(out, "input written before each call");
    rc = bench2("alltoall -b 64 -e 1K -f 4 -n 2 -w 0 -d int64", out, sizeof out);
    CHECK_MSG(rc == 0, "exit %d:\n%s", rc, out);
    check_table(out, "int64", "none", 64, 1024, 16);
    rc = bench2("broadcast -b 4 -e 64 -f 4 -n 2 -w 0 -d uint8 -r 1 -c 0", out, sizeof out);
    CHECK_MSG(rc == 0, "exit %d:\n%s", rc, out);
    CHECK_CONTAINS(out, "N/A");
    /* the tree and the chain, out of place (the chain's root copies as it
     * sends) and in place, each size checked */
    rc = bench2("broadcast -b 64 -e 1M -f 4 -n 2 -w 0 -r 1", out, sizeof out);
    CHECK_MSG(rc == 0, "exit %d:\n%s", rc, out);
    check_table(out, "float32", "none", 64, 1 << 20, 4);
    rc = bench2("broadcast -b 64 -e 1M -f 4 -n 2 -w 0 -I 1", out, sizeof out);
    CHECK_MSG(rc == 0, "exit %d:\n%s", rc, out);
    check_table(out, "float32", "none", 64, 1 << 20, 4);
    CHECK_CONTAINS(out, "in place");
}

TEST(bench_bad_usage) {
    static const struct {
        const char *args, *needle;
    } cases[] = {
        { "", "COLLECTIVE" },
        { "allgatherv", "allgatherv" },
        { "allreduce -b 12Q", "-b" },
        { "allreduce -e", "-e" },
        { "allreduce -n 0", "-n" },
        { "allreduce -c 2", "-c" },
        { "allreduce -F 2", "-F" },
        { "allreduce -I 1", "-I 1 is for broadcast only" },
        { "allreduce -d float128", "float128" },
        { "allreduce -o mean", "mean" },
        { "allreduce -q 1", "-q" },
        { "allreduce -b 1M -e 1K", "-b" },
        { "allreduce -d float32 -o band", "-o band needs an integer -d, got float32" },
        { "reduce-scatter -d bf16 -o bxor", "bxor" },
    };
    char cmd[1024], out[4096];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(cmd, sizeof cmd, "%s %s", t_bin("ddpc-bench"), cases[i].args);
        int rc = t_run_cmd(cmd, 20, out, sizeof out);
        CHECK_MSG(rc == 2, "'%s' exited %d, want 2: %s", cases[i].args, rc, out);
        CHECK_CONTAINS(out, cases[i].needle);
        CHECK_MSG(strchr(out, '\n') == out + strlen(out) - 1, "'%s': not one line: %s",
                  cases[i].args, out);
    }
    snprintf(cmd, sizeof cmd, "%s --help", t_bin("ddpc-bench"));
    CHECK_EQ(t_run_cmd(cmd, 20, out, sizeof out), 0);
    CHECK_CONTAINS(out, "usage: ddpc-bench COLLECTIVE");
    snprintf(cmd, sizeof cmd,
             "RANK=5 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=%d %s allreduce", t_free_port(),
             t_bin("ddpc-bench"));
    int rc = t_run_cmd(cmd, 20, out, sizeof out);
    CHECK_MSG(rc == 1, "RANK=5 WORLD_SIZE=2 exited %d: %s", rc, out);
    CHECK_CONTAINS(out, "RANK");
}
