/* Counter-based random numbers laid out exactly as MLX's mlx.core.random
 * (Threefry-2x32, 20 rounds), so that a key drawn here yields the same bits,
 * uniforms and categorical draws as MLX on the CPU for the same key.
 *
 * A key is two 32-bit words. key(seed) = { seed >> 32, seed & 0xffffffff }.
 * bits(key, n) fills n words: for half = n/2 and odd = n%2, the hash of the
 * counter pair (i, i+half+odd) gives word i (first half) and word i+half+odd
 * (second half); when n is odd, word half is the first word of the hash of
 * (half, 0). Everything here is pure and thread-safe. */
#ifndef TERN_ENGINE_PRNG_H
#define TERN_ENGINE_PRNG_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t k[2];
} tern_prng_key;

/* The key MLX's random.key(seed) builds. */
tern_prng_key tern_prng_key_from_seed(uint64_t seed);

/* Key for decoding step `step` (0-based) of a request seeded with seed:
 * key(seed XOR ((step + 1) * 0x9e3779b97f4a7c15)). */
tern_prng_key tern_prng_step_key(uint64_t seed, uint64_t step);

/* Threefry-2x32 of the counter pair (c0, c1) under key; out[0..1]. */
void tern_prng_hash(tern_prng_key key, uint32_t c0, uint32_t c1, uint32_t out[2]);

/* MLX random.split(key, 2): out0 = row 0, out1 = row 1. */
void tern_prng_split(tern_prng_key key, tern_prng_key *out0, tern_prng_key *out1);

/* Word j of bits(key, n) (j < n), computed alone. */
uint32_t tern_prng_bits_at(tern_prng_key key, size_t n, size_t j);

/* bits(key, n) into out[n] (borrowed). */
void tern_prng_bits(tern_prng_key key, uint32_t *out, size_t n);

/* MLX's float32 uniform in [0, 1) from one random word:
 * min((float)bits / 2^32, nextafter(1, 0)). */
float tern_prng_word_to_uniform(uint32_t bits);

/* Gumbel noise from one random word: -log(-log(uniform)), float32 steps, as
 * MLX's random.gumbel. (MLX's categorical uses Gumbel-max only when it draws
 * several samples at once; one sample from one [1, V] row, which is what
 * mlx-lm asks for, goes by inverse CDF: see tern_categorical.) */
float tern_prng_word_to_gumbel(uint32_t bits);

#endif
