/* The products with the RMSNorm folded in against a double reference, and
 * their batch invariance (a row's bits the same for any M); the sampling
 * summaries against a double log-sum-exp and the host's tern_argmax. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/ops.h"
#include "engine/sampler_internal.h"
#include "ops_harness.h"

static void *dev_of(const float *f, long n, tern_dtype dt)
{
    void *h = ops_to_dtype(f, n, dt);
    void *d = ops_dev(h, (size_t)n * tern_dtype_size(dt));
    free(h);
    return d;
}

/* want[m, n] = rmsnorm(x[m]) . w[n] in double from the dtype-rounded w;
 * scale = |h| . |w|. */
static void norm_reference(const float *x, int M, int K, const float *nw, float eps, const float *wf, int N,
                           double *want, double *scale)
{
    double *h = malloc((size_t)K * sizeof *h);
    for (int m = 0; m < M; m++) {
        double ss = 0;
        for (int k = 0; k < K; k++) ss += (double)x[(long)m * K + k] * x[(long)m * K + k];
        double inv = 1.0 / sqrt(ss / K + eps);
        for (int k = 0; k < K; k++) h[k] = x[(long)m * K + k] * inv * nw[k];
        for (int n = 0; n < N; n++) {
            double s = 0, a = 0;
            for (int k = 0; k < K; k++) {
                s += h[k] * wf[(long)n * K + k];
                a += fabs(h[k] * wf[(long)n * K + k]);
            }
            want[(long)m * N + n] = s;
            scale[(long)m * N + n] = a;
        }
    }
    free(h);
}

static float *rounded(const float *f, long n, tern_dtype dt)
{
    void *h = ops_to_dtype(f, n, dt);
    float *r = malloc((size_t)n * sizeof *r);
    tern_cpu_to_f32(h, dt, n, r);
    free(h);
    return r;
}

/* matmul_norm (gate = 0) or gate_up_norm (gate = 1) against double, and
 * every row of an M-row call bit-identical to that row alone (M = 1). */
static void norm_case(int gate, tern_dtype wdt, int M, int K, int N)
{
    char name[160];
    snprintf(name, sizeof name, "%s %s M=%d K=%d N=%d", gate ? "gate_up_norm" : "matmul_norm", tern_dtype_name(wdt), M, K,
             N);
    float *x = malloc((size_t)M * K * 4), *nw = malloc((size_t)K * 4), *w = malloc((size_t)N * K * 4);
    float *wu = malloc((size_t)N * K * 4), *got = malloc((size_t)M * N * 4), *one = malloc((size_t)N * 4);
    ops_fill(x, (long)M * K, (unsigned)(M * 3 + K), 2.0f);
    ops_fill(nw, K, (unsigned)K + 4, 1.5f);
    ops_fill(w, (long)N * K, (unsigned)(N + K), 0.05f);
    ops_fill(wu, (long)N * K, (unsigned)(N + K + 9), 0.05f);
    float *dx = ops_dev(x, (size_t)M * K * 4), *dnw = ops_dev(nw, (size_t)K * 4);
    void *dw = dev_of(w, (long)N * K, wdt), *du = dev_of(wu, (long)N * K, wdt);
    float *dy = ops_dev_zero((size_t)M * N * 4), *d1 = ops_dev_zero((size_t)N * 4);
    float *tmp = ops_dev_zero(tern_cuda_norm_tmp_bytes(K));
    int ok = gate ? ops_ok(tern_cuda_gate_up_norm(ops_cuda, dx, M, K, dnw, 1e-6f, dw, du, wdt, N, dy, tmp), name)
                  : ops_ok(tern_cuda_matmul_norm(ops_cuda, dx, M, K, dnw, 1e-6f, dw, wdt, N, dy, N, tmp), name);
    if (ok) {
        ops_get(got, dy, (size_t)M * N * 4);
        float *wr = rounded(w, (long)N * K, wdt), *ur = rounded(wu, (long)N * K, wdt);
        double *want = malloc((size_t)M * N * sizeof *want), *scale = malloc((size_t)M * N * sizeof *scale);
        double *wup = malloc((size_t)M * N * sizeof *wup), *sup = malloc((size_t)M * N * sizeof *sup);
        float *wantf = malloc((size_t)M * N * 4);
        norm_reference(x, M, K, nw, 1e-6f, wr, N, want, scale);
        if (gate) {
            norm_reference(x, M, K, nw, 1e-6f, ur, N, wup, sup);
            for (long i = 0; i < (long)M * N; i++) {
                double g = want[i], u = wup[i];
                wantf[i] = (float)(g / (1.0 + exp(-g)) * u);
                scale[i] = (scale[i] * fabs(u) + sup[i] * fabs(g)) + 1e-30;
            }
        } else {
            for (long i = 0; i < (long)M * N; i++) wantf[i] = (float)want[i];
        }
        ops_compare(name, got, wantf, scale, (long)M * N, 1e-6, 2e-5);
        /* Row by row alone: the same bits. */
        int same = 1;
        for (int m = 0; m < M && same; m += (M > 8 ? 7 : 1)) {
            ok = gate ? ops_ok(tern_cuda_gate_up_norm(ops_cuda, dx + (long)m * K, 1, K, dnw, 1e-6f, dw, du, wdt, N, d1, tmp), name)
                      : ops_ok(tern_cuda_matmul_norm(ops_cuda, dx + (long)m * K, 1, K, dnw, 1e-6f, dw, wdt, N, d1, N, tmp), name);
            if (!ok) break;
            ops_get(one, d1, (size_t)N * 4);
            same = !memcmp(one, got + (long)m * N, (size_t)N * 4);
        }
        if (ok) {
            strcat(name, ": rows alone");
            printf("%s %-58s %s\n", same ? "PASS" : "FAIL", name, same ? "bit-identical" : "differ");
            same ? ops_pass++ : ops_fail++;
        }
        free(wr); free(ur); free(want); free(scale); free(wup); free(sup); free(wantf);
    }
    tern_cuda_free(ops_cuda, dx); tern_cuda_free(ops_cuda, dnw); tern_cuda_free(ops_cuda, dw); tern_cuda_free(ops_cuda, du);
    tern_cuda_free(ops_cuda, dy); tern_cuda_free(ops_cuda, d1); tern_cuda_free(ops_cuda, tmp);
    free(x); free(nw); free(w); free(wu); free(got); free(one);
}

