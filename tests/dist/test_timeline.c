/* test_timeline.c — ddpc-train --trace under ddpc-run writes one Chrome
 * trace-event file per rank; ddpc-trace --merge joins them into one that
 * parses (cJSON), with every event well formed, both ranks present, each
 * phase there, and DDP's bucket allreduces overlapping backward's layers
 * with overlap on and never with overlap off. Also ddpc-trace's refusals
 * of bad input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"

#ifdef DDPC_HAVE_CJSON
#include <cJSON.h>
#endif

#define DATA "/usr/share/datasets/fashion-mnist"

static char out[1 << 16];

#ifdef DDPC_HAVE_CJSON
static cJSON *load_json(const char *path) {
    FILE *f = fopen(path, "rb");
    CHECK_MSG(f != NULL, "cannot read %s", path);
    static char buf[8 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    CHECK_MSG(n < sizeof buf - 1, "%s is larger than the test reads", path);
    buf[n] = '\0';
    cJSON *doc = cJSON_Parse(buf);
    CHECK_MSG(doc != NULL, "%s is not JSON near '%.40s'", path, cJSON_GetErrorPtr());
    return doc;
}

typedef struct ev {
    const char *name, *cat;
    int pid, tid;
    double ts, dur;
} ev;

/* Trains 2 ranks for 8 steps with --trace, merges, checks the structure;
 * returns how many bucket events overlap a backward event of their rank. */
static int traced_run(const char *overlap) {
    const char *d = t_tmp_dir();
    int rc = t_run_cmdf(120 * t_slow(), out, sizeof out,
                        "%s --nproc-per-node=2 --standalone %s --model mlp --epochs 1 "
                        "--max-batches 8 --max-eval-batches 1 --bucket-mb 0.05 --overlap %s "
                        "--trace %s/tl-{rank}.json 2>&1",
                        t_bin("ddpc-run"), t_bin("ddpc-train"), overlap, d);
    CHECK_MSG(rc == 0, "ddpc-train --trace exit %d: %s", rc, out);
    CHECK_CONTAINS(out, overlap[1] == 'n' ? "DDP overlap on" : "DDP overlap off");
    rc = t_run_cmdf(30 * t_slow(), out, sizeof out,
                    "%s --merge %s/all.json %s/tl-0.json %s/tl-1.json", t_bin("ddpc-trace"), d, d,
                    d);
    CHECK_MSG(rc == 0, "ddpc-trace --merge exit %d: %s", rc, out);
    CHECK_CONTAINS(out, "merged 2 files");
    cJSON *doc = load_json(t_tmp_path("all.json"));
    cJSON *arr = cJSON_GetObjectItem(doc, "traceEvents");
    CHECK(cJSON_IsArray(arr));
    int n = cJSON_GetArraySize(arr);
    CHECK(n > 50);
    ev *es = calloc((size_t)n, sizeof *es);
    int k = 0, meta = 0, steps[2] = { 0, 0 }, buckets = 0;
    int have_data = 0, have_fw = 0, have_bw = 0, have_sync = 0, have_step = 0;
    cJSON *e;
    cJSON_ArrayForEach(e, arr) {
        cJSON *name = cJSON_GetObjectItem(e, "name"), *ph = cJSON_GetObjectItem(e, "ph");
        cJSON *pid = cJSON_GetObjectItem(e, "pid"), *tid = cJSON_GetObjectItem(e, "tid");
        CHECK(cJSON_IsString(name) && cJSON_IsString(ph) && cJSON_IsNumber(pid) &&
              cJSON_IsNumber(tid));
        CHECK(pid->valueint == 0 || pid->valueint == 1);
        if (!strcmp(ph->valuestring, "M")) {
            meta++;
            continue;
        }
        CHECK_STR(ph->valuestring, "X");
        cJSON *ts = cJSON_GetObjectItem(e, "ts"), *dur = cJSON_GetObjectItem(e, "dur");
        cJSON *cat = cJSON_GetObjectItem(e, "cat");
        CHECK(cJSON_IsNumber(ts) && cJSON_IsNumber(dur) && cJSON_IsString(cat));
        CHECK(dur->valuedouble >= 0 && ts->valuedouble > 1e15); /* wall-clock microseconds */
        es[k++] = (ev){ name->valuestring, cat->valuestring, pid->valueint,
                        tid->valueint,     ts->valuedouble,  dur->valuedouble };
        const char *nm = name->valuestring;
        have_data |= !strcmp(nm, "data");
        have_fw |= !strcmp(nm, "forward linear1");
        have_bw |= !strcmp(nm, "backward linear1");
        have_sync |= !strcmp(nm, "sync (wait for buckets)");
        have_step |= !strcmp(nm, "optimizer step");
        if (!strncmp(nm, "train step ", 11)) steps[pid->valueint]++;
        if (!strncmp(nm, "allreduce bucket ", 17)) {
            CHECK_EQ(tid->valueint, 1);
            buckets++;
        }
    }
    CHECK_EQ(meta, 6); /* process and two thread names per rank */
    CHECK(have_data && have_fw && have_bw && have_sync && have_step);
    CHECK_EQ(steps[0], 8);
    CHECK_EQ(steps[1], 8);
    CHECK(buckets >= 2 * 8 * 2); /* at least 2 buckets a step (0.05 MB) on each rank */
    /* a bucket overlaps a backward event of its rank (0.5 us for rounding) */
    int overlapping = 0;
    for (int i = 0; i < k; i++) {
        if (strcmp(es[i].cat, "allreduce") != 0) continue;
        for (int j = 0; j < k; j++)
            if (es[j].pid == es[i].pid && !strcmp(es[j].cat, "backward") &&
                es[i].ts < es[j].ts + es[j].dur - 0.5 && es[j].ts < es[i].ts + es[i].dur - 0.5) {
                overlapping++;
                break;
            }
    }
    free(es);
    cJSON_Delete(doc);
    t_tmp_remove();
    return overlapping;
}
#endif

