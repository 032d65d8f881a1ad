/*
 * fuzz_store.c — the rendezvous store's server on arbitrary client bytes.
 * One server runs in this process (restarted every 1000 inputs, so the keys
 * the inputs set do not pile up). Each input is one connection: unless the
 * first byte is odd, a valid handshake goes first; then the rest of the
 * input, then the client's end of the stream.
 * Promise checked: whatever a client sends, the server answers it or closes
 * that connection within a second, and keeps serving others: a well-behaved
 * client can then set and get a key.
 */
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ddpc/store.h"
#include "fuzz/fuzz.h"
#include "store/proto.h"

static ddpc_store_server *server;
static int port, inputs;

static int raw_connect(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) fuzz_fail("cannot connect to the store");
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
        ddpc_store_server_stop(server);
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
    char buf[4096];
    struct pollfd pf = {fd, POLLIN, 0};
    for (int spins = 0;; spins++) {
        if (spins > 100 || poll(&pf, 1, 10) < 0) fuzz_fail("the server neither answered nor closed in 1 s");
        if (!(pf.revents & (POLLIN | POLLHUP | POLLERR))) continue;
        ssize_t k = recv(fd, buf, sizeof buf, 0);
        if (k <= 0) break;
    }
    close(fd);
    ddpc_store *c;
    if (ddpc_store_connect("127.0.0.1", port, 2, &c) != DDPC_OK) fuzz_fail("connect after: %s", ddpc_last_error());
    void *v = NULL;
    size_t n = 0;
    if (ddpc_store_set(c, "fuzz/probe", "ok", 2) != DDPC_OK || ddpc_store_get(c, "fuzz/probe", 2, &v, &n) != DDPC_OK ||
        n != 2 || memcmp(v, "ok", 2) != 0)
        fuzz_fail("the server stopped serving: %s", ddpc_last_error());
    free(v);
    ddpc_store_close(c);
    return 0;
}

#ifdef DDPC_FUZZ_ENTRY_store
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_store(data, size); }
#endif
