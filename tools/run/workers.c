/*
 * workers.c — this node's workers: their environment (torchrun's variables),
 * fork and exec in their own process groups, their output pipes read into
 * rank-prefixed lines (console.c) and log files, signals to them, the kill
 * grace, reaping, and the orphans a subreaper adopts.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/base.h"
#include "run.h"

extern char **environ;

/* ------------------------------------------------------------ output */

static void emit_line(job *J, worker *w, stream *s, const char *line, size_t len) {
    if (s->console) {
        char pre[32];
        snprintf(pre, sizeof pre, "[%d]: ", w->rank);
        console_line(s->out_fd, pre, line, len);
    }
    if (s->log_fd >= 0) {
        write_all(s->log_fd, line, len);
        write_all(s->log_fd, "\n", 1);
    }
    if (s == &w->err) {
        char *t = w->tail[w->tail_n % TAIL_LINES];
        snprintf(t, TAIL_LINE_CAP, "%.*s", (int)(len < TAIL_LINE_CAP ? len : TAIL_LINE_CAP - 1),
                 line);
        w->tail_n++;
    }
    (void)J;
}

/* A piece of a progress stream that ended with '\r': the progress line's
 * new state, on the terminal only. */
static void emit_update(worker *w, stream *s, const char *text, size_t len) {
    s->in_bar = 1;
    if (len == 0) return; /* "\rA\rB": the piece before the first '\r' */
    char pre[32];
    snprintf(pre, sizeof pre, "[%d]: ", w->rank);
    console_bar(s->out_fd, pre, text, len);
}

/* The end of a line (or of the stream) on a progress stream after updates:
 * the line is the progress line's final state (its last update when the
 * line is empty), written as an ordinary line, so logs get it once. */
static void end_updates(job *J, worker *w, stream *s, const char *line, size_t len) {
    s->in_bar = 0;
    size_t bl = 0;
    const char *last = console_bar_text(&bl);
    char final[1024];
    if (len == 0 && last) {
        len = bl < sizeof final ? bl : sizeof final;
        memcpy(final, last, len);
        line = final;
    }
    console_bar_drop();
    if (len) emit_line(J, w, s, line, len);
}

/* Emits the partial line left in s (the stream ends). */
static void stream_flush(job *J, worker *w, stream *s) {
    if (s->in_bar)
        end_updates(J, w, s, s->buf, s->n);
    else if (s->n)
        emit_line(J, w, s, s->buf, s->n);
    s->n = 0;
}

/* Emits the complete lines (and, on a progress stream, the updates) among
 * the n bytes just read into s. */
static void split_lines(job *J, worker *w, stream *s, size_t n) {
    size_t start = 0;
    for (size_t i = s->n - n; i < s->n; i++) {
        char c = s->buf[i];
        if (c == '\r' && s->progress)
            emit_update(w, s, s->buf + start, i - start);
        else if (c == '\n' && s->in_bar)
            end_updates(J, w, s, s->buf + start, i - start);
        else if (c == '\n')
            emit_line(J, w, s, s->buf + start, i - start);
        else
            continue;
        start = i + 1;
    }
    if (start == 0 && s->n == LINE_CAP) { /* an endless line: break it */
        emit_line(J, w, s, s->buf, s->n);
        start = s->n;
    }
    memmove(s->buf, s->buf + start, s->n - start);
    s->n -= start;
    if (s->in_bar && s->n) emit_update(w, s, s->buf, s->n); /* "\rA": A is shown before its end */
}

void stream_read(job *J, worker *w, stream *s) {
    for (int rounds = 0; rounds < 8 && s->fd >= 0; rounds++) {
        ssize_t n = read(s->fd, s->buf + s->n, LINE_CAP - s->n);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) return;
            n = 0;
        }
        if (n == 0) { /* EOF: flush a last unterminated line */
            stream_flush(J, w, s);
            close(s->fd);
            s->fd = -1;
            return;
        }
        s->n += (size_t)n;
        split_lines(J, w, s, (size_t)n);
    }
}