static void need(void) {
#ifndef DDPC_HAVE_CJSON
    SKIP("built without cJSON (libcjson-dev): cannot read the trace's JSON");
#endif
    if (access(DATA "/train-images-idx3-ubyte.gz", R_OK) != 0)
        SKIP("Fashion-MNIST is not installed in " DATA);
}

TEST_T(timeline_buckets_overlap_backward_with_overlap_on, 180) {
    need();
#ifdef DDPC_HAVE_CJSON
    int o = traced_run("on");
    CHECK_MSG(o > 0, "no bucket allreduce overlaps a backward layer with --overlap on");
#endif
}

TEST_T(timeline_buckets_apart_from_backward_with_overlap_off, 180) {
    need();
#ifdef DDPC_HAVE_CJSON
    int o = traced_run("off");
    CHECK_MSG(o == 0, "%d bucket allreduces overlap a backward layer with --overlap off", o);
#endif
}

TEST_T(trace_tool_refuses_bad_input, 60) {
    const char *d = t_tmp_dir();
    FILE *f = fopen(t_tmp_path("bad.json"), "w");
    fputs("{\"traceEvents\": [ {\"name\": 1", f);
    fclose(f);
    f = fopen(t_tmp_path("flight-0.txt"), "w");
    fputs("ddpc-flight 1\nprocess rank=0 pid=1 host=h time=1 reason=x\ncomm id=a rank=5 size=2\n",
          f);
    fclose(f);
    int rc = t_run_cmdf(20, out, sizeof out, "%s --merge %s/o.json %s/bad.json",
                        t_bin("ddpc-trace"), d, d);
#ifdef DDPC_HAVE_CJSON
    CHECK_EQ(rc, 1);
    CHECK_CONTAINS(out, "bad.json is not JSON");
#endif
    rc = t_run_cmdf(20, out, sizeof out, "%s --merge %s/o.json %s/none.json", t_bin("ddpc-trace"),
                    d, d);
    CHECK_EQ(rc, 1);
    CHECK_CONTAINS(out, "none.json");
    CHECK_EQ(t_run_cmdf(20, out, sizeof out, "%s --merge %s/o.json", t_bin("ddpc-trace"), d), 2);
    CHECK_CONTAINS(out, "--merge needs OUT and at least one FILE");
    CHECK_EQ(t_run_cmdf(20, out, sizeof out, "%s --bogus", t_bin("ddpc-trace")), 2);
    CHECK_CONTAINS(out, "unknown option '--bogus'");
    rc = t_run_cmdf(20, out, sizeof out, "%s %s", t_bin("ddpc-trace"), d);
    CHECK_EQ(rc, 1);
    CHECK_CONTAINS(out, "flight-0.txt:3: rank 5 of size 2");
    unlink(t_tmp_path("flight-0.txt"));
    rc = t_run_cmdf(20, out, sizeof out, "%s %s", t_bin("ddpc-trace"), d);
    CHECK_EQ(rc, 1);
    CHECK_CONTAINS(out, "no flight records");
    /* ddpc-train: an unwritable --trace is named */
    rc =
        t_run_cmdf(60, out, sizeof out, "%s --max-batches 1 --epochs 1 --trace /nonexistent/t.json",
                   t_bin("ddpc-train"));
    if (access(DATA "/train-images-idx3-ubyte.gz", R_OK) == 0) {
        CHECK_EQ(rc, 1);
        CHECK_CONTAINS(out, "cannot open --trace /nonexistent/t.json");
    }
    t_tmp_remove();
}
