/* test_soak.c — the soak benchmark (bench/soak.c) in short: 2,000 random
 * collectives on 4 ranks under ddpc-run --max-restarts=1, every result
 * checked, the last rank SIGKILLed at call 1,333 and the job restarted from
 * the call it recorded (1,000); nothing wrong, nothing hung. Its bad
 * options and a record of another soak are refused. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "test.h"

static char out[1 << 16];

TEST_T(soak_short_with_a_kill_and_restart, 240) {
    const char *rec = t_tmp_path("soak.rec");
    int rc = t_run_cmdf(200, out, sizeof out,
                        "DDPC_TIMEOUT=60 %s --standalone --nproc-per-node=4 --max-restarts=1 %s "
                        "--ops 2000 --record %s 2>&1",
                        t_bin("ddpc-run"), t_bin("ddpc-soak"), rec);
    CHECK_MSG(rc == 0, "rc=%d: %s", rc, out);
    CHECK_CONTAINS(out, "[3]: ddpc-soak: rank 3 kills itself at call 1333");
    CHECK_CONTAINS(out, "restarting all workers");
    /* the launcher names the rank killed, not the ranks that lost it */
    CHECK_CONTAINS(out, "ddpc-run: first failure: rank 3 ");
    CHECK_CONTAINS(out, "[0]: ddpc-soak: restart 1: continuing from the record at call 1000");
    CHECK_CONTAINS(out, "[0]: ddpc-soak: 2000 collectives on 4 ranks, 0 wrong, restarts 1 (1 "
                        "planned), resumed at call 1000");
    /* the record is a line anyone can read */
    rc = t_run_cmdf(10, out, sizeof out, "cat %s", rec);
    CHECK_CONTAINS(out, "ddpc-soak-record 1 seed=1 ops=2000 world=4 next=2000 wrong=0 ");
    t_tmp_remove();
}

TEST_T(soak_refuses_bad_input, 60) {
    int rc = t_run_cmdf(20, out, sizeof out, "%s --ops x 2>&1", t_bin("ddpc-soak"));
    CHECK_EQ(rc, 2);
    CHECK_CONTAINS(out, "--ops");
    rc = t_run_cmdf(20, out, sizeof out, "%s --frobnicate 2>&1", t_bin("ddpc-soak"));
    CHECK_EQ(rc, 2);
    CHECK_CONTAINS(out, "unknown option '--frobnicate'");
    /* a restart that finds another soak's record stops, saying whose */
    const char *rec = t_tmp_path("other.rec");
    FILE *f = fopen(rec, "w");
    CHECK(f != NULL);
    fputs("ddpc-soak-record 1 seed=7 ops=99 world=2 next=5 wrong=0 rss_first=1 rss_last=1 "
          "resumed=0\n",
          f);
    fclose(f);
    rc = t_run_cmdf(60, out, sizeof out,
                    "RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=%d "
                    "TORCHELASTIC_RESTART_COUNT=1 %s --ops 100 --record %s 2>&1",
                    t_free_port(), t_bin("ddpc-soak"), rec);
    CHECK(rc != 0);
    CHECK_CONTAINS(out, "other.rec records another soak (seed 7, 99 calls, 2 ranks)");
    t_tmp_remove();
}
