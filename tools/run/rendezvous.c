/*
 * rendezvous.c — the job's store and what the nodes' launchers agree on
 * through it: joining (the job's configuration, one launcher per node rank),
 * the barrier before each restart, heartbeats and lost nodes, the
 * generation's outcome (the first node to set it wins) and the end of the
 * job. Node 0's launcher hosts the store.
 *
 * Store keys (all under "run/<run-id>/"):
 *   config            "nnodes=N nproc=P max_restarts=K" (a second job differing is refused)
 *   node/<r>          "host pid" of the launcher that claimed node rank r
 *   hb/<r>            heartbeat counter, bumped every monitor interval
 *   gen<g>/start/<r>  node r is ready to start generation g (a barrier)
 *   gen<g>/ndone      nodes whose workers all exited 0
 *   gen<g>/outcome    the generation's outcome, as outcome_encode writes it
 *   exit/<r>          node r has finished (node 0 keeps the store up until all have)
 *   rdzv<k>/count     --nnodes=MIN:MAX: launchers other than the store's host that joined
 *                     round k (0: the start; k: after k membership changes)
 *   rdzv<k>/closed    --nnodes=MIN:MAX: the number of nodes round k started with
 * From round k >= 1 on, all keys but rdzv<k>/ are under "run/<run-id>/r<k>/",
 * so that each membership has its own node ranks, heartbeats and generations.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "base/base.h"
#include "base/env.h"
#include "run.h"

int job_token(job *J) {
    opts *o = J->o;
    if (!ddpc__env_isset(DDPC_ENV_STORE_TORCH))
        setenv("DDPC_STORE_TORCH", "1", 1); /* torch.distributed's clients cannot prove a token */
    /* set, even empty (the way to turn it off), or several nodes: the user's */
    if (getenv("DDPC_JOB_TOKEN") || o->nnodes != 1) return 0;
    unsigned char b[32];
    char hex[65];
    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) {
        say("cannot make a job token: getrandom: %s", strerror(errno));
        return -1;
    }
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", b[i]);
    setenv("DDPC_JOB_TOKEN", hex, 1);
    DDPC_INFO(RUN, "generated a job token for this single-node job (DDPC_JOB_TOKEN, given to the "
                   "workers); the store serves PyTorch TCPStore clients without it unless "
                   "DDPC_STORE_TORCH=0");
    return 0;
}

char *key(job *J, const char *fmt, ...) {
    static char buf[512];
    int n = J->round ? snprintf(buf, sizeof buf, "run/%s/r%d/", J->o->run_id, J->round)
                     : snprintf(buf, sizeof buf, "run/%s/", J->o->run_id);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    va_end(ap);
    return buf;
}

/* Waits (in slices, handling signals) until the key "what/<r>" (or
 * "gen<gen>/what/<r>" when gen >= 0) exists for every node r, at most
 * timeout_s. Returns 0 when all exist, 1 on timeout, -1 on a store error or
 * (when interruptible) a stop signal. missing (may be NULL) gets the list
 * of the nodes whose key is absent. */
