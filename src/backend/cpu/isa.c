#include "backend/cpu/isa.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t isa_once = PTHREAD_ONCE_INIT;
static int isa_ok[TERN_CPU_ISA_COUNT];
static atomic_int isa_active;

static const char *const isa_names[TERN_CPU_ISA_COUNT] = {"scalar", "avx2", "avx512"};

static void isa_detect(void)
{
    isa_ok[TERN_CPU_ISA_SCALAR] = 1;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    isa_ok[TERN_CPU_ISA_AVX2] = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    isa_ok[TERN_CPU_ISA_AVX512] = isa_ok[TERN_CPU_ISA_AVX2] &&
        __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512bf16");
#endif
    /* F16C has no __builtin_cpu_supports name; every AVX2 CPU shipped has it. */
    int best = TERN_CPU_ISA_SCALAR;
    for (int i = 0; i < TERN_CPU_ISA_COUNT; i++)
        if (isa_ok[i]) best = i;
    const char *env = getenv("TERN_ISA");
    if (env) {
        for (int i = 0; i < TERN_CPU_ISA_COUNT; i++)
            if (strcmp(env, isa_names[i]) == 0 && isa_ok[i]) best = i;
    }
    atomic_store(&isa_active, best);
}

int tern_cpu_isa_supported(tern_cpu_isa isa)
{
    pthread_once(&isa_once, isa_detect);
    return isa >= 0 && isa < TERN_CPU_ISA_COUNT && isa_ok[isa];
}

tern_cpu_isa tern_cpu_isa_active(void)
{
    pthread_once(&isa_once, isa_detect);
    return (tern_cpu_isa)atomic_load_explicit(&isa_active, memory_order_relaxed);
}

tern_status tern_cpu_isa_select(tern_cpu_isa isa)
{
    if (!tern_cpu_isa_supported(isa))
        return tern_error(TERN_E_UNSUPPORTED, "cpu: instruction set %s not available here",
                          tern_cpu_isa_name(isa));
    atomic_store(&isa_active, (int)isa);
    return TERN_OK;
}

const char *tern_cpu_isa_name(tern_cpu_isa isa)
{
    return isa >= 0 && isa < TERN_CPU_ISA_COUNT ? isa_names[isa] : "unknown";
}
