/* ops_test: every CUDA op x dtype x shape against the CPU reference
 * (src/backend/cpu), with the tolerance of each case printed beside its
 * error, plus bit-identity checks for batch invariance. `ops_test --time`
 * prints kernel timings instead (Qwen3-8B shapes), `--chain` only the
 * decode layer's products in sequence under the one-row kernel's modes,
 * `--timeline` those products block by block (ops_timeline.c), `--floor`
 * what a one-row product costs apart from its bytes (ops_floor.c),
 * `--attn-timeline` the attention's chain block by block.
 *
 * Without a usable CUDA device it prints "skipped: <reason>" and exits 0.
 * Exit status 1 when any case fails. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_harness.h"

tern_cuda *ops_cuda;
int ops_pass, ops_fail;

void ops_fill(float *x, long n, unsigned seed, float scale)
{
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (long i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = ((float)(s >> 40) / 16777216.0f * 2.0f - 1.0f) * scale;
    }
}

void *ops_to_dtype(const float *f, long n, tern_dtype dt)
{
    size_t es = tern_dtype_size(dt);
    void *o = malloc((size_t)n * es);
    if (!o) return NULL;
    for (long i = 0; i < n; i++) {
        if (dt == TERN_DT_F32) ((float *)o)[i] = f[i];
        else if (dt == TERN_DT_BF16) ((uint16_t *)o)[i] = tern_f32_to_bf16(f[i]);
        else if (dt == TERN_DT_F16) ((uint16_t *)o)[i] = tern_f32_to_f16(f[i]);
        else { free(o); return NULL; }
    }
    return o;
}

static void die(const char *what)
{
    fprintf(stderr, "ops_test: %s: %s\n", what, tern_last_error());
    exit(1);
}

void *ops_dev(const void *host, size_t bytes)
{
    void *d;
    if (tern_cuda_alloc(ops_cuda, bytes, &d) || tern_cuda_upload(ops_cuda, d, host, bytes)) die("device buffer");
    return d;
}

void *ops_dev_zero(size_t bytes)
{
    void *d;
    if (tern_cuda_alloc(ops_cuda, bytes, &d) || tern_cuda_memset(ops_cuda, d, 0, bytes)) die("device buffer");
    return d;
}

void *ops_dev_random(long n, tern_dtype dt, unsigned seed, float scale)
{
    void *d = ops_dev_zero((size_t)n * tern_dtype_size(dt));
    ops_ok(tern_cuda_fill_random(ops_cuda, d, n, dt, seed, scale), "fill");
    return d;
}

void ops_get(void *host, const void *d, size_t bytes)
{
    if (tern_cuda_download(ops_cuda, host, d, bytes)) die("download");
}

int ops_ok(tern_status st, const char *what)
{
    if (st == TERN_OK) return 1;
    printf("FAIL %s: %s\n", what, tern_last_error());
    ops_fail++;
    return 0;
}

void ops_compare(const char *name, const float *got, const float *want, const double *scale, long n, double atol,
                 double rtol)
{
    double worst = 0, worst_ratio = 0;
    long at = 0;
    for (long i = 0; i < n; i++) {
        double ref = scale ? scale[i] : fabs((double)want[i]);
        double err = fabs((double)got[i] - (double)want[i]), lim = atol + rtol * ref;
        double ratio = err / lim;
        if (!(ratio <= worst_ratio) || isnan(err)) {
            worst_ratio = isnan(err) ? INFINITY : ratio;
            worst = err;
            at = i;
        }
    }
    int ok = worst_ratio <= 1.0;
    printf("%s %-58s max err %.3g (%.2f of tol: atol %.0e + rtol %.0e)%s\n", ok ? "PASS" : "FAIL", name, worst,
           worst_ratio, atol, rtol, ok ? "" : "");
    if (!ok) printf("     at %ld: got %.9g want %.9g\n", at, got[at], want[at]);
    ok ? ops_pass++ : ops_fail++;
}

void ops_same(const char *name, const float *a, const float *b, long n)
{
    long i = 0;
    while (i < n && !memcmp(&a[i], &b[i], sizeof *a)) i++;
    int ok = i == n;
    printf("%s %-58s %s\n", ok ? "PASS" : "FAIL", name, ok ? "bit-identical" : "differs");
    if (!ok) printf("     at %ld: %.9g vs %.9g\n", i, a[i], b[i]);
    ok ? ops_pass++ : ops_fail++;
}

/* Bad arguments are refused with a status and a message, and the context
 * keeps working after a failed allocation. */
