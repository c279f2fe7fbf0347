/* The CUDA backend (sm_90): a device context and the decoder ops on device
 * memory, callable from C.
 *
 * Every op implements the contract of its CPU counterpart in src/backend/cpu
 * (same shapes, same layouts, float32 activations and accumulation) and is
 * tested against it by tests/ops. Pointers named d_* are device memory,
 * borrowed; ops are queued on the context's stream and return once queued
 * (tern_cuda_sync waits). Ops never allocate device memory, so a sequence of
 * them can be captured as a CUDA graph (tern_cuda_graph_*); the cuBLAS path
 * creates its handle on first use, so run it once before capturing it.
 *
 * Batch invariance: every output row is computed by a sequence of operations
 * that depends only on that row's own inputs and the op's fixed parameters
 * (K, N, head_dim, ...), never on the number of rows or the other rows. The
 * one exception is tern_cuda_matmul with TERN_CUDA_MM_CUBLAS, which the caller
 * opts into (see there).
 *
 * Without CUDA (no nvcc at build time) only tern_cuda_built, _open, _close
 * and _describe exist (none.c), and tern_cuda_open reports that the build
 * has no CUDA support. */
#ifndef TERN_BACKEND_CUDA_H
#define TERN_BACKEND_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "tern/dtype.h"
#include "tern/status.h"

typedef struct tern_cuda tern_cuda;

/* 1 when this build contains the CUDA backend. */
int tern_cuda_built(void);

/* Opens device `device` (0-based) with one stream. Returns an
 * owned context, or TERN_E_UNSUPPORTED with a message naming what is missing
 * (no CUDA in this build, the runtime's cudaGetDeviceCount error text, no
 * device of that index, or a device older than sm_90). */
tern_status tern_cuda_open(int device, tern_cuda **out);
void tern_cuda_close(tern_cuda *c);
/* "NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)"; borrowed, lives with c. */
const char *tern_cuda_describe(const tern_cuda *c);

/* Programmatic dependent launch (on by default): each kernel may start
 * while the one before it drains, fetching its weights, and waits for that
 * kernel's results before reading them. Off queues plain launches. */
void tern_cuda_set_pdl(tern_cuda *c, int on);
/* The GEMM of bf16 products past the small-batch kernel: 1 warpgroup MMA
 * fed by the tensor copy engine (sm_90a; the default; K whose parts do not
 * start on even blocks stay on mma.sync), 0 mma.sync (the same bits);
 * TERN_CUDA_WGMMA sets it at open. Returns the previous mode. */
int tern_cuda_set_wgmma(tern_cuda *c, int mode);
/* One-row bf16 products: 0 the register-buffered kernel, 2, 3 or 4 the
 * kernel with x prepared once per block, that many blocks a multiprocessor,
 * 5 (the default) that kernel with the one-matrix products at 2 blocks and
 * twice the loads in flight, gate/up at 3 (the same bits); TERN_CUDA_SKX
 * sets it at open. Returns the previous mode. */
int tern_cuda_set_sk_x(tern_cuda *c, int mode);
/* When the one-row kernel (x prepared once per block) loads its first
 * tile's second weight batch: 0 in the tile loop, after x is prepared; 1
 * right after the wait for the previous kernel, before x; 2 after a warp's
 * first x loads; 3 (the default) after its last x loads, so that the batch
 * streams while x is split and the norm's sum formed. Only when the loads
 * are issued changes: the same bits. TERN_CUDA_SKEARLY sets it at open.
 * Returns the previous mode. */
int tern_cuda_set_sk_early(tern_cuda *c, int mode);
/* The attention prologue (tern_cuda_qkv_rope_store) with each head in a
 * warp's registers, its row, table row and norm weight read before the
 * wait for the previous kernel (head_dim 64, 128 or 256 with rope over the
 * whole head; others keep the shared-memory kernel): the same bits
 * (default on; TERN_CUDA_PRO_REG sets it at open). Returns the previous
 * setting. */
