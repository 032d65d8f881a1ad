/*
 * ddpc-plot — ddpc's numbers as pictures, drawn by gnuplot.
 *
 *   ddpc-plot [-o OUT.png] [--size WxH] [--title TEXT] [--script FILE]
 *             [--table FILE] [--gnuplot PATH] [[--label NAME] FILE]...
 *
 * Two kinds of input, told apart by their first line:
 *
 *   metrics  ddpc-train --metrics files, one JSON object per epoch. One PNG
 *            of four panels against the epoch: loss, train and test
 *            accuracy (%), samples/s; one series per run (a file that
 *            holds several runs, its epochs starting again, is split).
 *   tables   ddpc-bench's nccl-tests table, or a peer's table of the same
 *            columns (nccl-tests, bench/mpi_allreduce.c; ddpc-run's "[0]: "
 *            prefixes are skipped; the header line names the size, time
 *            and busbw columns). Two panels against the message size, on
 *            log axes: bus bandwidth (GB/s) and time (us); one series per
 *            file.
 *
 * A series is labelled by its file's name (without directory and
 * extension) or by --label. The numbers go into the script as data blocks,
 * so the script (--script) redraws the same picture on its own. With
 * --table gnuplot also writes down what it drew ("set table": a block per
 * curve, "# Curve title: ..." first), which is how tests count series.
 * This file only reads and writes text; gnuplot does every pixel.
 *
 * Exit status: 0 drawn; 1 an input could not be read or held no numbers,
 * gnuplot is missing or failed; 2 bad usage.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { KIND_NONE, KIND_METRICS, KIND_TABLE };

/* Columns of a series' rows. metrics: epoch, loss, train accuracy (%), test
 * accuracy (%), samples/s. tables: size (B), time (us), busbw (GB/s). A
 * number a row lacks is NaN (written "?", gnuplot's missing value). */
enum { M_EPOCH, M_LOSS, M_TRAIN, M_TEST, M_SPS, M_NCOL };
enum { T_SIZE, T_TIME, T_BUSBW, T_NCOL };
#define NCOL M_NCOL

typedef struct series {
    char label[256];
    double (*row)[NCOL]; /* (n, NCOL), owned */
    int n, cap;
} series;

typedef struct plot {
    const char *output, *title, *script, *table, *gnuplot;
    int width, height; /* 0: the kind's default */
    int kind;
    series *s; /* (ns,) owned */
    int ns;
} plot;

static void usage(FILE *f) {
    fprintf(f,
            "usage: ddpc-plot [options] [--label NAME] FILE [[--label NAME] FILE]...\n"
            "\n"
            "Draws one PNG with gnuplot from either kind of file (all FILEs of one kind):\n"
            "  ddpc-train --metrics files (a JSON line per epoch): loss, train and test\n"
            "    accuracy, and samples/s per epoch, a series per run (1 vs 2 vs 4 processes)\n"
            "  ddpc-bench tables, or a peer's table of the same columns (nccl-tests'):\n"
            "    bus bandwidth and time against message size, on log axes, a series per file\n"
            "\n"
            "  -o, --output FILE   the PNG (default ddpc-plot.png)\n"
            "  --size WxH          its size in pixels (default 1200x900 for metrics,\n"
            "                      1200x500 for tables)\n"
            "  --title TEXT        the title over the panels\n"
            "  --label NAME        the next FILE's name in the legend (default: its file name\n"
            "                      without directory and extension)\n"
            "  --script FILE       also write the gnuplot script there (it redraws the PNG)\n"
            "  --table FILE        also have gnuplot write down every curve it drew (set table)\n"
            "  --gnuplot PATH      the gnuplot to run (default: gnuplot on PATH)\n"
            "  -h, --help          this text\n"
            "\n"
            "Example:\n"
            "  ddpc-run --nproc-per-node=2 ddpc-train --epochs 3 --metrics 2proc.jsonl\n"
            "  ddpc-plot -o train.png 1proc.jsonl 2proc.jsonl\n"
            "Exit status: 0 drawn; 1 an input could not be read, or gnuplot is missing or\n"
            "failed; 2 bad usage. gnuplot: apt-get install gnuplot-nox.\n");
}

static void die_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die_usage(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ddpc-plot: error: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see ddpc-plot --help)\n");
    va_end(ap);
    exit(2);
}

/* "ddpc-plot: " + the message on stderr; returns 1 (the exit status). */
static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ddpc-plot: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    return 1;
}

