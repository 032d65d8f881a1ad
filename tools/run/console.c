/*
 * console.c — everything ddpc-run writes to its terminal: its own messages
 * ("ddpc-run: ..."), the workers' lines with their rank prefix (each in one
 * write, so lines never interleave), and rank 0's progress line.
 *
 * The progress line exists only when ddpc-run's stderr is a terminal: rank
 * 0's updates ('\r'-terminated pieces, as tqdm and ddpc-train write them)
 * are drawn over each other on one line; before any other line is written
 * the progress line is cleared, and it is drawn again after, so that it
 * stays below the log. Log files never see it (workers.c decides what is a
 * line and what is an update).
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "run.h"

#define BAR_CAP 1024

static struct {
    int on;             /* progress lines may be drawn */
    int fd;             /* where the shown one is; -1 = none shown */
    char text[BAR_CAP]; /* prefix + the last update */
    size_t n;
    size_t prefix_n;
} bar = { 0, -1, { 0 }, 0, 0 };

void write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return; /* a closed console is not the job's problem */
        p += w;
        n -= (size_t)w;
    }
}

char *xasprintf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0) s = NULL;
    va_end(ap);
    return s;
}

const char *sig_name(int sig, char *buf, size_t n) {
    const char *abbr = sigabbrev_np(sig);
    if (abbr)
        snprintf(buf, n, "SIG%s", abbr);
    else
        snprintf(buf, n, "signal %d", sig);
    return buf;
}

void console_progress_on(void) { bar.on = 1; }
int console_progress(void) { return bar.on; }

/* The terminal's width, so that a progress line never wraps ('\r' only
 * goes back to the start of the last row). */
static size_t columns(int fd) {
    struct winsize ws;
    if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1) return ws.ws_col;
    return 80;
}

/* Appends the progress line's redraw ("prefix text", erasing the rest of
 * the row) to b at *n; b has room for BAR_CAP + 8 more bytes. */
static void add_bar(char *b, size_t *n) {
    size_t len = bar.n, cols = columns(bar.fd);
    if (len > cols - 1) len = cols - 1;
    memcpy(b + *n, bar.text, len);
    *n += len;
    memcpy(b + *n, "\033[K", 3);
    *n += 3;
}

/* Writes the n bytes of text (whole lines) to fd in one write: the shown
 * progress line is cleared first and drawn again after. */
static void write_lines(int fd, const char *text, size_t n) {
    if (bar.fd < 0) {
        write_all(fd, text, n);
        return;
    }
    char stackbuf[16384],
        *b = n + BAR_CAP + 16 <= sizeof stackbuf ? stackbuf : malloc(n + BAR_CAP + 16);
    if (!b) return;
    size_t k = 0;
    memcpy(b, "\r\033[K", 4);
    k = 4;
    memcpy(b + k, text, n);
    k += n;
    add_bar(b, &k);
    write_all(fd, b, k);
    if (b != stackbuf) free(b);
}

void say(const char *fmt, ...) {
    char buf[8192];
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(buf, sizeof buf, "ddpc-run: ");
    n += vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof buf - 1) n = (int)sizeof buf - 2;
    buf[n++] = '\n';
    write_lines(2, buf, (size_t)n);
}

void console_line(int fd, const char *prefix, const char *line, size_t len) {
    size_t pn = strlen(prefix);
    char stackbuf[8192], *b = len + pn + 1 <= sizeof stackbuf ? stackbuf : malloc(len + pn + 1);
    if (!b) return;
    memcpy(b, prefix, pn);
    memcpy(b + pn, line, len);
    b[pn + len] = '\n';
    write_lines(fd, b, pn + len + 1); /* one write: lines never interleave */
    if (b != stackbuf) free(b);
}

void console_bar(int fd, const char *prefix, const char *text, size_t len) {
    if (!bar.on) return;
    size_t pn = strlen(prefix);
    if (pn + len > BAR_CAP) len = BAR_CAP - pn;
    if (bar.fd == fd && bar.n == pn + len && !memcmp(bar.text, prefix, pn) &&
        !memcmp(bar.text + pn, text, len))
        return; /* shown already (drawn before its '\r' came) */
    memcpy(bar.text, prefix, pn);
    memcpy(bar.text + pn, text, len);
    bar.n = pn + len;
    bar.prefix_n = pn;
    bar.fd = fd;
    char b[BAR_CAP + 16];
    size_t k = 1;
    b[0] = '\r';
    add_bar(b, &k);
    write_all(fd, b, k);
}

const char *console_bar_text(size_t *len) {
    if (bar.fd < 0) return NULL;
    *len = bar.n - bar.prefix_n;
    return bar.text + bar.prefix_n;
}

void console_bar_drop(void) {
    if (bar.fd < 0) return;
    write_all(bar.fd, "\r\033[K", 4);
    bar.fd = -1;
}

void console_bar_end(void) {
    if (bar.fd < 0) return;
    write_all(bar.fd, "\n", 1);
    bar.fd = -1;
}
