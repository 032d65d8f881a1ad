/*
 * shm_segment.c — the shared-memory transport's set-up: the segment two
 * ranks of one host share (two byte rings, shm.c moves the bytes), made and
 * mapped over the pair's TCP connection, which the connection keeps as
 * doorbell and liveness channel.
 *
 * Whether a pair can have it (shm_can_connect): same host id, both
 * DDPC_SHM=1, the same DDPC_SHM_BYTES; where the settings differ, a
 * warning and TCP.
 *
 * Set-up, over the pair's TCP connection (comm/link.c drives it, after the
 * hello; which end offers is link.c's rule):
 *   1. the offering rank (setup: offer) creates a segment under an
 *      unguessable name (O_CREAT|O_EXCL, mode 0600), reserves its pages
 *      (posix_fallocate: a full /dev/shm is an error now, never a SIGBUS
 *      later), maps it and sends {magic, version, capacity, name} -- or a
 *      refusal saying why;
 *   2. the other rank (connect without res: join) opens and maps it,
 *      checks its size, owner and headers, and answers yes or no (saying
 *      why);
 *   3. the offering rank (connect with res: finish) reads the answer and
 *      removes the name, on every path, so nothing is left in /dev/shm even
 *      when a rank is killed later.
 * A rank killed between steps 1 and 3 (milliseconds) leaves its name behind;
 * the first offer of each process removes such names of processes that are
 * gone (sweep_stale).
 * A local failure is a warning and the pair stays on TCP; only a failure of
 * the TCP exchange itself (peer lost, deadline, abort) is an error.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "transport/shm_impl.h"

/* ------------------------------------------------------------ segments */

static size_t seg_len(uint64_t cap) { return SHM_DATA_OFF + 2 * (size_t)cap; }

/* Capacity of each ring for a DDPC_SHM_BYTES value: a multiple of 64, so
 * the second ring's data stays cache-line aligned. */
static uint64_t ring_cap(size_t bytes) { return ((uint64_t)bytes + 63) & ~(uint64_t)63; }

static void random_name(char name[64]) {
    unsigned char r[16];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
        /* no entropy source (very old kernel): O_EXCL still makes the name ours */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t a = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30),
                 b = (uint64_t)(uintptr_t)name;
        memcpy(r, &a, 8);
        memcpy(r + 8, &b, 8);
    }
    int n = snprintf(name, 64, "/ddpc-%d-", (int)getpid());
    for (int i = 0; i < 16 && n + 2 < 64; i++, n += 2) snprintf(name + n, 3, "%02x", r[i]);
}

static void rings_init(char *base, uint64_t cap) {
    memset(base, 0, SHM_DATA_OFF);
    for (int i = 0; i < 2; i++) {
        shm_ring *r = (shm_ring *)base + i;
        r->magic = SHM_MAGIC;
        r->version = SHM_VERSION;
        r->capacity = cap;
    }
}

/* Removes the segments in /dev/shm that a process of this user made and
 * did not live to remove ("ddpc-<pid>-<32 hex digits>", <pid> gone). A pid
 * taken again by another process keeps its name there; one of another pid
 * namespace sharing this /dev/shm would lose a name in the milliseconds it
 * exists, and that pair would fall back to TCP with a warning. */
static void sweep_stale(void) {
    DIR *d = opendir("/dev/shm");
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        int pid, end = 0;
        if (sscanf(e->d_name, "ddpc-%d-%n", &pid, &end) != 1 || end == 0 || pid <= 0 ||
            pid == (int)getpid() || strlen(e->d_name + end) != 32 ||
            strspn(e->d_name + end, "0123456789abcdef") != 32)
            continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
            st.st_uid != geteuid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        char name[300];
        snprintf(name, sizeof name, "/%s", e->d_name);
        if (shm_unlink(name) == 0)
            DDPC_INFO(SHM, "removed /dev%s, left by process %d, which is gone", name, pid);
    }
    closedir(d);
}
static pthread_once_t sweep_once = PTHREAD_ONCE_INIT;

/* Makes, reserves and maps a segment of two rings of cap bytes into p. On
 * failure writes the reason into why and leaves nothing behind. */
