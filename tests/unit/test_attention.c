/* The p.V kernel against a double-precision reference on every available
 * ISA, and block invariance: a query's output is bit-identical whether it is
 * computed alone or inside a block of any size. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/attn_pv.h"
#include "backend/cpu/isa.h"
#include "backend/cpu/ops.h"
#include "check.h"

static float frand(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) & 0xffff) / 65536.0f - 0.5f;
}

static void run(int M, int hd, int base)
{
    unsigned seed = (unsigned)(M * 977 + hd * 31 + base);
    int klen = base + M;
    float *p = malloc((size_t)M * klen * sizeof *p), *V = malloc((size_t)klen * hd * sizeof *V);
    float *out = malloc((size_t)M * hd * sizeof *out), *one = malloc((size_t)hd * sizeof *one);
    int *len = malloc((size_t)M * sizeof *len);
    for (int i = 0; i < M * klen; i++) p[i] = frand(&seed);
    for (int i = 0; i < klen * hd; i++) V[i] = frand(&seed);
    for (int q = 0; q < M; q++) len[q] = base + q + 1;
    tern_attn_pv(p, klen, len, M, V, hd, out, hd, 0);
    for (int q = 0; q < M; q++) {
        for (int d = 0; d < hd; d++) {
            double ref = 0;
            for (int j = 0; j < len[q]; j++) ref += (double)p[q * klen + j] * V[(long)j * hd + d];
            CHECK_MSG(fabs(ref - out[q * hd + d]) < 1e-4, "M=%d hd=%d q=%d d=%d: %g vs %g", M, hd, q, d, ref,
                      out[q * hd + d]);
        }
        tern_attn_pv(p + (long)q * klen, klen, &len[q], 1, V, hd, one, hd, 0);
        CHECK_MSG(!memcmp(one, out + (long)q * hd, (size_t)hd * sizeof *one), "M=%d hd=%d q=%d: alone != block", M,
                  hd, q);
    }
    free(p); free(V); free(out); free(one); free(len);
}

/* Softmax and the SiLU gate against double precision. */
static void run_act(int n)
{
    unsigned seed = (unsigned)n * 7919u;
    float *x = malloc((size_t)n * sizeof *x), *g = malloc((size_t)n * sizeof *g), *u = malloc((size_t)n * sizeof *u);
    double *ref = malloc((size_t)n * sizeof *ref), mx = -INFINITY, sum = 0;
    for (int i = 0; i < n; i++) {
        x[i] = 40.0f * frand(&seed);
        g[i] = 30.0f * frand(&seed);
        u[i] = frand(&seed);
        mx = x[i] > mx ? x[i] : mx;
    }
    for (int i = 0; i < n; i++) sum += ref[i] = exp((double)x[i] - mx);
    tern_cpu_softmax(x, n);
    for (int i = 0; i < n; i++)
        CHECK_MSG(fabs(x[i] - ref[i] / sum) <= 2e-6 * (ref[i] / sum) + 1e-30, "softmax n=%d i=%d", n, i);
    for (int i = 0; i < n; i++) ref[i] = g[i] / (1.0 + exp(-(double)g[i])) * u[i];
    tern_cpu_silu_mul(g, u, n);
    for (int i = 0; i < n; i++) CHECK_MSG(fabs(g[i] - ref[i]) <= 1e-6 * fabs(ref[i]) + 1e-30, "silu n=%d i=%d", n, i);
    free(x); free(g); free(u); free(ref);
}

int main(void)
{
    for (int isa = 0; isa < TERN_CPU_ISA_COUNT; isa++) {
        if (!tern_cpu_isa_supported((tern_cpu_isa)isa)) continue;
        tern_cpu_isa_select((tern_cpu_isa)isa);
        int hds[] = {16, 32, 40, 64, 80, 128, 7};
        int Ms[] = {1, 2, 3, 4, 5, 9, 16};
        for (size_t a = 0; a < sizeof hds / sizeof *hds; a++)
            for (size_t b = 0; b < sizeof Ms / sizeof *Ms; b++) run(Ms[b], hds[a], (int)(a * 3 + b));
        int ns[] = {1, 15, 16, 17, 100, 513};
        for (size_t a = 0; a < sizeof ns / sizeof *ns; a++) run_act(ns[a]);
    }
    return check_summary("attention");
}