static int wait_nodes(job *J, const char *what, int gen, double timeout_s, int interruptible,
                      char *missing, size_t mlen) {
    int n = J->o->nnodes, rc = -1;
    char **keys = calloc((size_t)n, sizeof *keys);
    if (!keys) goto done;
    for (int r = 0; r < n; r++) {
        if (gen >= 0)
            keys[r] = strdup(key(J, "gen%d/%s/%d", gen, what, r));
        else
            keys[r] = strdup(key(J, "%s/%d", what, r));
        if (!keys[r]) goto done;
    }
    double deadline = ddpc__now() + timeout_s;
    rc = 1;
    for (;;) {
        handle_signals(J);
        if (J->got_signal && interruptible) {
            rc = -1;
            break;
        }
        double left = deadline - ddpc__now();
        if (left <= 0) break;
        ddpc_status s =
            ddpc_store_wait(J->store, (const char *const *)keys, n, left < 0.25 ? left : 0.25);
        if (s == DDPC_OK) {
            rc = 0;
            break;
        }
        if (s != DDPC_ERR_TIMEOUT) {
            say("lost the job's store: %s", ddpc_last_error());
            J->store_lost = 1;
            rc = -1;
            break;
        }
    }
    if (rc == 1 && missing) {
        size_t used = 0;
        missing[0] = 0;
        for (int r = 0; r < n && used + 16 < mlen; r++) {
            int ex = 1;
            if (ddpc_store_check(J->store, keys[r], &ex) == DDPC_OK && !ex)
                used += (size_t)snprintf(missing + used, mlen - used, "%s%d", used ? ", " : "", r);
        }
    }
done:
    for (int r = 0; keys && r < n; r++) free(keys[r]);
    free(keys);
    return rc;
}

/* Hosts the store (node 0) and connects to it. 0 or -1 (said why). With
 * --nnodes=MIN:MAX the launcher that can listen at the endpoint hosts it
 * and is node 0; the others (the address is not this host's, or the port
 * is taken by that launcher) are clients. */
static int connect_store(job *J) {
    opts *o = J->o;
    if (o->max_nodes) {
        J->rdzv_host =
            ddpc_store_server_create(o->master_addr, o->master_port, &J->server) == DDPC_OK;
        DDPC_INFO(RUN, "elastic rendezvous: %s the store at %s:%d",
                  J->rdzv_host ? "hosting" : "joining", o->master_addr, o->master_port);
    } else if (o->node_rank == 0) {
        if (ddpc_store_server_create(o->master_addr, o->master_port, &J->server) != DDPC_OK) {
            say("cannot host the job's store at %s:%d: %s (choose another with --master-port)",
                o->master_addr, o->master_port, ddpc_last_error());
            return -1;
        }
        o->master_port = ddpc_store_server_port(J->server);
    }
    if (ddpc_store_create_tcp(o->master_addr, o->master_port, o->join_timeout, &J->store) !=
        DDPC_OK) {
        say("node %d cannot reach the job's store on node 0 at %s:%d within %g s: %s", o->node_rank,
            o->master_addr, o->master_port, o->join_timeout, ddpc_last_error());
        return -1;
    }
    /* a store that stops answering (node 0's launcher hung) counts as lost
     * within the heartbeat timeout, not DDPC_STORE_TIMEOUT */
    ddpc_store_set_timeout(J->store,
                           o->hb_timeout > o->join_timeout ? o->join_timeout : o->hb_timeout);
    return 0;
}

/* Sets key k to val unless it exists; *got (malloc'd, NUL-terminated by
 * the store client) gets the value that is there now. 0, or -1 (said why). */
static int claim(job *J, const char *k, const char *val, char **got) {
    size_t gl = 0;
    *got = NULL;
    if (ddpc_store_compare_set(J->store, k, NULL, 0, val, strlen(val), (void **)got, &gl) !=
        DDPC_OK) {
        say("cannot register with the job's store: %s", ddpc_last_error());
        return -1;
    }
    if (gl != strlen(val) || memcmp(*got, val, gl) != 0) return 1;
    return 0;
}

/* Registers this launcher: the job's configuration must match a job
 * already using this run id, and this node rank must be free. 0 or -1. */