int tern_cuda_set_pro_reg(tern_cuda *c, int on);
/* One-row SwiGLU pairs (tern_cuda_gate_up*, M = 1, F a multiple of 4,
 * mode 5) on the one-matrix one-row kernel over interleaved gate / up
 * rows, the same bits (TERN_CUDA_GU_ILV, default on; returns the old
 * setting). */
int tern_cuda_set_gu_ilv(tern_cuda *c, int on);
/* A timeline of the one-row products (a build with -DTERN_CUDA_TIMELINE;
 * elsewhere nothing is recorded): each of the next `launches` launches of
 * the one-row kernel writes, per block b, TERN_CUDA_TL_SLOTS stamps of the
 * global clock at d_buf[(launch * TERN_CUDA_TL_BLOCKS + b) * SLOTS]: 0
 * entry, 1 past the wait for the previous kernel, 2 x prepared, 3..5 the
 * end of tiles 1..3, 6 the end of the last tile, 7 the multiprocessor |
 * tiles << 16 | blocks << 32. d_buf is borrowed (NULL stops). Returns the
 * launches recorded since the previous call. */
enum { TERN_CUDA_TL_SLOTS = 8, TERN_CUDA_TL_BLOCKS = 512 };
int tern_cuda_set_timeline(tern_cuda *c, unsigned long long *d_buf, int launches);
/* The same for the attention's chain, in a timeline build: every launch of
 * the q/k/v prologue kernel writes per block b stamps at d_pro[b * SLOTS]
 * (0 entry, 1 past the wait, 6 end; 7 blocks << 32), every launch of the
 * decode attention's split kernel at d_att[b * SLOTS], b its block in x, y,
 * z order (0 entry, 1 the older keys staged, 2 past the wait, 3 the new q,
 * k, v in shared memory, 4 its split's record written, 5 counted, 6 the
 * fold's end; 7: bit 0 a block that worked, bit 1 the one that folded,
 * blocks << 32). Later launches overwrite earlier ones; NULL stops. */
tern_status tern_cuda_set_attn_timeline(tern_cuda *c, unsigned long long *d_pro, unsigned long long *d_att);
/* The decode attention's fold: for calls of more than n splits (n > 0) a
 * launch of its own, one block per (query, head); else (and for n = 0) the
 * split kernel's last block per (query, kv head) (the same bits);
 * TERN_CUDA_FOLD_SPLITS sets it at open (default 32). Returns the previous
 * value. */
int tern_cuda_set_fold_splits(tern_cuda *c, int n);


/* Device memory. tern_cuda_alloc returns owned memory (tern_cuda_free). */
tern_status tern_cuda_alloc(tern_cuda *c, size_t bytes, void **d_out);
void tern_cuda_free(tern_cuda *c, void *d);
/* Synchronous copies on the context's stream. */
tern_status tern_cuda_upload(tern_cuda *c, void *d_dst, const void *src, size_t bytes);
tern_status tern_cuda_download(tern_cuda *c, void *dst, const void *d_src, size_t bytes);
/* Asynchronous host->device copy (src must stay valid until the stream
 * reaches it; pinned memory from tern_cuda_host_alloc for graph replays). */
tern_status tern_cuda_upload_async(tern_cuda *c, void *d_dst, const void *src, size_t bytes);
tern_status tern_cuda_host_alloc(tern_cuda *c, size_t bytes, void **out);
void tern_cuda_host_free(tern_cuda *c, void *p);
tern_status tern_cuda_memset(tern_cuda *c, void *d, int value, size_t bytes);
/* Asynchronous device->device and device->host copies on the stream. */
tern_status tern_cuda_copy(tern_cuda *c, void *d_dst, const void *d_src, size_t bytes);
tern_status tern_cuda_download_async(tern_cuda *c, void *dst, const void *d_src, size_t bytes);
tern_status tern_cuda_sync(tern_cuda *c);

/* Graph capture of the ops queued between begin and end; launch replays
 * them. Returns an owned graph handle (tern_cuda_graph_free). */
