/*
 * fuzz_store.c — the rendezvous store's server on arbitrary client bytes.
 * One server runs in this process (restarted every 1000 inputs, so the keys
 * the inputs set do not pile up). Each input is one connection: unless the
 * first byte is odd, a valid handshake goes first; then the rest of the
 * input (without the handshake, a first byte below 9 makes it a PyTorch
 * TCPStore client: the torch_* seeds), then the client's end of the stream;
 * then the client reads to the end and resets the connection.
 * Promise checked: whatever a client sends, the server answers it or closes
 * that connection within a second, and keeps serving others: a well-behaved
 * client of either protocol can then set and get a key.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/base.h"
#include "base/sock.h"
#include "ddpc/store.h"
#include "fuzz/fuzz.h"
#include "store/proto.h"

static ddpc_store_server *server;
static ddpc_store *probe, *tprobe; /* well-behaved clients (ddpc's, TCPStore's protocol),
                                     kept while the server lives */
static int port, inputs;

int fuzz_store(const uint8_t *data, size_t size) {
    if (size == 0 || size > (1u << 16)) return 0;
    if (server && ++inputs % 1000 == 0) {
        ddpc_store_destroy(probe);
        ddpc_store_destroy(tprobe);
        ddpc_store_server_destroy(server);
        probe = tprobe = NULL;
        server = NULL;
    }
    if (!server) {
        if (ddpc_store_server_create("127.0.0.1", 0, &server) != DDPC_OK)
            fuzz_fail("server: %s", ddpc_last_error());
        port = ddpc_store_server_port(server);
    }
    int fd = -1;
    if (ddpc__sock_connect("127.0.0.1", port, ddpc__deadline_in(2), &fd) != DDPC_OK)
        fuzz_fail("cannot connect to the store: %s", ddpc_last_error());
    /* the server may close early (a bad frame): a failed write is no fault */
    if (!(data[0] & 1)) {
        unsigned char hs[8];
        put_u32(hs, STORE_MAGIC);
        put_u32(hs + 4, STORE_VERSION);
        ddpc__sock_write_full(fd, hs, sizeof hs, ddpc__deadline_in(1), -1);
    }
    ddpc__sock_write_full(fd, data + 1, size - 1, ddpc__deadline_in(1), -1);
    shutdown(fd, SHUT_WR);
    /* the server replies, then closes: read to the end, for a second at most */
    static char buf[1 << 16];
    struct pollfd pf = { fd, POLLIN, 0 };
    for (int idle = 0;;) {
        int r = poll(&pf, 1, 10);
        if (r < 0 && errno == EINTR) continue; /* libFuzzer's -timeout alarm */
        if (r < 0 || idle >= 100) fuzz_fail("the server neither answered nor closed in 1 s");
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
    struct linger lg = { 1, 0 };
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
    if (!probe && ddpc_store_create_tcp("127.0.0.1", port, 2, &probe) != DDPC_OK)
        fuzz_fail("connect after: %s", ddpc_last_error());
    if (!tprobe) {
        setenv("DDPC_STORE_PROTOCOL", "torch", 1);
        ddpc_status s = ddpc_store_create_tcp("127.0.0.1", port, 2, &tprobe);
        unsetenv("DDPC_STORE_PROTOCOL");
        if (s != DDPC_OK) fuzz_fail("TCPStore connect after: %s", ddpc_last_error());
    }
    ddpc_store *cs[2] = { probe, tprobe };
    for (int i = 0; i < 2; i++) {
        void *v = NULL;
        size_t n = 0;
        if (ddpc_store_set(cs[i], "fuzz/probe", "ok", 2) != DDPC_OK ||
            ddpc_store_get(cs[i], "fuzz/probe", 2, &v, &n) != DDPC_OK || n != 2 ||
            memcmp(v, "ok", 2) != 0)
            fuzz_fail("the server stopped serving %s's protocol: %s", ddpc_store_protocol(cs[i]),
                      ddpc_last_error());
        free(v);
    }
    return 0;
}

#ifdef DDPC_FUZZ_ENTRY_store
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_store(data, size); }
#endif