void workers_close_streams(job *J) {
    for (int i = 0; i < J->o->nproc; i++) {
        worker *w = &J->w[i];
        stream *ss[2] = { &w->out, &w->err };
        for (int k = 0; k < 2; k++) {
            if (ss[k]->fd >= 0) {
                stream_flush(J, w, ss[k]);
                close(ss[k]->fd);
                ss[k]->fd = -1;
            }
            if (ss[k]->log_fd >= 0) close(ss[k]->log_fd);
            ss[k]->log_fd = -1;
        }
    }
    console_bar_end();
}

/* ------------------------------------------------------------ start */

static int mkdir_p(const char *path) {
    char buf[PATH_MAX + 256];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
            *p = '/';
        }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
    return 0;
}

static int worker_streams(job *J, worker *w, int pout[2], int perr[2]) {
    opts *o = J->o;
    if (pipe2(pout, O_CLOEXEC) != 0 || pipe2(perr, O_CLOEXEC) != 0) {
        say("cannot create pipes for rank %d: %s", w->rank, strerror(errno));
        return -1;
    }
    fcntl(pout[0], F_SETFL, O_NONBLOCK);
    fcntl(perr[0], F_SETFL, O_NONBLOCK);
    int lr = w->local_rank;
    stream *ss[2] = { &w->out, &w->err };
    for (int k = 0; k < 2; k++) {
        stream *s = ss[k];
        s->fd = k ? perr[0] : pout[0];
        s->out_fd = k ? 2 : 1;
        s->n = 0;
        s->log_fd = -1;
        int bit = k ? 2 : 1;
        s->console = !(o->redirects[lr] & bit);
        s->progress = s->console && w->rank == 0 && console_progress();
        s->in_bar = 0;
        if (o->log_any && ((o->redirects[lr] | o->tee[lr]) & bit)) {
            char dir[PATH_MAX + 200], path[PATH_MAX + 240];
            snprintf(dir, sizeof dir, "%s/%s/attempt_%d/%d", o->log_dir, o->run_id, J->gen,
                     w->rank);
            if (mkdir_p(dir) != 0) {
                say("cannot create log directory %s: %s", dir, strerror(errno));
                return -1;
            }
            snprintf(path, sizeof path, "%s/%s.log", dir, k ? "stderr" : "stdout");
            s->log_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
            if (s->log_fd < 0) {
                say("cannot open log file %s: %s", path, strerror(errno));
                return -1;
            }
        }
    }
    return 0;
}

/* The variables ddpc-run sets (and removes from the inherited environment). */
static const char *const our_vars[] = { "RANK",
                                        "LOCAL_RANK",
                                        "WORLD_SIZE",
                                        "LOCAL_WORLD_SIZE",
                                        "GROUP_RANK",
                                        "GROUP_WORLD_SIZE",
                                        "ROLE_RANK",
                                        "ROLE_WORLD_SIZE",
                                        "ROLE_NAME",
                                        "LOCAL_WORLD_SIZE",
                                        "MASTER_ADDR",
                                        "MASTER_PORT",
                                        "TORCHELASTIC_RESTART_COUNT",
                                        "TORCHELASTIC_MAX_RESTARTS",
                                        "TORCHELASTIC_RUN_ID",
                                        "TORCHELASTIC_USE_AGENT_STORE",
                                        "TORCHELASTIC_ERROR_FILE",
                                        NULL };

/* ... and in a rank-table job (run_rank_table_env). */
static const char *const table_vars[] = { "RANK_TABLE_FILE", "RANK_ID", "RANK_SIZE", "DEVICE_ID",
                                          NULL };

static int is_our_var(const opts *o, const char *entry) {
    for (int t = 0; t < 2; t++) {
        const char *const *vars = t ? table_vars : our_vars;
        for (int i = 0; vars[i] && (!t || o->table); i++) {
            size_t n = strlen(vars[i]);
            if (!strncmp(entry, vars[i], n) && entry[n] == '=') return 1;
        }
    }
    return 0;
}

