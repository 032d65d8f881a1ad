/* test_crypto.c — SHA-256 against FIPS 180's examples, HMAC-SHA256 against
 * RFC 4231's test cases, and the job token's handshake (base/auth.c) on a
 * socket pair: the right token accepted, a wrong one, a replayed proof, a
 * wrong purpose and a server without a token refused, each side's error
 * naming the cause. The whole-job tests are tests/dist/test_auth.c. */
#include <arpa/inet.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/auth.h"
#include "base/sha256.h"
#include "test.h"

static void hex(const unsigned char *d, size_t n, char *out) {
    for (size_t i = 0; i < n; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void check_sha(const void *p, size_t n, const char *want) {
    unsigned char d[32];
    char h[65];
    ddpc__sha256(p, n, d);
    hex(d, 32, h);
    CHECK_STR(h, want);
}

TEST(crypto_sha256_fips180) {
    check_sha("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    check_sha("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    check_sha(two, strlen(two), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    const char *four =
        "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqk"
        "lmnopqrlmnopqrsmnopqrstnopqrstu";
    check_sha(four, strlen(four),
              "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
    /* a million 'a', fed in uneven pieces across block boundaries */
    char *a = malloc(1000000);
    memset(a, 'a', 1000000);
    check_sha(a, 1000000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    ddpc__sha256_ctx s;
    ddpc__sha256_init(&s);
    for (size_t off = 0, step = 1; off < 1000000; off += step, step = step * 3 % 1000 + 1)
        ddpc__sha256_update(&s, a + off, off + step > 1000000 ? 1000000 - off : step);
    unsigned char d[32];
    char h[65];
    ddpc__sha256_final(&s, d);
    hex(d, 32, h);
    CHECK_STR(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(a);
}

static void check_hmac(const void *key, size_t klen, const void *data, size_t n, const char *want) {
    unsigned char d[32];
    char h[65];
    /* in one part, and split in two at every third byte: the same MAC */
    const void *parts[2] = { data, (const char *)data + n / 3 };
    size_t lens[2] = { n / 3, n - n / 3 }, whole = n;
    ddpc__hmac_sha256(key, klen, &parts[0], &whole, 1, d);
    hex(d, 32, h);
    CHECK_STR(h, want);
    ddpc__hmac_sha256(key, klen, parts, lens, 2, d);
    hex(d, 32, h);
    CHECK_STR(h, want);
}

TEST(crypto_hmac_rfc4231) {
    unsigned char k[131], v[50];
    memset(k, 0x0b, 20);
    check_hmac(k, 20, "Hi There", 8,
               "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    check_hmac("Jefe", 4, "what do ya want for nothing?", 28,
               "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    memset(k, 0xaa, 20);
    memset(v, 0xdd, 50);
    check_hmac(k, 20, v, 50, "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
    for (int i = 0; i < 25; i++) k[i] = (unsigned char)(i + 1);
    memset(v, 0xcd, 50);
    check_hmac(k, 25, v, 50, "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
    memset(k, 0xaa, 131);
    const char *t6 = "Test Using Larger Than Block-Size Key - Hash Key First";
    check_hmac(k, 131, t6, strlen(t6),
               "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    const char *t7 =
        "This is a test using a larger than block-size key and a larger than block-size "
        "data. The key needs to be hashed before being used by the HMAC algorithm.";
    check_hmac(k, 131, t7, strlen(t7),
               "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
    CHECK(ddpc__equal_ct("abcd", "abcd", 4));
    CHECK(!ddpc__equal_ct("abcd", "abce", 4));
}

/* ------------------------------------------------ the handshake */

typedef struct server_arg {
    int fd;
    const char *token;
    int purpose;
    int result; /* ddpc__auth_srv_step's last answer */
    char why[256];
    unsigned char seen[DDPC_AUTH_HELLO + DDPC_AUTH_PROOF]; /* what the client sent */
} server_arg;

/* The server half, blocking reads one message at a time. */
static void *serve(void *p) {
    server_arg *s = p;
    ddpc__auth_srv a;
    ddpc__auth_srv_init(&a, s->purpose);
    size_t seen = 0;
    s->result = 0;
    while (s->result == 0 || s->result == 1) {
        ssize_t n = read(s->fd, a.in + a.have, ddpc__auth_srv_need(&a));
        if (n <= 0) {
            snprintf(s->why, sizeof s->why, "client closed");
            s->result = -2;
            break;
        }
        if (seen + (size_t)n <= sizeof s->seen) memcpy(s->seen + seen, a.in + a.have, (size_t)n);
        seen += (size_t)n;
        a.have += (size_t)n;
        unsigned char out[DDPC_AUTH_CHALLENGE];
        size_t olen = 0;
        s->result = ddpc__auth_srv_step(&a, s->token, out, &olen, s->why, sizeof s->why);
        if (olen) CHECK_EQ(write(s->fd, out, olen), (ssize_t)olen);
    }
    close(s->fd);
    return NULL;
}

/* Runs a client with ctoken against a server with stoken; returns the
 * client's status, the server's result in *srv. */
static ddpc_status shake(const char *ctoken, const char *stoken, int cpurpose, int spurpose,
                         server_arg *srv) {
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    memset(srv, 0, sizeof *srv);
    srv->fd = sv[1];
    srv->token = stoken;
    srv->purpose = spurpose;
    pthread_t th;
    CHECK(pthread_create(&th, NULL, serve, srv) == 0);
    ddpc_status s =
        ddpc__auth_client(sv[0], ctoken, cpurpose, ddpc__deadline_in(10), -1, "the test server");
    close(sv[0]);
    pthread_join(th, NULL);
    return s;
}

TEST(crypto_handshake) {
    const char *tok = "0123456789abcdef-the-job", *other = "0123456789abcdef-another";
    server_arg srv;
    CHECK_OK(shake(tok, tok, DDPC_AUTH_DATA, DDPC_AUTH_DATA, &srv));
    CHECK_EQ(srv.result, 2);
    /* the recorded hello + proof, replayed on a new connection: the
     * server's nonce is new, so the old proof is refused */
    server_arg rep;
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    memset(&rep, 0, sizeof rep);
    rep.fd = sv[1];
    rep.token = tok;
    rep.purpose = DDPC_AUTH_DATA;
    pthread_t th;
    CHECK(pthread_create(&th, NULL, serve, &rep) == 0);
    CHECK_EQ(write(sv[0], srv.seen, sizeof srv.seen), (ssize_t)sizeof srv.seen);
    pthread_join(th, NULL);
    close(sv[0]);
    CHECK_EQ(rep.result, -1);
    CHECK_CONTAINS(rep.why, "replayed");
    /* a wrong token: the client sees the server's proof fail first */
    CHECK_STATUS(shake(other, tok, DDPC_AUTH_DATA, DDPC_AUTH_DATA, &srv), DDPC_ERR_DENIED);
    CHECK_CONTAINS(ddpc_last_error(), "does not know this job's token");
    CHECK_EQ(srv.result, -2); /* the client hung up before proving anything */
    /* a store handshake on a data port */
    CHECK_STATUS(shake(tok, tok, DDPC_AUTH_STORE, DDPC_AUTH_DATA, &srv), DDPC_ERR_PEER_LOST);
    CHECK_EQ(srv.result, -1);
    CHECK_CONTAINS(srv.why, "a store handshake on a data port");
    /* a server without a token tells the client so */
    CHECK_STATUS(shake(tok, NULL, DDPC_AUTH_DATA, DDPC_AUTH_DATA, &srv), DDPC_ERR_DENIED);
    CHECK_CONTAINS(ddpc_last_error(), "has no job token");
    /* garbage: refused on its first word */
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    memset(&rep, 0, sizeof rep);
    rep.fd = sv[1];
    rep.token = tok;
    rep.purpose = DDPC_AUTH_DATA;
    CHECK(pthread_create(&th, NULL, serve, &rep) == 0);
    CHECK_EQ(write(sv[0], "GET / HTTP/1.0\r\n", 16), 16);
    pthread_join(th, NULL);
    close(sv[0]);
    CHECK_EQ(rep.result, -1);
    CHECK_CONTAINS(rep.why, "did not open with the job token's handshake");
}

TEST(crypto_token_rules) {
    const char *t = (const char *)1;
    unsetenv("DDPC_JOB_TOKEN");
    CHECK_OK(ddpc__auth_token(&t));
    CHECK(t == NULL);
    setenv("DDPC_JOB_TOKEN", "short", 1);
    CHECK_STATUS(ddpc__auth_token(&t), DDPC_ERR_ENV);
    CHECK_CONTAINS(ddpc_last_error(), "DDPC_JOB_TOKEN has 5 characters");
    setenv("DDPC_JOB_TOKEN", "sixteen-chars-ok", 1);
    CHECK_OK(ddpc__auth_token(&t));
    CHECK_STR(t, "sixteen-chars-ok");
}

TEST(crypto_whitelist_file) {
    const char *path = t_tmp_path("wl.json");
    FILE *f = fopen(path, "w");
    fprintf(f, "{\"host_ip\": [\"127.0.0.1\", \"::1\"], \"device_ip\": []}");
    fclose(f);
    setenv("HCCL_WHITELIST_DISABLE", "0", 1);
    unsetenv("HCCL_WHITELIST_FILE");
    CHECK_STATUS(ddpc__whitelist_load(), DDPC_ERR_ENV);
    CHECK_CONTAINS(ddpc_last_error(), "HCCL_WHITELIST_FILE is not set");
    setenv("HCCL_WHITELIST_FILE", path, 1);
    CHECK_OK(ddpc__whitelist_load());
    struct sockaddr_in a = { .sin_family = AF_INET };
    a.sin_addr.s_addr = htonl(0x7f000001);
    CHECK(ddpc__whitelist_allows((struct sockaddr *)&a));
    a.sin_addr.s_addr = htonl(0x7f000002);
    CHECK(!ddpc__whitelist_allows((struct sockaddr *)&a));
    struct sockaddr_in6 m = { .sin6_family = AF_INET6 }; /* ::ffff:127.0.0.1, a dual-stack peer */
    m.sin6_addr.s6_addr[10] = m.sin6_addr.s6_addr[11] = 0xff;
    m.sin6_addr.s6_addr[12] = 127;
    m.sin6_addr.s6_addr[15] = 1;
    CHECK(ddpc__whitelist_allows((struct sockaddr *)&m));
    /* malformed files: each error names the file and the problem */
    const char *bad[] = { "{\"host_ip\": [\"127.0.0.300\"]}", "{\"hosts\": []}", "not json" };
    const char *why[] = { "host_ip[0] is not an IP address", "has no \"host_ip\" array",
                          "is not JSON" };
    for (int i = 0; i < 3; i++) {
        char p2[256];
        snprintf(p2, sizeof p2, "%s", t_tmp_path(i == 0 ? "b0" : i == 1 ? "b1" : "b2"));
        f = fopen(p2, "w");
        fputs(bad[i], f);
        fclose(f);
        setenv("HCCL_WHITELIST_FILE", p2, 1);
        CHECK_STATUS(ddpc__whitelist_load(), DDPC_ERR_ENV);
        CHECK_CONTAINS(ddpc_last_error(), why[i]);
        CHECK_CONTAINS(ddpc_last_error(), p2);
    }
    setenv("HCCL_WHITELIST_DISABLE", "1", 1);
    CHECK_OK(ddpc__whitelist_load());
    CHECK(ddpc__whitelist_allows((struct sockaddr *)&a)); /* off: everyone */
    t_tmp_remove();
}
