#include "backend/cpu/attn_pv.h"

#include <string.h>

#include "backend/cpu/isa.h"
#include "backend/cpu/vec.h"

/* Other ISAs: one dispatched axpy per key (vec.h), in key order. */
static void pv_axpy(const float *p, long ldp, const int *len, int M, const float *V, int hd, float *out, long ldo,
                    int accumulate)
{
    for (int q = 0; q < M; q++) {
        float *o = out + q * ldo;
        if (!accumulate) memset(o, 0, (size_t)hd * sizeof *o);
        for (int j = 0; j < len[q]; j++) tern_vec_axpy_f32(o, p[q * ldp + j], V + (long)j * hd, hd);
    }
}

void tern_attn_pv(const float *p, long ldp, const int *len, int M, const float *V, int hd, float *out, long ldo,
                  int accumulate)
{
    if (tern_cpu_isa_active() == TERN_CPU_ISA_AVX512)
        tern_attn_pv_avx512(p, ldp, len, M, V, hd, out, ldo, accumulate);
    else
        pv_axpy(p, ldp, len, M, V, hd, out, ldo, accumulate);
}