int build_base_env(job *J) {
    int n = 0;
    while (environ[n]) n++;
    J->envp = calloc((size_t)n + 40, sizeof *J->envp);
    if (!J->envp) return -1;
    for (int i = 0; i < n; i++)
        if (!is_our_var(J->o, environ[i])) J->envp[J->envn++] = environ[i];
    if (J->o->nproc > 1) {
        int told = 0;
        if (!getenv("OMP_NUM_THREADS")) {
            J->envp[J->envn++] = "OMP_NUM_THREADS=1";
            told = 1;
        }
        if (!getenv("OPENBLAS_NUM_THREADS")) {
            J->envp[J->envn++] = "OPENBLAS_NUM_THREADS=1";
            told = 1;
        }
        if (told)
            say("setting OMP_NUM_THREADS=1 and OPENBLAS_NUM_THREADS=1 (where unset) for each of "
                "the %d "
                "workers, to avoid overloading the system; tune them for your application",
                J->o->nproc);
    }
    return 0;
}

void workers_reset(job *J) {
    opts *o = J->o;
    for (int i = 0; i < o->nproc; i++) {
        worker *w = &J->w[i];
        w->local_rank = i;
        w->rank = o->rank_base + i;
        w->alive = 0;
        w->out.fd = w->err.fd = -1;
        w->out.log_fd = w->err.log_fd = -1;
    }
}

/* The CPU local rank lr is bound to (--bind-to), or -1 for none: the lr-th
 * CPU of ddpc-run's own affinity mask, where this node runs 2 or more
 * workers and they do not outnumber its CPUs (auto; one worker keeps every
 * CPU for its threads), or always (core, wrapping round). Two ranks
 * left to the kernel share one CPU for long spells on a busy machine (its
 * wake-ups put a woken rank beside its waker): then every message waits
 * for a switch between them (a 2-rank 8-byte allreduce 5.9 us against 1.8
 * on two CPUs, both at load 3.4 on 2 CPUs). */
static int worker_cpu(const job *J, int lr, int *ncpus) {
    const opts *o = J->o;
    cpu_set_t set;
    if (o->bind == BIND_NONE || sched_getaffinity(0, sizeof set, &set) != 0) return -1;
    int n = CPU_COUNT(&set);
    *ncpus = n;
    if (n < 1 || (o->bind == BIND_AUTO && (o->nproc < 2 || o->nproc > n))) return -1;
    for (int cpu = 0, k = 0; cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, &set) && k++ == lr % n) return cpu;
    return -1;
}

/* Fills mine with worker w's own variables (malloc'd; NULL where out of
 * memory); returns how many. */
static int worker_env(job *J, worker *w, char *mine[24]) {
    opts *o = J->o;
    int world = o->world, m = 0;
    mine[m++] = xasprintf("RANK=%d", w->rank);
    mine[m++] = xasprintf("LOCAL_RANK=%d", w->local_rank);
    mine[m++] = xasprintf("WORLD_SIZE=%d", world);
    mine[m++] = xasprintf("LOCAL_WORLD_SIZE=%d", o->nproc);
    mine[m++] = xasprintf("GROUP_RANK=%d", o->node_rank);
    mine[m++] = xasprintf("GROUP_WORLD_SIZE=%d", o->nnodes);
    mine[m++] = xasprintf("ROLE_RANK=%d", w->rank);
    mine[m++] = xasprintf("ROLE_WORLD_SIZE=%d", world);
    mine[m++] = xasprintf("ROLE_NAME=default");
    mine[m++] = xasprintf("MASTER_ADDR=%s", o->master_addr);
    mine[m++] = xasprintf("MASTER_PORT=%d", o->master_port);
    mine[m++] = xasprintf("TORCHELASTIC_RESTART_COUNT=%d", J->gen);
    mine[m++] = xasprintf("TORCHELASTIC_MAX_RESTARTS=%d", o->max_restarts);
    mine[m++] = xasprintf("TORCHELASTIC_RUN_ID=%s", o->run_id);
    mine[m++] = xasprintf("TORCHELASTIC_USE_AGENT_STORE=True");
    /* the flight recorders write beside the logs (unless the user chose) */
    if (o->log_any && !getenv("DDPC_TRACE_DIR"))
        mine[m++] = xasprintf("DDPC_TRACE_DIR=%s/%s/attempt_%d", o->log_dir, o->run_id, J->gen);
    /* rank 0 draws its progress bar for our terminal (as tqdm under torchrun) */
    if (J->progress_env && w->rank == 0) mine[m++] = xasprintf("DDPC_PROGRESS=1");
    /* bound to one CPU, a worker's own mask no longer says how many the
     * node's workers share */
    int ncpus = 0;
    if (worker_cpu(J, w->local_rank, &ncpus) >= 0 && !getenv("DDPC_CPUS"))
        mine[m++] = xasprintf("DDPC_CPUS=%d", ncpus);
    return run_rank_table_env(o, w->rank, mine, m);
}

