#include "tern/dtype.h"

/* The one dtype table: name, bytes per element (0: quantized), bits per
 * code, quantized, block elements and bytes. The matmul kernels of each row
 * are chosen by the CPU backend's tables (backend/cpu/matmul.c, matmul_q.c;
 * GGUF blocks are repacked to matmul_q's panels, gguf_blocks.c). */
static const struct {
    const char *name;
    size_t size;
    int bits, quant, block, block_bytes;
} dtypes[TERN_DT_COUNT] = {
    [TERN_DT_F32] = {"F32", 4, 32, 0, 1, 4},   [TERN_DT_F16] = {"F16", 2, 16, 0, 1, 2},
    [TERN_DT_BF16] = {"BF16", 2, 16, 0, 1, 2}, [TERN_DT_I32] = {"I32", 4, 32, 0, 1, 4},
    [TERN_DT_U32] = {"U32", 4, 32, 0, 1, 4},   [TERN_DT_I64] = {"I64", 8, 64, 0, 1, 8},
    [TERN_DT_U8] = {"U8", 1, 8, 0, 1, 1},
    [TERN_DT_MLX_Q4] = {"MLX_Q4", 0, 4, 1, 0, 0}, [TERN_DT_MLX_Q8] = {"MLX_Q8", 0, 8, 1, 0, 0},
    [TERN_DT_Q8_0] = {"Q8_0", 0, 8, 1, 32, 34},   [TERN_DT_Q4_0] = {"Q4_0", 0, 4, 1, 32, 18},
    [TERN_DT_Q4_K] = {"Q4_K", 0, 4, 1, 256, 144}, [TERN_DT_Q5_K] = {"Q5_K", 0, 5, 1, 256, 176},
    [TERN_DT_Q6_K] = {"Q6_K", 0, 6, 1, 256, 210},
};

void tern_dtype_block(tern_dtype dt, int *elems, int *bytes)
{
    *elems = (unsigned)dt < TERN_DT_COUNT ? dtypes[dt].block : 0;
    *bytes = (unsigned)dt < TERN_DT_COUNT ? dtypes[dt].block_bytes : 0;
}

size_t tern_dtype_size(tern_dtype dt)
{
    return (unsigned)dt < TERN_DT_COUNT ? dtypes[dt].size : 0;
}

int tern_dtype_bits(tern_dtype dt)
{
    return (unsigned)dt < TERN_DT_COUNT ? dtypes[dt].bits : 0;
}

int tern_dtype_is_quant(tern_dtype dt)
{
    return (unsigned)dt < TERN_DT_COUNT && dtypes[dt].quant;
}

const char *tern_dtype_name(tern_dtype dt)
{
    return (unsigned)dt < TERN_DT_COUNT ? dtypes[dt].name : "?";
}

int tern_dtype_parse(const char *s, tern_dtype *dt)
{
    for (int i = 0; i < TERN_DT_COUNT; i++)
        if (!dtypes[i].quant && !strcmp(s, dtypes[i].name)) {
            *dt = (tern_dtype)i;
            return 0;
        }
    return -1;
}

float tern_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { /* subnormal: normalise */
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) { man <<= 1; exp--; }
            u = sign | (exp << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t tern_f32_to_f16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00);     /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00);    /* overflow -> inf */
    if (a < 0x38800000u) {                                      /* subnormal or zero */
        if (a < 0x33000000u) return (uint16_t)sign;
        uint32_t man = (a & 0x7fffff) | 0x800000, shift = 126 - (a >> 23);
        uint32_t r = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = a - 0x38000000u;                               /* rebias exponent */
    uint32_t h = r >> 13, rem = r & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
    return (uint16_t)(sign | h);
}