/* ------------------------------------------------------------ reading */

/* A new, empty series labelled label (borrowed: copied). NULL when out of
 * memory. */
static series *add_series(plot *p, const char *label) {
    series *s = realloc(p->s, (size_t)(p->ns + 1) * sizeof *s);
    if (!s) return NULL;
    p->s = s;
    s = &p->s[p->ns++];
    memset(s, 0, sizeof *s);
    snprintf(s->label, sizeof s->label, "%s", label);
    return s;
}

/* Appends a row (NCOL numbers); 0 or -1 when out of memory. */
static int add_row(series *s, const double *v) {
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 64;
        double(*r)[NCOL] = realloc(s->row, (size_t)cap * sizeof *r);
        if (!r) return -1;
        s->row = r, s->cap = cap;
    }
    memcpy(s->row[s->n++], v, sizeof s->row[0]);
    return 0;
}

/* The file's name without directory and extension. */
static void default_label(const char *path, char *buf, size_t n) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    const char *dot = strrchr(b, '.');
    int len = dot && dot != b ? (int)(dot - b) : (int)strlen(b);
    snprintf(buf, n, "%.*s", len, b);
}

/* line without ddpc-run's "[rank]: " prefix and leading blanks. */
static char *skip_prefix(char *line) {
    char *p = line;
    if (*p == '[') {
        char *q = p + 1;
        while (*q >= '0' && *q <= '9') q++;
        if (q > p + 1 && q[0] == ']' && q[1] == ':') p = q + 2;
    }
    while (*p == ' ' || *p == '\t') p++;
    return p;
}

/* The number after "key": in a JSON object's text (ddpc-train's metrics
 * lines are flat but for phase_seconds, which follows the keys read here,
 * so the first match is the top-level one), or NaN. */
static double json_number(const char *line, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\"", key);
    const char *p = strstr(line, pat);
    if (!p) return NAN;
    p += strlen(pat);
    while (*p == ' ' || *p == '\t') p++;
    if (*p++ != ':') return NAN;
    char *end;
    double v = strtod(p, &end);
    return end == p ? NAN : v;
}

/* Reads a metrics file into one series per run (a run ends where the epoch
 * does not grow). 0, or 1 having said why. */
static int read_metrics(plot *p, FILE *f, const char *path, const char *label) {
    char *line = NULL;
    size_t cap = 0;
    int runs = 0, lineno = 0, rc = 0;
    series *s = NULL;
    double last_epoch = 0;
    while (getline(&line, &cap, f) > 0) {
        lineno++;
        char *t = skip_prefix(line);
        if (*t == '\n' || *t == 0) continue;
        if (*t != '{') {
            rc = fail("%s:%d: not a JSON line of ddpc-train --metrics: %.60s", path, lineno, t);
            break;
        }
        double v[NCOL] = { 0 };
        v[M_EPOCH] = json_number(t, "epoch");
        v[M_LOSS] = json_number(t, "loss");
        v[M_TRAIN] = 100 * json_number(t, "train_accuracy");
        v[M_TEST] = 100 * json_number(t, "test_accuracy");
        v[M_SPS] = json_number(t, "samples_per_s");
        if (isnan(v[M_EPOCH])) v[M_EPOCH] = s ? last_epoch + 1 : 0;
        if (!s || v[M_EPOCH] <= last_epoch) {
            char name[300];
            if (++runs == 1)
                snprintf(name, sizeof name, "%s", label);
            else
                snprintf(name, sizeof name, "%s #%d", label, runs);
            if (!(s = add_series(p, name))) {
                rc = fail("out of memory");
                break;
            }
        }
        last_epoch = v[M_EPOCH];
        if (add_row(s, v) != 0) {
            rc = fail("out of memory");
            break;
        }
    }
    free(line);
    if (!rc && runs == 0)
        rc = fail("%s: no metrics in it (ddpc-train --metrics FILE writes them)", path);
    return rc;
}

/* Index of word in the header's words (the '#' dropped), or -1; the first
 * one when repeated (nccl-tests' out-of-place columns come first). */
static int column_of(char *const *words, int n, const char *word) {
    for (int i = 0; i < n; i++)
        if (!strcmp(words[i], word)) return i;
    return -1;
}

/* Splits s in place on blanks into at most max words; returns how many. */
static int split(char *s, char **w, int max) {
    int n = 0;
    for (char *save = NULL, *t = strtok_r(s, " \t\r\n", &save); t && n < max;
         t = strtok_r(NULL, " \t\r\n", &save))
        w[n++] = t;
    return n;
}