/* The forked child: its own process group, default signals, its CPU (cpu
 * >= 0), the pipes as stdout and stderr, then the program. Never returns. */
static void worker_exec(job *J, pid_t parent, int pout[2], int perr[2], int cpu)
    __attribute__((noreturn));
static void worker_exec(job *J, pid_t parent, int pout[2], int perr[2], int cpu) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* the launcher dies: so does the worker */
    if (getppid() != parent) _exit(127);
    /* default dispositions: a signal ignored by whoever started us
     * (a background job's SIGINT) must still reach the workers */
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP) signal(sig, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (cpu >= 0) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        sched_setaffinity(0, sizeof one, &one); /* a refusal leaves it unbound */
    }
    dup2(pout[1], 1);
    dup2(perr[1], 2);
    execvpe(J->exec_argv[0], J->exec_argv, J->envp);
    dprintf(2, "ddpc-run: cannot execute '%s': %s\n", J->exec_argv[0], strerror(errno));
    _exit(127);
}

int worker_spawn(job *J, worker *w) {
    int pout[2] = { -1, -1 }, perr[2] = { -1, -1 };
    char *mine[24];
    int m = 0, rc = -1;
    if (worker_streams(J, w, pout, perr) != 0) goto done;
    m = worker_env(J, w, mine);
    int ok = 1;
    for (int i = 0; i < m; i++) ok &= mine[i] != NULL;
    for (int i = 0; i < m; i++) J->envp[J->envn + i] = mine[i];
    J->envp[J->envn + m] = NULL;
    pid_t parent = getpid();
    int ncpus, cpu = worker_cpu(J, w->local_rank, &ncpus);
    pid_t pid = ok ? fork() : -1;
    if (pid == 0) worker_exec(J, parent, pout, perr, cpu);
    if (pid < 0) {
        say("cannot start rank %d: %s", w->rank, ok ? strerror(errno) : "out of memory");
        goto done;
    }
    setpgid(pid, pid); /* also here: no window where a signal to the group misses it */
    w->pid = pid;
    w->alive = 1;
    w->status = 0;
    w->tail_n = 0;
    J->alive++;
    DDPC_TRACE(RUN, "started rank %d (local %d) as pid %d, %s %d", w->rank, w->local_rank, (int)pid,
               cpu >= 0 ? "on CPU" : "unbound", cpu);
    rc = 0;
done:
    for (int i = 0; i < m; i++) free(mine[i]);
    for (int k = 0; k < 2;
         k++) { /* the write ends are the child's; the read ends ours on success */
        int *p = k ? perr : pout;
        if (p[1] >= 0) close(p[1]);
        if (rc != 0 && p[0] >= 0) close(p[0]);
    }
    if (rc != 0) w->out.fd = w->err.fd = -1;
    return rc;
}

/* ------------------------------------------------------------ stop */

void signal_workers(job *J, int sig) {
    for (int i = 0; i < J->o->nproc; i++) {
        worker *w = &J->w[i];
        if (!w->alive) continue;
        kill(-w->pid, sig);
        kill(w->pid, sig);
    }
}

/* SIGTERM to every live worker now, SIGKILL after the grace period. */
/* Whether process pid catches SIGUSR1 (its SigCgt mask in /proc): ddpc's
 * recorder does; a program that does not would be killed by it. */
