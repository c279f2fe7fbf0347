/* Attention and the KV write against the CPU reference (tern_cpu_attention,
 * float32), tolerance 1e-5 absolute + 1e-5 relative (outputs are averages of
 * values in [-1, 1]), over contiguous rows and over paged rows (blocks of 32
 * positions in shuffled order, the CPU pool's layout); and invariance: each
 * row alone, each row's last query as a decode step, and a larger grid
 * (max_len) give the same bits as the batch. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/attention.h"
#include "backend/cpu/ops.h"
#include "ops_harness.h"

typedef struct {
    int len, n_q;
} row_shape;

typedef struct {
    int H, Hk, hd, cap, n_rows, total_q;
    const row_shape *rs;
    float *q, **k, **v;                 /* host: q [total_q, H*hd]; logical caches [Hk][cap][hd] per row */
    float *dq, **dk, **dv;              /* device, in the row's layout */
    tern_cuda_attn_row *rows;           /* host copy of the device descriptors */
} attn_setup;

enum { PAGE = 32 };

/* The first upto positions of a logical [Hk][cap][hd] cache in the row's
 * layout: itself (table NULL), or blocks [nb][Hk][PAGE][hd] where logical
 * block b is stored at table[b]. Returns owned memory. */
static float *in_layout(const float *logical, int upto, int Hk, int cap, int hd, const int *table)
{
    float *o = calloc((size_t)Hk * cap * hd, 4);
    for (int h = 0; h < Hk; h++)
        for (int p = 0; p < upto; p++) {
            long src = ((long)h * cap + p) * hd;
            long dst = table ? (((long)table[p / PAGE] * Hk + h) * PAGE + p % PAGE) * hd : src;
            memcpy(o + dst, logical + src, (size_t)hd * 4);
        }
    return o;
}

/* Runs GPU attention over rows[0..n) (descriptors as given), queries dq,
 * into out (host, [total, H*hd]); tiled: by tern_cuda_attention_tiled. */
static int gpu_attention_k(attn_setup *a, const tern_cuda_attn_row *rows, int n, const float *dq, int total,
                           int max_len, float *out, int tiled)
{
    int *tok = malloc((size_t)total * sizeof *tok);
    for (int r = 0; r < n; r++)
        for (int i = 0; i < rows[r].n_q; i++) tok[rows[r].q0 + i] = r;
    tern_cuda_attn_row *drows = ops_dev(rows, (size_t)n * sizeof *rows);
    int *dtok = ops_dev(tok, (size_t)total * sizeof *tok);
    size_t pb = tern_cuda_attention_tmp_bytes(total, max_len, a->H, a->hd);
    void *dpart = ops_dev_zero(pb);
    unsigned *dcount = ops_dev_zero(tern_cuda_attention_count_bytes(total, a->Hk));
    float *dout = ops_dev_zero((size_t)total * a->H * a->hd * 4);
    float scale = 1.0f / sqrtf((float)a->hd);
    int ok = ops_ok(tiled ? tern_cuda_attention_tiled(ops_cuda, drows, dtok, total, max_len, a->H, a->Hk, a->hd, scale,
                                                      dq, (long)a->H * a->hd, dout)
                          : tern_cuda_attention(ops_cuda, drows, dtok, total, max_len, a->H, a->Hk, a->hd, scale, dq,
                                                (long)a->H * a->hd, dout, dpart, dcount, NULL),
                    tiled ? "attention_tiled" : "attention");
    if (ok) ops_get(out, dout, (size_t)total * a->H * a->hd * 4);
    tern_cuda_free(ops_cuda, drows); tern_cuda_free(ops_cuda, dtok);
    tern_cuda_free(ops_cuda, dpart); tern_cuda_free(ops_cuda, dout); tern_cuda_free(ops_cuda, dcount);
    free(tok);
    return ok;
}

static int gpu_attention(attn_setup *a, const tern_cuda_attn_row *rows, int n, const float *dq, int total, int max_len,
                         float *out)
{
    return gpu_attention_k(a, rows, n, dq, total, max_len, out, 0);
}

