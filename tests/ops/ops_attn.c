/* Attention and the KV write against the CPU reference (tern_cpu_attention,
 * float32), tolerance 1e-5 absolute + 1e-5 relative (outputs are averages of
 * values in [-1, 1]); and invariance: each row alone, each row's last query
 * as a decode step, and a larger grid (max_len) give the same bits as the
 * batch. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/attention.h"
#include "ops_harness.h"

typedef struct {
    int len, n_q;
} row_shape;

typedef struct {
    int H, Hk, hd, cap, n_rows, total_q;
    const row_shape *rs;
    float *q, **k, **v;                 /* host: q [total_q, H*hd]; caches [Hk][cap][hd] per row */
    float *dq, **dk, **dv;              /* device */
    tern_cuda_attn_row *rows;           /* host copy of the device descriptors */
} attn_setup;

/* Runs GPU attention over rows[0..n) (descriptors as given), queries dq,
 * into out (host, [total, H*hd]). */
static int gpu_attention(attn_setup *a, const tern_cuda_attn_row *rows, int n, const float *dq, int total, int max_len,
                         float *out)
{
    int *tok = malloc((size_t)total * sizeof *tok);
    for (int r = 0; r < n; r++)
        for (int i = 0; i < rows[r].n_q; i++) tok[rows[r].q0 + i] = r;
    tern_cuda_attn_row *drows = ops_dev(rows, (size_t)n * sizeof *rows);
    int *dtok = ops_dev(tok, (size_t)total * sizeof *tok);
    size_t pb = tern_cuda_attention_tmp_bytes(total, max_len, a->H, a->hd);
    void *dpart = ops_dev_zero(pb);
    float *dout = ops_dev_zero((size_t)total * a->H * a->hd * 4);
    float scale = 1.0f / sqrtf((float)a->hd);
    int ok = ops_ok(tern_cuda_attention(ops_cuda, drows, dtok, total, max_len, a->H, a->Hk, a->hd, scale, dq,
                                        (long)a->H * a->hd, dout, dpart),
                    "attention");
    if (ok) ops_get(out, dout, (size_t)total * a->H * a->hd * 4);
    tern_cuda_free(ops_cuda, drows); tern_cuda_free(ops_cuda, dtok);
    tern_cuda_free(ops_cuda, dpart); tern_cuda_free(ops_cuda, dout);
    free(tok);
    return ok;
}

static void attention_case(int H, int Hk, int hd, const row_shape *rs, int n_rows)
{
    attn_setup a = {H, Hk, hd, 0, n_rows, 0, rs, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    for (int r = 0; r < n_rows; r++) {
        a.total_q += rs[r].n_q;
        if (rs[r].len > a.cap) a.cap = rs[r].len;
    }
    a.cap += 8;
    char name[200];
    int off = snprintf(name, sizeof name, "attention H=%d Hk=%d hd=%d rows", H, Hk, hd);
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
        float *oldk = calloc((size_t)Hk * hs, 4), *oldv = calloc((size_t)Hk * hs, 4);
        int old = rs[r].len - rs[r].n_q;
        for (int h = 0; h < Hk; h++) {
            memcpy(oldk + h * hs, a.k[r] + h * hs, (size_t)old * hd * 4);
            memcpy(oldv + h * hs, a.v[r] + h * hs, (size_t)old * hd * 4);
            for (int i = 0; i < rs[r].n_q; i++) {
                memcpy(newk + (long)(q0 + i) * (kw + 16) + h * hd, a.k[r] + h * hs + (long)(old + i) * hd, (size_t)hd * 4);
                memcpy(newv + (long)(q0 + i) * (kw + 16) + h * hd, a.v[r] + h * hs + (long)(old + i) * hd, (size_t)hd * 4);
            }
        }
        a.dk[r] = ops_dev(oldk, (size_t)Hk * hs * 4);
        a.dv[r] = ops_dev(oldv, (size_t)Hk * hs * 4);
        free(oldk); free(oldv);
        a.rows[r] = (tern_cuda_attn_row){a.dk[r], a.dv[r], hs, rs[r].len, rs[r].n_q, q0, 0};
        cpu[r] = (tern_attn_row){a.q + q0 * qw, want + q0 * qw, rs[r].n_q, {a.k[r], a.v[r], rs[r].len, hs}};
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
                same = !memcmp(back, a.k[r], (size_t)Hk * hs * 4);
                ops_get(back, a.dv[r], (size_t)Hk * hs * 4);
                same = same && !memcmp(back, a.v[r], (size_t)Hk * hs * 4);
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
        free(one); free(alone); free(a0); free(g0); free(ref2);
    }
out:
    for (int r = 0; r < n_rows; r++) {
        free(a.k[r]); free(a.v[r]);
        tern_cuda_free(ops_cuda, a.dk[r]); tern_cuda_free(ops_cuda, a.dv[r]);
    }
    tern_cuda_free(ops_cuda, a.dq);
    free(a.k); free(a.v); free(a.dk); free(a.dv); free(a.rows); free(a.q);
    free(cpu); free(want); free(got); free(newk); free(newv);
}

void ops_attention(void)
{
    static const row_shape mixed[] = {{1, 1}, {300, 1}, {77, 77}, {600, 5}, {130, 64}};
    static const row_shape one_long[] = {{4100, 1}};
    static const row_shape prefill[] = {{512, 512}};
    attention_case(32, 8, 128, mixed, 5);
    attention_case(8, 2, 64, mixed, 5);
    attention_case(4, 4, 128, mixed, 5);
    attention_case(16, 2, 256, mixed, 3);
    attention_case(32, 8, 128, one_long, 1);
    attention_case(32, 8, 128, prefill, 1);
}
