/* Batch invariance of the forward pass: rows run together give logits
 * bit-identical to each row run alone, in both precision modes, and
 * trimming a row then re-decoding gives the logits of a fresh run; the
 * packed weight layout gives the logits of the weights read in place. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "forward_alone.h"
#include "model/forward.h"
#include "tern/model.h"

enum { MAXT = 40 };

static void check_model(const char *dir, tern_precision prec)
{
    tern_model_opts o = {.n_threads = 2, .precision = prec, .weights = TERN_WEIGHTS_PANELS};
    tern_model *m;
    if (tern_model_load(dir, &o, &m) != TERN_OK) {
        CHECK_MSG(0, "%s", tern_last_error());
        return;
    }
    int V = tern_model_vocab_size(m);
    int32_t ids[3][MAXT];
    int lens[3] = {7, 19, 12};
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < lens[r]; i++) ids[r][i] = (int32_t)((r * 131 + i * 37 + 5) % V);
    float *ref[3];
    for (int r = 0; r < 3; r++) ref[r] = forward_alone(m, ids[r], lens[r], MAXT);

    /* B = 3, different lengths, one call, every position returned. */
    tern_kv *kv;
    int rows[3];
    CHECK(tern_model_kv_create(m, 4, MAXT, 3, 0, &kv) == TERN_OK);
    for (int r = 0; r < 3; r++) CHECK(tern_kv_row_add(kv, MAXT, &rows[r]) == TERN_OK);
    int32_t cat[3 * MAXT];
    uint8_t want[3 * MAXT];
    int T = 0;
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < lens[r]; i++) cat[T++] = ids[r][i];
    memset(want, 1, (size_t)T);
    float *all = malloc((size_t)T * V * sizeof *all);
    tern_batch b = {3, rows, lens, cat, want};
    CHECK(tern_forward(m, kv, &b, all, NULL) == TERN_OK);
    long off = 0;
    for (int r = 0; r < 3; r++) {
        CHECK_MSG(!memcmp(all + off, ref[r], (size_t)lens[r] * V * sizeof(float)), "%s row %d batched != alone", dir, r);
        off += (long)lens[r] * V;
    }

    /* Trim the middle row by 6 and decode those tokens one by one, next to a
     * row that prefills more tokens in the same calls. */
    CHECK(tern_kv_trim(kv, rows[1], 6) == TERN_OK);
    CHECK(tern_kv_offset(kv, rows[1]) == 13);
    for (int i = 13; i < 19; i++) {
        int n2[2] = {1, 2};
        int r2[2] = {rows[1], rows[2]};
        int32_t toks[3] = {ids[1][i], (int32_t)(i % V), (int32_t)((i * 7) % V)};
        float lg[2 * 512 * 64];
        float *lgp = V * 2 <= (int)(sizeof lg / sizeof *lg) ? lg : malloc((size_t)2 * V * sizeof *lgp);
        tern_batch d = {2, r2, n2, toks, NULL};
        CHECK(tern_forward(m, kv, &d, lgp, NULL) == TERN_OK);
        CHECK_MSG(!memcmp(lgp, ref[1] + (long)i * V, (size_t)V * sizeof(float)), "%s redecode position %d differs", dir, i);
        if (lgp != lg) free(lgp);
    }

    /* A failing call (bad token id) leaves every row as it was. */
    int one = 1;
    int32_t bad = V + 5;
    tern_batch e = {1, &rows[0], &one, &bad, NULL};
    CHECK(tern_forward(m, kv, &e, all, NULL) == TERN_E_RANGE);
    CHECK(tern_kv_offset(kv, rows[0]) == lens[0]);

    /* Chunk boundaries: row 1 fed in chunks of 1, 5, 16 and 33 tokens (in
     * blocks of 4 KV positions, so chunks and blocks cross at every offset),
     * each chunk beside another row's tokens, gives every position's logits
     * bit-identical to the one-shot run. */
    int chunks[] = {1, 5, 16, 33};
    for (int ci = 0; ci < 4; ci++) {
        tern_kv *kc;
        CHECK(tern_model_kv_create(m, 2, MAXT, 4, 0, &kc) == TERN_OK);
        int ra, rb;
        CHECK(tern_kv_row_add(kc, MAXT, &ra) == TERN_OK && tern_kv_row_add(kc, MAXT, &rb) == TERN_OK);
        float *lg = malloc((size_t)(MAXT + 8) * V * sizeof *lg);
        for (int p0 = 0; p0 < lens[1];) {
            int n = lens[1] - p0 < chunks[ci] ? lens[1] - p0 : chunks[ci];
            int other = 1 + (p0 % 3);
            if (tern_kv_offset(kc, rb) + other > MAXT) other = 0;
            int rr[2] = {rb, ra}, nn[2] = {other, n};
            int32_t toks[MAXT + 8];
            uint8_t wt[MAXT + 8];
            for (int i = 0; i < other; i++) toks[i] = (int32_t)((p0 * 13 + i) % V);
            memcpy(toks + other, ids[1] + p0, (size_t)n * sizeof *toks);
            memset(wt, 1, sizeof wt);
            tern_batch cb = {2, rr, nn, toks, wt};
            CHECK(tern_forward(m, kc, &cb, lg, NULL) == TERN_OK);
            CHECK_MSG(!memcmp(lg + (long)other * V, ref[1] + (long)p0 * V, (size_t)n * V * sizeof(float)),
                      "%s chunks of %d: positions %d..%d differ", dir, chunks[ci], p0, p0 + n - 1);
            p0 += n;
        }
        free(lg);
        tern_kv_free(kc);
    }

    /* Speculative verify: a window of d + 1 positions appended to a row
     * (logits at each) gives exactly the logits of d + 1 single steps, for
     * d = 1..8, beside a row decoding one token; a rollback of the window
     * (trim) leaves the row as before. */
    {
        tern_kv *kw;
        CHECK(tern_model_kv_create(m, 2, MAXT, 4, 0, &kw) == TERN_OK);
        int ra, rb;
        CHECK(tern_kv_row_add(kw, MAXT, &ra) == TERN_OK && tern_kv_row_add(kw, MAXT, &rb) == TERN_OK);
        int n0 = 10;
        tern_batch pb = {1, &ra, &n0, ids[1], NULL};
        float *lg = malloc((size_t)(MAXT + 2) * V * sizeof *lg);
        CHECK(tern_forward(m, kw, &pb, lg, NULL) == TERN_OK);
        for (int d = 1; d <= 8 && n0 + d + 1 <= lens[1]; d++) {
            int rr[2] = {rb, ra}, nn[2] = {1, d + 1};
            int32_t toks[16];
            uint8_t wt[16];
            toks[0] = (int32_t)(d % V);
            memcpy(toks + 1, ids[1] + n0, (size_t)(d + 1) * sizeof *toks);
            memset(wt, 1, sizeof wt);
            tern_batch vb = {2, rr, nn, toks, wt};
            CHECK(tern_forward(m, kw, &vb, lg, NULL) == TERN_OK);
            CHECK_MSG(!memcmp(lg + V, ref[1] + (long)n0 * V, (size_t)(d + 1) * V * sizeof(float)),
                      "%s: a verify window of %d positions differs from single steps", dir, d + 1);
            CHECK(tern_kv_trim(kw, ra, d + 1) == TERN_OK && tern_kv_offset(kw, ra) == n0);
        }
        free(lg);
        tern_kv_free(kw);
    }

    /* The same model with its weights read in place from the mapping. */
    tern_model_opts om = {.n_threads = 1, .precision = prec, .weights = TERN_WEIGHTS_MAPPED};
    tern_model *mm;
    if (tern_model_load(dir, &om, &mm) == TERN_OK) {
        for (int r = 0; r < 3; r++) {
            float *got = forward_alone(mm, ids[r], lens[r], MAXT);
            CHECK_MSG(!memcmp(got, ref[r], (size_t)lens[r] * V * sizeof(float)),
                      "%s row %d: mapped weights != panels", dir, r);
            free(got);
        }
        tern_model_free(mm);
    } else {
        CHECK_MSG(0, "%s", tern_last_error());
    }

    /* Two models on one execution context (a target and its draft share
     * threads and workspace): passes of different sizes taking turns give
     * each model's own logits. */
    tern_exec *x;
    CHECK(tern_exec_create(2, &x) == TERN_OK);
    tern_model_opts ox = {.precision = prec, .weights = TERN_WEIGHTS_PANELS, .exec = x};
    tern_model *ma = NULL, *mb = NULL;
    if (tern_model_load(dir, &ox, &ma) == TERN_OK && tern_model_load(dir, &ox, &mb) == TERN_OK) {
        for (int rep = 0; rep < 2; rep++)
            for (int r = 0; r < 3; r++) {
                float *got = forward_alone((r + rep) % 2 ? ma : mb, ids[r], lens[r], MAXT);
                CHECK_MSG(!memcmp(got, ref[r], (size_t)lens[r] * V * sizeof(float)),
                          "%s row %d: on a shared context != alone", dir, r);
                free(got);
            }
    } else {
        CHECK_MSG(0, "%s", tern_last_error());
    }
    tern_model_free(ma);
    tern_model_free(mb);
    tern_exec_free(x);

    free(all);
    for (int r = 0; r < 3; r++) free(ref[r]);
    tern_kv_free(kv);
    tern_model_free(m);
}

int main(void)
{
    char dir[1024];
    const char *models[] = {"qwen3", "qwen3_moe", "llama"};
    for (int i = 0; i < 3; i++) {
        snprintf(dir, sizeof dir, "%s/fixtures/models/%s", check_shared_dir(), models[i]);
        check_model(dir, TERN_PRECISION_F32);
        check_model(dir, TERN_PRECISION_BF16);
    }
    check_model("tests/fixtures/models/qwen2", TERN_PRECISION_BF16);
    return check_summary("forward");
}
