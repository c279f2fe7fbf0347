#include "backend/cpu/matmul.h"

static float weight_at(const void *w, tern_dtype wdt, long i)
{
    switch (wdt) {
    case TERN_DT_F32: return ((const float *)w)[i];
    case TERN_DT_F16: return tern_f16_to_f32(((const uint16_t *)w)[i]);
    case TERN_DT_BF16: return tern_bf16_to_f32(((const uint16_t *)w)[i]);
    default: return 0.0f;
    }
}

void tern_cpu_matmul_ref(tern_act_mode mode, const float *x, int M, int K, const void *w,
                         tern_dtype wdt, int N, float *y)
{
    int round_act = mode == TERN_ACT_BF16 && wdt == TERN_DT_BF16;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double acc = 0.0;
            for (int k = 0; k < K; k++) {
                float a = x[(long)m * K + k];
                if (round_act) a = tern_bf16_to_f32(tern_f32_to_bf16(a));
                acc += (double)a * weight_at(w, wdt, (long)n * K + k);
            }
            y[(long)m * N + n] = (float)acc;
        }
}