static int register_node(job *J) {
    opts *o = J->o;
    char want[128], me[320], *got = NULL;
    int rc = -1, c;
    if (o->table) /* the nodes' worker counts may differ: the table's size is the check */
        snprintf(want, sizeof want, "nnodes=%d rank_table_ranks=%d max_restarts=%d", o->nnodes,
                 o->world, o->max_restarts);
    else
        snprintf(want, sizeof want, "nnodes=%d nproc_per_node=%d max_restarts=%d", o->nnodes,
                 o->nproc, o->max_restarts);
    if ((c = claim(J, key(J, "config"), want, &got)) != 0) {
        if (c > 0)
            say("refusing to join: run id '%s' at %s:%d belongs to a job with %s, and this "
                "launcher has %s "
                "(give every node the same --nnodes, --nproc-per-node and --max-restarts, or "
                "another "
                "--run-id)",
                o->run_id, o->master_addr, o->master_port, got, want);
        goto done;
    }
    free(got);
    snprintf(me, sizeof me, "%s pid %d", J->host, (int)getpid());
    if ((c = claim(J, key(J, "node/%d", o->node_rank), me, &got)) != 0) {
        if (c > 0)
            say("refusing to join: node rank %d of run id '%s' is already taken by the launcher on "
                "%s",
                o->node_rank, o->run_id, got);
        goto done;
    }
    rc = 0;
done:
    free(got);
    return rc;
}

/* Round k's key "rdzv<k>/what" (outside any round's prefix). */
static char *rdzv_key(job *J, int k, const char *what) {
    static char buf[512];
    if (k < 0) /* the rendezvous' own keys: rdzv/current */
        snprintf(buf, sizeof buf, "run/%s/rdzv/%s", J->o->run_id, what);
    else
        snprintf(buf, sizeof buf, "run/%s/rdzv%d/%s", J->o->run_id, k, what);
    return buf;
}

/* The nodes' count in round k: the store's host plus rdzv<k>/count. -1 on a
 * store error. */
static int joined_count(job *J, int k) {
    int64_t v = 0;
    if (ddpc_store_add(J->store, rdzv_key(J, k, "count"), 0, &v) != DDPC_OK) return -1;
    return 1 + (int)v;
}

/* Round k's size once closed (> 0), 0 while open, -1 on a store error. */
static int closed_size(job *J, int k) {
    void *v = NULL;
    size_t n = 0;
    ddpc_status s = ddpc_store_get(J->store, rdzv_key(J, k, "closed"), 0, &v, &n);
    if (s == DDPC_ERR_TIMEOUT) return 0;
    if (s != DDPC_OK) return -1;
    int c = atoi((char *)v);
    free(v);
    return c > 0 ? c : -1;
}

/* Takes this node's number in round k: 0 for the store's host, else the
 * next from the counter. -1 (said why) on a store error. */
static int take_number(job *J, int k) {
    if (J->rdzv_host) return 0;
    int64_t v = 0;
    if (ddpc_store_add(J->store, rdzv_key(J, k, "count"), 1, &v) != DDPC_OK) {
        say("cannot join the rendezvous at %s:%d: %s", J->o->master_addr, J->o->master_port,
            ddpc_last_error());
        return -1;
    }
    return (int)v;
}

/* Closes round k at `count` nodes (MAX at most); the first to close wins:
 * returns the size it closed at, or -1 (said why). */
static int close_round(job *J, int k, int count) {
    char want[16], *got = NULL;
    snprintf(want, sizeof want, "%d", count < J->o->max_nodes ? count : J->o->max_nodes);
    if (claim(J, rdzv_key(J, k, "closed"), want, &got) < 0) return -1;
    int c = atoi(got);
    free(got);
    char cur[16];
    snprintf(cur, sizeof cur, "%d", k);
    ddpc_store_set(J->store, rdzv_key(J, -1, "current"), cur, strlen(cur)); /* for late nodes */
    return c;
}

/* This node takes its place in the round that closed at `closed` nodes;
 * me past it: refused (the round started without it). 0 or 1. */
static int take_place(job *J, int me, int closed) {
    opts *o = J->o;
    if (me >= closed) {
        say("run id '%s' at %s:%d restarted with %d nodes (--nnodes=%d:%d) without this one",
            o->run_id, o->master_addr, o->master_port, closed, o->min_nodes, o->max_nodes);
        return 1;
    }
    o->nnodes = closed;
    o->node_rank = me;
    o->rank_base = me * o->nproc;
    o->world = closed * o->nproc;
    say("elastic rendezvous (--nnodes=%d:%d): %d nodes, this one node %d (ranks %d-%d of %d)",
        o->min_nodes, o->max_nodes, closed, me, o->rank_base, o->rank_base + o->nproc - 1,
        o->world);
    return 0;
}