/* A number, or NaN where the word is none ("N/A"). */
static double number(const char *w) {
    char *end;
    double v = strtod(w, &end);
    return end == w || *end ? NAN : v;
}

/* Reads a table: the header ("#  size ... time ... busbw") names the
 * columns (nccl-tests' positions when there is none); a row is a line
 * whose size column is a whole number. 0, or 1 having said why. */
static int read_table(plot *p, FILE *f, const char *path, const char *label) {
    char *line = NULL;
    size_t cap = 0;
    int c_size = 0, c_time = 5, c_bw = 7, rc = 0;
    series *s = add_series(p, label);
    if (!s) return fail("out of memory");
    while (getline(&line, &cap, f) > 0) {
        char *t = skip_prefix(line), *w[64];
        if (*t == '#') {
            int n = split(t + 1, w, 64);
            int a = column_of(w, n, "size"), b = column_of(w, n, "time"),
                c = column_of(w, n, "busbw");
            if (a >= 0 && b >= 0 && c >= 0) c_size = a, c_time = b, c_bw = c;
            continue;
        }
        int n = split(t, w, 64);
        if (n <= c_size || n <= c_time || n <= c_bw) continue;
        double size = number(w[c_size]);
        if (isnan(size) || size < 0 || size != (double)(long long)size) continue;
        double v[NCOL] = { size, number(w[c_time]), number(w[c_bw]) };
        if (add_row(s, v) != 0) {
            rc = fail("out of memory");
            break;
        }
    }
    free(line);
    if (!rc && s->n == 0)
        rc = fail("%s: no table rows in it (ddpc-bench's, or a table of the same columns: size, "
                  "time, busbw)",
                  path);
    return rc;
}

/* The kind of a file from its first line that says anything. */
static int kind_of(FILE *f) {
    char *line = NULL;
    size_t cap = 0;
    int kind = KIND_NONE;
    while (kind == KIND_NONE && getline(&line, &cap, f) > 0) {
        char *t = skip_prefix(line);
        if (*t == '{')
            kind = KIND_METRICS;
        else if (*t && *t != '\n')
            kind = KIND_TABLE;
    }
    free(line);
    rewind(f);
    return kind;
}

static int read_file(plot *p, const char *path, const char *label) {
    FILE *f = fopen(path, "r");
    if (!f) return fail("cannot read %s: %s", path, strerror(errno));
    char def[256];
    if (!label) default_label(path, def, sizeof def), label = def;
    int kind = kind_of(f), rc;
    if (kind == KIND_NONE) {
        rc = fail("%s is empty", path);
    } else if (p->kind != KIND_NONE && kind != p->kind) {
        rc = fail("%s is a %s, the files before it %s: plot one kind at a time", path,
                  kind == KIND_METRICS ? "metrics file" : "table",
                  p->kind == KIND_METRICS ? "metrics files" : "tables");
    } else {
        p->kind = kind;
        rc = kind == KIND_METRICS ? read_metrics(p, f, path, label) : read_table(p, f, path, label);
    }
    fclose(f);
    return rc;
}

/* ------------------------------------------------------------ the script */

/* s as a gnuplot single-quoted string (a quote doubled; nothing else is
 * special in one). */
static void put_str(FILE *f, const char *s) {
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'') fputc('\'', f);
        fputc(*s, f);
    }
    fputc('\'', f);
}

static void put_num(FILE *f, double v) {
    if (isnan(v))
        fputs(" ?", f);
    else
        fprintf(f, " %.9g", v);
}

/* One data block per series: $s0, $s1, ... */
static void put_data(FILE *f, const plot *p) {
    int ncol = p->kind == KIND_METRICS ? M_NCOL : T_NCOL;
    for (int i = 0; i < p->ns; i++) {
        fprintf(f, "# ");
        put_str(f, p->s[i].label);
        fprintf(f, "\n$s%d << EOD\n", i);
        for (int r = 0; r < p->s[i].n; r++) {
            for (int c = 0; c < ncol; c++) put_num(f, p->s[i].row[r][c]);
            fputc('\n', f);
        }
        fprintf(f, "EOD\n");
    }
}

/* A plot's curves: column col of every series against its column 1, as
 * linespoints, colour i for series i. */
