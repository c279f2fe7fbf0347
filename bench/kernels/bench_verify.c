/* Small-batch matmul benchmark: every projection of the 0.46B Qwen3-shaped
 * model (24 layers plus lm_head, bf16 weights in panels in huge pages, as
 * the loader lays them out, 0.92 GB: they stream from DRAM) run once with
 * M rows of activations, for each M given, interleaved round by round.
 * Prints the median time of one pass and its ratio to the M = 1 pass of the
 * same rounds: the matmul part of a verify window of M positions against a
 * decode step. Also the compute ceiling (vdpbf16ps on registers) and the
 * kernels' rate on a cache-resident matrix, and from that rate the floor a
 * window cannot beat.
 *
 *   bench_verify [--threads T] [--rounds R] [--m 1,2,3,5,9,16]
 */
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "backend/cpu/matmul.h"
#include "backend/cpu/panel.h"
#include "core/threadpool.h"

typedef struct {
    int K, N, per_layer;
} shape;

static const shape shapes[] = {
    {1024, 2048, 1}, {1024, 512, 2}, {2048, 1024, 1}, {1024, 3072, 2}, {3072, 1024, 1},
};
enum { N_SHAPES = sizeof shapes / sizeof shapes[0], N_LAYERS = 24, MAX_MS = 16, HEAD_N = 151936 };

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct {
    void *w;
    size_t len;
    int K, N;
} mat;

static int mat_make(mat *m, int K, int N, unsigned seed)
{
    uint16_t *rows = malloc((size_t)K * N * 2);
    if (!rows) return -1;
    for (size_t i = 0; i < (size_t)K * N; i++) {
        seed = seed * 1664525u + 1013904223u;
        rows[i] = tern_f32_to_bf16(((float)(seed >> 9) / 8388608.0f - 1.0f) * 0.05f);
    }
    m->K = K;
    m->N = N;
    m->len = tern_cpu_panel_bytes(TERN_DT_BF16, N, K);
    m->w = mmap(NULL, m->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m->w == MAP_FAILED) {
        free(rows);
        return -1;
    }
    madvise(m->w, m->len, MADV_HUGEPAGE);
    tern_cpu_panel_pack(rows, TERN_DT_BF16, N, K, m->w, 0, tern_panel_count(N));
    free(rows);
    return 0;
}

/* The bf16 dot-product instruction's own rate: 24 independent accumulator
 * chains of vdpbf16ps on registers (32 multiply-adds each), per thread. */
__attribute__((target("avx512f,avx512bf16"))) static void *peak_thread(void *arg)
{
    double *out = arg;
    __m512 acc[24];
#pragma GCC unroll 24
    for (int i = 0; i < 24; i++) acc[i] = _mm512_set1_ps((float)i);
    __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80), b = (__m512bh)_mm512_set1_epi16(0x3c00);
    const long iters = 4000000;
    double t0 = now_s();
    for (long n = 0; n < iters; n++)
#pragma GCC unroll 24
        for (int i = 0; i < 24; i++) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
    double t = now_s() - t0;
    float sink = 0;
    for (int i = 0; i < 24; i++) sink += _mm512_reduce_add_ps(acc[i]);
    *out = iters * 24.0 * 32 / t + (sink == 12345.0f);
    return NULL;
}

