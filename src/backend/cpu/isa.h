/* Run-time choice of the CPU instruction set the kernels use.
 *
 * The best ISA the CPU supports is detected once (cpuid); the environment
 * variable TERN_ISA=scalar|avx2|avx512 can lower it (never raise it beyond
 * what the CPU has). Kernels read tern_cpu_isa_active() on every call, so
 * tests and benchmarks can switch with tern_cpu_isa_select() between calls
 * (not while a kernel runs on another thread). */
#ifndef TERN_CPU_ISA_H
#define TERN_CPU_ISA_H

#include "tern/status.h"

typedef enum {
    TERN_CPU_ISA_SCALAR = 0,    /* portable C */
    TERN_CPU_ISA_AVX2,          /* AVX2 + FMA + F16C */
    TERN_CPU_ISA_AVX512,        /* AVX-512 F/BW/VL/DQ + AVX512_BF16 */
    TERN_CPU_ISA_COUNT
} tern_cpu_isa;

/* 1 if this CPU (and OS) can run kernels built for isa. */
int tern_cpu_isa_supported(tern_cpu_isa isa);
/* The ISA kernels use now (detected once, lowered by TERN_ISA). */
tern_cpu_isa tern_cpu_isa_active(void);
/* Switches the active ISA; TERN_E_UNSUPPORTED if the CPU lacks it. */
tern_status tern_cpu_isa_select(tern_cpu_isa isa);
/* "scalar", "avx2", "avx512" (static string). */
const char *tern_cpu_isa_name(tern_cpu_isa isa);

#endif
