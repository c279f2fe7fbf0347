#include "backend/cpu/panel.h"

#include <string.h>

size_t tern_cpu_panel_bytes(tern_dtype dt, int N, int K)
{
    return (size_t)tern_panel_count(N) * TERN_PANEL_ROWS * (size_t)tern_panel_kp(K) *
           tern_dtype_size(dt);
}

void tern_cpu_panel_pack(const void *src, tern_dtype dt, int N, int K, void *dst, int p0, int p1)
{
    size_t es = tern_dtype_size(dt);
    long kp = tern_panel_kp(K);
    const char *s = src;
    char *d = dst;
    for (int p = p0; p < p1; p++) {
        char *panel = d + (size_t)p * TERN_PANEL_ROWS * (size_t)kp * es;
        for (long c = 0; c < kp; c += TERN_PANEL_K) {
            char *chunk = panel + (size_t)c * TERN_PANEL_ROWS * es;
            for (int r = 0; r < TERN_PANEL_ROWS; r++) {
                char *out = chunk + (size_t)r * TERN_PANEL_K * es;
                int n = p * TERN_PANEL_ROWS + r;
                long len = n < N ? (K - c < TERN_PANEL_K ? K - c : TERN_PANEL_K) : 0;
                if (len > 0) memcpy(out, s + ((size_t)n * (size_t)K + (size_t)c) * es, (size_t)len * es);
                if (len < TERN_PANEL_K) memset(out + (size_t)(len > 0 ? len : 0) * es, 0,
                                               (size_t)(TERN_PANEL_K - (len > 0 ? len : 0)) * es);
            }
        }
    }
}
