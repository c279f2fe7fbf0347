/* Float routines shared by the sampler, rounding as MLX's CPU backend does:
 * its exp polynomial, its logsumexp order of operations, and total orders that
 * reproduce its argpartition tie rules. */
#include "engine/sampler_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 2^(x/ln 2): integer part by exponent bits, fraction by a polynomial
 * evaluated with fused multiply-adds (MLX rounds x + 0.5 in double before
 * the floor). Inlined into a plain and an FMA-enabled copy below: both give
 * the same bits, the FMA copy avoids a libm call per step. */
static inline __attribute__((always_inline)) float exp_body(float xi)
{
    if (isnan(xi))
        return xi;
    if (xi > 88.0f)
        return INFINITY;
    if (xi < -88.0f)
        return 0.0f;
    float x = xi * 1.442695f;
    float ipart = (float)floor((double)x + 0.5);
    float fpart = x - ipart;
    float p = 1.535336188319500e-4f;
    p = fmaf(p, fpart, 1.339887440266574e-3f);
    p = fmaf(p, fpart, 9.618437357674640e-3f);
    p = fmaf(p, fpart, 5.550332471162809e-2f);
    p = fmaf(p, fpart, 2.402264791363012e-1f);
    p = fmaf(p, fpart, 6.931472028550421e-1f);
    p = fmaf(p, fpart, 1.000000000000000f);
    uint32_t bits = (uint32_t)((int)ipart + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return scale * p;
}

float tern_mlx_expf(float xi)
{
    return exp_body(xi);
}

static void exp_array_plain(const float *x, float *out, int n, float shift)
{
    for (int i = 0; i < n; i++)
        out[i] = exp_body(x[i] - shift);
}

static float exp_sum_plain(const float *x, int n, float shift)
{
    float sum = 0.0f;
    for (int i = 0; i < n; i++)
        sum += exp_body(x[i] - shift);
    return sum;
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("fma,sse4.1"))) static void exp_array_fma(const float *x, float *out,
                                                                 int n, float shift)
{
    for (int i = 0; i < n; i++)
        out[i] = exp_body(x[i] - shift);
}

__attribute__((target("fma,sse4.1"))) static float exp_sum_fma(const float *x, int n, float shift)
{
    float sum = 0.0f;
    for (int i = 0; i < n; i++)
        sum += exp_body(x[i] - shift);
    return sum;
}

static int have_fma(void)
{
    return __builtin_cpu_supports("fma") && __builtin_cpu_supports("sse4.1");
}
#endif

void tern_mlx_exp_array(const float *x, float *out, int n, float shift)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (have_fma()) {
        exp_array_fma(x, out, n, shift);
        return;
    }
#endif
    exp_array_plain(x, out, n, shift);
}

float tern_mlx_exp_sum(const float *x, int n, float shift)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (have_fma())
        return exp_sum_fma(x, n, shift);
#endif
    return exp_sum_plain(x, n, shift);
}

/* The shortest decimal that reads back as f, as a double: the value a
 * request most likely carried before it was narrowed to float (exact for
 * every decimal of up to 6 significant digits). */
static double as_typed(float f)
{
    char buf[32];
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)f);
        if (strtof(buf, NULL) == f)
            return strtod(buf, NULL);
    }
    return (double)f;
}

float tern_temperature_scale(float temperature)
{
    return (float)(1.0 / as_typed(temperature));
}

float tern_min_p_offset(float min_p)
{
    return (float)log(as_typed(min_p));
}

static float max_nan(float a, float b)
{
    if (isnan(a))
        return a;
    if (isnan(b))
        return b;
    return a > b ? a : b;
}

float tern_mlx_logsumexp(const float *x, int n)
{
    float mx = -INFINITY;
    for (int i = 0; i < n; i++)
        mx = max_nan(x[i], mx);
    float sum = tern_mlx_exp_sum(x, n, mx);
    if (isinf(mx))
        return mx;
    return logf(sum) + mx;
}

tern_status tern_sampler_ws_init(tern_sampler_ws *ws, int n)
{
    memset(ws, 0, sizeof *ws);
    size_t m = n > 0 ? (size_t)n : 1;
    ws->f = malloc(m * sizeof *ws->f);
    ws->f2 = malloc(m * sizeof *ws->f2);
    ws->u0 = malloc(m * sizeof *ws->u0);
    ws->u1 = malloc(m * sizeof *ws->u1);
    ws->keep = malloc(m);
    if (!ws->f || !ws->f2 || !ws->u0 || !ws->u1 || !ws->keep) {
        tern_sampler_ws_free(ws);
        return tern_error(TERN_E_NOMEM, "sampler: out of memory for %d-entry scratch", n);
    }
    ws->cap = n;
    return TERN_OK;
}

