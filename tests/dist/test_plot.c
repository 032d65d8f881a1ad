/* test_plot.c — ddpc-plot: PNGs of ddpc-train's per-epoch metrics and of
 * benchmark tables (ddpc-bench's and a peer's of the same columns), drawn
 * by gnuplot. Each picture is checked for its pixel size (the PNG's IHDR)
 * and for the series it holds, counted from gnuplot's own record of what it
 * drew (--table: gnuplot's "set table", a "# Curve title" per curve). The
 * tests that draw skip when gnuplot is missing; the one that trains skips
 * without the Fashion-MNIST data. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"

#define DATA "/usr/share/datasets/fashion-mnist"

static char out[1 << 20];

#define run(timeout_s, ...) t_run_cmdf((timeout_s), out, sizeof out, __VA_ARGS__)

static const char *plot_bin(void) {
    const char *b = t_bin("ddpc-plot");
    CHECK_MSG(access(b, X_OK) == 0, "%s is not built (make tools)", b);
    return b;
}

static void need_gnuplot(void) {
    if (run(10, "command -v gnuplot") != 0)
        SKIP("gnuplot is not installed (apt-get install gnuplot-nox, or DDPC_SETUP_PEERS=1 bash "
             "scripts/setup.sh)");
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    CHECK_MSG(f != NULL, "cannot write %s", path);
    fputs(text, f);
    CHECK(fclose(f) == 0);
}

/* The file's whole text (static buffer). */
static const char *read_text(const char *path) {
    static char buf[1 << 20];
    FILE *f = fopen(path, "r");
    CHECK_MSG(f != NULL, "%s was not written", path);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}

/* Fails unless path is a PNG of w x h pixels (its IHDR chunk, first). */
static void check_png(const char *path, unsigned w, unsigned h) {
    unsigned char b[24];
    FILE *f = fopen(path, "rb");
    CHECK_MSG(f != NULL, "no PNG at %s", path);
    size_t n = fread(b, 1, sizeof b, f);
    fclose(f);
    CHECK_MSG(n == sizeof b && !memcmp(b, "\x89PNG\r\n\x1a\n", 8) && !memcmp(b + 12, "IHDR", 4),
              "%s is not a PNG", path);
    unsigned pw = (unsigned)b[16] << 24 | (unsigned)b[17] << 16 | (unsigned)b[18] << 8 | b[19];
    unsigned ph = (unsigned)b[20] << 24 | (unsigned)b[21] << 16 | (unsigned)b[22] << 8 | b[23];
    CHECK_MSG(pw == w && ph == h, "%s is %ux%u pixels, want %ux%u", path, pw, ph, w, h);
}

/* How many times needle is in hay. */
static int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
    return n;
}

/* gnuplot's record of one curve: its title line, then "# x y type" and the
 * points; returns how many points the curve titled title has in the
 * panel'th panel's block (0-based: the panels' curves come in order). */
static int curve_points(const char *table, int panel, const char *title) {
    char want[300];
    snprintf(want, sizeof want, "# Curve title: \"%s\"", title);
    const char *p = table;
    for (int k = 0; k <= panel; k++) {
        p = strstr(p, want);
        CHECK_MSG(p != NULL, "no curve \"%s\" in panel %d of gnuplot's table:\n%s", title, panel,
                  table);
        p += strlen(want);
    }
    /* back to "# Curve i of n, K points" just before it */
    const char *head = p - strlen(want);
    do head--;
    while (head > table && strncmp(head, "# Curve ", 8) != 0);
    int i, n, pts;
    CHECK_MSG(sscanf(head, "# Curve %d of %d, %d points", &i, &n, &pts) == 3,
              "gnuplot's table: no count before \"%s\": %.80s", title, head);
    return pts;
}