static void put_curves(FILE *f, const plot *p, int col) {
    for (int i = 0; i < p->ns; i++) {
        fprintf(f, "  $s%d using 1:%d with linespoints lc %d pt 7 ps 0.6 title ", i, col + 1,
                i + 1);
        put_str(f, p->s[i].label);
        fprintf(f, "%s\n", i == p->ns - 1 ? "" : ", \\");
    }
}

/* Every panel's axes and plot, in multiplot order. */
static void put_panels(FILE *f, const plot *p) {
    if (p->kind == KIND_METRICS) {
        double last = 0;
        for (int i = 0; i < p->ns; i++)
            for (int r = 0; r < p->s[i].n; r++)
                if (p->s[i].row[r][M_EPOCH] > last) last = p->s[i].row[r][M_EPOCH];
        fprintf(f, "set xlabel 'epoch'\n%s", last <= 20 ? "set xtics 1\n" : "");
        fprintf(f, "set ylabel 'loss'\nset title 'training loss'\nplot \\\n");
        put_curves(f, p, M_LOSS);
        fprintf(f, "set ylabel 'accuracy (%%)'\nset title 'train accuracy'\nplot \\\n");
        put_curves(f, p, M_TRAIN);
        fprintf(f, "set title 'test accuracy'\nplot \\\n");
        put_curves(f, p, M_TEST);
        fprintf(f, "set ylabel 'samples/s'\nset format y '%%.1s%%c'\nset title 'throughput'\n"
                   "plot \\\n");
        put_curves(f, p, M_SPS);
        fprintf(f, "set format y '%%g'\n");
    } else {
        fprintf(f, "set logscale x 2\nset xlabel 'message size (bytes)'\nset format x '%%.0b%%B'\n"
                   "set logscale y 10\nset format y '%%g'\n"
                   "set ylabel 'bus bandwidth (GB/s)'\nset title 'bus bandwidth'\nplot \\\n");
        put_curves(f, p, T_BUSBW);
        fprintf(f, "set ylabel 'time (us)'\nset title 'time'\nplot \\\n");
        put_curves(f, p, T_TIME);
    }
}

/* The whole script: data, the PNG, then (with --table) the same panels
 * once more into gnuplot's table. */
static void put_script(FILE *f, const plot *p) {
    int w = p->width, h = p->height;
    if (!w) w = 1200, h = p->kind == KIND_METRICS ? 900 : 500;
    fprintf(f, "# written by ddpc-plot: %d series from %s\n", p->ns,
            p->kind == KIND_METRICS ? "ddpc-train --metrics" : "benchmark tables");
    fprintf(f, "set datafile missing '?'\n");
    put_data(f, p);
    fprintf(f,
            "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
            "  set terminal pngcairo size %d,%d noenhanced font ',10'\n"
            "} else {\n"
            "  set terminal png size %d,%d noenhanced\n"
            "}\n",
            w, h, w, h);
    fprintf(f, "set output ");
    put_str(f, p->output);
    fprintf(f, "\nset grid\nset key top left box opaque\n");
    fprintf(f, "set multiplot layout %s title ", p->kind == KIND_METRICS ? "2,2" : "1,2");
    put_str(f, p->title                  ? p->title
               : p->kind == KIND_METRICS ? "ddpc-train, per epoch"
                                         : "collective benchmark");
    fprintf(f, "\n");
    put_panels(f, p);
    fprintf(f, "unset multiplot\nset output\n");
    if (p->table) {
        fprintf(f, "# what was drawn, curve by curve\nset table ");
        put_str(f, p->table);
        fprintf(f, "\n");
        put_panels(f, p);
        fprintf(f, "unset table\n");
    }
}

/* ------------------------------------------------------------ gnuplot */

/* gnuplot's path when it can be run: name itself when it has a '/', else
 * the first match on PATH (static buffer); NULL when none. */
static const char *find_program(const char *name) {
    static char buf[4096];
    if (strchr(name, '/')) return access(name, X_OK) == 0 ? name : NULL;
    const char *path = getenv("PATH");
    if (!path) path = "/usr/bin:/bin";
    for (const char *d = path; *d;) {
        const char *e = strchr(d, ':');
        int len = e ? (int)(e - d) : (int)strlen(d);
        snprintf(buf, sizeof buf, "%.*s/%s", len ? len : 1, len ? d : ".", name);
        if (access(buf, X_OK) == 0) return buf;
        d += len + (e ? 1 : 0);
    }
    return NULL;
}

