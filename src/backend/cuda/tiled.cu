/* The tiled layout of bf16 weights (the model loader's default,
 * TERN_CUDA_TILED=0 keeps the row-major one): each tile of 8 rows of an
 * [N, K] matrix keeps its place, its 8 K elements reordered 32-element
 * block by block, so that a warp's 16-byte loads of one block of a tile
 * (lane (g, t): row g, elements 8t .. 8t + 7) are 512 contiguous bytes
 * and a warp's part of K in a tile one contiguous run, instead of 8 rows x
 * 64 bytes 2 K bytes apart. Element (n, k) lies at
 *   (n / 8) 8 K + (k / 32) 256 + (n % 8) 32 + k % 32.
 * A matrix is rewritten in place, so the layout costs no memory; the
 * context records which matrices are tiled, and every tensor-core product
 * (mma_skinny.cu, mma_gemm.cu, mma_wgmma.cu, chain.cu) reads a tiled
 * matrix into the same registers in the same order as a row-major one:
 * the same bits. Of the paths that read rows, cuBLAS is skipped for one
 * (matmul.cu) and gemv.cu refuses one.
 * On an H100 the layout took a one-row product over 4.3 GB from 97-98% to 101%
 * of the read kernel's rate and Qwen3-8B decode from 5.97 to 5.77 ms a
 * token, prefill unchanged (the same call, docs/BENCHMARKS.md). */
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/mma.cuh"

struct tern_cuda_tiled {
    const char *base; /* the matrix (borrowed: the caller's memory) */
    size_t bytes;
    int K;
};

enum { TILE_CHUNK_BYTES = 32 << 20 };

/* Rows [0, N) of the row-major src into the tiled dst (both N x K). */
__global__ void tile_kernel(const uint4 *__restrict__ src, uint4 *__restrict__ dst, long N, int K)
{
    long units = N * (K / 8), kb8 = K / 8;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < units; i += (long)gridDim.x * blockDim.x) {
        long n = i / kb8;
        int j = (int)(i % kb8); /* 8-element unit j of row n: block j / 4, lane t = j % 4 */
        long at = (n >> 3) * kb8 * 8 + (long)(j >> 2) * 32 + (n & 7) * 4 + (j & 3);
        dst[at] = src[i];
    }
}

/* The records are kept in order of base (they never overlap): the index
 * of the first with base > p. */