static int seg_create(uint64_t cap, shm_pending *p, char *why, size_t wlen) {
    size_t len = seg_len(cap);
    int fd = -1;
    for (int tries = 0; tries < 8; tries++) {
        random_name(p->name);
        fd = shm_open(p->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd >= 0 || errno != EEXIST) break;
    }
    if (fd < 0) {
        snprintf(why, wlen, "shm_open(%s): %s", p->name, strerror(errno));
        return -1;
    }
    int err = 0;
    const char *what = "ftruncate";
    if (ftruncate(fd, (off_t)len) != 0) err = errno;
    if (!err) {
        what = "posix_fallocate";
        do err = posix_fallocate(fd, 0, (off_t)len);
        while (err == EINTR);
    }
    void *m = MAP_FAILED;
    if (!err) {
        what = "mmap";
        m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
        if (m == MAP_FAILED) err = errno;
    }
    close(fd);
    if (err) {
        snprintf(why, wlen, "%s of %zu bytes for %s: %s", what, len, p->name, strerror(err));
        shm_unlink(p->name);
        return -1;
    }
    p->base = m;
    p->len = len;
    p->cap = cap;
    rings_init(p->base, cap);
    return 0;
}

/* Opens and maps the segment an offer names; checks name, owner, size and
 * headers. Returns the mapping or NULL with the reason in why. */