static double peak_rate(int threads)
{
    pthread_t th[64];
    double r[64], sum = 0;
    for (int i = 0; i < threads && i < 64; i++) pthread_create(&th[i], NULL, peak_thread, &r[i]);
    for (int i = 0; i < threads && i < 64; i++) {
        pthread_join(th[i], NULL);
        sum += r[i];
    }
    return sum;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int threads = 2, rounds = 15, ms[MAX_MS] = {1, 2, 3, 5, 9, 16}, n_ms = 6;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (strcmp(argv[i], "--m") == 0 && i + 1 < argc) {
            n_ms = 0;
            for (char *s = argv[++i]; *s && n_ms < MAX_MS; s++) {
                ms[n_ms++] = (int)strtol(s, &s, 10);
                if (!*s) break;
            }
        } else {
            fprintf(stderr, "usage: bench_verify [--threads T] [--rounds R] [--m 1,2,3,5,9,16]\n");
            return 2;
        }
    }
    if (ms[0] != 1) {
        fprintf(stderr, "bench_verify: the first M must be 1 (the ratios are to it)\n");
        return 2;
    }
    int n_mats = N_LAYERS * 7 + 1;
    mat *mats = calloc((size_t)n_mats, sizeof *mats);
    int c = 0;
    for (int l = 0; l < N_LAYERS; l++)
        for (int s = 0; s < N_SHAPES; s++)
            for (int r = 0; r < shapes[s].per_layer; r++, c++)
                if (mat_make(&mats[c], shapes[s].K, shapes[s].N, 17u * (unsigned)c + 1u)) return 1;
    if (mat_make(&mats[c++], 1024, HEAD_N, 3u)) return 1;
    n_mats = c;
    size_t bytes = 0;
    for (int i = 0; i < n_mats; i++) bytes += mats[i].len;
    float *x = malloc(sizeof(float) * MAX_MS * 3072), *y = malloc(sizeof(float) * MAX_MS * HEAD_N);
    for (long i = 0; i < (long)MAX_MS * 3072; i++) x[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    tern_pool *pool = NULL;
    if (tern_pool_create(threads, &pool) != TERN_OK) return 1;
    double *t = calloc((size_t)n_ms * rounds, sizeof *t);
    for (int r = -1; r < rounds; r++)
        for (int mi = 0; mi < n_ms; mi++) {
            double t0 = now_s();
            for (int i = 0; i < n_mats; i++) {
                tern_mm_out o = {mats[i].w, TERN_DT_BF16, mats[i].N, y, TERN_WL_PANELS_HUGE};
                tern_cpu_matmul_multi(pool, TERN_ACT_BF16, x, ms[mi], mats[i].K, &o, 1);
            }
            if (r >= 0) t[mi * rounds + r] = now_s() - t0;
        }
    printf("bf16 panels, %.0f MB of weights, %d threads, %d rounds (median)\n", bytes / 1e6, threads,
           rounds);
    /* The same kernels on a matrix that stays in L2 (each thread's half, 0.5 MB of 1 MB
     * in all), so their compute rate shows without the stream. */
    double peak = peak_rate(threads);
    printf("vdpbf16ps on registers, %d threads: %.1f G mul-add/s (the compute ceiling)\n", threads, peak * 1e-9);
    double rate[MAX_MS];
    mat small;
    if (mat_make(&small, 1024, 480, 99u)) return 1;
    for (int mi = 0; mi < n_ms; mi++) {
        tern_mm_out o = {small.w, TERN_DT_BF16, small.N, y, TERN_WL_PANELS_HUGE};
        double best = 1e30;
        for (int r = 0; r < 5; r++) {
            double t0 = now_s();
            for (int i = 0; i < 200; i++) tern_cpu_matmul_multi(pool, TERN_ACT_BF16, x, ms[mi], 1024, &o, 1);
            double dt = (now_s() - t0) / 200;
            if (dt < best) best = dt;
        }
        rate[mi] = 1024.0 * small.N * ms[mi] / best;
        printf("M=%2d  cache-resident 1024 x 480: %6.1f us, %6.1f G mul-add/s\n", ms[mi], best * 1e6,
               rate[mi] * 1e-9);
    }
    double ratio[MAX_MS];
    for (int mi = 0; mi < n_ms; mi++) {
        double rr[256];
        int nr = rounds < 256 ? rounds : 256;
        for (int r = 0; r < nr; r++) rr[r] = t[mi * rounds + r] / t[r];
        qsort(rr, (size_t)nr, sizeof *rr, cmp_d);
        ratio[mi] = rr[nr / 2];
        qsort(t + mi * rounds, (size_t)rounds, sizeof *t, cmp_d);
    }
    for (int mi = 0; mi < n_ms; mi++) {
        double med = t[mi * rounds + rounds / 2];
        /* floor: the stream of M = 1 or this M's multiply-adds at the rate the
         * same kernels reach on cache-resident weights, whichever is longer */
        double t1 = t[rounds / 2], compute = bytes / 2.0 * ms[mi] / rate[mi];
        double floor = compute > t1 ? compute : t1;
        printf("M=%2d  %7.2f ms  %6.1f GB/s  %6.1f G mul-add/s  x%.2f of M=1  (floor %.2f ms = x%.2f)\n",
               ms[mi], med * 1e3, bytes / med * 1e-9, bytes / 2.0 * ms[mi] / med * 1e-9, ratio[mi],
               floor * 1e3, floor / t1);
    }
    return 0;
}
