/* Matmul kernel benchmark: the 0.46B Qwen3-shaped projections at M=1
 * (decode: GB/s of weights streamed, against a STREAM triad measured in the
 * same run) and M=512 (prefill: GFLOP/s), for 1 and 2 threads.
 *
 *   bench_matmul [--isa scalar|avx2|avx512] [--quick]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "backend/cpu/isa.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/panel.h"
#include "backend/cpu/stream_triad.h"

typedef struct {
    const char *name;
    int K, N;
    int per_layer;  /* how many of this shape one layer runs (0: once per model) */
} shape;

static const shape shapes[] = {
    {"q", 1024, 2048, 1}, {"k/v", 1024, 512, 2}, {"o", 2048, 1024, 1},
    {"gate/up", 1024, 3072, 2}, {"down", 3072, 1024, 1}, {"lm_head", 1024, 151936, 0},
};
enum { N_SHAPES = sizeof shapes / sizeof shapes[0], N_LAYERS = 24 };

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint16_t *random_bf16(size_t n, unsigned seed)
{
    uint16_t *w = malloc(n * 2);
    if (!w) return NULL;
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        w[i] = tern_f32_to_bf16(((float)(seed >> 9) / 8388608.0f - 1.0f) * 0.05f);
    }
    return w;
}

/* The panel copy of a row-major bf16 matrix in its own huge-page-advised
 * mapping, as the model loader makes it (NULL on failure). */
static void *panel_copy(const uint16_t *w, int N, int K, size_t *len)
{
    *len = tern_cpu_panel_bytes(TERN_DT_BF16, N, K);
    void *p = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    madvise(p, *len, MADV_HUGEPAGE);
    tern_cpu_panel_pack(w, TERN_DT_BF16, N, K, p, 0, tern_panel_count(N));
    return p;
}

/* Decode: weights cycle through enough copies (>= 256 MB) that every call
 * streams them from DRAM, as a whole model does. Returns seconds per call. */
static double time_decode(tern_pool *pool, tern_act_mode mode, tern_wlayout layout, const shape *s,
                          float *x, float *y, double min_s)
{
    size_t bytes = (size_t)s->K * s->N * 2;
    int copies = (int)((256u << 20) / bytes) + 1;
    if (copies > 64) copies = 64;
    void **w = calloc((size_t)copies, sizeof *w);
    size_t *len = calloc((size_t)copies, sizeof *len);
    for (int c = 0; c < copies; c++) {
        uint16_t *rows = random_bf16((size_t)s->K * s->N, 7u + (unsigned)c);
        w[c] = rows;
        if (layout != TERN_WL_ROWS) {
            w[c] = panel_copy(rows, s->N, s->K, &len[c]);
            free(rows);
        }
    }
    tern_mm_out out = {NULL, TERN_DT_BF16, s->N, y, layout};
    for (int c = 0; c < copies; c++) {
        out.w = w[c];
        tern_cpu_matmul_multi(pool, mode, x, 1, s->K, &out, 1);
    }
    long calls = 0;
    double t0 = now_s(), t;
    do {
        for (int c = 0; c < copies; c++, calls++) {
            out.w = w[c];
            tern_cpu_matmul_multi(pool, mode, x, 1, s->K, &out, 1);
        }
        t = now_s() - t0;
    } while (t < min_s);
    for (int c = 0; c < copies; c++) {
        if (layout == TERN_WL_ROWS) free(w[c]);
        else if (w[c]) munmap(w[c], len[c]);
    }
    free(w);
    free(len);
    return t / (double)calls;
}

/* Prefill: best of a few repetitions of one M-row product. */
static double time_prefill(tern_pool *pool, tern_act_mode mode, tern_dtype dt, const shape *s,
                           int M, const float *x, const void *w, float *y, int reps)
{
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        tern_cpu_matmul(pool, mode, x, M, s->K, w, dt, s->N, y);
        double t = now_s() - t0;
        if (t < best) best = t;
    }
    return best;
}