static char *seg_open(const shm_offer_msg *o, char *why, size_t wlen) {
    if (strncmp(o->name, "/ddpc-", 6) != 0 || !memchr(o->name, '\0', sizeof o->name) ||
        strchr(o->name + 1, '/')) {
        snprintf(why, wlen, "the offered segment name is malformed");
        return NULL;
    }
    size_t len = seg_len(o->capacity);
    int fd = shm_open(o->name, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(why, wlen, "shm_open(%s): %s", o->name, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_uid != geteuid() || (size_t)st.st_size != len) {
        snprintf(why, wlen, "%s is not the segment offered (size %lld, want %zu; owner %d)",
                 o->name, (long long)st.st_size, len, (int)st.st_uid);
        close(fd);
        return NULL;
    }
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    int err = errno;
    close(fd);
    if (m == MAP_FAILED) {
        snprintf(why, wlen, "mmap of %zu bytes of %s: %s", len, o->name, strerror(err));
        return NULL;
    }
    for (int i = 0; i < 2; i++) {
        const shm_ring *r = (const shm_ring *)m + i;
        if (r->magic != SHM_MAGIC || r->version != SHM_VERSION || r->capacity != o->capacity) {
            snprintf(why, wlen, "%s has a bad ring header (magic 0x%x version %u capacity %llu)",
                     o->name, r->magic, r->version, (unsigned long long)r->capacity);
            munmap(m, len);
            return NULL;
        }
    }
    return m;
}

/* A connection over mapping base (ownership transferred); creator = 1 for
 * the side that writes ring 0. Takes a duplicate of tcp's socket. */
static ddpc_status conn_make(ddpc__conn *tcp, char *base, size_t len, uint64_t cap, int creator,
                             const char *peer, ddpc__conn **out) {
    int fd = fcntl(ddpc__transport_tcp.poll_fd(tcp), F_DUPFD_CLOEXEC, 0);
    ddpc__conn *c = fd >= 0 ? calloc(1, sizeof *c) : NULL;
    if (!c) {
        int err = errno;
        if (fd >= 0) close(fd);
        munmap(base, len);
        return ddpc__err_errno(DDPC_ERR_SYSTEM, err,
                               "shm: no descriptor or memory for a connection");
    }
    shm_ring *r = (shm_ring *)base;
    c->fd = fd;
    c->base = base;
    c->len = len;
    c->cap = cap;
    c->tx = creator ? &r[0] : &r[1];
    c->rx = creator ? &r[1] : &r[0];
    c->txd = base + SHM_DATA_OFF + (creator ? 0 : cap);
    c->rxd = base + SHM_DATA_OFF + (creator ? cap : 0);
    c->copy_policy = COPY_AUTO;
    snprintf(c->peer_name, sizeof c->peer_name, "%s", peer);
    *out = c;
    return DDPC_OK;
}

/* ------------------------------------------------------------ set-up */

static void pending_free(shm_pending *p);

/* Step 1: creates the segment and sends the offer (or a refusal, warned:
 * *pending = NULL). */
static ddpc_status offer(ddpc__conn *tcp, const char *peer, size_t ring_bytes, double deadline,
                         int abort_fd, shm_pending **pending) {
    *pending = NULL;
    shm_offer_msg o;
    memset(&o, 0, sizeof o);
    o.magic = SHM_MAGIC;
    o.version = SHM_VERSION;
    o.pid = (int32_t)getpid();
    o.capacity = ring_cap(ring_bytes);
    pthread_once(&sweep_once, sweep_stale);
    shm_pending *p = calloc(1, sizeof *p);
    if (!p)
        snprintf(o.why, sizeof o.why, "out of memory");
    else if (seg_create(o.capacity, p, o.why, sizeof o.why) != 0) {
        free(p);
        p = NULL;
    }
    if (p) {
        o.ok = 1;
        snprintf(o.name, sizeof o.name, "%s", p->name);
    }
    ddpc_status s = ddpc__transport_tcp.send_full(tcp, &o, sizeof o, deadline, abort_fd);
    if (s != DDPC_OK) {
        pending_free(p);
        return ddpc__err_wrap(s, "sending a shared-memory offer");
    }
    if (!p)
        DDPC_WARN(SHM,
                  "no shared memory with %s on this host (%s); using TCP to it "
                  "(DDPC_SHM=0 uses TCP without trying)",
                  peer, o.why);
    *pending = p;
    return DDPC_OK;
}

/* Step 2: reads the offer, maps the segment and answers; *out = the shm
 * connection, or NULL when either side could not (warned). */
static ddpc_status join(ddpc__conn *tcp, const char *peer, size_t ring_bytes, double deadline,
                        int abort_fd, ddpc__conn **out) {
    *out = NULL;
    shm_offer_msg o;
    DDPC_CHECK(ddpc__transport_tcp.recv_full(tcp, &o, sizeof o, deadline, abort_fd));
    if (o.magic != SHM_MAGIC || o.version != SHM_VERSION)
        return ddpc__err(DDPC_ERR_PROTOCOL,
                         "unexpected shared-memory offer (magic 0x%x version %u)", o.magic,
                         o.version);
    o.name[sizeof o.name - 1] = '\0';
    o.why[sizeof o.why - 1] = '\0';
    shm_answer_msg a;
    memset(&a, 0, sizeof a);
    a.magic = SHM_MAGIC;
    a.version = SHM_VERSION;
    char *m = NULL;
    if (!o.ok)
        snprintf(a.why, sizeof a.why, "the peer offered none: %.130s", o.why);
    else if (o.capacity != ring_cap(ring_bytes))
        snprintf(a.why, sizeof a.why,
                 "the peer's rings hold %llu bytes, this rank's DDPC_SHM_BYTES=%zu",
                 (unsigned long long)o.capacity, ring_bytes);
    else
        m = seg_open(&o, a.why, sizeof a.why);
    a.ok = m != NULL;
    ddpc_status s = ddpc__transport_tcp.send_full(tcp, &a, sizeof a, deadline, abort_fd);
    if (s != DDPC_OK) {
        if (m) munmap(m, seg_len(o.capacity));
        return ddpc__err_wrap(s, "answering a shared-memory offer");
    }
    if (!m) {
        if (o.ok) /* the creator's side warned itself when it refused */
            DDPC_WARN(SHM,
                      "no shared memory with %s on this host (%s); using TCP to it "
                      "(DDPC_SHM=0 uses TCP without trying)",
                      peer, a.why);
        return DDPC_OK;
    }
    return conn_make(tcp, m, seg_len(o.capacity), o.capacity, 0, peer, out);
}

/* Step 3: reads the answer and removes the segment's name; *out as for
 * join. Consumes p (NULL included) on every path. */
static ddpc_status finish(shm_pending *p, ddpc__conn *tcp, const char *peer, double deadline,
                          int abort_fd, ddpc__conn **out) {
    *out = NULL;
    shm_answer_msg a;
    ddpc_status s = ddpc__transport_tcp.recv_full(tcp, &a, sizeof a, deadline, abort_fd);
    if (p) shm_unlink(p->name); /* both sides have it mapped, or never will */
    if (s == DDPC_OK && (a.magic != SHM_MAGIC || a.version != SHM_VERSION))
        s = ddpc__err(DDPC_ERR_PROTOCOL, "unexpected shared-memory answer (magic 0x%x version %u)",
                      a.magic, a.version);
    if (s != DDPC_OK || !p || !a.ok) {
        a.why[sizeof a.why - 1] = '\0';
        if (s == DDPC_OK && p)
            DDPC_WARN(SHM,
                      "no shared memory with %s on this host (%s said: %s); using TCP to it "
                      "(DDPC_SHM=0 uses TCP without trying)",
                      peer, peer, a.why);
        pending_free(p);
        return s == DDPC_OK ? DDPC_OK
                            : ddpc__err_wrap(s, "reading the answer to a shared-memory offer");
    }
    s = conn_make(tcp, p->base, p->len, p->cap, 1, peer, out);
    free(p);
    return s;
}

/* setup's res when this side refused (warned): finish reads the answer
 * and the pair stays on TCP. */
static shm_pending refused;

/* Unmaps and removes an offered segment that will not be finished. */
static void pending_free(shm_pending *p) {
    if (!p || p == &refused) return;
    shm_unlink(p->name); /* ENOENT when finish removed it already */
    munmap(p->base, p->len);
    free(p);
}

/* ------------------------------------------------------------ the table's */

int ddpc__shm_can_connect(const ddpc__pair *pair) {
    const ddpc__endpoint *me = pair->self, *pe = pair->peer;
    if (strcmp(pe->host, me->host) != 0) return 0;
    if (!me->shm || !pe->shm) {
        if (me->shm)
            DDPC_WARN(
                SHM, "rank %d: rank %d on this host has DDPC_SHM=0 (this rank: 1); using TCP to it",
                pair->rank, pair->peer_rank);
        return 0;
    }
    if (pe->shm_bytes != me->shm_bytes) {
        DDPC_WARN(SHM,
                  "rank %d: rank %d on this host has DDPC_SHM_BYTES=%ld, this rank %ld; using TCP "
                  "to it (set the same value on every rank)",
                  pair->rank, pair->peer_rank, pe->shm_bytes, me->shm_bytes);
        return 0;
    }
    return 1;
}

ddpc_status ddpc__shm_setup(const ddpc__pair *pair, ddpc__conn *base, double deadline, int abort_fd,
                            void **res) {
    shm_pending *p = NULL;
    ddpc_status s = offer(base, pair->name, (size_t)pair->self->shm_bytes, deadline, abort_fd, &p);
    *res = s == DDPC_OK && !p ? &refused : p;
    return s;
}

ddpc_status ddpc__shm_connect(const ddpc__pair *pair, ddpc__conn **conns, int n, void *res,
                              double deadline, int abort_fd, ddpc__conn **out,
                              const ddpc__transport **used) {
    ddpc__conn *tcp = conns[0], *sc = NULL;
    for (int k = 1; k < n; k++) ddpc__transport_tcp.close(conns[k]);
    *out = NULL;
    *used = &ddpc__transport_tcp;
    ddpc_status s =
        res ? finish(res == &refused ? NULL : res, tcp, pair->name, deadline, abort_fd, &sc)
            : join(tcp, pair->name, (size_t)pair->self->shm_bytes, deadline, abort_fd, &sc);
    if (s != DDPC_OK) {
        ddpc__transport_tcp.close(tcp);
        return s;
    }
    if (!sc) { /* warned: the pair stays on TCP */
        *out = tcp;
        return DDPC_OK;
    }
    sc->copy_policy =
        pair->shm_copy == COPY_CACHED || pair->shm_copy == COPY_STREAM ? pair->shm_copy : COPY_AUTO;
    ddpc__transport_tcp.close(tcp); /* sc holds its own duplicate of the socket */
    *out = sc;
    *used = &ddpc__transport_shm;
    return DDPC_OK;
}

void ddpc__shm_free(void *res) { pending_free(res); }