/* Summaries of n rows against the host: lse within 2e-6 relative of a
 * double log-sum-exp, argmax and lp exactly tern_argmax over
 * logits - (the device's lse). Row kinds: random; ties everywhere; a NaN
 * in the middle; a NaN at index 0; -inf entries. Run twice (counters). */
static void summary_case(int V, float scale)
{
    enum { N = 5 };
    char name[120];
    snprintf(name, sizeof name, "summary V=%d scale %g", V, scale);
    float *lg = malloc((size_t)N * V * 4), *lp = malloc((size_t)V * 4);
    ops_fill(lg, (long)N * V, (unsigned)V + 17, scale);
    for (int i = 0; i < V; i++) lg[V + i] = (float)(i % 7 == 3);   /* ties: first 3 */
    lg[2L * V + V / 2] = NAN;
    lg[3L * V] = NAN;
    for (int i = 0; i < V; i += 3) lg[4L * V + i] = -INFINITY;
    float *dl = ops_dev(lg, (size_t)N * V * 4);
    void *tmp = ops_dev_zero(tern_cuda_summary_tmp_bytes(N, V));
    unsigned *cnt = ops_dev_zero(tern_cuda_summary_count_bytes(N));
    tern_cuda_lsum *dout = ops_dev_zero(N * sizeof(tern_cuda_lsum)), out[N];
    int ok = 1;
    for (int rep = 0; rep < 2 && ok; rep++)
        ok = ops_ok(tern_cuda_summary(ops_cuda, dl, V, N, V, tmp, cnt, dout), name);
    if (ok) {
        ops_get(out, dout, sizeof out);
        for (int r = 0; r < N; r++) {
            const float *x = lg + (long)r * V;
            float host = tern_mlx_logsumexp(x, V), want = host;
            if (!isnan(host) && !isinf(host)) {
                double mx = -INFINITY, sum = 0;
                for (int i = 0; i < V; i++) mx = x[i] > mx ? x[i] : mx;
                for (int i = 0; i < V; i++) sum += exp((double)x[i] - mx);
                want = (float)(log(sum) + mx);
            }
            for (int i = 0; i < V; i++) lp[i] = x[i] - out[r].lse;
            int32_t am = tern_argmax(lp, V);
            int same_nan = isnan(want) && isnan(out[r].lse);
            int lse_ok = same_nan || fabsf(out[r].lse - want) <= 2e-6f * fmaxf(1.0f, fabsf(want));
            int arg_ok = out[r].argmax == am && (!memcmp(&out[r].lp, &lp[am], 4) || (isnan(out[r].lp) && isnan(lp[am])));
            int pass = lse_ok && arg_ok;
            printf("%s %-40s row %d: lse %.9g (double %.9g, sequential float %.9g) argmax %d (host %d)\n",
                   pass ? "PASS" : "FAIL", name, r, out[r].lse, want, host, out[r].argmax, am);
            pass ? ops_pass++ : ops_fail++;
        }
    }
    tern_cuda_free(ops_cuda, dl); tern_cuda_free(ops_cuda, tmp); tern_cuda_free(ops_cuda, cnt); tern_cuda_free(ops_cuda, dout);
    free(lg); free(lp);
}