int main(int argc, char **argv)
{
    int quick = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) quick = 1;
        else if (strcmp(argv[i], "--isa") == 0 && i + 1 < argc) {
            const char *want = argv[++i];
            for (int a = 0; a < TERN_CPU_ISA_COUNT; a++)
                if (strcmp(want, tern_cpu_isa_name((tern_cpu_isa)a)) == 0 &&
                    tern_cpu_isa_select((tern_cpu_isa)a) != TERN_OK) {
                    fprintf(stderr, "%s\n", tern_last_error());
                    return 1;
                }
        } else {
            fprintf(stderr, "usage: bench_matmul [--isa scalar|avx2|avx512] [--quick]\n");
            return 2;
        }
    }
    tern_pool *pools[2];
    tern_pool_create(1, &pools[0]);
    tern_pool_create(2, &pools[1]);
    printf("isa %s\n", tern_cpu_isa_name(tern_cpu_isa_active()));
    double triad[2];
    for (int p = 0; p < 2; p++) triad[p] = tern_cpu_stream_triad_gbps(pools[p], 128u << 20);
    printf("STREAM triad: 1 thread %.1f GB/s, 2 threads %.1f GB/s\n\n", triad[0], triad[1]);

    int M = 512, KMAX = 3072, NMAX = 151936;
    float *x = malloc(sizeof(float) * (size_t)M * KMAX), *y = malloc(sizeof(float) * (size_t)M * NMAX);
    for (long i = 0; i < (long)M * KMAX; i++) x[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;

    enum { N_DEC = 3 };
    static const struct {
        tern_act_mode mode;
        tern_wlayout layout;
        const char *name;
    } dec[N_DEC] = {{TERN_ACT_BF16, TERN_WL_PANELS_HUGE, "bf16 act, panels in huge pages (default)"},
                    {TERN_ACT_BF16, TERN_WL_ROWS, "bf16 act, row-major (--weights mapped)"},
                    {TERN_ACT_F32, TERN_WL_ROWS, "f32 act, row-major (reference)"}};
    double layer_s[N_DEC][2] = {{0}}, head_s[N_DEC][2] = {{0}};
    printf("decode M=1, BF16 weights: GB/s of weights (%% of triad, same thread count)\n");
    printf("%-8s %5s %6s | %-27s | %-27s\n", "shape", "K", "N", "1 thread", "2 threads");
    for (int v = 0; v < N_DEC; v++) {
        printf("-- %s\n", dec[v].name);
        for (int si = 0; si < N_SHAPES; si++) {
            const shape *s = &shapes[si];
            printf("%-8s %5d %6d", s->name, s->K, s->N);
            for (int p = 0; p < 2; p++) {
                double t = time_decode(pools[p], dec[v].mode, dec[v].layout, s, x, y, quick ? 0.1 : 0.4);
                double gbps = (double)s->K * s->N * 2 / t * 1e-9;
                printf(" | %7.1f us %6.1f GB/s %3.0f%%", t * 1e6, gbps, 100 * gbps / triad[p]);
                if (s->per_layer) layer_s[v][p] += s->per_layer * t;
                else head_s[v][p] = t;
            }
            printf("\n");
        }
    }
    double model_bytes = 0;
    for (int si = 0; si < N_SHAPES; si++)
        model_bytes += (double)shapes[si].K * shapes[si].N * 2 *
                       (shapes[si].per_layer ? shapes[si].per_layer * N_LAYERS : 1);
    for (int v = 0; v < N_DEC; v++)
        for (int p = 0; p < 2; p++) {
            double t = N_LAYERS * layer_s[v][p] + head_s[v][p];
            printf("model matmuls per token, %s, %d thread(s): %.2f ms, %.1f GB/s = %.0f%% of triad"
                   " (%.0f tok/s bound)\n", dec[v].name, p + 1, t * 1e3, model_bytes / t * 1e-9,
                   100 * model_bytes / t * 1e-9 / triad[p], 1 / t);
        }

    /* Small batches (continuous batching decodes several rows per step):
     * the lm_head shape, best of 6 alternating calls per layout. */
    {
        const shape *s = &shapes[N_SHAPES - 1];
        size_t n = (size_t)s->K * s->N, plen = 0;
        uint16_t *wr = random_bf16(n, 5u);
        void *wp = panel_copy(wr, s->N, s->K, &plen);
        static const int Ms[] = {1, 2, 3, 4, 8, 16};
        printf("\nsmall batches, %s (%.0f MB), 2 threads: ms per product (GB/s of weights)\n", s->name,
               n * 2 / 1e6);
        for (size_t i = 0; wp && i < sizeof Ms / sizeof Ms[0]; i++) {
            double best[2] = {1e30, 1e30};
            for (int r = 0; r < 6; r++)
                for (int l = 0; l < 2; l++) {
                    tern_mm_out o = {l ? wp : (void *)wr, TERN_DT_BF16, s->N, y,
                                     l ? TERN_WL_PANELS_HUGE : TERN_WL_ROWS};
                    double t0 = now_s();
                    tern_cpu_matmul_multi(pools[1], TERN_ACT_BF16, x, Ms[i], s->K, &o, 1);
                    double t = now_s() - t0;
                    if (t < best[l]) best[l] = t;
                }
            printf("M=%2d  row-major %6.2f ms (%5.1f GB/s) | panels in huge pages %6.2f ms (%5.1f GB/s)\n",
                   Ms[i], best[0] * 1e3, n * 2 / best[0] * 1e-9, best[1] * 1e3, n * 2 / best[1] * 1e-9);
        }
        free(wr);
        if (wp) munmap(wp, plen);
    }

    printf("\nprefill M=%d: GFLOP/s\n", M);
    printf("%-8s %5s %6s | %-22s | %-22s | %-22s\n", "shape", "K", "N", "bf16 w, bf16 act",
           "bf16 w, f32 act", "f16 w, f32 act");
    double pre_s[3][2] = {{0}};
    for (int si = 0; si < N_SHAPES; si++) {
        const shape *s = &shapes[si];
        int is_head = s->per_layer == 0;
        uint16_t *wb = random_bf16((size_t)s->K * s->N, 11u);
        uint16_t *wh = malloc((size_t)s->K * s->N * 2);
        for (size_t i = 0; i < (size_t)s->K * s->N; i++) wh[i] = tern_f32_to_f16(tern_bf16_to_f32(wb[i]));
        printf("%-8s %5d %6d", s->name, s->K, s->N);
        double flop = 2.0 * M * s->K * s->N;
        for (int v = 0; v < 3; v++) {
            printf(" |");
            for (int p = 0; p < 2; p++) {
                tern_act_mode mode = v == 0 ? TERN_ACT_BF16 : TERN_ACT_F32;
                const void *w = v == 2 ? (const void *)wh : wb;
                tern_dtype dt = v == 2 ? TERN_DT_F16 : TERN_DT_BF16;
                double t = time_prefill(pools[p], mode, dt, s, M, x, w, y, is_head || quick ? 1 : 3);
                printf(" %4.0f%s", flop / t * 1e-9, p ? "" : "  ");
                if (!is_head) pre_s[v][p] += s->per_layer * t;
                if (is_head && v == 0 && p == 1) head_s[0][0] = t;
            }
            printf("%-12s", "");
        }
        printf("\n");
        free(wb);
        free(wh);
    }
    static const char *pre_name[3] = {"bf16 w, bf16 act", "bf16 w, f32 act", "f16 w, f32 act"};
    for (int v = 0; v < 3; v++)
        for (int p = 0; p < 2; p++)
            printf("model matmuls per %d-token prefill (no lm_head), %s, %d thread(s): %.1f ms "
                   "= %.0f tok/s bound\n", M, pre_name[v], p + 1, N_LAYERS * pre_s[v][p] * 1e3,
                   M / (N_LAYERS * pre_s[v][p]));
    free(x);
    free(y);
    tern_pool_free(pools[0]);
    tern_pool_free(pools[1]);
    return 0;
}
