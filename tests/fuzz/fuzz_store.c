/*
 * fuzz_store.c — the rendezvous store's server on arbitrary client bytes.
 * One server runs in this process (restarted every 1000 inputs, so the keys
 * the inputs set do not pile up). Each input is one connection: unless the
 * first byte is odd, a valid handshake goes first; then the rest of the
 * input, then the client's end of the stream; then the client reads to the
 * end and resets the connection.
 * Promise checked: whatever a client sends, the server answers it or closes
 * that connection within a second, and keeps serving others: a well-behaved
 * client can then set and get a key.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ddpc/store.h"
#include "fuzz/fuzz.h"
#include "store/proto.h"

static ddpc_store_server *server;
static ddpc_store *probe; /* a well-behaved client, kept while the server lives */
static int port, inputs;

static int raw_connect(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0) fuzz_fail("socket: %s", strerror(errno));
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        /* interrupted (libFuzzer's -timeout alarm): the connect goes on; wait for it */
        int err = errno;
        socklen_t len = sizeof err;
        struct pollfd pf = {fd, POLLOUT, 0};
        if (err == EINTR) {
            for (int i = 0; i < 100 && poll(&pf, 1, 10) <= 0; i++) {}
            if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
        }
        if (err) fuzz_fail("cannot connect to the store: %s", strerror(err));
    }
    return fd;
}

/* Writes what the server will take; it may close early, which is fine. */
static void send_some(int fd, const uint8_t *p, size_t n) {
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k <= 0) return;
        p += k;
        n -= (size_t)k;
    }
}

int fuzz_store(const uint8_t *data, size_t size) {
    if (size == 0 || size > (1u << 16)) return 0;
    if (server && ++inputs % 1000 == 0) {
        ddpc_store_close(probe);
        ddpc_store_server_stop(server);
        probe = NULL;
        server = NULL;
    }
    if (!server) {
        if (ddpc_store_server_start("127.0.0.1", 0, &server) != DDPC_OK) fuzz_fail("server: %s", ddpc_last_error());
        port = ddpc_store_server_port(server);
    }
    int fd = raw_connect();
    if (!(data[0] & 1)) {
        unsigned char hs[8];
        put_u32(hs, STORE_MAGIC);
        put_u32(hs + 4, STORE_VERSION);
        send_some(fd, hs, sizeof hs);
    }
    send_some(fd, data + 1, size - 1);
    shutdown(fd, SHUT_WR);
    /* the server replies, then closes: read to the end, for a second at most */
    static char buf[1 << 16];
    struct pollfd pf = {fd, POLLIN, 0};
    for (int idle = 0;;) {
        int r = poll(&pf, 1, 10);
        if (r < 0 && errno == EINTR) continue; /* libFuzzer's -timeout alarm */
        if (r < 0 || idle >= 100) {
            int fds = 0;
            for (int k = 0; k < 65536; k++) fds += fcntl(k, F_GETFD) != -1;
            fuzz_fail("the server neither answered nor closed in 1 s (this process has %d open files)", fds);
        }
        if (r == 0) {
            idle++;
            continue;
        }
        idle = 0;
        ssize_t k = recv(fd, buf, sizeof buf, 0);
        if (k <= 0) break;
    }
    /* reset rather than close: a million inputs would otherwise fill the
     * port range with connections in TIME_WAIT */
    struct linger lg = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
    if (!probe && ddpc_store_connect("127.0.0.1", port, 2, &probe) != DDPC_OK)
        fuzz_fail("connect after: %s", ddpc_last_error());
    ddpc_store *c = probe;
    void *v = NULL;
    size_t n = 0;
    if (ddpc_store_set(c, "fuzz/probe", "ok", 2) != DDPC_OK || ddpc_store_get(c, "fuzz/probe", 2, &v, &n) != DDPC_OK ||
        n != 2 || memcmp(v, "ok", 2) != 0)
        fuzz_fail("the server stopped serving: %s", ddpc_last_error());
    free(v);
    return 0;
}

#ifdef DDPC_FUZZ_ENTRY_store
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_store(data, size); }
#endif
