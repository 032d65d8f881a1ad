/*
 * presets.c — ddpc-train's models by name (--model; train.h): "linear",
 * "mlp" and "cnn", each a stack of the training library's layers with
 * ddpc_model_create. The library knows layers and stacks, not these names.
 */
#include <string.h>

#include "base/base.h"
#include "train.h"

ddpc_status model_create_preset(const char *name, uint64_t seed, ddpc_model **out) {
    static const struct {
        const char *name;
        int n;
        ddpc_layer_kind kind[11];
        int arg[11][5]; /* in, out, kernel, stride, padding */
    } presets[] = {
        { "linear",
          3,
          { DDPC_LAYER_INPUT, DDPC_LAYER_FLATTEN, DDPC_LAYER_LINEAR },
          { { 0 }, { 0 }, { 784, 10 } } },
        { "mlp",
          7,
          { DDPC_LAYER_INPUT, DDPC_LAYER_FLATTEN, DDPC_LAYER_LINEAR, DDPC_LAYER_RELU,
            DDPC_LAYER_LINEAR, DDPC_LAYER_RELU, DDPC_LAYER_LINEAR },
          { { 0 }, { 0 }, { 784, 512 }, { 0 }, { 512, 512 }, { 0 }, { 512, 10 } } },
        { "cnn",
          11,
          { DDPC_LAYER_INPUT, DDPC_LAYER_CONV2D, DDPC_LAYER_RELU, DDPC_LAYER_MAXPOOL2D,
            DDPC_LAYER_CONV2D, DDPC_LAYER_RELU, DDPC_LAYER_MAXPOOL2D, DDPC_LAYER_FLATTEN,
            DDPC_LAYER_LINEAR, DDPC_LAYER_RELU, DDPC_LAYER_LINEAR },
          { { 0 },
            { 1, 16, 3, 1, 1 },
            { 0 },
            { 0, 0, 2, 2 },
            { 16, 32, 3, 1, 1 },
            { 0 },
            { 0, 0, 2, 2 },
            { 0 },
            { 32 * 7 * 7, 128 },
            { 0 },
            { 128, 10 } } },
    };
    if (!out) return ddpc__err(DDPC_ERR_INVALID_ARG, "model_create_preset: out is NULL");
    *out = NULL;
    for (size_t k = 0; name && k < sizeof presets / sizeof presets[0]; k++) {
        if (strcmp(name, presets[k].name) != 0) continue;
        ddpc_layer l[11];
        for (int i = 0; i < presets[k].n; i++) {
            const int *a = presets[k].arg[i];
            switch (presets[k].kind[i]) {
            case DDPC_LAYER_INPUT: l[i] = ddpc_input(1, 28, 28); break;
            case DDPC_LAYER_LINEAR: l[i] = ddpc_linear(a[0], a[1]); break;
            case DDPC_LAYER_CONV2D: l[i] = ddpc_conv2d(a[0], a[1], a[2], a[3], a[4]); break;
            case DDPC_LAYER_MAXPOOL2D: l[i] = ddpc_maxpool2d(a[2], a[3]); break;
            case DDPC_LAYER_RELU: l[i] = ddpc_relu(); break;
            default: l[i] = ddpc_flatten(); break;
            }
        }
        ddpc_model_options o = ddpc_model_options_default();
        o.seed = seed;
        return ddpc_model_create(l, presets[k].n, &o, out);
    }
    return ddpc__err(DDPC_ERR_INVALID_ARG, "unknown model '%s' (linear, mlp, cnn)",
                     name ? name : "(null)");
}