/* Decode attention with its prologue inside (three rows of one new token,
 * at positions 32, 63 and 99) against tern_cuda_qkv_rope_store followed by
 * the plain attention: outputs and caches bit-identical. */
static void attn_prologue_case(int H, int HK, int hd, int qk_norm)
{
    enum { NR = 3, CAP = 128 };
    char name[120];
    snprintf(name, sizeof name, "attention+prologue H=%d HK=%d hd=%d%s", H, HK, hd, qk_norm ? " qk-norm" : "");
    int lens[NR] = {33, 64, 100}, tok[NR] = {0, 1, 2};
    long ld = (long)(H + 2 * HK) * hd, hs = (long)CAP * hd, cache = 2L * HK * hs;
    float *qkv = malloc((size_t)NR * ld * 4), *kv = malloc((size_t)cache * 4), *cs = malloc((size_t)CAP * hd * 4);
    float *qn = malloc((size_t)hd * 4), *kn = malloc((size_t)hd * 4), *inv = malloc((size_t)hd / 2 * 4);
    int *all = malloc(CAP * sizeof *all);
    ops_fill(qkv, NR * ld, 301u, 2.0f);
    ops_fill(kv, cache, 302u, 1.0f);
    ops_fill(qn, hd, 303u, 1.5f);
    ops_fill(kn, hd, 304u, 1.5f);
    for (int i = 0; i < hd / 2; i++) inv[i] = powf(10000.0f, -2.0f * i / hd);
    for (int p = 0; p < CAP; p++) all[p] = p;
    tern_cpu_rope_table(CAP, hd, all, inv, 1.0f, cs);
    float *dcs = ops_dev(cs, (size_t)CAP * hd * 4);
    void *dqn = dev_of(qn, hd, TERN_DT_BF16), *dkn = dev_of(kn, hd, TERN_DT_BF16);
    int *dtok = ops_dev(tok, sizeof tok);
    float *dq[2], *dc[2][NR], *dout[2];
    tern_cuda_attn_row *drows[2];
    void *part = ops_dev_zero(tern_cuda_attention_tmp_bytes(NR, 128, H, hd));
    unsigned *cnt = ops_dev_zero(tern_cuda_attention_count_bytes(NR, HK));
    for (int v = 0; v < 2; v++) {
        tern_cuda_attn_row rows[NR];
        dq[v] = ops_dev(qkv, (size_t)NR * ld * 4);
        dout[v] = ops_dev_zero((size_t)NR * H * hd * 4);
        for (int r = 0; r < NR; r++) {
            dc[v][r] = ops_dev(kv, (size_t)cache * 4);
            rows[r] = (tern_cuda_attn_row){dc[v][r], dc[v][r] + HK * hs, NULL, 0, hs, 0, lens[r], 1, r};
        }
        drows[v] = ops_dev(rows, sizeof rows);
    }
    const void *q1 = qk_norm ? dqn : NULL, *k1 = qk_norm ? dkn : NULL;
    tern_cuda_attn_prologue pro = {q1, k1, TERN_DT_BF16, 1e-6f, hd, dcs};
    float scale = 1.0f / sqrtf((float)hd);
    int ok = ops_ok(tern_cuda_qkv_rope_store(ops_cuda, dq[0], ld, NR, H, HK, hd, hd, q1, k1, TERN_DT_BF16, 1e-6f, dcs,
                                             drows[0], dtok), name) &&
             ops_ok(tern_cuda_attention(ops_cuda, drows[0], dtok, NR, 128, H, HK, hd, scale, dq[0], ld, dout[0], part, cnt,
                                        NULL), name) &&
             ops_ok(tern_cuda_attention(ops_cuda, drows[1], dtok, NR, 128, H, HK, hd, scale, dq[1], ld, dout[1], part, cnt,
                                        &pro), name);
    if (ok) {
        long n = (long)NR * H * hd + NR * cache;
        float *a = malloc((size_t)n * 4), *b = malloc((size_t)n * 4), *dst[2] = {a, b};
        for (int v = 0; v < 2; v++) {
            ops_get(dst[v], dout[v], (size_t)NR * H * hd * 4);
            for (int r = 0; r < NR; r++) ops_get(dst[v] + (long)NR * H * hd + r * cache, dc[v][r], (size_t)cache * 4);
        }
        char n2[200];
        snprintf(n2, sizeof n2, "%s == qkv_rope_store, attention", name);
        ops_same(n2, a, b, n);
        free(a); free(b);
    }
    for (int v = 0; v < 2; v++) {
        tern_cuda_free(ops_cuda, dq[v]); tern_cuda_free(ops_cuda, dout[v]); tern_cuda_free(ops_cuda, drows[v]);
        for (int r = 0; r < NR; r++) tern_cuda_free(ops_cuda, dc[v][r]);
    }
    tern_cuda_free(ops_cuda, dcs); tern_cuda_free(ops_cuda, dqn); tern_cuda_free(ops_cuda, dkn);
    tern_cuda_free(ops_cuda, dtok); tern_cuda_free(ops_cuda, part); tern_cuda_free(ops_cuda, cnt);
    free(qkv); free(kv); free(cs); free(qn); free(kn); free(inv); free(all);
}