/* Two ddpc-train metrics files, as ddpc-train writes them (3 epochs each). */
static const char *METRICS_LINE =
    "{\"epoch\": %d, \"loss\": %.6f, \"train_accuracy\": %.6f, \"test_accuracy\": %.6f, "
    "\"test_loss\": 0.9, \"test_samples\": 320, \"samples_per_s\": %.1f, \"seconds\": 0.01, "
    "\"eval_seconds\": 0.001, \"step\": %d, \"model\": \"linear\", \"world_size\": %d, "
    "\"phase_seconds\": {\"data\": 0.0004, \"forward\": 0.0003, \"backward\": 0.0001, "
    "\"sync\": 0.0059, \"step\": 0.0000}}\n";

static void write_metrics(const char *path, int world, int epochs, int runs) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    for (int r = 0; r < runs; r++)
        for (int e = 0; e < epochs; e++)
            fprintf(f, METRICS_LINE, e, 1.5 / (e + 1) + 0.01 * world, 0.5 + 0.1 * e, 0.55 + 0.1 * e,
                    1e5 * world + e, 30 * (e + 1), world);
    CHECK(fclose(f) == 0);
}

/* Metrics of two runs (1 and 2 processes) -> one 1200x900 PNG whose four
 * panels (loss, train accuracy, test accuracy, samples/s) each drew two
 * curves of 3 points, labelled by file and by --label. */
TEST_T(plot_metrics_of_two_runs, 60) {
    need_gnuplot();
    const char *a = t_tmp_path("1proc.jsonl"), *b = t_tmp_path("2proc.jsonl");
    write_metrics(a, 1, 3, 1);
    write_metrics(b, 2, 3, 1);
    const char *png = t_tmp_path("train.png"), *tab = t_tmp_path("train.tab");
    int rc =
        run(60, "%s -o %s --table %s %s --label '2 processes' %s 2>&1", plot_bin(), png, tab, a, b);
    CHECK_MSG(rc == 0, "rc=%d: %s", rc, out);
    CHECK_CONTAINS(out, "2 series, 6 epochs");
    check_png(png, 1200, 900);
    const char *t = read_text(tab);
    CHECK_MSG(count(t, "# Curve title:") == 8 && count(t, " of 2, 3 points") == 8,
              "want 4 panels x 2 curves of 3 points:\n%s", t);
    for (int panel = 0; panel < 4; panel++) {
        CHECK_EQ(curve_points(t, panel, "1proc"), 3);
        CHECK_EQ(curve_points(t, panel, "2 processes"), 3);
    }
    /* --size; the script redraws the same picture on its own */
    const char *gp = t_tmp_path("train.gp");
    rc = run(60, "%s -o %s --size 640x480 --script %s %s %s 2>&1", plot_bin(), png, gp, a, b);
    CHECK_MSG(rc == 0, "rc=%d: %s", rc, out);
    check_png(png, 640, 480);
    CHECK_MSG(unlink(png) == 0, "%s", png);
    rc = run(60, "gnuplot %s 2>&1", gp);
    CHECK_MSG(rc == 0, "gnuplot %s: rc=%d: %s", gp, rc, out);
    check_png(png, 640, 480);
    t_tmp_remove();
}

/* A metrics file that several runs appended to (--metrics appends) is a
 * series per run. */
TEST_T(plot_metrics_file_of_two_runs_is_two_series, 60) {
    need_gnuplot();
    const char *m = t_tmp_path("runs.jsonl"), *tab = t_tmp_path("runs.tab");
    write_metrics(m, 2, 2, 2);
    int rc = run(60, "%s -o %s --table %s %s 2>&1", plot_bin(), t_tmp_path("runs.png"), tab, m);
    CHECK_MSG(rc == 0, "rc=%d: %s", rc, out);
    const char *t = read_text(tab);
    CHECK_EQ(curve_points(t, 0, "runs"), 2);
    CHECK_EQ(curve_points(t, 0, "runs #2"), 2);
    t_tmp_remove();
}