void tern_sampler_ws_free(tern_sampler_ws *ws)
{
    free(ws->f);
    free(ws->f2);
    free(ws->u0);
    free(ws->u1);
    free(ws->keep);
    memset(ws, 0, sizeof *ws);
}

/* Unsigned key whose order is float order: -0 folds onto +0 (they compare
 * equal), every NaN maps to the top (MLX sorts NaN last). */
static uint32_t float_key(float f)
{
    uint32_t b;
    if (isnan(f))
        return 0xFFFFFFFFu;
    if (f == 0.0f)
        f = 0.0f;
    memcpy(&b, &f, sizeof b);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

static float key_float(uint32_t k)
{
    uint32_t b = (k & 0x80000000u) ? (k & 0x7FFFFFFFu) : ~k;
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* LSD radix sort in three 11-bit passes (bits 0-10, 11-21, 22-31); a pass
 * whose digit is the same for every key is skipped. The result is in a. */
static void radix_sort_u32(uint32_t *a, uint32_t *tmp, int n)
{
    static const int shifts[3] = {0, 11, 22};
    uint32_t *src = a, *dst = tmp;
    for (int p = 0; p < 3; p++) {
        int shift = shifts[p];
        size_t count[2049] = {0};
        for (int i = 0; i < n; i++)
            count[((src[i] >> shift) & 0x7FFu) + 1]++;
        if (n > 0 && count[((src[0] >> shift) & 0x7FFu) + 1] == (size_t)n)
            continue;
        for (int b = 0; b < 2048; b++)
            count[b + 1] += count[b];
        for (int i = 0; i < n; i++)
            dst[count[(src[i] >> shift) & 0x7FFu]++] = src[i];
        uint32_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != a)
        memcpy(a, src, (size_t)n * sizeof *a);
}

void tern_sort_floats(float *x, int n, tern_sampler_ws *ws)
{
    for (int i = 0; i < n; i++)
        ws->u0[i] = float_key(x[i]);
    radix_sort_u32(ws->u0, ws->u1, n);
    for (int i = 0; i < n; i++)
        x[i] = key_float(ws->u0[i]);
}

/* The value that would sit at index kth if a[n] were sorted ascending
 * (quickselect; a is reordered). */
static uint32_t select_kth(uint32_t *a, int n, int kth)
{
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        uint32_t x = a[lo], y = a[mid], z = a[hi];
        uint32_t pivot = x < y ? (y < z ? y : (x < z ? z : x)) : (x < z ? x : (y < z ? z : y));
        int i = lo, j = hi;
        while (i <= j) {
            while (a[i] < pivot)
                i++;
            while (a[j] > pivot)
                j--;
            if (i <= j) {
                uint32_t t = a[i];
                a[i] = a[j];
                a[j] = t;
                i++;
                j--;
            }
        }
        if (kth <= j)
            hi = j;
        else if (kth >= i)
            lo = i;
        else
            return a[kth];
    }
    return a[kth];
}

void tern_select_top(const float *x, int n, int k, int prefer_high_index, tern_sampler_ws *ws)
{
    memset(ws->keep, 0, (size_t)n);
    if (k <= 0)
        return;
    if (k >= n) {
        memset(ws->keep, 1, (size_t)n);
        return;
    }
    uint32_t *key = ws->u1;
    for (int i = 0; i < n; i++)
        key[i] = float_key(x[i]);
    memcpy(ws->u0, key, (size_t)n * sizeof *key);
    uint32_t kth = select_kth(ws->u0, n, n - k);
    int above = 0;
    for (int i = 0; i < n; i++) {
        ws->keep[i] = key[i] > kth;
        above += ws->keep[i];
    }
    int ties = k - above;
    if (prefer_high_index) {
        for (int i = n - 1; i >= 0 && ties > 0; i--)
            if (key[i] == kth) {
                ws->keep[i] = 1;
                ties--;
            }
    } else {
        for (int i = 0; i < n && ties > 0; i++)
            if (key[i] == kth) {
                ws->keep[i] = 1;
                ties--;
            }
    }
}

int32_t tern_argmax(const float *x, int n)
{
    if (n <= 0)
        return 0;
    int32_t best = 0;
    float v = x[0];
    for (int i = 1; i < n; i++)
        if (x[i] > v) {
            v = x[i];
            best = i;
        }
    return best;
}