typedef struct tern_cuda_graph tern_cuda_graph;
tern_status tern_cuda_graph_begin(tern_cuda *c);
tern_status tern_cuda_graph_end(tern_cuda *c, tern_cuda_graph **out);
tern_status tern_cuda_graph_launch(tern_cuda *c, tern_cuda_graph *g);
void tern_cuda_graph_free(tern_cuda_graph *g);

/* Timing with events on the context's stream: mark, then elapsed since the
 * last mark after synchronising (milliseconds). */
tern_status tern_cuda_timer_mark(tern_cuda *c);
tern_status tern_cuda_timer_elapsed(tern_cuda *c, float *ms);

/* Profiling events (a pool of up to 4096 on the stream): record event i;
 * elapsed from event i to event j, both recorded and reached. */
tern_status tern_cuda_prof_record(tern_cuda *c, int i);
tern_status tern_cuda_prof_elapsed(tern_cuda *c, int i, int j, float *ms);

/* ---- ops ---------------------------------------------------------------- */

typedef enum {
    TERN_CUDA_ACT_F32 = 0,   /* activations stay float32 (reference path) */
    TERN_CUDA_ACT_BF16 = 1   /* activations rounded to bf16 before products with
                                BF16 weights, as TERN_ACT_BF16 on the CPU */
} tern_cuda_act;

typedef enum {
    /* own kernels for every M: batch-invariant (the default) */
    TERN_CUDA_MM_OWN = 0,
    /* cuBLAS GEMM (bf16 x bf16 -> f32) when M > 16 and the weights are BF16:
     * faster prefill, but cuBLAS chooses its algorithm (tile shape, split-K)
     * from M, so a row's bits can change with the number of rows. Also
     * implies bf16 activations for those products. Not for a tiled matrix
     * (tern_cuda_tile_weights): that runs on the own kernels. */
    TERN_CUDA_MM_CUBLAS = 1
} tern_cuda_mm_path;

enum { TERN_CUDA_GEMV_MAX_M = 16 };

/* y[M, N] (row stride ldy) = x[M, K] . w[N, K]^T, or y += that when
 * accumulate is set (the residual add, same arithmetic as a separate add).
 * w is row-major in F32, F16 or BF16; K must be a multiple of 8 and w, x
 * 16-byte aligned. BF16 weights with K a multiple of 32 run on the tensor
 * cores for every M (mma.cuh: up to 64 rows in one weight pass, a tiled
 * GEMM beyond; TERN_CUDA_MMA=0 turns them off). Other weights: M <= 16 runs
 * one kernel that streams each weight row once for all M rows; larger M runs
 * it over 16-row tiles. cuBLAS when path asks. Either way a row's bits do
 * not depend on M (except cuBLAS). d_tmp: workspace of
 * tern_cuda_matmul_tmp_bytes(M, K) bytes (may be NULL when that is 0). */
tern_status tern_cuda_matmul(tern_cuda *c, tern_cuda_act act, tern_cuda_mm_path path, const float *d_x,
                             int M, int K, const void *d_w, tern_dtype wdt, int N, float *d_y, int ldy,
                             int accumulate, void *d_tmp);
size_t tern_cuda_matmul_tmp_bytes(tern_cuda_mm_path path, int M, int K, int N);

/* h[M, F] = silu(x . wg^T) * (x . wu^T), wg and wu [F, K]: one pass over
 * both weights (gate and up of a SwiGLU MLP). Each element is bit-identical
 * to two tern_cuda_matmul calls followed by tern_cuda_silu_mul. */
tern_status tern_cuda_gate_up(tern_cuda *c, tern_cuda_act act, const float *d_x, int M, int K,
                              const void *d_wg, const void *d_wu, tern_dtype wdt, int F, float *d_h);

/* y[r] = x[r] / rms(x[r]) * w for n rows of width d; y may alias x. */
tern_status tern_cuda_rmsnorm(tern_cuda *c, const float *d_x, float *d_y, int n, int d, const void *d_w,
                              tern_dtype wdt, float eps);

