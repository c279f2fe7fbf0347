#include "backend/cpu/matmul.h"

/* Portable kernel: one task per block of output columns; each y[m,n] is a
 * plain float32 dot product in k order, so results do not depend on M or on
 * the split across threads. ISA-specific kernels replace this at run time. */
typedef struct {
    tern_act_mode mode;
    const float *x;
    int M, K, N;
    const void *w;
    tern_dtype wdt;
    float *y;
} mm_job;

enum { MM_COLS_PER_TASK = 16 };

static void mm_task(void *arg, int task)
{
    const mm_job *j = arg;
    int n0 = task * MM_COLS_PER_TASK, n1 = n0 + MM_COLS_PER_TASK;
    if (n1 > j->N) n1 = j->N;
    int round_act = j->mode == TERN_ACT_BF16 && j->wdt == TERN_DT_BF16;
    for (int n = n0; n < n1; n++)
        for (int m = 0; m < j->M; m++) {
            const float *xr = j->x + (long)m * j->K;
            float acc = 0.0f;
            for (int k = 0; k < j->K; k++) {
                float a = round_act ? tern_bf16_to_f32(tern_f32_to_bf16(xr[k])) : xr[k];
                float b;
                long i = (long)n * j->K + k;
                if (j->wdt == TERN_DT_F32) b = ((const float *)j->w)[i];
                else if (j->wdt == TERN_DT_BF16) b = tern_bf16_to_f32(((const uint16_t *)j->w)[i]);
                else b = tern_f16_to_f32(((const uint16_t *)j->w)[i]);
                acc += a * b;
            }
            j->y[(long)m * j->N + n] = acc;
        }
}

tern_status tern_cpu_matmul(tern_pool *pool, tern_act_mode mode, const float *x, int M, int K,
                            const void *w, tern_dtype wdt, int N, float *y)
{
    if (M < 0 || K <= 0 || N <= 0)
        return tern_error(TERN_E_INVALID, "matmul: bad shape M=%d K=%d N=%d", M, K, N);
    if (wdt != TERN_DT_F32 && wdt != TERN_DT_F16 && wdt != TERN_DT_BF16)
        return tern_error(TERN_E_UNSUPPORTED, "matmul: weight dtype %s not supported",
                          tern_dtype_name(wdt));
    if (M == 0) return TERN_OK;
    mm_job j = {mode, x, M, K, N, w, wdt, y};
    tern_pool_run(pool, mm_task, &j, (N + MM_COLS_PER_TASK - 1) / MM_COLS_PER_TASK);
    return TERN_OK;
}