/* ddpc-bench's table as ddpc-run prints it ("[0]: " before each line) and
 * a peer's table of the same columns (nccl-tests', with its in-place
 * columns too) -> one 1200x500 PNG: bus bandwidth and time against size,
 * two curves each, on log axes. */
TEST_T(plot_bench_tables_with_a_peer, 60) {
    need_gnuplot();
    const char *ddpc = t_tmp_path("ddpc.txt"), *peer = t_tmp_path("nccl.txt");
    write_file(ddpc,
               "ddpc-run: setting OMP_NUM_THREADS=1 ...\n"
               "[0]: # ddpc-bench allreduce: 2 ranks, float32, sum, iters 5, warmup 1, check 1\n"
               "[0]: #\n"
               "[0]: #       size        count     type  redop   root       time    algbw    "
               "busbw #wrong\n"
               "[0]: #        (B)   (elements)                              (us)   (GB/s)   "
               "(GB/s)       \n"
               "[0]:            8            2  float32    sum     -1       1.75    0.005    "
               "0.005      0\n"
               "[0]:         1024          256  float32    sum     -1       3.00    0.341    "
               "0.341      0\n"
               "[0]:      1048576       262144  float32    sum     -1     400.00    2.621    "
               "2.621      0\n"
               "[0]: # Out of bounds values : 0 OK\n"
               "[0]: # Avg bus bandwidth : 0.9\n");
    write_file(peer,
               "#                                                              out-of-place"
               "                       in-place          \n"
               "#       size         count      type   redop    root     time   algbw   busbw "
               "#wrong     time   algbw   busbw #wrong\n"
               "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
               "            (us)  (GB/s)  (GB/s)       \n"
               "           8             2     float     sum      -1    10.00    0.00    0.00"
               "      0     9.00    0.00    0.00      0\n"
               "        1024           256     float     sum      -1    12.00    0.09    0.09"
               "      0    11.00    0.09    0.09      0\n"
               "     1048576        262144     float     sum      -1   300.00    3.50    3.50"
               "      0   290.00    3.62    3.62      0\n");
    const char *png = t_tmp_path("bench.png"), *tab = t_tmp_path("bench.tab");
    int rc = run(60, "%s -o %s --table %s %s --label 'nccl-tests' %s 2>&1", plot_bin(), png, tab,
                 ddpc, peer);
    CHECK_MSG(rc == 0, "rc=%d: %s", rc, out);
    CHECK_CONTAINS(out, "2 series, 6 sizes");
    check_png(png, 1200, 500);
    const char *t = read_text(tab);
    CHECK_MSG(count(t, "# Curve title:") == 4, "want 2 panels x 2 curves:\n%s", t);
    for (int panel = 0; panel < 2; panel++) {
        CHECK_EQ(curve_points(t, panel, "ddpc"), 3);
        CHECK_EQ(curve_points(t, panel, "nccl-tests"), 3);
    }
    /* the out-of-place columns were read: 1 MiB's busbw 3.5, time 300 (x
     * as the axis labels it) */
    CHECK_MSG(strstr(t, "\n1Mi 3.5  i\n") && strstr(t, "\n1Mi 300  i\n"),
              "the peer's out-of-place busbw and time are not in:\n%s", t);
    t_tmp_remove();
}

/* What goes wrong is said: gnuplot missing (exit 1, the package named),
 * mixed kinds, an empty file, no file (exit 2), a bad option (exit 2). */