/*
 * --nnodes=MIN:MAX, torchrun's c10d rendezvous: sets nnodes and node_rank.
 * 1. The store's host is node 0; every other launcher takes the next number
 *    from rdzv/count (1, 2, ...).
 * 2. Every node watches the count: MAX joined, or MIN joined and
 *    last_call_timeout passed since this node saw MIN, closes the round (the
 *    first compare-and-set of rdzv/closed wins; all read its value).
 * 3. A node numbered past the closed round is refused: the job has started.
 * Bounded by --join-timeout; 0, or an exit code (said why).
 */
/* A launcher that came after the job started: it takes a number in the
 * round after the current one, which the running nodes see at their next
 * heartbeat, stop their workers and rejoin with it; it waits (until
 * deadline) for that round to close. 0 or 1 (said why). */
static int late_join(job *J, double deadline) {
    opts *o = J->o;
    for (int tries = 0; tries < 8; tries++) {
        void *v = NULL;
        size_t n = 0;
        int cur = 0;
        if (ddpc_store_get(J->store, rdzv_key(J, -1, "current"), 5, &v, &n) == DDPC_OK) {
            cur = atoi((char *)v);
            free(v);
        }
        int k = cur + 1, me = take_number(J, k), closed = 0;
        if (me < 0) return 1;
        say("run id '%s' is running with round %d of its nodes: asking to join at the next",
            o->run_id, cur);
        while ((closed = closed_size(J, k)) == 0 && ddpc__now() < deadline) {
            handle_signals(J);
            if (J->got_signal) return 128 + J->got_signal;
            ddpc__sleep(0.05);
        }
        if (closed < 0) break;
        if (closed == 0) {
            say("the running nodes of run id '%s' did not take this one in within %g s "
                "(--join-timeout)",
                o->run_id, o->join_timeout);
            return 1;
        }
        if (me < closed) { /* start at the job's generation, with the others */
            if (ddpc_store_get(J->store, rdzv_key(J, k, "gen"), 5, &v, &n) != DDPC_OK) break;
            J->first_gen = atoi((char *)v);
            free(v);
            J->round = k;
            return take_place(J, me, closed);
        }
        /* that round closed without this node (MAX reached, or it was late again) */
        if (closed >= o->max_nodes) {
            say("run id '%s' has its MAX %d nodes (--nnodes=%d:%d): this one is not needed",
                o->run_id, closed, o->min_nodes, o->max_nodes);
            return 1;
        }
    }
    say("lost the rendezvous' store at %s:%d: %s", o->master_addr, o->master_port,
        ddpc_last_error());
    return 1;
}

static int elastic_join(job *J) {
    opts *o = J->o;
    int me = take_number(J, 0);
    if (me < 0) return 1;
    double deadline = ddpc__now() + o->join_timeout, min_seen = 0;
    int closed;
    while ((closed = closed_size(J, 0)) == 0) {
        int count = joined_count(J, 0);
        if (count < 0) break;
        double now = ddpc__now();
        if (count >= o->min_nodes && !min_seen) min_seen = now;
        if (count >= o->max_nodes || (min_seen && now - min_seen >= o->last_call)) {
            closed = close_round(J, 0, count);
            break;
        }
        handle_signals(J);
        if (J->got_signal) return 128 + J->got_signal;
        if (now >= deadline) {
            say("only %d of at least %d nodes joined run id '%s' at %s:%d within %g s "
                "(--join-timeout); start more with the same --nnodes=%d:%d",
                count, o->min_nodes, o->run_id, o->master_addr, o->master_port, o->join_timeout,
                o->min_nodes, o->max_nodes);
            return 1;
        }
        ddpc__sleep(0.05);
    }
    if (closed < 0) {
        say("lost the rendezvous' store at %s:%d: %s", o->master_addr, o->master_port,
            ddpc_last_error());
        return 1;
    }
    if (me >= closed) return late_join(J, deadline);
    return take_place(J, me, closed);
}