/* Runs gnuplot with the script on its stdin; 0 or 1 having said why. */
static int run_gnuplot(const plot *p, const char *prog) {
    int fd[2];
    if (pipe(fd) != 0) return fail("pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0) return fail("fork: %s", strerror(errno));
    if (pid == 0) {
        dup2(fd[0], 0);
        close(fd[0]);
        close(fd[1]);
        execl(prog, prog, (char *)NULL);
        fprintf(stderr, "ddpc-plot: cannot run %s: %s\n", prog, strerror(errno));
        _exit(127);
    }
    close(fd[0]);
    FILE *f = fdopen(fd[1], "w");
    if (!f) return fail("fdopen: %s", strerror(errno));
    put_script(f, p);
    fclose(f);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return fail("gnuplot failed (%s %d): see its message above; --script FILE keeps the "
                    "script",
                    WIFEXITED(st) ? "exit" : "signal",
                    WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    return 0;
}

/* ------------------------------------------------------------ main */

/* "--opt=value" or "--opt value": the value, or NULL when a is not opt. */
static const char *opt_value(int argc, char **argv, int *i, const char *opt) {
    size_t n = strlen(opt);
    const char *a = argv[*i];
    if (strncmp(a, opt, n) != 0) return NULL;
    if (a[n] == '=') return a + n + 1;
    if (a[n] != 0) return NULL;
    if (*i + 1 >= argc) die_usage("%s needs a value", opt);
    return argv[++*i];
}

int main(int argc, char **argv) {
    plot p = { .output = "ddpc-plot.png" };
    const char *label = NULL, *v;
    int nfiles = 0, rc = 0;
    /* 1. options; files are read as they come, each with the --label before it */
    for (int i = 1; i < argc && rc == 0; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "-o")) {
            if (i + 1 >= argc) die_usage("-o needs a value");
            p.output = argv[++i];
        } else if ((v = opt_value(argc, argv, &i, "--output"))) {
            p.output = v;
        } else if ((v = opt_value(argc, argv, &i, "--size"))) {
            char x;
            if (sscanf(v, "%d%c%d", &p.width, &x, &p.height) != 3 || (x != 'x' && x != 'X') ||
                p.width < 64 || p.height < 64 || p.width > 10000 || p.height > 10000)
                die_usage("--size=%s is not WxH (64 to 10000 pixels each)", v);
        } else if ((v = opt_value(argc, argv, &i, "--title"))) {
            p.title = v;
        } else if ((v = opt_value(argc, argv, &i, "--label"))) {
            label = v;
        } else if ((v = opt_value(argc, argv, &i, "--script"))) {
            p.script = v;
        } else if ((v = opt_value(argc, argv, &i, "--table"))) {
            p.table = v;
        } else if ((v = opt_value(argc, argv, &i, "--gnuplot"))) {
            p.gnuplot = v;
        } else if (a[0] == '-' && a[1] != 0) {
            die_usage("unknown option %s", a);
        } else {
            rc = read_file(&p, a, label);
            label = NULL;
            nfiles++;
        }
    }
    if (rc == 0 && nfiles == 0) die_usage("no FILE to plot");
    if (rc == 0 && label) die_usage("--label %s is not followed by a FILE", label);
    /* 2. the script, when asked for; 3. gnuplot draws */
    if (rc == 0 && p.script) {
        FILE *f = fopen(p.script, "w");
        if (!f) {
            rc = fail("cannot write --script %s: %s", p.script, strerror(errno));
        } else {
            put_script(f, &p);
            if (fclose(f) != 0)
                rc = fail("cannot write --script %s: %s", p.script, strerror(errno));
        }
    }
    const char *prog = NULL;
    if (rc == 0 && !(prog = find_program(p.gnuplot ? p.gnuplot : "gnuplot")))
        rc = p.gnuplot ? fail("--gnuplot %s cannot be run", p.gnuplot)
                       : fail("gnuplot is not installed (apt-get install gnuplot-nox), or give "
                              "its path with --gnuplot PATH%s",
                              p.script ? "; the script is written" : "");
    if (rc == 0) rc = run_gnuplot(&p, prog);
    if (rc == 0) {
        int points = 0;
        for (int i = 0; i < p.ns; i++) points += p.s[i].n;
        printf("ddpc-plot: wrote %s: %d series, %d %s\n", p.output, p.ns, points,
               p.kind == KIND_METRICS ? "epochs" : "sizes");
    }
    for (int i = 0; i < p.ns; i++) free(p.s[i].row);
    free(p.s);
    return rc;
}
