/* tern_vec_dot_f32 / tern_vec_axpy_f32 against scalar references for every
 * ISA this CPU has, plus determinism: the same inputs at another address
 * give the same bits, and axpy over a vector equals axpy over its pieces. */
#include "check.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/isa.h"
#include "backend/cpu/vec.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;

static float frand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static void check_n(int n)
{
    const char *isa = tern_cpu_isa_name(tern_cpu_isa_active());
    float *a = malloc(sizeof(float) * (size_t)(n + 1)), *b = malloc(sizeof(float) * (size_t)(n + 1));
    float *a2 = malloc(sizeof(float) * (size_t)(n + 1)), *b2 = malloc(sizeof(float) * (size_t)(n + 1));
    double ref = 0, mag = 0;
    for (int i = 0; i < n; i++) {
        a[i] = frand();
        b[i] = frand();
        ref += (double)a[i] * b[i];
        mag += fabs((double)a[i] * b[i]);
    }
    float d = tern_vec_dot_f32(a, b, n);
    CHECK_MSG(fabs(d - ref) <= 1e-6 * mag + 1e-7, "%s dot n=%d got %.9g want %.9g", isa, n, d, ref);
    /* same values at an address one float off */
    memcpy(a2 + 1, a, sizeof(float) * (size_t)n);
    memcpy(b2 + 1, b, sizeof(float) * (size_t)n);
    float d2 = tern_vec_dot_f32(a2 + 1, b2 + 1, n);
    CHECK_MSG(memcmp(&d, &d2, sizeof d) == 0, "%s dot n=%d depends on address", isa, n);

    float *y = malloc(sizeof(float) * (size_t)(n + 1)), *y2 = malloc(sizeof(float) * (size_t)(n + 1));
    for (int i = 0; i < n; i++) y[i] = y2[i] = frand();
    float s = frand();
    int ok = 1;
    double *want = malloc(sizeof(double) * (size_t)(n + 1));
    for (int i = 0; i < n; i++) want[i] = (double)y[i] + (double)s * a[i];
    tern_vec_axpy_f32(y, s, a, n);
    for (int i = 0; i < n; i++)
        if (!(fabs(y[i] - want[i]) <= 1e-6 * (fabs(want[i]) + fabs(s * a[i])) + 1e-7)) ok = 0;
    CHECK_MSG(ok, "%s axpy n=%d", isa, n);
    int cut = n / 3;
    tern_vec_axpy_f32(y2, s, a, cut);
    tern_vec_axpy_f32(y2 + cut, s, a + cut, n - cut);
    CHECK_MSG(memcmp(y, y2, sizeof(float) * (size_t)n) == 0, "%s axpy n=%d split differs", isa, n);
    free(a);
    free(b);
    free(a2);
    free(b2);
    free(y);
    free(y2);
    free(want);
}

int main(void)
{
    int n_isa = 0;
    for (int isa = 0; isa < TERN_CPU_ISA_COUNT; isa++) {
        if (tern_cpu_isa_select((tern_cpu_isa)isa) != TERN_OK) continue;
        n_isa++;
        for (int n = 0; n <= 140; n++) check_n(n);
        check_n(1000);
        check_n(4099);
        CHECK(tern_vec_dot_f32(NULL, NULL, 0) == 0.0f);
    }
    CHECK(n_isa >= 1);
    return check_summary("vec");
}
