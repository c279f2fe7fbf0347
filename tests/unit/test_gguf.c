/* GGUF: every block type dequantises bit-exactly as gguf-py (goldens from
 * tests/gen/gen_gguf_goldens.py); the affine form fed to the quantized panels
 * reproduces the dequantised values and the panel matmul computes with them;
 * crafted malformed files (truncated, bad magic/version, absurd counts,
 * lengths and offsets, unknown value/tensor types, misaligned, overlapping,
 * partial blocks, inconsistent model shapes) are refused with an error that
 * names the file and the byte offset. */
#include "check.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cpu/gguf_blocks.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/qpanel.h"
#include "io/gguf.h"
#include "model/gguf_tok.h"
#include "tern/model.h"

/* The tests run from the repository root (scripts/run_unit_tests.sh). */
static const char *root(void)
{
    return ".";
}

static void *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *p = malloc((size_t)len + 1);
    *n = fread(p, 1, (size_t)len, f);
    fclose(f);
    return p;
}

static void check_dequant(void)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/tests/fixtures/gguf/blocks.gguf", root());
    tern_gguf *g = NULL;
    CHECK_MSG(tern_gguf_open(path, &g) == TERN_OK, "%s", tern_last_error());
    if (!g) return;
    CHECK(tern_gguf_n_tensors(g) == 8);
    tern_pool *pool = NULL;
    tern_pool_create(2, &pool);
    for (int i = 0; i < tern_gguf_n_tensors(g); i++) {
        const tern_gguf_tensor *t = tern_gguf_tensor_at(g, i);
        int K = (int)t->ne[0], N = (int)t->ne[1];
        char gp[4300];
        snprintf(gp, sizeof gp, "%s/tests/fixtures/gguf/blocks_%s.f32", root(), tern_dtype_name(t->dtype));
        size_t n = 0;
        float *want = read_file(gp, &n);
        CHECK_MSG(want && n == (size_t)K * N * 4, "golden %s", gp);
        if (!want) continue;
        float *got = malloc((size_t)K * N * 4);
        int be, bb;
        tern_dtype_block(t->dtype, &be, &bb);
        size_t row = (size_t)(K / be) * (size_t)bb;
        for (int r = 0; r < N; r++)
            tern_gguf_dequant(t->dtype, (const uint8_t *)t->data + r * row, K, got + (size_t)r * K);
        CHECK_MSG(memcmp(got, want, (size_t)K * N * 4) == 0, "%s dequantisation differs from gguf-py",
                  tern_dtype_name(t->dtype));
        tern_gguf_affine a;
        if (tern_gguf_affine_of(t->dtype, &a)) {
            /* the affine form gives the same weights (within a rounding of s*q + b) */
            int G = K / a.group;
            size_t ss = tern_dtype_size(a.sdt);
            uint8_t *codes = malloc((size_t)K * N);
            uint8_t *sc = malloc((size_t)N * G * ss), *bi = malloc((size_t)N * G * ss);
            int ok = 1;
            for (int r = 0; r < N; r++) {
                CHECK(tern_gguf_affine_row(t->dtype, (const uint8_t *)t->data + r * row, K, codes + (size_t)r * K,
                                           sc + (size_t)r * G * ss, bi + (size_t)r * G * ss) == 0);
                for (int k = 0; k < K; k++) {
                    size_t gi = (size_t)r * G + k / a.group;
                    float s, b;
                    if (a.sdt == TERN_DT_F32) { memcpy(&s, sc + gi * 4, 4); memcpy(&b, bi + gi * 4, 4); }
                    else {
                        uint16_t hs, hb;
                        memcpy(&hs, sc + gi * 2, 2);
                        memcpy(&hb, bi + gi * 2, 2);
                        s = tern_f16_to_f32(hs);
                        b = tern_f16_to_f32(hb);
                    }
                    float w = s * (float)codes[(size_t)r * K + k] + b, ref = want[(size_t)r * K + k];
                    if (!(fabsf(w - ref) <= 1e-6f * fabsf(ref) + 1e-30f)) ok = 0;
                }
            }
            CHECK_MSG(ok, "%s affine form differs from the dequantised weights", tern_dtype_name(t->dtype));
            /* and the panel matmul (float32 activations) against the dequantised product */
            size_t pb = tern_cpu_qpanel_bytes(a.bits, a.group, a.sdt, N, K);
            void *panel = aligned_alloc(64, (pb + 63) / 64 * 64);
            tern_cpu_qpanel_pack_rows(codes, sc, bi, a.sdt, a.bits, a.group, N, K, panel);
            tern_qmat q = {panel, NULL, NULL, a.sdt, a.group, t->dtype, TERN_QF_AFFINE};
            float x[2 * 512], y[2 * 8];
            for (int k = 0; k < 2 * K; k++) x[k] = (float)((k * 37 % 101) - 50) / 50.0f;
            tern_mm_out o = {&q, a.bits == 8 ? TERN_DT_MLX_Q8 : TERN_DT_MLX_Q4, N, y, TERN_WL_PANELS};
            CHECK(tern_cpu_matmul_multi(pool, TERN_ACT_F32, x, 2, K, &o, 1) == TERN_OK);
            int mok = 1;
            for (int m = 0; m < 2; m++)
                for (int r = 0; r < N; r++) {
                    double acc = 0, mag = 0;
                    for (int k = 0; k < K; k++) {
                        acc += (double)x[m * K + k] * want[(size_t)r * K + k];
                        mag += fabs((double)x[m * K + k] * want[(size_t)r * K + k]);
                    }
                    if (!(fabs(y[m * N + r] - acc) <= 1e-5 * mag + 1e-6)) mok = 0;
                }
            CHECK_MSG(mok, "%s panel matmul differs from the dequantised product", tern_dtype_name(t->dtype));
            /* the raw rows are refused without their panel copy */
            tern_qmat raw = {t->data, NULL, NULL, a.sdt, a.group, t->dtype, TERN_QF_AFFINE};
            tern_mm_out ro = {&raw, o.wdt, N, y, TERN_WL_ROWS};
            CHECK(tern_cpu_matmul_multi(pool, TERN_ACT_F32, x, 2, K, &ro, 1) != TERN_OK);
            free(panel);
            free(codes);
            free(sc);
            free(bi);
        }
        free(got);
        free(want);
    }
    tern_pool_free(pool);
    tern_gguf_close(g);
}

