#include "backend/cpu/vec.h"

#include <pthread.h>

#include "backend/cpu/isa.h"
#include "backend/cpu/vec_kern.h"

/* Portable entries: plain loops in index order. */
static float dot_portable(const float *a, const float *b, int n)
{
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

static void axpy_portable(float *y, float a, const float *x, int n)
{
    for (int i = 0; i < n; i++) y[i] += a * x[i];
}

static pthread_once_t vec_once = PTHREAD_ONCE_INIT;
static tern_vec_table vec_tables[TERN_CPU_ISA_COUNT];

static void vec_fill(void)
{
    vec_tables[TERN_CPU_ISA_SCALAR] = (tern_vec_table){dot_portable, axpy_portable};
    vec_tables[TERN_CPU_ISA_AVX2] = vec_tables[TERN_CPU_ISA_SCALAR];
    vec_tables[TERN_CPU_ISA_AVX512] = vec_tables[TERN_CPU_ISA_SCALAR];
    if (tern_cpu_isa_supported(TERN_CPU_ISA_AVX2)) tern_vec_table_avx2(&vec_tables[TERN_CPU_ISA_AVX2]);
    if (tern_cpu_isa_supported(TERN_CPU_ISA_AVX512))
        tern_vec_table_avx512(&vec_tables[TERN_CPU_ISA_AVX512]);
}

float tern_vec_dot_f32(const float *a, const float *b, int n)
{
    pthread_once(&vec_once, vec_fill);
    return vec_tables[tern_cpu_isa_active()].dot(a, b, n);
}

void tern_vec_axpy_f32(float *y, float a, const float *x, int n)
{
    pthread_once(&vec_once, vec_fill);
    vec_tables[tern_cpu_isa_active()].axpy(y, a, x, n);
}
