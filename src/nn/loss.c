/*
 * loss.c — CrossEntropyLoss (log-softmax + negative log-likelihood, mean over
 * the batch), fused with its gradient and the accuracy count.
 */
#include <math.h>

#include "nn/nn_impl.h"

/*
 * Per row: m = max(z); lse = m + log(sum exp(z - m)); loss = lse - z[y];
 * dz = (exp(z - m) / sum - [j == y]) / B. Sums in double so the mean does not
 * depend on the batch's size as much as float would.
 */
ddpc_status ddpc_cross_entropy(const float *logits, const int32_t *labels, int B, int K,
                               float *dlogits, float *loss, int *correct) {
    if (!logits || !labels)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "cross_entropy: logits or labels is NULL");
    if (B < 1 || K < 1)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "cross_entropy: B=%d K=%d must be positive", B, K);
    for (int r = 0; r < B; r++)
        if (labels[r] < 0 || labels[r] >= K)
            return ddpc__err(DDPC_ERR_INVALID_ARG,
                             "cross_entropy: label %d of row %d is out of range [0, %d)",
                             (int)labels[r], r, K);
    double total = 0.0;
    int ok = 0;
    float invB = 1.0f / (float)B;
    for (int r = 0; r < B; r++) {
        const float *z = logits + (size_t)r * K;
        int y = labels[r];
        float mx = z[0];
        int arg = 0;
        for (int j = 1; j < K; j++)
            if (z[j] > mx) {
                mx = z[j];
                arg = j;
            }
        ok += arg == y;
        float sum = 0.0f;
        if (dlogits) { /* keep exp(z - m) in d: one exp per logit */
            float *d = dlogits + (size_t)r * K;
            for (int j = 0; j < K; j++) sum += d[j] = expf(z[j] - mx);
            float scale = invB / sum;
            for (int j = 0; j < K; j++) d[j] *= scale;
            d[y] -= invB;
        } else {
            for (int j = 0; j < K; j++) sum += expf(z[j] - mx);
        }
        float lse = mx + logf(sum);
        total += (double)(lse - z[y]);
    }
    if (loss) *loss = (float)(total / B);
    if (correct) *correct = ok;
    return DDPC_OK;
}
