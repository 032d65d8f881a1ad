/*
 * fuzz_ranktable.c — ddpc_rank_table_load on arbitrary bytes (HCCL's rank
 * table JSON, what RANK_TABLE_FILE names and anyone may have written).
 * Promises checked: an error leaves *out NULL and says EI0004 (or names
 * the file); a loaded table has at least one rank and one server, each
 * server's ranks are one contiguous run, the runs cover 0..n-1 once, and
 * each rank's server agrees with them.
 */
#include <stdlib.h>
#include <string.h>

#include "ddpc/ddpc.h"
#include "fuzz/fuzz.h"

static void check_table(const ddpc_rank_table *t) {
    int n = ddpc_rank_table_size(t), ns = ddpc_rank_table_servers(t);
    if (n < 1 || ns < 1 || ns > n) fuzz_fail("loaded %d ranks on %d servers", n, ns);
    char *seen = calloc((size_t)n, 1);
    if (!seen) fuzz_fail("out of memory");
    int held = 0;
    for (int s = 0; s < ns; s++) {
        ddpc_rank_table_server sv;
        if (ddpc_rank_table_server_at(t, s, &sv) != DDPC_OK) fuzz_fail("server %d missing", s);
        if (!sv.server_id || !sv.host || !sv.host[0]) fuzz_fail("server %d has no address", s);
        if (sv.first_rank < 0 || sv.nranks < 1 || sv.first_rank + sv.nranks > n)
            fuzz_fail("server %d holds ranks %d+%d of %d", s, sv.first_rank, sv.nranks, n);
        for (int r = sv.first_rank; r < sv.first_rank + sv.nranks; r++) {
            if (seen[r]++) fuzz_fail("rank %d on two servers", r);
            if (ddpc_rank_table_server_of(t, r) != s)
                fuzz_fail("rank %d: server %d, but server %d lists it", r,
                          ddpc_rank_table_server_of(t, r), s);
            if (ddpc_rank_table_device(t, r) < 0) fuzz_fail("rank %d has no device", r);
        }
        held += sv.nranks;
    }
    free(seen);
    if (held != n) fuzz_fail("servers hold %d ranks of %d", held, n);
    ddpc_rank_table_server sv;
    if (ddpc_rank_table_server_at(t, ns, &sv) == DDPC_OK) fuzz_fail("server %d exists", ns);
    if (ddpc_rank_table_server_of(t, n) != -1 || ddpc_rank_table_server_of(t, -1) != -1)
        fuzz_fail("a rank outside 0..%d has a server", n - 1);
}

int fuzz_ranktable(const uint8_t *data, size_t size) {
    if (size > (1u << 16)) return 0;
    const char *path = fuzz_file("ranktable", data, size);
    ddpc_rank_table *t = (ddpc_rank_table *)(uintptr_t)1; /* must come back NULL on error */
    ddpc_status st = ddpc_rank_table_load(path, &t);
    if (st == DDPC_OK) {
        if (!t) fuzz_fail("loaded, but no table");
        check_table(t);
        ddpc_rank_table_destroy(t);
        return 0;
    }
    if (t) fuzz_fail("status %s but a table came back", ddpc_status_str(st));
    const char *e = ddpc_last_error();
    if (st == DDPC_ERR_INVALID_ARG && strstr(e, "libcjson")) return 0; /* a build without it */
    if (st != DDPC_ERR_IO) fuzz_fail("status %s: %s", ddpc_status_str(st), e);
    if (!strstr(e, "EI0004") || !strstr(e, path)) fuzz_fail("the error names no cause: %s", e);
    return 0;
}

#ifdef DDPC_FUZZ_ENTRY_ranktable
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_ranktable(data, size); }
#endif