/* Rotary embedding of the first rope_dim dims of each of n_heads heads of
 * x [n, n_heads*head_dim] (row stride ldx floats; rotate-half pairing), the table holding a row
 * cs[p] = [cos[0..half), sin[0..half)] per position p (the CPU's
 * tern_cpu_rope_table over positions 0..n_pos-1, uploaded); d_pos [n]. */
tern_status tern_cuda_rope(tern_cuda *c, float *d_x, long ldx, int n, int n_heads, int head_dim, int rope_dim,
                           const float *d_cs, const int *d_pos);

/* Per head: optional RMSNorm over head_dim with weight d_w (Qwen3 q/k norm;
 * NULL skips it), then rope; in place on x [n, n_heads*head_dim]. Bit-identical
 * to tern_cuda_rmsnorm over n*n_heads rows followed by tern_cuda_rope. */
tern_status tern_cuda_head_norm_rope(tern_cuda *c, float *d_x, long ldx, int n, int n_heads, int head_dim, int rope_dim,
                                     const void *d_w, tern_dtype wdt, float eps, const float *d_cs,
                                     const int *d_pos);

/* g[i] = silu(g[i]) * u[i]; y[i] += x[i]. */
tern_status tern_cuda_silu_mul(tern_cuda *c, float *d_g, const float *d_u, long count);
tern_status tern_cuda_add(tern_cuda *c, float *d_y, const float *d_x, long count);

/* out[t] = table[ids[t]] as float32, table [vocab, d] in F32/F16/BF16. */
tern_status tern_cuda_embed(tern_cuda *c, const int32_t *d_ids, int n, const void *d_table, tern_dtype dt,
                            int d, float *d_out);

/* y[M, N] = rmsnorm(x) . w^T with the norm folded into the product: one
 * kernel, no separate norm pass (on the tensor-core path past 64 rows, a
 * prep kernel forms the row scales first). The kernel forms sum_k (x_k nw_k) w_nk and
 * the row's sum of squares in the same order, and scales by
 * 1 / sqrt(ss / K + eps) last, so it rounds differently from
 * tern_cuda_rmsnorm followed by tern_cuda_matmul (within float32 rounding of
 * it), the same way for every M. d_nw: the norm weight as float32 [K];
 * float32 activations; d_tmp: tern_cuda_norm_tmp_bytes(K) of scratch. */
tern_status tern_cuda_matmul_norm(tern_cuda *c, const float *d_x, int M, int K, const float *d_nw, float eps,
                                  const void *d_w, tern_dtype wdt, int N, float *d_y, int ldy, float *d_tmp);
/* h = silu(g) * u of g, u = rmsnorm(x) . wg^T, . wu^T, folded as
 * tern_cuda_matmul_norm. */
tern_status tern_cuda_gate_up_norm(tern_cuda *c, const float *d_x, int M, int K, const float *d_nw, float eps,
                                   const void *d_wg, const void *d_wu, tern_dtype wdt, int F, float *d_h,
                                   float *d_tmp);
/* Scratch of both (tiles of more than 4 rows stage x * nw and the row
 * scales there, computed in the kernels' order, then multiply). */
size_t tern_cuda_norm_tmp_bytes(int K);

/* ---- attention ---------------------------------------------------------- */

/* One row (sequence) of an attention call, in device memory so that graph
 * replays read the current lengths. Keys and values are float32, laid out
 * as the CPU's KV pool (src/kv/kv.h): with a block table, position p of KV
 * head h is at k + table[p / block_tokens] * block_stride + h * head_stride
 * + (p % block_tokens) * head_dim (block_tokens a multiple of
 * TERN_CUDA_ATTN_SPLIT); without one (table NULL) the row is one head-major
 * block: k + h * head_stride + p * head_dim. */
typedef struct tern_cuda_attn_row tern_cuda_attn_row;
struct tern_cuda_attn_row {
    float *k, *v;
    const int *table;   /* device memory, borrowed; NULL for one contiguous block */
    long block_stride;  /* floats per block (all heads); unused without a table */
    long head_stride;   /* floats per head within a block */
    int block_tokens;   /* unused without a table */
    int len;            /* keys including this call's new tokens */
    int n_q;            /* new tokens: query i sits at position len - n_q + i */
    int q0;             /* index of the row's first query in q/out */
};

