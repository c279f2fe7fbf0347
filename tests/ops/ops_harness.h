/* Shared pieces of the CUDA op harness (ops_test): device buffers filled
 * from host arrays, comparisons with stated tolerances, and the tally. */
#ifndef TERN_OPS_HARNESS_H
#define TERN_OPS_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "backend/cuda/cuda.h"

extern tern_cuda *ops_cuda;
extern int ops_pass, ops_fail;

/* Deterministic uniform values in [-scale, scale). */
void ops_fill(float *x, long n, unsigned seed, float scale);
/* Host array (malloc, owned by the caller) of n elements of dt made from
 * f (rounded to dt); returns NULL for dtypes other than F32/F16/BF16. */
void *ops_to_dtype(const float *f, long n, tern_dtype dt);
/* Device copy of bytes of host memory (owned; tern_cuda_free). Aborts the
 * harness on failure: a device that cannot take a few megabytes is broken. */
void *ops_dev(const void *host, size_t bytes);
void *ops_dev_zero(size_t bytes);
/* n elements of dt made on the device, uniform in [-scale, scale) from seed
 * (tern_cuda_fill_random; owned, tern_cuda_free). */
void *ops_dev_random(long n, tern_dtype dt, unsigned seed, float scale);
void ops_get(void *host, const void *d, size_t bytes);
/* Checks that a tern_status is TERN_OK, recording a failure otherwise. */
int ops_ok(tern_status st, const char *what);

/* Records one case: max |got - want| <= atol + rtol * |want| (per element,
 * with |want| replaced by scale[i] when scale is non-NULL). Prints a line. */
void ops_compare(const char *name, const float *got, const float *want, const double *scale, long n, double atol,
                 double rtol);
/* Records one case that must be bit-identical. */
void ops_same(const char *name, const float *a, const float *b, long n);

/* The op families (ops_linear.c, ops_rows.c, ops_attn.c); time_mode prints
 * timings instead of checking. */
void ops_linear(void);
void ops_rows(void);
void ops_attention(void);
void ops_fused(void);
void ops_time(void);
void ops_time_chains(void);
/* ops_pair.c: one-row SwiGLU pairs over interleaved rows, checked; and timed (--chain). */
void ops_pair(void);
void ops_time_pair(void);
/* ops_tl.c: graphs and timelines for the timing harnesses. ops_graph
 * captures what queue(ctx) queues in a graph, replays it `replays` times,
 * then (rounds > 0) times `rounds` rounds of four replays after one
 * untimed, *best_ms the best round's ms a replay; returns 1 when every step
 * succeeded (failures recorded). */
typedef tern_status (*ops_queue_fn)(void *ctx);
int ops_graph(ops_queue_fn queue, void *ctx, int replays, int rounds, float *best_ms);
/* A timeline (TERN_CUDA_TL_SLOTS stamps a block, slot 7 the block's
 * flags): slot of the first n blocks whose flags (bits 0-1 of slot 7) are
 * at least `flags` and which have it stamped, sorted, in us after t0, into
 * out (TERN_CUDA_TL_BLOCKS); returns how many. ops_tl_last: the latest
 * stamp of slot over the first n blocks. */
int ops_tl_slot(const unsigned long long *st, int n, int slot, unsigned long long t0, int flags, double *out);
unsigned long long ops_tl_last(const unsigned long long *st, int n, int slot);
/* ops_chain.c: the one-row product chain against the one-product kernels
 * (checked), and its decode layer timed against them (--chain). */
void ops_chain(void);
void ops_time_chain_kernel(void);
/* ops_floor.c: one-row products' cost apart from their bytes (--floor). */
void ops_floor(void);
/* ops_tiled.c: one-row products over tiled weight copies, checked. */
void ops_tiled(void);
/* ops_readpat.c: the weight stream's rate by the order of its loads (--readpat). */
void ops_readpat(void);
/* ops_attn_timeline.c: the attention's chain block by block (--attn-timeline). */
void ops_attn_timeline(void);
/* ops_timeline.c: the decode layer's products block by block (--timeline). */
void ops_timeline(void);

/* ops_layer.c: OPS_LAYERS copies of a decode layer's weights at the
 * Qwen3-8B shape (together larger than the L2) and the activations its
 * products pass along, all owned (ops_layers_free). */
enum { OPS_D = 4096, OPS_F = 12288, OPS_QKV = 6144, OPS_LAYERS = 6 };
typedef struct {
    void *wqkv[OPS_LAYERS], *wo[OPS_LAYERS], *wg[OPS_LAYERS], *wu[OPS_LAYERS], *wd[OPS_LAYERS];
    float *x, *nw, *qkv, *h, *ntmp;
} ops_layers;
void ops_layers_make(ops_layers *s, unsigned seed);
void ops_layers_free(ops_layers *s);
int ops_layers_tile(ops_layers *s);
/* The products of layer copy l that mask names (bit 0 q/k/v with the input
 * norm folded, 1 o + residual, 2 gate/up with the norm folded, 3 down +
 * residual), queued in that order as a pass queues them. */
tern_status ops_layer_run(const ops_layers *s, int l, unsigned mask);

#endif