/*
 * 1. Take a number in round k = round + 1 (the store's host: 0).
 * 2. Until the round closes: bump this node's heartbeat of the last round;
 *    count the last round's nodes still alive (a heartbeat within
 *    --heartbeat-timeout); fewer than MIN: the job ends, saying so; all of
 *    them joined (or MAX, or MIN and last_call_timeout): close the round.
 * 3. Take this node's place; the last round's heartbeat records are reset.
 */
int elastic_rejoin(job *J) {
    opts *o = J->o;
    int k = J->round + 1, prev = o->nnodes, me = take_number(J, k);
    if (me < 0) return 1;
    char back[32], gen[16];
    snprintf(back, sizeof back, "back/%d", o->node_rank); /* this node of the last round is back */
    snprintf(gen, sizeof gen, "%d", J->gen + 1);          /* the next generation, for late nodes */
    if (ddpc_store_set(J->store, rdzv_key(J, k, "gen"), gen, strlen(gen)) != DDPC_OK ||
        ddpc_store_set(J->store, rdzv_key(J, k, back), "", 0) != DDPC_OK) {
        say("lost the job's store: %s", ddpc_last_error());
        return 1;
    }
    char **hb = calloc((size_t)prev, sizeof *hb);
    int64_t *val = calloc((size_t)prev, sizeof *val);
    double *seen = calloc((size_t)prev, sizeof *seen);
    int rc = 1, closed = 0;
    for (int r = 0; hb && r < prev; r++) hb[r] = strdup(key(J, "hb/%d", r));
    if (!hb || !val || !seen) goto done;
    double t0 = ddpc__now(), deadline = t0 + o->join_timeout;
    for (int r = 0; r < prev; r++) seen[r] = t0, val[r] = -1;
    while ((closed = closed_size(J, k)) == 0) {
        if (!hb[o->node_rank] || ddpc_store_add(J->store, hb[o->node_rank], 1, NULL) != DDPC_OK)
            break;
        double now = ddpc__now();
        int alive = 0, returned = 0;
        char lost[256] = "";
        for (int r = 0; r < prev; r++) {
            int64_t v = 0;
            if (hb[r] && ddpc_store_add(J->store, hb[r], 0, &v) != DDPC_OK) break;
            if (v != val[r]) val[r] = v, seen[r] = now;
            if (r == o->node_rank || now - seen[r] <= o->hb_timeout) {
                alive++;
                int ex = 0;
                snprintf(back, sizeof back, "back/%d", r);
                if (ddpc_store_check(J->store, rdzv_key(J, k, back), &ex) == DDPC_OK && ex)
                    returned++;
            } else {
                snprintf(lost + strlen(lost), sizeof lost - strlen(lost), "%s%d",
                         lost[0] ? ", " : "", r);
            }
        }
        if (alive < o->min_nodes) {
            say("node(s) %s of %d sent no heartbeat for %g s (--heartbeat-timeout): %d node(s) "
                "remain, fewer than --nnodes=%d:%d needs; the job ends",
                lost, prev, o->hb_timeout, alive, o->min_nodes, o->max_nodes);
            goto done;
        }
        int count = joined_count(J, k);
        if (count < 0) break;
        /* every living node of the last round is back (and whoever joined) */
        if ((returned >= alive && count >= alive) || count >= o->max_nodes) {
            closed = close_round(J, k, count);
            break;
        }
        handle_signals(J);
        if (J->got_signal) {
            rc = 128 + J->got_signal;
            goto done;
        }
        if (now >= deadline) {
            say("the nodes did not rejoin run id '%s' within %g s (--join-timeout)", o->run_id,
                o->join_timeout);
            goto done;
        }
        ddpc__sleep(0.05);
    }
    if (closed <= 0) {
        J->store_lost = 1;
        say("lost the job's store on node 0 at %s:%d while the nodes rejoined: %s", o->master_addr,
            o->master_port, ddpc_last_error());
        goto done;
    }
    J->round = k;
    if ((rc = take_place(J, me, closed)) != 0) goto done;
    memset(J->hb_val, 0, (size_t)o->max_nodes * sizeof *J->hb_val);
    memset(J->hb_seen, 0, (size_t)o->max_nodes * sizeof *J->hb_seen);
    J->node_lost = 0;
    rc = register_node(J) != 0;
done:
    for (int r = 0; hb && r < prev; r++) free(hb[r]);
    free(hb), free(val), free(seen);
    return rc;
}