/* The attention prologue of a fused qkv output [n, ld] (per token: n_heads
 * query heads, then n_kv_heads keys, then n_kv_heads values, head_dim each):
 * q and k heads get their RMSNorm (d_qnorm / d_knorm, NULL for none) and
 * rope at their row's position (table as tern_cuda_rope), in place; keys and
 * values are stored in their row's cache. Bit-identical to
 * tern_cuda_head_norm_rope on q and on k, then tern_cuda_kv_write. */
tern_status tern_cuda_qkv_rope_store(tern_cuda *c, float *d_qkv, long ld, int n, int n_heads, int n_kv_heads,
                                     int head_dim, int rope_dim, const void *d_qnorm, const void *d_knorm,
                                     tern_dtype wdt, float eps, const float *d_cs, const tern_cuda_attn_row *d_rows,
                                     const int *d_tok_row);

/* Writes the n_q new keys and values of every row (k, v [total_q,
 * n_kv_heads*head_dim], token t of row r at index q0 + i) at positions
 * len - n_q .. len - 1 of the row's cache; ld: floats between tokens of k and v. d_tok_row [total_q]: row of each
 * query token. */
tern_status tern_cuda_kv_write(tern_cuda *c, const tern_cuda_attn_row *d_rows, const int *d_tok_row,
                               int total_q, int n_kv_heads, int head_dim, const float *d_k, const float *d_v,
                               long ld);

/* Causal GQA attention of every query token against its row's keys:
 * out = softmax(scale * q k^T) v. Keys are taken in fixed splits of
 * TERN_CUDA_ATTN_SPLIT positions (flash-decoding: the splits of one query
 * run in parallel, then combine in split order), so a query's result depends
 * only on its own row and position. q has ldq floats between tokens, out
 * is [total_q, n_heads*head_dim]. max_len bounds every row's len (it sizes
 * the grid); d_part: scratch of tern_cuda_attention_tmp_bytes; d_count:
 * tern_cuda_attention_count_bytes of counters, zeroed once before the first
 * call (each call leaves them at zero; a buffer sized for the largest
 * total_q serves every call). */
enum { TERN_CUDA_ATTN_SPLIT = 32 };
/* The attention prologue done inside the attention kernel, for calls where
 * every row has one new token (decode): d_q is then the fused qkv row of
 * tern_cuda_qkv_rope_store (q heads, k heads, v heads, unnormalised), and
 * each block applies that prologue's q/k norm and rope to what it reads and
 * stores the new key and value (the same bits as running
 * tern_cuda_qkv_rope_store first). */
typedef struct {
    const void *d_qnorm, *d_knorm;   /* NULL: no q/k norm */
    tern_dtype wdt;
    float eps;
    int rope_dim;
    const float *d_cs;               /* rope table as tern_cuda_rope's */
} tern_cuda_attn_prologue;
tern_status tern_cuda_attention(tern_cuda *c, const tern_cuda_attn_row *d_rows, const int *d_tok_row,
                                int total_q, int max_len, int n_heads, int n_kv_heads, int head_dim,
                                float scale, const float *d_q, long ldq, float *d_out, void *d_part,
                                unsigned *d_count, const tern_cuda_attn_prologue *pro);
/* The same attention (the same bits for every query) by a kernel that
 * stages a split's keys and values once for a tile of a row's queries and
 * folds the tile's splits itself: for calls where rows have many queries
 * (prefill). No prologue. Arguments as tern_cuda_attention's; it needs no
 * scratch and no counters. */
tern_status tern_cuda_attention_tiled(tern_cuda *c, const tern_cuda_attn_row *d_rows, const int *d_tok_row,
                                      int total_q, int max_len, int n_heads, int n_kv_heads, int head_dim,
                                      float scale, const float *d_q, long ldq, float *d_out);
