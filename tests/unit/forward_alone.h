/* Test helper shared by the forward tests (CPU and CUDA): the logits of
 * every position of ids[0..n) run alone from an empty row of a fresh KV
 * pool of max_len positions. Returns an owned [n, vocab] array. */
#ifndef TERN_TEST_FORWARD_ALONE_H
#define TERN_TEST_FORWARD_ALONE_H

#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "model/forward.h"
#include "tern/model.h"

static float *forward_alone(tern_model *m, const int32_t *ids, int n, int max_len)
{
    int V = tern_model_vocab_size(m), row;
    tern_kv *kv;
    float *out = malloc((size_t)n * V * sizeof *out);
    uint8_t *want = malloc((size_t)n);
    memset(want, 1, (size_t)n);
    CHECK_MSG(tern_model_kv_create(m, 1, max_len, 0, 0, &kv) == TERN_OK, "%s", tern_last_error());
    CHECK(tern_kv_row_add(kv, max_len, &row) == TERN_OK);
    tern_batch b = {1, &row, &n, ids, want};
    CHECK_MSG(tern_forward(m, kv, &b, out, NULL) == TERN_OK, "%s", tern_last_error());
    tern_kv_free(kv);
    free(want);
    return out;
}

#endif
