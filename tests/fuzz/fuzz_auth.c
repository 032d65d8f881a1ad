/*
 * fuzz_auth.c — the listener's half of the job token's handshake
 * (base/auth.c, as tcp.c and the store's server run it) on arbitrary bytes
 * from a client that does not know the token, fed in pieces whose sizes the
 * input's first byte picks. Promises checked: such a client is never
 * accepted (its proof would have to be an HMAC under the token over the
 * listener's fresh nonce); a refusal always says why; a reply is a
 * challenge after a hello, else a verdict; the state machine never asks for
 * more bytes than its buffer holds. Run with a token and, once, without.
 */
#include <string.h>

#include "base/auth.h"
#include "fuzz/fuzz.h"

static void shake(const uint8_t *data, size_t size, const char *token, int purpose) {
    ddpc__auth_srv a;
    ddpc__auth_srv_init(&a, purpose);
    size_t off = 1, piece = size ? (size_t)(data[0] % 7) + 1 : 1;
    for (int steps = 0; off < size && steps < 1000; steps++) {
        size_t need = ddpc__auth_srv_need(&a);
        if (need == 0 || a.have + need > sizeof a.in)
            fuzz_fail("asks for %zu bytes with %zu of %zu held", need, a.have, sizeof a.in);
        size_t take = need < piece ? need : piece;
        if (take > size - off) take = size - off;
        memcpy(a.in + a.have, data + off, take);
        a.have += take;
        off += take;
        unsigned char out[DDPC_AUTH_CHALLENGE];
        size_t olen = 1234;
        char why[256] = "";
        int r = ddpc__auth_srv_step(&a, token, out, &olen, why, sizeof why);
        if (r == 2) fuzz_fail("accepted a client that does not know the token");
        if (r == 1 && olen != DDPC_AUTH_CHALLENGE) fuzz_fail("a challenge of %zu bytes", olen);
        if (r != 1 && olen != 0 && olen != DDPC_AUTH_VERDICT)
            fuzz_fail("a reply of %zu bytes", olen);
        if (r == -1 && !why[0]) fuzz_fail("refused without saying why");
        if (r < 0) return;
        if (r != 0 && r != 1) fuzz_fail("step returned %d", r);
    }
}

int fuzz_auth(const uint8_t *data, size_t size) {
    shake(data, size, "fuzz-job-token-0123456789", DDPC_AUTH_DATA);
    shake(data, size, "fuzz-job-token-0123456789", DDPC_AUTH_STORE);
    shake(data, size, NULL, DDPC_AUTH_DATA);
    return 0;
}

#ifdef DDPC_FUZZ_ENTRY_auth
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_auth(data, size); }
#endif