size_t tern_cuda_attention_tmp_bytes(int total_q, int max_len, int n_heads, int head_dim);
size_t tern_cuda_attention_count_bytes(int total_q, int n_kv_heads);

/* ---- sampling summaries ------------------------------------------------- */

/* Per row of logits: lse = log(sum exp(logits)), argmax = the first index
 * of the largest logits[i] - lse (tern_argmax's rule over the
 * log-probabilities), lp = that log-probability. */
typedef struct {
    float lse;
    int32_t argmax;
    float lp;
} tern_cuda_lsum;

/* d_out[r] for rows r < n of d_logits [n, V] (row stride ld floats). The
 * arithmetic of a row depends on that row alone (fixed chunks of the
 * vocabulary folded in order). d_tmp: tern_cuda_summary_tmp_bytes; d_count:
 * tern_cuda_summary_count_bytes of counters, zeroed once (each call leaves
 * them at zero). */
tern_status tern_cuda_summary(tern_cuda *c, const float *d_logits, long ld, int n, int V, void *d_tmp,
                              unsigned *d_count, tern_cuda_lsum *d_out);
size_t tern_cuda_summary_tmp_bytes(int n, int V);
size_t tern_cuda_summary_count_bytes(int n);

/* ---- the one-row product chain (chain.cu) ------------------------------- */

/* The products a decode step at batch 1 runs between two attentions, in
 * one persistent kernel: one block a multiprocessor, each of its warps
 * streaming its share of every product's weights into its own ring of
 * shared-memory slots (cp.async) while the block waits for the previous
 * product's output (every block's count in d_sync), so the weight stream
 * need not stop at a product's start or end. Each output has the bits of the one-row product
 * (tern_cuda_matmul, _matmul_norm, _gate_up_norm at M = 1 with float32
 * activations, BF16 weights), so those of any M. The first product's x is
 * the previous kernel's output (the kernel waits for it); product i > 0
 * reads the output of i - 1, or of any earlier product.
 *   STORE: y = rmsnorm(x) . w^T (d_nw folds the norm, NULL: x . w^T);
 *   ADD:   y += that (the residual add);
 *   SWIGLU: y = silu(x . w^T) * (x . wu^T) over w, wu [N, K] (N a multiple
 *          of 4), the norm folded as above.
 * A product's weights may be row-major or tiled (tern_cuda_tile_weights;
 * a gate/up pair both or neither, N then a multiple of 8): the same bits.
 * d_sync: tern_cuda_chain_sync_bytes of zeroed words for this launch alone
 * among launches that may run at once (each launch leaves them zeroed);
 * d_err: one word, set to 1 when a block waited 2 s for the others (the
 * outputs are then wrong; never cleared by the kernel). Every pointer is
 * borrowed device memory. */
enum { TERN_CUDA_CHAIN_MAX = 4 };
enum { TERN_CUDA_CH_STORE = 0, TERN_CUDA_CH_ADD = 1, TERN_CUDA_CH_SWIGLU = 2 };
typedef struct {
    const float *d_x;     /* [K] */
    const float *d_nw;    /* the folded RMSNorm's weight as float32 [K], or NULL */
    float eps;
    const void *d_w;      /* [N, K] BF16 (SWIGLU: the gate) */
    const void *d_wu;     /* SWIGLU: the up weight [N, K] BF16, else NULL */
    int K, N;
    float *d_y;           /* [N] */
    int mode;             /* TERN_CUDA_CH_* */
} tern_cuda_chain_prod;
/* 1 when BF16 products of width K can be in a chain on c: K a multiple of
 * 32 whose one-row products run on the tensor cores (mma.cuh, whose bits
 * the chain keeps; not with TERN_CUDA_MMA=0), and the chain on
 * (TERN_CUDA_CHAIN_RING=0 at open turns it off). */
int tern_cuda_chain_takes(const tern_cuda *c, int K);
/* The chain's most ring slots a warp (0: no chain); returns the previous
 * value. */