static int tiled_after(const tern_cuda *c, const char *p)
{
    int lo = 0, hi = c->n_tiled;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (c->tiled[mid].base <= p) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* The record holding p, or NULL (a lookup per product launched). */
static const struct tern_cuda_tiled *tiled_find(const tern_cuda *c, const void *p)
{
    int i = tiled_after(c, (const char *)p) - 1;
    if (i < 0 || (const char *)p >= c->tiled[i].base + c->tiled[i].bytes) return NULL;
    return &c->tiled[i];
}

/* Whether the bf16 [N, K] matrix at w may be tiled: 0 yes, 1 already is
 * (the same matrix), else an error (a bad shape, or overlapping a tiled
 * matrix or another request: rq[0 .. i - 1]). */
static int tile_check(const tern_cuda *c, const tern_cuda_tile_req *rq, int i, tern_status *st)
{
    const tern_cuda_tile_req *q = &rq[i];
    long N = q->N;
    int K = q->K;
    *st = TERN_OK;
    if (!q->d_w || N <= 0 || N % 8 || K < MMA_KB || K % MMA_KB) {
        *st = tern_error(TERN_E_INVALID, "cuda tiled weights: [%ld, %d] (N a multiple of 8, K of %d)", N, K,
                         (int)MMA_KB);
        return -1;
    }
    const char *w0 = (const char *)q->d_w, *w1 = w0 + (size_t)N * K * 2;
    int at = tiled_after(c, w0);
    const struct tern_cuda_tiled *prev = at ? &c->tiled[at - 1] : NULL, *next = at < c->n_tiled ? &c->tiled[at] : NULL;
    if (prev && prev->base == w0 && prev->bytes == (size_t)(w1 - w0) && prev->K == K) return 1;
    bool clash = (prev && w0 < prev->base + prev->bytes) || (next && next->base < w1);
    for (int j = 0; j < i && !clash; j++) {
        const char *v0 = (const char *)rq[j].d_w, *v1 = v0 + (size_t)rq[j].N * rq[j].K * 2;
        clash = w0 < v1 && v0 < w1;
    }
    if (clash) {
        *st = tern_error(TERN_E_INVALID, "cuda tiled weights: [%ld, %d] at %p overlaps a tiled matrix", N, K, q->d_w);
        return -1;
    }
    return 0;
}

extern "C" tern_status tern_cuda_tile_weights(tern_cuda *c, const tern_cuda_tile_req *rq, int n)
{
    if (!c->mma)
        return tern_error(TERN_E_UNSUPPORTED, "cuda tiled weights: the tensor-core products are off (TERN_CUDA_MMA=0)");
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    CUDA_TRY(cudaStreamIsCapturing(c->stream, &cs), "tiled weights");
    if (cs != cudaStreamCaptureStatusNone)
        return tern_error(TERN_E_INTERNAL, "cuda tiled weights: not during a graph capture");
    /* every request checked, the table's room and the buffer had, before
     * anything is written */
    tern_status st = TERN_OK;
    size_t chunk = 0;
    int fresh = 0;
    for (int i = 0; i < n; i++) {
        int k = tile_check(c, rq, i, &st);
        if (k < 0) return st;
        if (k) continue;
        fresh++;
        size_t row = (size_t)rq[i].K * 2, rows = (TILE_CHUNK_BYTES / row) & ~(size_t)7;
        rows = rows < 8 ? 8 : rows > (size_t)rq[i].N ? (size_t)rq[i].N : rows;
        if (rows * row > chunk) chunk = rows * row;
    }
    if (!fresh) return TERN_OK;
    if (c->n_tiled + fresh > c->cap_tiled) {
        int cap = c->cap_tiled ? c->cap_tiled : 64;
        while (cap < c->n_tiled + fresh) cap *= 2;
        struct tern_cuda_tiled *t = (struct tern_cuda_tiled *)realloc(c->tiled, (size_t)cap * sizeof *t);
        if (!t) return tern_error(TERN_E_NOMEM, "cuda tiled weights: table of %d", cap);
        c->tiled = t, c->cap_tiled = cap;
    }
    /* a chunk of whole tiles at a time through a buffer of its own (not
     * the GEMM's scratch, which captured graphs may hold) */
    void *tmp = NULL;
    if ((st = tern_cuda_alloc(c, chunk, &tmp))) return st;
    for (int i = 0; i < n && !st; i++) {
        if (tile_check(c, rq, i, &st)) continue; /* tiled before this call, or earlier in it */
        long N = rq[i].N, rows = (long)(chunk / ((size_t)rq[i].K * 2)) & ~7L;
        int K = rq[i].K;
        for (long r0 = 0; r0 < N && !st; r0 += rows) {
            long m = N - r0 < rows ? N - r0 : rows;
            uint16_t *wr = (uint16_t *)rq[i].d_w + r0 * K;
            cudaError_t e = cudaMemcpyAsync(tmp, wr, (size_t)m * K * 2, cudaMemcpyDeviceToDevice, c->stream);
            if (e != cudaSuccess) st = cuda_fail(e, "tiled weights: copy");
            else tile_kernel<<<c->sms * 8, 256, 0, c->stream>>>((const uint4 *)tmp, (uint4 *)wr, m, K);
            if (!st) st = launched("tiled weights: tile");
        }
        if (st) break;
        /* recorded at once: the rest of the call sees it as tiled */
        const char *w0 = (const char *)rq[i].d_w;
        int at = tiled_after(c, w0);
        memmove(&c->tiled[at + 1], &c->tiled[at], (size_t)(c->n_tiled - at) * sizeof *c->tiled);
        c->tiled[at] = (struct tern_cuda_tiled){w0, (size_t)N * K * 2, K};
        c->n_tiled++;
    }
    cudaError_t e = cudaStreamSynchronize(c->stream);
    cudaFree(tmp);
    if (st) return st;
    if (e != cudaSuccess) return cuda_fail(e, "tiled weights");
    return TERN_OK;
}

extern "C" tern_status tern_cuda_tile_weight(tern_cuda *c, void *d_w, long N, int K)
{
    tern_cuda_tile_req r = {d_w, N, K};
    return tern_cuda_tile_weights(c, &r, 1);
}

extern "C" int tern_cuda_is_tiled(const tern_cuda *c, const void *d_w) { return tiled_find(c, d_w) != NULL; }

tern_status tiled_of(const tern_cuda *c, const void *w, int K, bool *tiled)
{
    *tiled = false;
    const struct tern_cuda_tiled *r = w ? tiled_find(c, w) : NULL;
    if (!r) return TERN_OK;
    size_t off = (size_t)((const char *)w - r->base), tile = (size_t)8 * r->K * 2;
    if (r->K != K || off % tile)
        return tern_error(TERN_E_INVALID,
                          "cuda: a product over a tiled matrix of %d columns as %d columns at byte %zu (it takes whole "
                          "tiles of 8 rows)",
                          r->K, K, off);
    *tiled = true;
    return TERN_OK;
}

extern "C" void tern_cuda_tiled_forget(tern_cuda *c, const void *d, size_t bytes)
{
    const char *lo = (const char *)d, *hi = lo + (bytes ? bytes : 1);
    int n = 0;
    for (int i = 0; i < c->n_tiled; i++)
        if (c->tiled[i].base < lo || c->tiled[i].base >= hi) c->tiled[n++] = c->tiled[i];
    c->n_tiled = n;
}

void tiled_free(tern_cuda *c)
{
    free(c->tiled);
    c->tiled = NULL, c->n_tiled = c->cap_tiled = 0;
}
