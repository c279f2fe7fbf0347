/* Element types of tensors as stored in checkpoints, the quantized weight
 * formats, and scalar conversions. */
#ifndef TERN_DTYPE_H
#define TERN_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef enum {
    TERN_DT_F32 = 0,
    TERN_DT_F16,
    TERN_DT_BF16,
    TERN_DT_I32,
    TERN_DT_U32,
    TERN_DT_I64,
    TERN_DT_U8,
    /* Quantized weight matrices: never a tensor's storage dtype, only the
     * format of a bound weight. MLX affine: w = scale * q + bias per group of
     * `group` consecutive inputs, q unsigned codes packed little-endian into
     * uint32 words (4 bits: element 2j in the low nibble of byte j), scales
     * and biases [rows, cols / group] in a float dtype. */
    TERN_DT_MLX_Q4,
    TERN_DT_MLX_Q8,
    /* GGUF block formats (ggml): rows of blocks, each block a scale (and
     * min) with its codes; layouts in backend/cpu/gguf_blocks.h */
    TERN_DT_Q8_0,
    TERN_DT_Q4_0,
    TERN_DT_Q4_K,
    TERN_DT_Q5_K,
    TERN_DT_Q6_K,
    TERN_DT_COUNT
} tern_dtype;

/* Bytes per element; 0 for an invalid dtype and for the quantized formats
 * (their bytes are tern_dtype_bits per element plus scales and biases). */
size_t tern_dtype_size(tern_dtype dt);
/* Bits per stored element (code bits for the quantized formats). */
int tern_dtype_bits(tern_dtype dt);
/* 1 for the quantized weight formats (MLX and GGUF). */
int tern_dtype_is_quant(tern_dtype dt);
/* Elements and bytes of one storage block: 1 and the element size for
 * plain types, the block of a GGUF format, 0 and 0 for MLX (its group is
 * per weight). */
void tern_dtype_block(tern_dtype dt, int *elems, int *bytes);
/* Safetensors spelling ("F32", "BF16", ...), or the format's name ("MLX_Q4"). */
const char *tern_dtype_name(tern_dtype dt);
/* Parses a safetensors dtype string (storage dtypes only); returns 0 and
 * sets *dt, or -1. */
int tern_dtype_parse(const char *s, tern_dtype *dt);

static inline float tern_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Round to nearest even; NaN stays NaN. */
static inline uint16_t tern_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float tern_f16_to_f32(uint16_t h);
uint16_t tern_f32_to_f16(float f);

#endif