void ops_fused(void)
{
    static const tern_dtype dts[] = {TERN_DT_BF16, TERN_DT_F16, TERN_DT_F32};
    static const int Ms[] = {1, 3, 16, 37};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) {
            norm_case(0, dts[i], Ms[j], 256, 300);
            norm_case(1, dts[i], Ms[j], 64, 96);
        }
    norm_case(0, TERN_DT_BF16, 5, 4096, 1000);
    norm_case(1, TERN_DT_BF16, 2, 4096, 700);
    norm_case(0, TERN_DT_BF16, 20, 1032, 77);
    norm_case(0, TERN_DT_BF16, 3, 512, 33001); /* a head's width: the one-row kernel's 8-block batches */
    static const int modes[] = {0, 2, 3, 4};
    for (int i = 0; i < 4; i++) { /* the one-row kernel's other modes (ops_linear) */
        int was = tern_cuda_set_sk_x(ops_cuda, modes[i]);
        norm_case(0, TERN_DT_BF16, 5, 4096, 300);
        norm_case(1, TERN_DT_BF16, 7, 512, 136);
        tern_cuda_set_sk_x(ops_cuda, was);
    }
    /* Rows alone against the batched kernels at long and uneven K, bit for
     * bit, the norm's sum of squares included (K = 12288: the model's
     * longest; 1032: uneven parts). */
    norm_case(0, TERN_DT_BF16, 3, 12288, 200);
    norm_case(1, TERN_DT_BF16, 2, 12288, 100);
    norm_case(0, TERN_DT_BF16, 3, 1032, 77);
    /* and at the decode shapes' widths (several tiles a block) */
    norm_case(0, TERN_DT_BF16, 2, 4096, 6144);
    norm_case(1, TERN_DT_BF16, 2, 4096, 12288);
    norm_case(1, TERN_DT_BF16, 2, 1032, 2999);
    /* The tensor-core path past the small-batch kernel (GEMM, M > 64), and
     * K with uneven quarters. */
    int wg_was = tern_cuda_set_wgmma(ops_cuda, 0);
    for (int wg = 0; wg <= 1; wg++) { /* both GEMMs (ops_linear) */
        tern_cuda_set_wgmma(ops_cuda, wg);
        norm_case(0, TERN_DT_BF16, 65, 4096, 300);
        norm_case(1, TERN_DT_BF16, 130, 512, 136);
        norm_case(0, TERN_DT_BF16, 33, 96, 40);
        norm_case(1, TERN_DT_BF16, 200, 160, 72);
        norm_case(1, TERN_DT_BF16, 150, 1024, 200);
    }
    tern_cuda_set_wgmma(ops_cuda, wg_was);
    for (int reg = 0; reg < 2; reg++) { /* both prologue kernels (ops_attn) */
        int was = tern_cuda_set_pro_reg(ops_cuda, reg);
        attn_prologue_case(32, 8, 128, 1);
        attn_prologue_case(8, 2, 64, 0);
        attn_prologue_case(4, 4, 16, 1);
        attn_prologue_case(16, 2, 256, 1);
        tern_cuda_set_pro_reg(ops_cuda, was);
    }
    summary_case(151936, 8.0f);
    summary_case(1000, 3.0f);
    summary_case(4096, 1e-3f);
}