static int catches_sigusr1(pid_t pid) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    unsigned long long mask = 0;
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) found = sscanf(line, "SigCgt: %llx", &mask) == 1;
    fclose(f);
    return found && (mask >> (SIGUSR1 - 1) & 1);
}

void ask_for_records(job *J) {
    if (!J->o->log_any || getenv("DDPC_TRACE_DIR") || !J->alive) return;
    int asked = 0;
    for (int i = 0; i < J->o->nproc; i++) /* the worker only, not its group */
        if (J->w[i].alive && catches_sigusr1(J->w[i].pid) && kill(J->w[i].pid, SIGUSR1) == 0)
            asked++;
    if (asked) ddpc__sleep(0.5); /* a record is a few hundred KB at most */
}

void stop_workers(job *J) {
    if (J->kill_at) return;
    signal_workers(J, SIGTERM);
    J->kill_at = ddpc__now() + (J->o->grace > 0 ? J->o->grace : 0.001);
}

/* Reaps every exited child (workers and orphans adopted as subreaper).
 * Returns the index of the first worker that failed in this call, or -1. */
int reap(job *J) {
    int first_fail = -1;
    for (;;) {
        int st;
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid <= 0) break;
        for (int i = 0; i < J->o->nproc; i++) {
            worker *w = &J->w[i];
            if (w->pid != pid || !w->alive) continue;
            w->alive = 0;
            w->status = st;
            w->t_exit = ddpc__now();
            J->alive--;
            kill(-pid, SIGKILL); /* whatever it left running in its group */
            int failed = !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
            DDPC_TRACE(RUN, "rank %d (pid %d) ended: status 0x%x", w->rank, (int)pid, st);
            /* of the failures reaped together, one killed by a signal comes
             * first: the others' exits are most often their answer to it */
            if (failed &&
                (first_fail < 0 || (WIFSIGNALED(st) && !WIFSIGNALED(J->w[first_fail].status))))
                first_fail = i;
        }
    }
    return first_fail;
}

void handle_signals(job *J) {
    struct signalfd_siginfo si[16];
    for (;;) {
        ssize_t n = read(J->sfd, si, sizeof si);
        if (n <= 0) break;
        for (int i = 0; i < (int)(n / (ssize_t)sizeof si[0]); i++) {
            int sig = (int)si[i].ssi_signo;
            if (sig == SIGCHLD) continue; /* reap() runs in the loop */
            char sn[32];
            if (!J->got_signal) {
                J->got_signal = sig;
                say("got %s: forwarding it to the workers and stopping the job",
                    sig_name(sig, sn, sizeof sn));
                signal_workers(J, sig);
                J->kill_at = ddpc__now() + (J->o->grace > 0 ? J->o->grace : 0.001);
            } else {
                say("got %s again: killing the workers now", sig_name(sig, sn, sizeof sn));
                signal_workers(J, SIGKILL);
            }
        }
    }
}

void reap_orphans(void) {
    pid_t me = getpid();
    for (int round = 0; round < 3; round++) {
        DIR *d = opendir("/proc");
        int found = 0;
        if (!d) return;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
            char path[300], buf[512];
            snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            if (fd < 0) continue;
            ssize_t n = read(fd, buf, sizeof buf - 1);
            close(fd);
            if (n <= 0) continue;
            buf[n] = 0;
            char *rp = strrchr(buf, ')');
            int ppid = 0;
            char state;
            if (!rp || sscanf(rp + 1, " %c %d", &state, &ppid) != 2 || ppid != me) continue;
            kill((pid_t)atoi(e->d_name), SIGKILL);
            found = 1;
        }
        closedir(d);
        if (!found) break;
        for (int k = 0; k < 100; k++) {
            int st;
            pid_t p = waitpid(-1, &st, WNOHANG);
            if (p < 0) break;
            if (p == 0) ddpc__sleep(0.002);
        }
    }
    while (waitpid(-1, NULL, WNOHANG) > 0) {}
}