/* ---- crafted files ---- */

typedef struct {
    uint8_t *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *d, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void u32(buf *b, uint32_t v) { put(b, &v, 4); }
static void u64(buf *b, uint64_t v) { put(b, &v, 8); }
static void str(buf *b, const char *s) { u64(b, strlen(s)); put(b, s, strlen(s)); }
static void kv_u32(buf *b, const char *k, uint32_t v) { str(b, k); u32(b, 4); u32(b, v); }
static void kv_f32(buf *b, const char *k, float v) { str(b, k); u32(b, 6); put(b, &v, 4); }
static void kv_str(buf *b, const char *k, const char *v) { str(b, k); u32(b, 8); str(b, v); }
static void header(buf *b, uint64_t nt, uint64_t nkv) { put(b, "GGUF", 4); u32(b, 3); u64(b, nt); u64(b, nkv); }
static void tinfo(buf *b, const char *name, int nd, const uint64_t *ne, uint32_t type, uint64_t off)
{
    str(b, name);
    u32(b, (uint32_t)nd);
    for (int i = 0; i < nd; i++) u64(b, ne[i]);
    u32(b, type);
    u64(b, off);
}
static void pad(buf *b, size_t a) { while (b->n % a) put(b, "", 1); }

static char tmp_path[256];

static tern_status open_bytes(const buf *b, const char *expect)
{
    FILE *f = fopen(tmp_path, "wb");
    fwrite(b->p, 1, b->n, f);
    fclose(f);
    tern_gguf *g = NULL;
    tern_status st = tern_gguf_open(tmp_path, &g);
    tern_gguf_close(g);
    if (st) {
        const char *e = tern_last_error();
        CHECK_MSG(strstr(e, tmp_path) && strstr(e, "byte"), "error must name file and offset: %s", e);
        if (expect) CHECK_MSG(strstr(e, expect) != NULL, "expected '%s' in: %s", expect, e);
    }
    return st;
}

/* A valid file with two F32 tensors [8] and [4, 2]. */
static void valid(buf *b)
{
    b->n = 0;
    header(b, 2, 2);
    kv_str(b, "general.architecture", "test");
    kv_u32(b, "general.alignment", 32);
    uint64_t ne1[1] = {8}, ne2[2] = {4, 2};
    tinfo(b, "a", 1, ne1, 0, 0);
    tinfo(b, "b", 2, ne2, 0, 32);
    pad(b, 32);
    float z[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    put(b, z, 32);
    put(b, z + 8, 32);
}

static void check_malformed(void)
{
    snprintf(tmp_path, sizeof tmp_path, "/tmp/tern-test-gguf-%d.gguf", (int)getpid());
    buf b = {0};
    valid(&b);
    CHECK(open_bytes(&b, NULL) == TERN_OK);
    {
        tern_gguf *g = NULL;
        CHECK(tern_gguf_open(tmp_path, &g) == TERN_OK);
        const tern_gguf_tensor *t = g ? tern_gguf_find_tensor(g, "b") : NULL;
        CHECK(t && t->ne[0] == 4 && t->ne[1] == 2 && ((const float *)t->data)[0] == 9.0f);
        const char *s;
        uint64_t n;
        CHECK(g && tern_gguf_get_str(g, "general.architecture", &s, &n) == TERN_OK && n == 4 && !memcmp(s, "test", 4));
        int64_t v;
        CHECK(g && tern_gguf_get_int(g, "general.architecture", &v) == TERN_E_FORMAT);
        tern_gguf_close(g);
    }
    /* every truncation of the valid file is refused */
    size_t full = b.n;
    int all = 1;
    for (size_t cut = 0; cut < full; cut += (cut < 120 ? 1 : 7)) {
        b.n = cut;
        if (open_bytes(&b, NULL) != TERN_E_FORMAT) { all = 0; fprintf(stderr, "  cut %zu accepted\n", cut); }
    }
    CHECK_MSG(all, "a truncated file was accepted");
    b.n = full;

    valid(&b); memcpy(b.p, "GGUX", 4);
    CHECK(open_bytes(&b, "not a GGUF file") == TERN_E_FORMAT);
    valid(&b); b.p[4] = 1;
    CHECK(open_bytes(&b, "version 1") == TERN_E_UNSUPPORTED);
    valid(&b); { uint64_t v = 1ull << 40; memcpy(b.p + 8, &v, 8); }
    CHECK(open_bytes(&b, "tensor count") == TERN_E_FORMAT);
    valid(&b); { uint64_t v = 1ull << 62; memcpy(b.p + 16, &v, 8); }
    CHECK(open_bytes(&b, "metadata count") == TERN_E_FORMAT);
    valid(&b); { uint64_t v = 1ull << 62; memcpy(b.p + 24, &v, 8); }    /* first key's length */
    CHECK(open_bytes(&b, "runs past the end") == TERN_E_FORMAT);
    valid(&b); { uint32_t v = 99; memcpy(b.p + 24 + 8 + 20, &v, 4); }   /* first value type */
    CHECK(open_bytes(&b, "unknown value type") == TERN_E_FORMAT);

    /* tensor-level problems */
    uint64_t ne1[1] = {8}, ne2[2] = {48, 1}, ne5[4] = {8, 1, 1, 1};
    b.n = 0; header(&b, 1, 0); tinfo(&b, "q41", 1, ne1, 3, 0); pad(&b, 32); put(&b, ne1, 8); put(&b, ne1, 8);
    CHECK(open_bytes(&b, "Q4_1") == TERN_E_UNSUPPORTED);
    b.n = 0; header(&b, 1, 0); str(&b, "x"); u32(&b, 5); for (int i = 0; i < 5; i++) u64(&b, 1); u32(&b, 0); u64(&b, 0);
    CHECK(open_bytes(&b, "5 dimensions") == TERN_E_FORMAT);
    b.n = 0; header(&b, 1, 0); tinfo(&b, "x", 1, ne1, 0, 16); pad(&b, 32); put(&b, ne5, 32); put(&b, ne5, 32);
    CHECK(open_bytes(&b, "not a multiple of the alignment") == TERN_E_FORMAT);
    b.n = 0; header(&b, 1, 0); tinfo(&b, "x", 1, ne1, 0, 1u << 20); pad(&b, 32); put(&b, ne5, 32);
    CHECK(open_bytes(&b, "runs past the end") == TERN_E_FORMAT);
    b.n = 0; header(&b, 1, 0); tinfo(&b, "x", 1, ne1, 0, 0xffffffffffffffe0ull); pad(&b, 32); put(&b, ne5, 32);
    CHECK(open_bytes(&b, "runs past the end") == TERN_E_FORMAT);
    b.n = 0; header(&b, 2, 0); tinfo(&b, "x", 1, ne1, 0, 0); tinfo(&b, "y", 1, ne1, 0, 0); pad(&b, 32); put(&b, ne5, 32);
    CHECK(open_bytes(&b, "overlap") == TERN_E_FORMAT);
    b.n = 0; header(&b, 1, 0); tinfo(&b, "x", 2, ne2, 8, 0); pad(&b, 32); put(&b, ne5, 32); put(&b, ne5, 32);
    CHECK(open_bytes(&b, "not whole Q8_0 blocks") == TERN_E_FORMAT);
    { uint64_t big[2] = {1ull << 39, 1ull << 39}; b.n = 0; header(&b, 1, 0); tinfo(&b, "x", 2, big, 0, 0); pad(&b, 32);
      CHECK(open_bytes(&b, "absurd") == TERN_E_FORMAT); }

    /* a model file whose q projection has the wrong shape */
    b.n = 0;
    header(&b, 5, 11);
    kv_str(&b, "general.architecture", "qwen3");
    kv_u32(&b, "qwen3.block_count", 1);
    kv_u32(&b, "qwen3.embedding_length", 64);
    kv_u32(&b, "qwen3.attention.head_count", 2);
    kv_u32(&b, "qwen3.attention.head_count_kv", 1);
    kv_u32(&b, "qwen3.feed_forward_length", 64);
    kv_u32(&b, "qwen3.attention.key_length", 32);
    kv_f32(&b, "qwen3.rope.freq_base", 10000.0f);
    kv_str(&b, "tokenizer.ggml.model", "gpt2");
    str(&b, "tokenizer.ggml.tokens"); u32(&b, 9); u32(&b, 8); u64(&b, 2); str(&b, "a"); str(&b, "b");
    str(&b, "tokenizer.ggml.merges"); u32(&b, 9); u32(&b, 8); u64(&b, 0);
    uint64_t emb[2] = {64, 8}, vec[1] = {64}, q[2] = {64, 32};
    tinfo(&b, "token_embd.weight", 2, emb, 0, 0);
    tinfo(&b, "output_norm.weight", 1, vec, 0, 2048);
    tinfo(&b, "blk.0.attn_norm.weight", 1, vec, 0, 2304);
    tinfo(&b, "blk.0.ffn_norm.weight", 1, vec, 0, 2560);
    tinfo(&b, "blk.0.attn_q.weight", 2, q, 0, 2816);
    pad(&b, 32);
    size_t data0 = b.n;
    while (b.n < data0 + 2816 + 64 * 32 * 4) put(&b, "\0\0\0\0", 4);
    FILE *f = fopen(tmp_path, "wb");
    fwrite(b.p, 1, b.n, f);
    fclose(f);
    tern_model *m = NULL;
    tern_model_opts mo = {.n_threads = 1, .precision = TERN_PRECISION_F32};
    CHECK(tern_model_load(tmp_path, &mo, &m) == TERN_E_FORMAT);
    CHECK_MSG(strstr(tern_last_error(), "blk.0.attn_q.weight") && strstr(tern_last_error(), "byte"), "%s",
              tern_last_error());
    tern_model_free(m);
    unlink(tmp_path);
    free(b.p);
}

/* A string array of n entries. */
static void kv_strs(buf *b, const char *k, const char *const *v, int n)
{
    str(b, k);
    u32(b, 9);
    u32(b, 8);
    u64(b, (uint64_t)n);
    for (int i = 0; i < n; i++) str(b, v[i]);
}

/* The tokenizer written from a GGUF file's metadata: a piece or merge that
 * is not UTF-8 (which JSON cannot hold) is refused, naming its index, never
 * dropped (which would shift every later id or merge rank). */
static void check_tokenizer_utf8(void)
{
    const char *good[] = {"a", "b", "ab"}, *bad[] = {"a", "\xff\xfe", "ab"}, *merges[] = {"a b"};
    const char *bad_merges[] = {"a b", "\xc3 b"};
    for (int c = 0; c < 4; c++) {
        buf b = {0};
        header(&b, 0, 4);
        kv_str(&b, "tokenizer.ggml.model", "gpt2");
        kv_str(&b, "tokenizer.ggml.pre", "qwen2");
        if (c == 3) {
            /* "a", "a\0b", "ab": a NUL inside a piece */
            str(&b, "tokenizer.ggml.tokens");
            u32(&b, 9);
            u32(&b, 8);
            u64(&b, 3);
            str(&b, "a");
            u64(&b, 3);
            put(&b, "a\0b", 3);
            str(&b, "ab");
        } else {
            kv_strs(&b, "tokenizer.ggml.tokens", c == 1 ? bad : good, 3);
        }
        kv_strs(&b, "tokenizer.ggml.merges", c == 2 ? bad_merges : merges, c == 2 ? 2 : 1);
        pad(&b, 32);
        tern_gguf *g = NULL;
        CHECK(tern_gguf_open_memory(b.p, b.n, "mem.gguf", &g) == TERN_OK);
        char *tok = NULL, *cfg = NULL;
        tern_status st = g ? tern_gguf_text_json(g, &tok, &cfg) : TERN_E_FORMAT;
        if (c == 0) {
            CHECK_MSG(st == TERN_OK && strstr(tok, "\"ab\":2") && strstr(tok, "\"a b\""), "%s", tok ? tok : "");
        } else {
            CHECK(st == TERN_E_FORMAT);
            const char *want = c != 2 ? "tokenizer.ggml.tokens[1]" : "tokenizer.ggml.merges[1]";
            CHECK_MSG(strstr(tern_last_error(), want) && strstr(tern_last_error(), "mem.gguf"), "%s", tern_last_error());
        }
        free(tok);
        free(cfg);
        tern_gguf_close(g);
        free(b.p);
    }
}

int main(void)
{
    check_dequant();
    check_malformed();
    check_tokenizer_utf8();
    return check_summary("gguf");
}