int join_job(job *J) {
    opts *o = J->o;
    if (connect_store(J) != 0) return 1;
    if (o->max_nodes) {
        int rc = elastic_join(J);
        if (rc != 0) return rc;
        /* the heartbeat records, sized for MAX nodes (alloc_job), hold nnodes */
    }
    if (register_node(J) != 0) return 1;
    if (o->nnodes > 1) {
        char missing[1024];
        int rc = wait_nodes(J, "node", -1, o->join_timeout, 1, missing, sizeof missing);
        if (rc == 1) {
            say("nodes %s of %d never joined within %g s (run id '%s', store at %s:%d); start them "
                "with --nnodes=%d --node-rank=R --master-addr=%s, or raise --join-timeout / "
                "DDPC_CONNECT_TIMEOUT",
                missing, o->nnodes, o->join_timeout, o->run_id, o->master_addr, o->master_port,
                o->nnodes, o->master_addr);
            return 1;
        }
        if (rc < 0) return J->got_signal ? 128 + J->got_signal : 1;
        say("node %d: all %d nodes joined (run id '%s')", o->node_rank, o->nnodes, o->run_id);
    }
    J->joined = 1;
    return 0;
}

int await_restart(job *J) {
    opts *o = J->o;
    ddpc_store_set(J->store, key(J, "gen%d/start/%d", J->gen, o->node_rank), "", 0);
    char missing[1024];
    int w = wait_nodes(J, "start", J->gen, o->join_timeout, 1, missing, sizeof missing);
    if (w == 0) return 0;
    if (w == 1)
        say("nodes %s did not come back for restart %d within %g s", missing, J->gen,
            o->join_timeout);
    return J->got_signal ? 128 + J->got_signal : 1;
}

void publish_outcome(job *J, const run_outcome *mine, run_outcome *won) {
    if (won && won != mine)
        outcome_set(won, mine->kind, mine->node, mine->rank, mine->status, "%s",
                    outcome_text(mine));
    if ((J->o->nnodes == 1 && !J->o->max_nodes) || J->store_lost) return;
    char *text = outcome_encode(mine);
    void *got = NULL;
    size_t gl = 0;
    if (!text || ddpc_store_compare_set(J->store, key(J, "gen%d/outcome", J->gen), NULL, 0, text,
                                        strlen(text), &got, &gl) != DDPC_OK) {
        if (text) J->store_lost = 1;
    } else if (won) {
        outcome_decode(got, won);
    }
    free(got);
    free(text);
}

int count_node_done(job *J, run_outcome *oc) {
    int64_t nd = 0;
    if (ddpc_store_add(J->store, key(J, "gen%d/ndone", J->gen), 1, &nd) != DDPC_OK) {
        J->store_lost = 1;
        outcome_set(oc, RUN_STORE_LOST, J->o->node_rank, -1, 0, "node %d lost the job's store (%s)",
                    J->o->node_rank, ddpc_last_error());
        return -1;
    }
    if (nd == J->o->nnodes) {
        run_outcome ok = { RUN_OK, -1, -1, 0, NULL };
        publish_outcome(J, &ok, NULL);
    }
    return 0;
}

