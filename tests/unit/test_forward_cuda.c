/* The forward on the CUDA backend against the CPU reference, and its batch
 * invariance there: for each fixture model, every position's logits of
 * three prompts run alone on the GPU are within 1e-3 of the CPU's
 * (float32 activations); the three run as one batch, and one prompt fed a
 * token at a time after a prefill, give the GPU's logits bit for bit; a
 * forked row (shared blocks, copy on write on the GPU) decodes as its
 * source. The BF16 models run a second time with the product chain on
 * (TERN_CUDA_CHAIN=1: one-token passes launch their products as chains,
 * tern_cuda_chain), whose one-token steps must give the bits of the
 * prefill without it, and a third time with the row-major weight layout
 * (TERN_CUDA_TILED=0; by default every bf16 matrix of the products is
 * rewritten in the tiled layout, which every other run checks), two of
 * them also with the chain over rows, under the same equalities. Without a usable GPU the test prints why and exits
 * 77 (skipped). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "forward_alone.h"
#include "engine/sampler_internal.h"
#include "model/backend_cuda_model.h"
#include "model/forward.h"
#include "tern/exec.h"
#include "tern/model.h"

enum { MAXT = 48 };

static float max_diff(const float *a, const float *b, long n)
{
    float d = 0.0f;
    for (long i = 0; i < n; i++) {
        float e = fabsf(a[i] - b[i]);
        if (!(e <= d)) d = e;   /* NaN sticks */
    }
    return d;
}

/* opt CHAIN: load the GPU model with TERN_CUDA_CHAIN=1 and check that its
 * one-token passes take the chain; ROWS: with TERN_CUDA_TILED=0 and check
 * that no matrix is tiled. Otherwise a model with bf16 weights must have
 * its matrices tiled. */