static void refuse(const char *what, tern_status got, tern_status want)
{
    int ok = got == want && tern_last_error()[0];
    printf("%s %-58s %s\n", ok ? "PASS" : "FAIL", what, ok ? tern_last_error() : "not refused as expected");
    ok ? ops_pass++ : ops_fail++;
}

static void ops_refusals(void)
{
    float *d = ops_dev_zero(1 << 20);
    refuse("refuses matmul K % 8 != 0", tern_cuda_matmul(ops_cuda, TERN_CUDA_ACT_F32, TERN_CUDA_MM_OWN, d, 1, 12, d,
                                                          TERN_DT_BF16, 4, d, 4, 0, NULL), TERN_E_INVALID);
    refuse("refuses matmul on I32 weights", tern_cuda_matmul(ops_cuda, TERN_CUDA_ACT_F32, TERN_CUDA_MM_OWN, d, 1, 16, d,
                                                              TERN_DT_I32, 4, d, 4, 0, NULL), TERN_E_UNSUPPORTED);
    refuse("refuses attention head_dim 96", tern_cuda_attention(ops_cuda, NULL, NULL, 1, 64, 8, 2, 96, 1.0f, d, 768, d,
                                                                d, NULL, NULL), TERN_E_UNSUPPORTED);
    refuse("refuses attention 10 heads per kv head", tern_cuda_attention(ops_cuda, NULL, NULL, 1, 64, 40, 4, 128, 1.0f,
                                                                         d, 5120, d, d, NULL, NULL),
           TERN_E_UNSUPPORTED);
    refuse("refuses rope head_dim 512", tern_cuda_rope(ops_cuda, d, 512, 1, 1, 512, 512, d, NULL), TERN_E_UNSUPPORTED);
    void *huge = NULL;
    refuse("refuses a 1 PiB allocation", tern_cuda_alloc(ops_cuda, (size_t)1 << 50, &huge), TERN_E_NOMEM);
    float one = 1.0f, back = 0.0f;
    int ok = !huge && tern_cuda_upload(ops_cuda, d, &one, 4) == TERN_OK && tern_cuda_add(ops_cuda, d, d, 1) == TERN_OK &&
             tern_cuda_download(ops_cuda, &back, d, 4) == TERN_OK && back == 2.0f;
    printf("%s %-58s\n", ok ? "PASS" : "FAIL", "  context works after the failed allocation");
    ok ? ops_pass++ : ops_fail++;
    tern_cuda_free(ops_cuda, d);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* a log cut short by a time limit keeps its lines */
    int timing = argc > 1 && !strcmp(argv[1], "--time"), chain = argc > 1 && !strcmp(argv[1], "--chain");
    int timeline = argc > 1 && !strcmp(argv[1], "--timeline"), floor_ = argc > 1 && !strcmp(argv[1], "--floor");
    int atl = argc > 1 && !strcmp(argv[1], "--attn-timeline"), rpat = argc > 1 && !strcmp(argv[1], "--readpat");
    if (argc > 1 && !timing && !chain && !timeline && !floor_ && !atl && !rpat) {
        fprintf(stderr, "usage: ops_test [--time | --chain | --timeline | --floor | --attn-timeline | --readpat]\n");
        return 2;
    }
    if (tern_cuda_open(0, &ops_cuda) != TERN_OK) {
        printf("skipped: %s\n", tern_last_error());
        return 0;
    }
    printf("device: %s\n", tern_cuda_describe(ops_cuda));
    if (timeline) {
        ops_timeline();
    } else if (floor_) {
        ops_floor();
    } else if (atl) {
        ops_attn_timeline();
    } else if (rpat) {
        ops_readpat();
    } else if (chain) {
        ops_time_chain_kernel();
        ops_time_pair();
        ops_time_chains();
    } else if (timing) {
        ops_time();
    } else {
        ops_linear();
        ops_rows();
        ops_attention();
        ops_fused();
        ops_pair();
        ops_chain();
        ops_tiled();
        ops_refusals();
        printf("ops: %d passed, %d failed\n", ops_pass, ops_fail);
    }
    tern_cuda_close(ops_cuda);
    return ops_fail ? 1 : 0;
}
