#include "tests/support/logits.h"

int test_logit_rank(const float *logits, int64_t n, int32_t token) {
    int r = 0;
    for (int64_t i = 0; i < n; i++)
        if (logits[i] > logits[token] || (logits[i] == logits[token] && i < token))
            r++;
    return r;
}

int32_t test_logit_argmax(const float *logits, int64_t n) {
    int32_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (logits[i] > logits[best])
            best = (int32_t)i;
    return best;
}