TEST_T(plot_errors_are_clear, 60) {
    const char *m = t_tmp_path("m.jsonl"), *tb = t_tmp_path("t.txt"), *e = t_tmp_path("e.txt");
    write_metrics(m, 1, 2, 1);
    write_file(tb, "#  size count type redop root time algbw busbw #wrong\n"
                   "  8 2 float32 sum -1 1.0 0.01 0.01 0\n");
    write_file(e, "");
    int rc = run(30, "PATH=/nonexistent %s -o %s %s 2>&1", plot_bin(), t_tmp_path("x.png"), m);
    CHECK_MSG(rc == 1 && strstr(out, "gnuplot is not installed (apt-get install gnuplot-nox)"),
              "no gnuplot on PATH: rc=%d: %s", rc, out);
    rc = run(30, "%s --gnuplot /nonexistent/gnuplot %s 2>&1", plot_bin(), m);
    CHECK_MSG(rc == 1 && strstr(out, "/nonexistent/gnuplot cannot be run"), "rc=%d: %s", rc, out);
    rc = run(30, "%s %s %s 2>&1", plot_bin(), m, tb);
    CHECK_MSG(rc == 1 && strstr(out, "plot one kind at a time"), "mixed: rc=%d: %s", rc, out);
    rc = run(30, "%s %s 2>&1", plot_bin(), e);
    CHECK_MSG(rc == 1 && strstr(out, "is empty"), "empty: rc=%d: %s", rc, out);
    rc = run(30, "%s -o x.png 2>&1", plot_bin());
    CHECK_MSG(rc == 2 && strstr(out, "no FILE to plot"), "no file: rc=%d: %s", rc, out);
    rc = run(30, "%s --size 10 %s 2>&1", plot_bin(), m);
    CHECK_MSG(rc == 2 && strstr(out, "--size=10 is not WxH"), "--size 10: rc=%d: %s", rc, out);
    rc = run(30, "%s --bogus %s 2>&1", plot_bin(), m);
    CHECK_MSG(rc == 2 && strstr(out, "unknown option --bogus"), "rc=%d: %s", rc, out);
    t_tmp_remove();
}

/* The real thing: ddpc-train --metrics under ddpc-run with 1 and 2
 * processes, and ddpc-bench's table, each plotted. */
TEST_T(plot_real_ddpc_train_and_bench_output, 120) {
    need_gnuplot();
    if (access(DATA "/train-images-idx3-ubyte.gz", R_OK) != 0)
        SKIP("Fashion-MNIST is not installed in " DATA " (apt-get install dataset-fashion-mnist)");
    const char *R = t_bin("ddpc-run");
    const char *m1 = t_tmp_path("1.jsonl"), *m2 = t_tmp_path("2.jsonl");
    for (int n = 1; n <= 2; n++) {
        int rc = run(60,
                     "%s --nproc-per-node=%d --master-port=%d %s --epochs 2 --max-batches 10 "
                     "--max-eval-batches 2 --log-every 0 --metrics %s 2>&1",
                     R, n, t_free_port_pair(), t_bin("ddpc-train"), n == 1 ? m1 : m2);
        CHECK_MSG(rc == 0, "ddpc-train x %d: rc=%d: %s", n, rc, out);
    }
    const char *tab = t_tmp_path("t.tab");
    int rc =
        run(60, "%s -o %s --table %s %s %s 2>&1", plot_bin(), t_tmp_path("train.png"), tab, m1, m2);
    CHECK_MSG(rc == 0, "rc=%d: %s", rc, out);
    const char *t = read_text(tab);
    CHECK_EQ(curve_points(t, 3, "1"), 2);
    CHECK_EQ(curve_points(t, 3, "2"), 2);
    const char *bt = t_tmp_path("bench.txt");
    rc = run(60,
             "%s --nproc-per-node=2 --master-port=%d %s allreduce -b 8 -e 64K -f 8 -n 3 -w 1 "
             "> %s 2>&1",
             R, t_free_port_pair(), t_bin("ddpc-bench"), bt);
    CHECK_MSG(rc == 0, "ddpc-bench: rc=%d: %s", rc, read_text(bt));
    rc = run(60, "%s -o %s --table %s %s 2>&1", plot_bin(), t_tmp_path("bench.png"), tab, bt);
    CHECK_MSG(rc == 0, "rc=%d: %s", rc, out);
    CHECK_EQ(curve_points(read_text(tab), 1, "bench"), 5); /* 8 B .. 32 KiB, x8 */
    t_tmp_remove();
}
