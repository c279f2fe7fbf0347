/* Private: per-ISA entries for vec.c (see vec.h for the contract). */
#ifndef TERN_CPU_VEC_KERN_H
#define TERN_CPU_VEC_KERN_H

typedef struct {
    float (*dot)(const float *a, const float *b, int n);
    void (*axpy)(float *y, float a, const float *x, int n);
} tern_vec_table;

void tern_vec_table_avx2(tern_vec_table *t);
void tern_vec_table_avx512(tern_vec_table *t);

#endif