/* The store went away while this node asked it something: node 0's
 * launcher (which hosts it) is gone. */
static void store_lost(job *J, run_outcome *oc, const char *why) {
    J->store_lost = 1;
    outcome_set(oc, RUN_STORE_LOST, J->o->node_rank, -1, 0,
                "node %d lost the job's store on node 0 (%s)%s", J->o->node_rank, ddpc_last_error(),
                why);
}

int read_outcome(job *J, double wait_s, run_outcome *oc) {
    void *v = NULL;
    size_t n;
    ddpc_status s = ddpc_store_get(J->store, key(J, "gen%d/outcome", J->gen), wait_s, &v, &n);
    if (s == DDPC_OK) {
        outcome_decode(v, oc);
        free(v);
        return 1;
    }
    if (s == DDPC_ERR_TIMEOUT) return 0;
    store_lost(J, oc, wait_s > 0 ? "" : ": node 0's launcher is gone");
    return 1;
}

int heartbeat(job *J, run_outcome *oc) {
    opts *o = J->o;
    double now = ddpc__now();
    if (ddpc_store_add(J->store, key(J, "hb/%d", o->node_rank), 1, NULL) != DDPC_OK) {
        store_lost(J, oc, ": node 0's launcher is gone");
        return 1;
    }
    for (int r = 0; r < o->nnodes; r++) {
        if (r == o->node_rank) continue;
        int64_t v = 0;
        void *p = NULL;
        size_t n;
        ddpc_status s = ddpc_store_get(J->store, key(J, "hb/%d", r), 0, &p, &n);
        if (s == DDPC_OK) {
            v = strtoll((char *)p, NULL, 10);
            free(p);
        } else if (s != DDPC_ERR_TIMEOUT) {
            store_lost(J, oc, "");
            return 1;
        }
        if (v != J->hb_val[r] || J->hb_seen[r] == 0) {
            J->hb_val[r] = v;
            J->hb_seen[r] = now;
        } else if (now - J->hb_seen[r] > o->hb_timeout) {
            void *who = NULL;
            ddpc_store_get(J->store, key(J, "node/%d", r), 0, &who, &n);
            outcome_set(oc, RUN_NODE_LOST, r, -1, 0,
                        "node %d's launcher (%s) sent no heartbeat for %.1f s "
                        "(--heartbeat-timeout %g s); it is presumed dead",
                        r, who ? (char *)who : "?", now - J->hb_seen[r], o->hb_timeout);
            free(who);
            J->node_lost = 1;
            return 1;
        }
    }
    if (o->max_nodes) { /* a launcher waiting in the next round: all restart with it */
        int next = joined_count(J, J->round + 1);
        if (next < 0) {
            store_lost(J, oc, ": node 0's launcher is gone");
            return 1;
        }
        if (next > 1 && o->nnodes < o->max_nodes) {
            outcome_set(oc, RUN_NODE_JOINED, -1, -1, 0,
                        "a node asked to join run id '%s' (%d nodes now, --nnodes=%d:%d): every "
                        "node restarts at the new size",
                        o->run_id, o->nnodes, o->min_nodes, o->max_nodes);
            return 1;
        }
    }
    return 0;
}

void finish_job(job *J) {
    opts *o = J->o;
    if (o->nnodes == 1 || J->store_lost || !J->store || !J->joined || J->node_lost) return;
    if (ddpc_store_set(J->store, key(J, "exit/%d", o->node_rank), "", 0) != DDPC_OK) return;
    if (o->node_rank != 0) return;
    char missing[1024];
    double limit = o->grace + o->monitor_interval + 2;
    if (wait_nodes(J, "exit", -1, limit, 0, missing, sizeof missing) == 1)
        say("nodes %s did not confirm the end of the job within %.0f s", missing, limit);
}