enum { CHAIN = 1, ROWS = 2 };
static void check_model(const char *dir, tern_exec *gpu, tern_precision prec, int opt)
{
    int chain = opt & CHAIN;
    tern_model_opts oc = {.n_threads = 2, .precision = prec, .device = "cpu"};
    tern_model_opts og = {.precision = prec, .exec = gpu};
    tern_model *mc, *mg;
    if (tern_model_load(dir, &oc, &mc) != TERN_OK) {
        CHECK_MSG(0, "%s: %s", dir, tern_last_error());
        return;
    }
    if (chain) setenv("TERN_CUDA_CHAIN", "1", 1);
    if (opt & ROWS) setenv("TERN_CUDA_TILED", "0", 1);
    tern_status ls = tern_model_load(dir, &og, &mg);
    if (chain) unsetenv("TERN_CUDA_CHAIN");
    if (opt & ROWS) unsetenv("TERN_CUDA_TILED");
    if (ls != TERN_OK) {
        CHECK_MSG(0, "%s on the GPU: %s", dir, tern_last_error());
        tern_model_free(mc);
        return;
    }
    if (chain) CHECK_MSG(cm(mg)->chain_ok, "%s: the product chain is off", dir);
    if (opt & ROWS) CHECK_MSG(!cm(mg)->tiled, "%s: %d matrices tiled", dir, cm(mg)->tiled);
    else if (mg->layers[0].wq.dt == TERN_DT_BF16) CHECK_MSG(cm(mg)->tiled > 0, "%s: no matrix tiled", dir);
    int V = tern_model_vocab_size(mc);
    int32_t ids[3][MAXT];
    int lens[3] = {7, 40, 30}; /* together 77 tokens: past the small-batch kernel */
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < lens[r]; i++) ids[r][i] = (int32_t)((r * 131 + i * 37 + 5) % V);
    float *ref[3];
    for (int r = 0; r < 3; r++) {
        float *cpu = forward_alone(mc, ids[r], lens[r], MAXT);
        ref[r] = forward_alone(mg, ids[r], lens[r], MAXT);
        if (prec == TERN_PRECISION_F32) {
            float d = max_diff(cpu, ref[r], (long)lens[r] * V);
            CHECK_MSG(d <= 1e-3f, "%s row %d: GPU logits %g from the CPU's", dir, r, d);
        }
        free(cpu);
    }

    /* The three as one batch. */
    tern_kv *kv;
    int rows[4];
    CHECK(tern_model_kv_create(mg, 4, 2 * MAXT, 0, 16, &kv) == TERN_OK);
    for (int r = 0; r < 3; r++) CHECK(tern_kv_row_add(kv, 2 * MAXT, &rows[r]) == TERN_OK);
    int32_t cat[3 * MAXT];
    uint8_t want[3 * MAXT];
    int T = 0;
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < lens[r]; i++) cat[T++] = ids[r][i];
    memset(want, 1, (size_t)T);
    float *all = malloc((size_t)T * V * sizeof *all);
    tern_batch b = {3, rows, lens, cat, want};
    CHECK_MSG(tern_forward(mg, kv, &b, all, NULL) == TERN_OK, "%s", tern_last_error());
    long off = 0;
    for (int r = 0; r < 3; r++) {
        CHECK_MSG(!memcmp(all + off, ref[r], (size_t)lens[r] * V * sizeof(float)), "%s row %d batched != alone", dir, r);
        off += (long)lens[r] * V;
    }
    free(all);

    /* Row 1 again from scratch: prefill of 20, then one token a time, with
     * row 0 decoding beside it; every step matches the prefill of all 40. */
    tern_kv_row_remove(kv, rows[1]);
    CHECK(tern_kv_row_add(kv, 2 * MAXT, &rows[1]) == TERN_OK);
    int n20 = 20, one[2] = {1, 1};
    float *lg = malloc((size_t)2 * V * sizeof *lg);
    tern_batch p = {1, &rows[1], &n20, ids[1], NULL};
    CHECK(tern_forward(mg, kv, &p, lg, NULL) == TERN_OK);
    CHECK_MSG(!memcmp(lg, ref[1] + (long)19 * V, (size_t)V * sizeof(float)), "%s prefill 20 != position 19", dir);
    int pair[2] = {rows[1], rows[0]};
    for (int i = 20; i < lens[1]; i++) {
        int32_t tk[2] = {ids[1][i], (int32_t)(i % V)};
        tern_batch d = {2, pair, one, tk, NULL};
        CHECK(tern_forward(mg, kv, &d, lg, NULL) == TERN_OK);
        CHECK_MSG(!memcmp(lg, ref[1] + (long)i * V, (size_t)V * sizeof(float)), "%s decode step %d differs", dir, i);
    }
    /* Row 1 again, alone: prefill of 32, then one token a time (the
     * one-token kernels that fuse the norms), every step equal to the
     * prefill of all 40; through tern_forward_ex, whose summary is the
     * argmax of logits - lse and whose need = 0 leaves the logits alone. */
    tern_kv_row_remove(kv, rows[1]);
    CHECK(tern_kv_row_add(kv, 2 * MAXT, &rows[1]) == TERN_OK);
    int n32 = 32;
    tern_batch p32 = {1, &rows[1], &n32, ids[1], NULL};
    CHECK(tern_forward(mg, kv, &p32, lg, NULL) == TERN_OK);
    float *lp = malloc((size_t)V * sizeof *lp);
    for (int i = 32; i < lens[1]; i++) {
        tern_batch d = {1, &rows[1], one, &ids[1][i], NULL};
        uint8_t need = i % 2;
        tern_logit_summary sm;
        const float *want = ref[1] + (long)i * V;
        for (int k = 0; k < V; k++) lg[k] = -7.0f;
        CHECK_MSG(tern_forward_ex(mg, kv, &d, lg, NULL, &need, &sm) == TERN_OK, "%s", tern_last_error());
        if (need) CHECK_MSG(!memcmp(lg, want, (size_t)V * sizeof(float)), "%s one-token step %d differs", dir, i);
        else CHECK_MSG(lg[0] == -7.0f && lg[V - 1] == -7.0f, "%s step %d: logits written though not needed", dir, i);
        float host = tern_mlx_logsumexp(want, V);
        CHECK_MSG(fabsf(sm.lse - host) <= 1e-5f * fmaxf(1.0f, fabsf(host)), "%s step %d: lse %g, host %g", dir, i,
                  sm.lse, host);
        for (int k = 0; k < V; k++) lp[k] = want[k] - sm.lse;
        int32_t am = tern_argmax(lp, V);
        CHECK_MSG(sm.argmax == am && sm.lp == lp[am], "%s step %d: argmax %d, host %d", dir, i, sm.argmax, am);
    }
    free(lp);
    /* Fork row 2 (12 positions: a partial shared block) into row 3 and
     * decode the same token on both: copy on write keeps them apart. */
    tern_kv_prep prep;
    CHECK_MSG(tern_kv_row_prepare(kv, lens[2] + 1, 1, lens[2] + 1, &prep) == TERN_OK, "%s", tern_last_error());
    rows[3] = tern_kv_row_commit(kv, &prep);
    CHECK_MSG(tern_kv_row_adopt(kv, rows[3], rows[2]) == TERN_OK, "%s", tern_last_error());
    int fk[2] = {rows[2], rows[3]};
    int32_t same[2] = {3, 3};
    tern_batch f = {2, fk, one, same, NULL};
    CHECK_MSG(tern_forward(mg, kv, &f, lg, NULL) == TERN_OK, "%s", tern_last_error());
    CHECK_MSG(!memcmp(lg, lg + V, (size_t)V * sizeof(float)), "%s forked row decodes differently", dir);
    /* A block's bytes out of the GPU and into another block come back the
     * same (the prompt cache on disk). */
    size_t bb = tern_kv_block_bytes(kv);
    unsigned char *b1 = malloc(bb), *b2 = malloc(bb);
    int blk;
    CHECK(tern_kv_block_alloc(kv, &blk) == TERN_OK);
    tern_kv_block_save(kv, tern_kv_table(kv, rows[1])[0], b1);
    tern_kv_block_load(kv, blk, b1);
    tern_kv_block_save(kv, blk, b2);
    CHECK_MSG(!memcmp(b1, b2, bb), "%s block save / load", dir);
    tern_kv_block_release(kv, blk);
    free(b1);
    free(b2);
    free(lg);
    tern_kv_free(kv);
    for (int r = 0; r < 3; r++) free(ref[r]);
    tern_model_free(mg);
    tern_model_free(mc);
}

