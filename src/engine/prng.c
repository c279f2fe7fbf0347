/* Threefry-2x32 keyed streams with MLX's output layout (see prng.h). */
#include "engine/prng.h"

#include <math.h>

static uint32_t rotl32(uint32_t x, unsigned r)
{
    return (x << r) | (x >> (32u - r));
}

void tern_prng_hash(tern_prng_key key, uint32_t c0, uint32_t c1, uint32_t out[2])
{
    static const unsigned rot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
    uint32_t ks[3] = {key.k[0], key.k[1], key.k[0] ^ key.k[1] ^ 0x1BD11BDAu};
    uint32_t x = c0 + ks[0];
    uint32_t y = c1 + ks[1];
    for (unsigned i = 0; i < 5; i++) {
        for (unsigned j = 0; j < 4; j++) {
            x += y;
            y = rotl32(y, rot[i % 2][j]);
            y ^= x;
        }
        x += ks[(i + 1) % 3];
        y += ks[(i + 2) % 3] + i + 1;
    }
    out[0] = x;
    out[1] = y;
}

tern_prng_key tern_prng_key_from_seed(uint64_t seed)
{
    tern_prng_key k = {{(uint32_t)(seed >> 32), (uint32_t)seed}};
    return k;
}

tern_prng_key tern_prng_step_key(uint64_t seed, uint64_t step)
{
    return tern_prng_key_from_seed(seed ^ ((step + 1) * 0x9e3779b97f4a7c15ull));
}

uint32_t tern_prng_bits_at(tern_prng_key key, size_t n, size_t j)
{
    size_t half = n / 2, odd = n % 2;
    uint32_t h[2];
    if (j < half) {
        tern_prng_hash(key, (uint32_t)j, (uint32_t)(j + half + odd), h);
        return h[0];
    }
    if (odd && j == half) {
        tern_prng_hash(key, (uint32_t)half, 0, h);
        return h[0];
    }
    size_t i = j - half - odd;
    tern_prng_hash(key, (uint32_t)i, (uint32_t)j, h);
    return h[1];
}

void tern_prng_bits(tern_prng_key key, uint32_t *out, size_t n)
{
    size_t half = n / 2, odd = n % 2;
    uint32_t h[2];
    for (size_t i = 0; i < half; i++) {
        tern_prng_hash(key, (uint32_t)i, (uint32_t)(i + half + odd), h);
        out[i] = h[0];
        out[i + half + odd] = h[1];
    }
    if (odd) {
        tern_prng_hash(key, (uint32_t)half, 0, h);
        out[half] = h[0];
    }
}

void tern_prng_split(tern_prng_key key, tern_prng_key *out0, tern_prng_key *out1)
{
    uint32_t w[4];
    tern_prng_bits(key, w, 4);
    out0->k[0] = w[0];
    out0->k[1] = w[1];
    out1->k[0] = w[2];
    out1->k[1] = w[3];
}

float tern_prng_word_to_uniform(uint32_t bits)
{
    /* MLX divides the word, converted to float32 (round to nearest), by
     * (float)UINT32_MAX, which rounds to 2^32: an exact scaling. */
    float u = (float)bits * 0x1p-32f;
    float upper = 0x1.fffffep-1f;
    return u < upper ? u : upper;
}

float tern_prng_word_to_gumbel(uint32_t bits)
{
    float u = tern_prng_word_to_uniform(bits);
    float a = -logf(u);
    return -logf(a);
}
