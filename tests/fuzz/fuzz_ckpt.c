/*
 * fuzz_ckpt.c — ddpc_checkpoint_load (safetensors) on arbitrary bytes, into
 * a small two-layer model (Linear(3, 2), ReLU, Linear(2, 1)) with Adam. The
 * first byte picks what is loaded: bit 0 the optimizer's state too, bit 1
 * the metadata; the rest is the file.
 * Promises checked: the status is OK, DDPC_ERR_IO (malformed) or
 * DDPC_ERR_MISMATCH (another model), with a message; an error changes
 * nothing, neither the parameters nor the optimizer's state and steps.
 */
#include <string.h>

#include "ddpc/nn.h"
#include "fuzz/fuzz.h"

static ddpc_model *m;
static ddpc_optim *opt;
static size_t numel;

static void setup(void) {
    if (m) return;
    if (ddpc_model_create(DDPC_LAYERS(ddpc_linear(3, 2), ddpc_relu(), ddpc_linear(2, 1)), NULL,
                          &m) != DDPC_OK)
        fuzz_fail("model: %s", ddpc_last_error());
    ddpc_optim_options o = ddpc_optim_options_default(DDPC_OPTIM_ADAM);
    if (ddpc_optim_create(m, &o, &opt) != DDPC_OK) fuzz_fail("optimizer: %s", ddpc_last_error());
    ddpc_model_param_block(m, &numel);
}

int fuzz_ckpt(const uint8_t *data, size_t size) {
    if (size == 0 || size > (1u << 16)) return 0;
    setup();
    /* known values in, to see that a failed load leaves them */
    float *p = ddpc_model_param_block(m, NULL);
    float *s0 = ddpc_optim_state(opt, 0, NULL), *s1 = ddpc_optim_state(opt, 1, NULL);
    for (size_t i = 0; i < numel; i++) p[i] = (float)i, s0[i] = -(float)i, s1[i] = 0.5f * (float)i;
    ddpc_optim_set_steps(opt, 7);
    const char *path = fuzz_file("ckpt", data + 1, size - 1);
    ddpc_ckpt_meta meta = { .epoch = 123, .step = 456 };
    ddpc_status st =
        ddpc_checkpoint_load(path, m, (data[0] & 1) ? opt : NULL, (data[0] & 2) ? &meta : NULL);
    if (st == DDPC_OK) return 0;
    if (st != DDPC_ERR_IO && st != DDPC_ERR_MISMATCH)
        fuzz_fail("status %s: %s", ddpc_status_str(st), ddpc_last_error());
    if (!ddpc_last_error()[0]) fuzz_fail("an error with no message");
    for (size_t i = 0; i < numel; i++)
        if (p[i] != (float)i || s0[i] != -(float)i || s1[i] != 0.5f * (float)i)
            fuzz_fail("a failed load (%s) changed element %zu", ddpc_last_error(), i);
    if (ddpc_optim_steps(opt) != 7) fuzz_fail("a failed load changed the step count");
    if (meta.epoch != 123 || meta.step != 456) fuzz_fail("a failed load changed the metadata");
    return 0;
}

#ifdef DDPC_FUZZ_ENTRY_ckpt
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_ckpt(data, size); }
#endif