int tern_cuda_set_chain_ring(tern_cuda *c, int ring);
/* Its groups of eight warps a block (1 or 2: two tiles at a time, the
 * same bits); returns the previous value. */
int tern_cuda_set_chain_groups(tern_cuda *c, int groups);
/* The chain's most shared memory a block in bytes (at most 227 KiB);
 * returns the previous value. */
int tern_cuda_set_chain_smem(tern_cuda *c, int bytes);
/* For timing the parts of a chain (ops_test --chain); its values are then
 * WRONG. flags 1: no product waits for the previous product's blocks;
 * 2: the weights are streamed but not multiplied; 0: normal. Returns the
 * previous flags. */
int tern_cuda_set_chain_timing(tern_cuda *c, int flags);
tern_status tern_cuda_chain(tern_cuda *c, const tern_cuda_chain_prod *prods, int n, unsigned *d_sync,
                            unsigned *d_err);
size_t tern_cuda_chain_sync_bytes(void);

/* ---- test data and bandwidth -------------------------------------------- */

/* Fills n elements of dtype dt (F32/F16/BF16) with uniform values in
 * [-scale, scale) from a counter hash of (seed, index): the same values on
 * every run, made on the device (a model's worth of weights never crosses
 * the bus). */
tern_status tern_cuda_fill_random(tern_cuda *c, void *d, long n, tern_dtype dt, uint64_t seed, float scale);

/* Reads bytes of d_src with 16-byte loads (the pattern of the matmul
 * weight stream) and writes one word per block to d_sink (4096 floats). */
tern_status tern_cuda_read_bw(tern_cuda *c, const void *d_src, size_t bytes, float *d_sink);

/* Rewrites the bf16 [N, K] matrix at d_w (device memory, the caller's) in
 * place into the tiled layout (tiled.cu: each tile of 8 rows stored
 * 32-element block by block; N a multiple of 8, K of 32) and records it in
 * c: every tensor-core product over d_w, or over rows of it from a
 * multiple of 8 on, then reads it so, with the same bits as over the
 * row-major matrix (the chain's too); a cuBLAS request over it runs on
 * the tensor-core GEMM instead, and the matrix-vector kernel refuses it. _weights does n matrices with one buffer (32 MB at most, freed
 * before it returns): every request is checked and the buffer had before
 * anything is written, so a refusal (a bad shape, an overlap,
 * TERN_E_NOMEM, TERN_E_UNSUPPORTED with the tensor-core products off)
 * leaves every matrix as it was; only a CUDA error past that point can
 * leave one half rewritten (the context is then unusable). A matrix
 * already tiled is skipped. Not during a graph capture. */
typedef struct {
    void *d_w;
    long N;
    int K;
} tern_cuda_tile_req;
tern_status tern_cuda_tile_weights(tern_cuda *c, const tern_cuda_tile_req *rq, int n);
tern_status tern_cuda_tile_weight(tern_cuda *c, void *d_w, long N, int K);
/* Whether d_w lies inside a matrix recorded as tiled. */
int tern_cuda_is_tiled(const tern_cuda *c, const void *d_w);
/* Forgets the tiled matrices that start inside [d, d + bytes) (bytes 0:
 * the one starting at d), before their memory is freed or reused; their
 * contents stay as they are. tern_cuda_free(c, d) forgets the one at d. */
void tern_cuda_tiled_forget(tern_cuda *c, const void *d, size_t bytes);

/* The one-row products' weight loads over a [N, K] bf16 matrix at d_w with
 * no arithmetic (readpat.cu; layout 0: the row-major matrix, 1: each tile
 * of 8 rows stored 32-element block by block), writing one word per warp to
 * d_sink (tern_cuda_readpat_sink_floats floats): what the order of the
 * loads costs the stream (ops_test --readpat). */
size_t tern_cuda_readpat_sink_floats(tern_cuda *c);
tern_status tern_cuda_readpat(tern_cuda *c, const void *d_w, long N, int K, int layout, float *d_sink);

#ifdef __cplusplus
}
#endif

#endif