static void attention_case(int H, int Hk, int hd, const row_shape *rs, int n_rows, int paged)
{
    attn_setup a = {H, Hk, hd, 0, n_rows, 0, rs, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    for (int r = 0; r < n_rows; r++) {
        a.total_q += rs[r].n_q;
        if (rs[r].len > a.cap) a.cap = rs[r].len;
    }
    a.cap = (a.cap + 8 + PAGE - 1) / PAGE * PAGE;
    int nb = a.cap / PAGE;
    int **tables = calloc((size_t)n_rows, sizeof *tables), **dtables = calloc((size_t)n_rows, sizeof *dtables);
    float **pk = calloc((size_t)n_rows, sizeof *pk), **pv = calloc((size_t)n_rows, sizeof *pv);
    int whole[1] = {0};
    char name[200];
    int off = snprintf(name, sizeof name, "attention%s H=%d Hk=%d hd=%d rows", paged ? " paged" : "", H, Hk, hd);
    for (int r = 0; r < n_rows && off < 150; r++) off += snprintf(name + off, sizeof name - off, " %d/%d", rs[r].n_q, rs[r].len);
    long qw = (long)H * hd, kw = (long)Hk * hd, hs = (long)a.cap * hd;
    a.q = malloc((size_t)a.total_q * qw * 4);
    ops_fill(a.q, a.total_q * qw, 5u + (unsigned)H, 2.0f);
    a.k = calloc((size_t)n_rows, sizeof *a.k); a.v = calloc((size_t)n_rows, sizeof *a.v);
    a.dk = calloc((size_t)n_rows, sizeof *a.dk); a.dv = calloc((size_t)n_rows, sizeof *a.dv);
    a.rows = calloc((size_t)n_rows, sizeof *a.rows);
    tern_attn_row *cpu = calloc((size_t)n_rows, sizeof *cpu);
    float *want = calloc((size_t)a.total_q * qw, 4), *got = malloc((size_t)a.total_q * qw * 4);
    float *newk = calloc((size_t)a.total_q * (kw + 16), 4), *newv = calloc((size_t)a.total_q * (kw + 16), 4);
    int q0 = 0;
    for (int r = 0; r < n_rows; r++) {
        a.k[r] = calloc((size_t)Hk * hs, 4);
        a.v[r] = calloc((size_t)Hk * hs, 4);
        for (int h = 0; h < Hk; h++) {
            ops_fill(a.k[r] + h * hs, (long)rs[r].len * hd, 100u + (unsigned)(r * 31 + h), 1.0f);
            ops_fill(a.v[r] + h * hs, (long)rs[r].len * hd, 200u + (unsigned)(r * 31 + h), 1.0f);
        }
        /* The new tokens' keys/values go through tern_cuda_kv_write: the
         * device cache starts with only the old positions. */
        int old = rs[r].len - rs[r].n_q;
        if (paged) {
            tables[r] = malloc((size_t)nb * sizeof **tables);
            for (int b = 0; b < nb; b++) tables[r][b] = (b * 7 + 3 + r) % nb;   /* a permutation: 7 and nb coprime */
            for (int b = 0; b < nb && nb % 7 == 0; b++) tables[r][b] = nb - 1 - b;
            dtables[r] = ops_dev(tables[r], (size_t)nb * sizeof **tables);
        }
        float *oldk = in_layout(a.k[r], old, Hk, a.cap, hd, tables[r]), *oldv = in_layout(a.v[r], old, Hk, a.cap, hd, tables[r]);
        pk[r] = in_layout(a.k[r], rs[r].len, Hk, a.cap, hd, tables[r]);
        pv[r] = in_layout(a.v[r], rs[r].len, Hk, a.cap, hd, tables[r]);
        for (int h = 0; h < Hk; h++) {
            for (int i = 0; i < rs[r].n_q; i++) {
                memcpy(newk + (long)(q0 + i) * (kw + 16) + h * hd, a.k[r] + h * hs + (long)(old + i) * hd, (size_t)hd * 4);
                memcpy(newv + (long)(q0 + i) * (kw + 16) + h * hd, a.v[r] + h * hs + (long)(old + i) * hd, (size_t)hd * 4);
            }
        }
        a.dk[r] = ops_dev(oldk, (size_t)Hk * hs * 4);
        a.dv[r] = ops_dev(oldv, (size_t)Hk * hs * 4);
        free(oldk); free(oldv);
        if (paged) {
            a.rows[r] = (tern_cuda_attn_row){a.dk[r], a.dv[r], dtables[r], (long)Hk * PAGE * hd, (long)PAGE * hd, PAGE,
                                             rs[r].len, rs[r].n_q, q0};
            cpu[r] = (tern_attn_row){a.q + q0 * qw, want + q0 * qw, rs[r].n_q,
                                     {pk[r], pv[r], tables[r], rs[r].len, PAGE, (long)Hk * PAGE * hd, (long)PAGE * hd}};
        } else {
            a.rows[r] = (tern_cuda_attn_row){a.dk[r], a.dv[r], NULL, 0, hs, 0, rs[r].len, rs[r].n_q, q0};
            cpu[r] = (tern_attn_row){a.q + q0 * qw, want + q0 * qw, rs[r].n_q,
                                     {pk[r], pv[r], whole, rs[r].len, a.cap, (long)Hk * hs, hs}};
        }
        q0 += rs[r].n_q;
    }
    a.dq = ops_dev(a.q, (size_t)a.total_q * qw * 4);
    /* kv write, then check the caches. */
    {
        int *tok = malloc((size_t)a.total_q * sizeof *tok);
        for (int r = 0; r < n_rows; r++)
            for (int i = 0; i < rs[r].n_q; i++) tok[a.rows[r].q0 + i] = r;
        tern_cuda_attn_row *drows = ops_dev(a.rows, (size_t)n_rows * sizeof *a.rows);
        int *dtok = ops_dev(tok, (size_t)a.total_q * sizeof *tok);
        float *dnk = ops_dev(newk, (size_t)a.total_q * (kw + 16) * 4), *dnv = ops_dev(newv, (size_t)a.total_q * (kw + 16) * 4);
        if (ops_ok(tern_cuda_kv_write(ops_cuda, drows, dtok, a.total_q, Hk, hd, dnk, dnv, kw + 16), "kv_write")) {
            int same = 1;
            float *back = malloc((size_t)Hk * hs * 4);
            for (int r = 0; r < n_rows && same; r++) {
                ops_get(back, a.dk[r], (size_t)Hk * hs * 4);
                same = !memcmp(back, pk[r], (size_t)Hk * hs * 4);
                ops_get(back, a.dv[r], (size_t)Hk * hs * 4);
                same = same && !memcmp(back, pv[r], (size_t)Hk * hs * 4);
            }
            printf("%s %-58s %s\n", same ? "PASS" : "FAIL", "  kv_write: caches hold the new tokens", same ? "exact" : "differ");
            same ? ops_pass++ : ops_fail++;
            free(back);
        }
        tern_cuda_free(ops_cuda, drows); tern_cuda_free(ops_cuda, dtok);
        tern_cuda_free(ops_cuda, dnk); tern_cuda_free(ops_cuda, dnv);
        free(tok);
    }
    if (!ops_ok(tern_cpu_attention(NULL, cpu, n_rows, H, Hk, hd, 1.0f / sqrtf((float)hd)), "cpu attention")) goto out;
    if (gpu_attention(&a, a.rows, n_rows, a.dq, a.total_q, a.cap, got)) {
        ops_compare(name, got, want, NULL, a.total_q * qw, 1e-5, 1e-5);
        float *one = malloc((size_t)a.total_q * qw * 4), *alone = malloc((size_t)a.total_q * qw * 4);
        for (int r = 0; r < n_rows; r++) {
            tern_cuda_attn_row solo = a.rows[r];
            solo.q0 = 0;
            gpu_attention(&a, &solo, 1, a.dq + (long)a.rows[r].q0 * qw, rs[r].n_q, rs[r].len, one);
            memcpy(alone + (long)a.rows[r].q0 * qw, one, (size_t)rs[r].n_q * qw * 4);
        }
        ops_same("  each row alone == in the batch", alone, got, a.total_q * qw);
        for (int r = 0; r < n_rows; r++) {
            tern_cuda_attn_row dec = a.rows[r];
            dec.n_q = 1;
            dec.q0 = 0;
            gpu_attention(&a, &dec, 1, a.dq + (long)(a.rows[r].q0 + rs[r].n_q - 1) * qw, 1, rs[r].len, one);
            memcpy(alone + (long)a.rows[r].q0 * qw, one, (size_t)qw * 4);
            memcpy(got + (long)a.rows[r].q0 * qw, got + (long)(a.rows[r].q0 + rs[r].n_q - 1) * qw, (size_t)qw * 4);
        }
        float *a0 = malloc((size_t)n_rows * qw * 4), *g0 = malloc((size_t)n_rows * qw * 4);
        for (int r = 0; r < n_rows; r++) {
            memcpy(a0 + r * qw, alone + (long)a.rows[r].q0 * qw, (size_t)qw * 4);
            memcpy(g0 + r * qw, got + (long)a.rows[r].q0 * qw, (size_t)qw * 4);
        }
        ops_same("  last query as a decode step == in the prefill", a0, g0, n_rows * qw);
        gpu_attention(&a, a.rows, n_rows, a.dq, a.total_q, a.cap * 3 + 100, one);
        float *ref2 = malloc((size_t)a.total_q * qw * 4);
        gpu_attention(&a, a.rows, n_rows, a.dq, a.total_q, a.cap, ref2);
        ops_same("  larger grid (max_len x3) == exact grid", one, ref2, a.total_q * qw);
        /* The tiled prefill kernel: the per-query kernel's bits, in the batch
         * and for each row alone. */
        if (gpu_attention_k(&a, a.rows, n_rows, a.dq, a.total_q, a.cap, one, 1))
            ops_same("  tiled kernel == per-query kernel", one, ref2, a.total_q * qw);
        if (gpu_attention_k(&a, a.rows, n_rows, a.dq, a.total_q, a.cap * 3 + 100, one, 1))
            ops_same("  tiled kernel, larger grid == per-query kernel", one, ref2, a.total_q * qw);
        free(one); free(alone); free(a0); free(g0); free(ref2);
    }
out:
    for (int r = 0; r < n_rows; r++) {
        free(a.k[r]); free(a.v[r]); free(pk[r]); free(pv[r]); free(tables[r]);
        tern_cuda_free(ops_cuda, a.dk[r]); tern_cuda_free(ops_cuda, a.dv[r]); tern_cuda_free(ops_cuda, dtables[r]);
    }
    free(tables); free(dtables); free(pk); free(pv);
    tern_cuda_free(ops_cuda, a.dq);
    free(a.k); free(a.v); free(a.dk); free(a.dv); free(a.rows); free(a.q);
    free(cpu); free(want); free(got); free(newk); free(newv);
}

/* The fused prologue against its unfused parts: q/k norm + rope in place,
 * k and v stored in the caches (rows of 3 and 1 tokens). */
static void qkv_prologue_case(int H, int HK, int hd)
{
    char name[120];
    snprintf(name, sizeof name, "qkv_rope_store H=%d HK=%d hd=%d", H, HK, hd);
    int n = 4, cap = 64, n_pos = 128;
    long ld = (long)(H + 2 * HK) * hd + 8, hs = (long)cap * hd;
    float *qkv = malloc((size_t)n * ld * 4), *cs = malloc((size_t)n_pos * hd * 4), *qn = malloc((size_t)hd * 4);
    float *kn = malloc((size_t)hd * 4), *inv = malloc((size_t)hd / 2 * 4);
    int *all = malloc((size_t)n_pos * 4);
    ops_fill(qkv, (long)n * ld, 77u, 2.0f);
    ops_fill(qn, hd, 78u, 1.5f);
    ops_fill(kn, hd, 79u, 1.5f);
    for (int i = 0; i < hd / 2; i++) inv[i] = powf(10000.0f, -2.0f * i / hd);
    for (int p = 0; p < n_pos; p++) all[p] = p;
    tern_cpu_rope_table(n_pos, hd, all, inv, 1.0f, cs);
    float *dcs = ops_dev(cs, (size_t)n_pos * hd * 4), *dqn = ops_dev(qn, (size_t)hd * 4), *dkn = ops_dev(kn, (size_t)hd * 4);
    float *cache[2][2], *qkvd[2];
    tern_cuda_attn_row rows[2][2];
    for (int v = 0; v < 2; v++) {
        qkvd[v] = ops_dev(qkv, (size_t)n * ld * 4);
        for (int r = 0; r < 2; r++) {
            cache[v][r] = ops_dev_zero((size_t)2 * HK * hs * 4);
            rows[v][r] = (tern_cuda_attn_row){cache[v][r], cache[v][r] + HK * hs, NULL, 0, hs, 0, r ? 40 : 9, r ? 1 : 3,
                                              r ? 3 : 0};
        }
    }
    int tok[4] = {0, 0, 0, 1}, pos[4] = {6, 7, 8, 39};
    int *dtok = ops_dev(tok, sizeof tok), *dpos = ops_dev(pos, sizeof pos);
    tern_cuda_attn_row *dr0 = ops_dev(rows[0], sizeof rows[0]), *dr1 = ops_dev(rows[1], sizeof rows[1]);
    int ok = ops_ok(tern_cuda_qkv_rope_store(ops_cuda, qkvd[0], ld, n, H, HK, hd, hd, dqn, dkn, TERN_DT_F32, 1e-6f, dcs,
                                             dr0, dtok), name) &&
             ops_ok(tern_cuda_head_norm_rope(ops_cuda, qkvd[1], ld, n, H, hd, hd, dqn, TERN_DT_F32, 1e-6f, dcs, dpos), name) &&
             ops_ok(tern_cuda_head_norm_rope(ops_cuda, qkvd[1] + (long)H * hd, ld, n, HK, hd, hd, dkn, TERN_DT_F32, 1e-6f,
                                             dcs, dpos), name) &&
             ops_ok(tern_cuda_kv_write(ops_cuda, dr1, dtok, n, HK, hd, qkvd[1] + (long)H * hd,
                                       qkvd[1] + (long)(H + HK) * hd, ld), name);
    if (ok) {
        long nb = (long)n * ld + 2L * 2 * HK * hs;
        float *a = malloc((size_t)nb * 4), *b = malloc((size_t)nb * 4);
        ops_get(a, qkvd[0], (size_t)n * ld * 4);
        ops_get(b, qkvd[1], (size_t)n * ld * 4);
        for (int r = 0; r < 2; r++) {
            ops_get(a + n * ld + r * 2 * HK * hs, cache[0][r], (size_t)2 * HK * hs * 4);
            ops_get(b + n * ld + r * 2 * HK * hs, cache[1][r], (size_t)2 * HK * hs * 4);
        }
        char n2[160];
        snprintf(n2, sizeof n2, "%s == norm/rope, norm/rope, kv_write", name);
        ops_same(n2, a, b, nb);
        free(a); free(b);
    }
    for (int v = 0; v < 2; v++) {
        tern_cuda_free(ops_cuda, qkvd[v]);
        for (int r = 0; r < 2; r++) tern_cuda_free(ops_cuda, cache[v][r]);
    }
    tern_cuda_free(ops_cuda, dcs); tern_cuda_free(ops_cuda, dqn); tern_cuda_free(ops_cuda, dkn);
    tern_cuda_free(ops_cuda, dtok); tern_cuda_free(ops_cuda, dpos); tern_cuda_free(ops_cuda, dr0); tern_cuda_free(ops_cuda, dr1);
    free(qkv); free(cs); free(qn); free(kn); free(inv); free(all);
}

void ops_attention(void)
{
    /* both prologue kernels: shared memory, then a head in registers */
    for (int reg = 0; reg < 2; reg++) {
        int was = tern_cuda_set_pro_reg(ops_cuda, reg);
        qkv_prologue_case(8, 2, 128);
        qkv_prologue_case(4, 4, 64);
        qkv_prologue_case(4, 2, 256);
        tern_cuda_set_pro_reg(ops_cuda, was);
    }
    static const row_shape mixed[] = {{1, 1}, {300, 1}, {77, 77}, {600, 5}, {130, 64}};
    static const row_shape one_long[] = {{4100, 1}};
    static const row_shape prefill[] = {{512, 512}};
    /* Rows whose splits outnumber one chunk of the per-query kernel's fold
     * (attn_fold: cap / (4 G) splits a chunk, 552 at G = 4 and 276 at G = 8
     * for head_dim 128), so that its running max carries across chunks. */
    static const row_shape past_chunk4[] = {{18000, 3}}, past_chunk8[] = {{9000, 2}};
    /* Rows of at most 8 splits in the batch (alone too), and past them with
     * the grid made larger. */
    static const row_shape short_rows[] = {{1, 1}, {33, 1}, {77, 77}, {130, 64}, {200, 3}};
    /* Both places of the decode attention's fold (the bits must not
     * change: each case checks the per-query kernel against the tiled one
     * bit for bit); the default loop below takes the separate launch past
     * 32 splits. */
    for (int apart = 0; apart < 2; apart++) {
        int was = tern_cuda_set_fold_splits(ops_cuda, apart);
        printf("(decode attention's fold: %s)\n", apart ? "a launch of its own" : "the split kernel's last block");
        attention_case(32, 8, 128, past_chunk4, 1, 0);
        attention_case(32, 4, 128, past_chunk8, 1, 1);
        attention_case(32, 8, 128, mixed, 5, 0);
        attention_case(16, 2, 256, mixed, 3, 1);
        attention_case(4, 2, 16, mixed, 5, 0);
        attention_case(64, 8, 128, short_rows, 5, apart);
        attention_case(8, 8, 64, short_rows, 5, !apart);
        tern_cuda_set_fold_splits(ops_cuda, was);
    }
    for (int paged = 0; paged < 2; paged++) {
        attention_case(32, 8, 128, mixed, 5, paged);
        attention_case(8, 2, 64, mixed, 5, paged);
        attention_case(4, 4, 128, mixed, 5, paged);
        attention_case(16, 2, 256, mixed, 3, paged);
        attention_case(4, 2, 16, mixed, 5, paged);
        attention_case(4, 2, 32, mixed, 5, paged);
        attention_case(32, 8, 128, short_rows, 5, paged);
        attention_case(32, 8, 128, one_long, 1, paged);
        attention_case(32, 8, 128, prefill, 1, paged);
    }
}