int main(void)
{
    /* Device names, with or without a GPU. */
    tern_exec *gpu;
    const char *bad[] = {"gpu", "cuda:", "cuda:x", "cuda:-1", "cuda0"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK(tern_exec_create_device(1, bad[i], &gpu) == TERN_E_INVALID && gpu == NULL);
        CHECK(strstr(tern_last_error(), "cpu or cuda[:N]") != NULL);
    }
    CHECK(tern_exec_create_device(1, "cpu", &gpu) == TERN_OK && gpu);
    tern_exec_free(gpu);
    if (tern_exec_create_device(2, "cuda", &gpu) != TERN_OK) {
        printf("test_forward_cuda: skipped: %s\n", tern_last_error());
        CHECK(strstr(tern_last_error(), "CUDA") != NULL);
        /* A model asked onto the missing GPU is refused with that reason. */
        tern_model_opts o = {.n_threads = 1, .device = "cuda"};
        tern_model *m = NULL;
        CHECK(tern_model_load("models/tern-demo-code-17m", &o, &m) == TERN_E_UNSUPPORTED && m == NULL);
        CHECK(strstr(tern_last_error(), "CUDA") != NULL);
        if (check_failures) return check_summary("forward_cuda");
        return 77;   /* scripts/run_unit_tests.sh: skipped */
    }
    const char *shared = check_shared_dir();
    char dir[4096];
    /* every model without the product chain, then the BF16 ones with it,
     * then with the row-major layout, without and with the chain ("@": under ../shared/fixtures/models, "/": a
     * path as it is) */
    static const struct {
        const char *name;
        tern_precision prec;
        int opt;
    } runs[] = {{"llama_f32", TERN_PRECISION_F32, 0},         {"qwen3_f16", TERN_PRECISION_F32, 0},
                {"qwen3_tied", TERN_PRECISION_F32, 0},        {"qwen2", TERN_PRECISION_F32, 0},
                {"llama_rope_llama3", TERN_PRECISION_F32, 0}, {"qwen3_rope_yarn", TERN_PRECISION_F32, 0},
                {"@qwen3", TERN_PRECISION_F32, 0},            {"/models/tern-demo-code-17m", TERN_PRECISION_BF16, 0},
                {"/models/tern-demo-code-17m", TERN_PRECISION_F32, 0},
                {"qwen3_tied", TERN_PRECISION_F32, CHAIN},    {"llama_rope_llama3", TERN_PRECISION_F32, CHAIN},
                {"qwen3_rope_yarn", TERN_PRECISION_F32, CHAIN}, {"@qwen3", TERN_PRECISION_F32, CHAIN},
                {"/models/tern-demo-code-17m", TERN_PRECISION_F32, CHAIN},
                {"qwen3_tied", TERN_PRECISION_F32, ROWS},     {"llama_rope_llama3", TERN_PRECISION_F32, ROWS},
                {"qwen3_rope_yarn", TERN_PRECISION_F32, ROWS}, {"@qwen3", TERN_PRECISION_F32, ROWS},
                {"/models/tern-demo-code-17m", TERN_PRECISION_BF16, ROWS},
                {"qwen3_tied", TERN_PRECISION_F32, CHAIN | ROWS}, {"@qwen3", TERN_PRECISION_F32, CHAIN | ROWS}};
    for (size_t i = 0; i < sizeof runs / sizeof *runs; i++) {
        const char *n = runs[i].name;
        if (n[0] == '@') snprintf(dir, sizeof dir, "%s/fixtures/models/%s", shared, n + 1);
        else if (n[0] == '/') snprintf(dir, sizeof dir, "%s", n + 1);
        else snprintf(dir, sizeof dir, "tests/fixtures/models/%s", n);
        check_model(dir, gpu, runs[i].prec, runs[i].opt);
    }
    /* What the backend lacks is refused at load, clearly. */
    tern_model_opts og = {.exec = gpu};
    tern_model *m;
    snprintf(dir, sizeof dir, "tests/fixtures/models/qwen3_moe_sparse2");
    CHECK(tern_model_load(dir, &og, &m) == TERN_E_UNSUPPORTED);
    CHECK(strstr(tern_last_error(), "mixture of experts") != NULL);
    tern_exec_free(gpu);
    return check_summary("forward_cuda");
}
