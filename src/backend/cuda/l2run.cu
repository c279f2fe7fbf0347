/* The run-ahead L2 prefetcher of a captured one-row pass (TERN_CUDA_L2R).
 *
 * A one-row pass streams each weight once, product after product, and
 * every product must wait for the one before it: at each boundary the
 * weight stream stops for the previous product's tail, the kernel boundary
 * and the next one's ramp. Here one small kernel, on a stream of its own
 * inside the same graph, walks the pass's weights in the order the products
 * read them and prefetches them into the L2, never more than l2r_mb MB
 * ahead of what the products have consumed (a counter the one-row kernel
 * adds each finished tile's bytes to). The products' loads then find their
 * weights in the L2 or already on their way, while the memory keeps
 * streaming through the boundaries and the attention between them.
 *
 * It changes no value: the products read the same weights with the same
 * arithmetic; prefetches only move bytes into the L2 earlier.
 *
 * The plan (the products' weights in order) is recorded while the graph is
 * captured (tern_cuda_l2r_add, from the one-row kernel's launch) into a
 * device array made at capture begin; the prefetcher reads it when the
 * graph runs, and the graph's last node zeroes the counter for the next
 * replay. */
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/common.cuh"
#include "backend/cuda/l2run.cuh"

enum { L2R_THREADS = 32, L2R_SMEM = 220 * 1024 }; /* the shared memory makes a block own its multiprocessor */

/* The plan on the device: a count, then the segments. */
struct l2r_plan {
    int n;
    int pad;
    l2r_seg seg[L2R_MAX_SEGS];
};

__device__ __forceinline__ unsigned ld_relaxed_u32(const unsigned *p)
{
    unsigned v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void prefetch_l2(const char *p, unsigned bytes)
{
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
}

/* Warp i takes the plan's units i, i + warps, ...: unit j of a segment is
 * its consumption bytes [j unit, (j + 1) unit), the same offsets / 2 of each
 * of two matrices read in step; each lane prefetches 1/32 of it (mode 0: one
 * bulk prefetch, 1: its 128-byte lines one by one). A warp waits until the
 * consumed count (256-byte units, read again every 8 units or when it must
 * wait) plus ahead reaches the unit's start, and jumps past what has been
 * consumed, so that it never holds the pass up; it ends once everything
 * is consumed or prefetched. */
__device__ __forceinline__ unsigned long long l2r_seen(const unsigned *count)
{
    unsigned v = 0;
    if ((threadIdx.x & 31) == 0) v = ld_relaxed_u32(count);
    return (unsigned long long)__shfl_sync(0xffffffffu, v, 0) << 8;
}

__global__ void __launch_bounds__(L2R_THREADS) l2r_kernel(const l2r_plan *plan, const unsigned *count,
                                                          unsigned long long ahead, unsigned unit, int mode,
                                                          unsigned long long head)
{
    const int n = plan->n, lane = threadIdx.x & 31;
    const unsigned long long warps = (unsigned long long)gridDim.x * (blockDim.x / 32);
    unsigned long long u = (unsigned long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    unsigned long long seen = l2r_seen(count);
    int s = 0, k = 0;
    while (s < n) {
        while (s < n && u >= plan->seg[s].u0 + plan->seg[s].units) s++;
        if (s >= n) break;
        unsigned long long j = u - plan->seg[s].u0, at = plan->seg[s].pos + j * unit;
        if (++k % 8 == 0 || seen + ahead < at) seen = l2r_seen(count);
        while (seen + ahead < at) {
            __nanosleep(200);
            seen = l2r_seen(count);
        }
        if (at + unit <= seen) {
            /* behind the products: on to this warp's first unit not consumed */
            int t = s;
            while (t < n && plan->seg[t].pos + plan->seg[t].len <= seen) t++;
            if (t >= n) break;
            unsigned long long want = plan->seg[t].u0;
            if (seen > plan->seg[t].pos) want += (seen - plan->seg[t].pos) / unit;
            if (want > u) u += (want - u + warps - 1) / warps * warps;
            else u += warps;
            s = t;
            continue;
        }
        const l2r_seg &g = plan->seg[s];
        unsigned long long per = g.p1 ? unit / 2 : unit, off = j * per;
        if (off < g.bytes && (!head || j * unit < head) && !(mode & 4)) {
            unsigned long long len = g.bytes - off < per ? g.bytes - off : per;
            for (int m = 0; m < (g.p1 ? 2 : 1); m++) {
                const char *p = (m ? g.p1 : g.p0) + off;
                if (mode == 0) {
                    unsigned long long sub = (len / 32 + 15) & ~15ull, o = lane * sub;
                    if (o < len) prefetch_l2(p + o, (unsigned)(len - o < sub ? len - o : sub));
                } else {
                    for (unsigned long long o = (unsigned long long)lane * 128; o < len; o += 32 * 128)
                        asm volatile("prefetch.global.L2 [%0];" ::"l"(p + o) : "memory");
                }
            }
        }
        u += warps;
    }
}

struct l2r_state {
    cudaStream_t side;
    cudaEvent_t fork, join;
    unsigned *d_count;
    l2r_plan *plan;   /* host copy of the plan being recorded */
    l2r_plan *d_plan; /* the capture's device plan (handed to its graph) */
    unsigned long long pos, units;
    int rec;
};

void tern_cuda_l2r_free(tern_cuda *c)
{
    l2r_state *r = c->l2r;
    if (!r) return;
    if (r->d_plan) cudaFree(r->d_plan);
    if (r->d_count) cudaFree(r->d_count);
    if (r->fork) cudaEventDestroy(r->fork);
    if (r->join) cudaEventDestroy(r->join);
    if (r->side) cudaStreamDestroy(r->side);
    free(r->plan);
    free(r);
    c->l2r = NULL;
}

static tern_status l2r_state_make(tern_cuda *c)
{
    if (c->l2r) return TERN_OK;
    l2r_state *r = (l2r_state *)calloc(1, sizeof *r);
    if (!r) return tern_error(TERN_E_NOMEM, "cuda: out of memory");
    c->l2r = r;
    r->plan = (l2r_plan *)calloc(1, sizeof *r->plan);
    if (!r->plan) return tern_error(TERN_E_NOMEM, "cuda: out of memory");
    CUDA_TRY(cudaStreamCreateWithFlags(&r->side, cudaStreamNonBlocking), "l2 prefetcher stream");
    CUDA_TRY(cudaEventCreateWithFlags(&r->fork, cudaEventDisableTiming), "l2 prefetcher event");
    CUDA_TRY(cudaEventCreateWithFlags(&r->join, cudaEventDisableTiming), "l2 prefetcher event");
    CUDA_TRY(cudaFuncSetAttribute((const void *)l2r_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, L2R_SMEM),
             "l2 prefetcher shared memory");
    CUDA_TRY(cudaMalloc((void **)&r->d_count, sizeof(unsigned)), "l2 prefetcher counter");
    CUDA_TRY(cudaMemset(r->d_count, 0, sizeof(unsigned)), "l2 prefetcher counter");
    return TERN_OK;
}

tern_status tern_cuda_l2r_prepare(tern_cuda *c)
{
    if (c->l2r_mb <= 0) return TERN_OK;
    tern_status st = l2r_state_make(c);
    if (st) return st;
    l2r_state *r = c->l2r;
    if (!r->d_plan) CUDA_TRY(cudaMalloc((void **)&r->d_plan, sizeof *r->d_plan), "l2 prefetcher plan");
    r->plan->n = 0, r->pos = 0, r->units = 0;
    return TERN_OK;
}

tern_status tern_cuda_l2r_fork(tern_cuda *c)
{
    l2r_state *r = c->l2r;
    if (c->l2r_mb <= 0 || !r || !r->d_plan) return TERN_OK;
    if (c->l2r_mode & 8) {
        /* the products prefetch their successors' first tiles themselves */
        r->rec = 1;
        return TERN_OK;
    }
    CUDA_TRY(cudaEventRecord(r->fork, c->stream), "l2 prefetcher fork");
    CUDA_TRY(cudaStreamWaitEvent(r->side, r->fork, 0), "l2 prefetcher fork");
    unsigned long long ahead = (unsigned long long)c->l2r_mb << 20;
    l2r_kernel<<<c->l2r_blocks, L2R_THREADS, L2R_SMEM, r->side>>>(r->d_plan, r->d_count, ahead,
                                                            (unsigned)c->l2r_unit << 10, c->l2r_mode & 5,
                                                            (unsigned long long)c->l2r_head << 20);
    tern_status st = launched("l2 prefetcher");
    if (st) return st;
    r->rec = 1;
    return TERN_OK;
}

unsigned *tern_cuda_l2r_add(tern_cuda *c, const void *w0, const void *w1, size_t bytes_each, size_t consumed)
{
    l2r_state *r = c->l2r;
    if (!r || !r->rec || r->plan->n >= L2R_MAX_SEGS) return NULL;
    unsigned long long unit = (unsigned long long)c->l2r_unit << 10;
    l2r_seg *g = &r->plan->seg[r->plan->n++];
    g->p0 = (const char *)w0, g->p1 = (const char *)w1;
    g->bytes = bytes_each, g->pos = r->pos, g->u0 = r->units;
    g->len = consumed;
    g->units = (consumed + unit - 1) / unit;
    r->pos += consumed, r->units += g->units;
    return c->l2r_mode & 8 ? NULL : r->d_count;
}

const l2r_seg *tern_cuda_l2r_next(tern_cuda *c)
{
    l2r_state *r = c->l2r;
    if (!r || !r->rec || !(c->l2r_mode & 8) || r->plan->n >= L2R_MAX_SEGS) return NULL;
    return &r->d_plan->seg[r->plan->n];
}

tern_status tern_cuda_l2r_join(tern_cuda *c)
{
    l2r_state *r = c->l2r;
    if (!r || !r->rec) return TERN_OK;
    r->rec = 0;
    if (c->l2r_mode & 8) return TERN_OK;
    CUDA_TRY(cudaEventRecord(r->join, r->side), "l2 prefetcher join");
    CUDA_TRY(cudaStreamWaitEvent(c->stream, r->join, 0), "l2 prefetcher join");
    CUDA_TRY(cudaMemsetAsync(r->d_count, 0, sizeof(unsigned), c->stream), "l2 prefetcher counter reset");
    return TERN_OK;
}

tern_status tern_cuda_l2r_commit(tern_cuda *c, void **d_plan_out)
{
    *d_plan_out = NULL;
    l2r_state *r = c->l2r;
    if (!r || !r->d_plan) return TERN_OK;
    /* the plan travels with the graph from here; the next capture makes another */
    memset(&r->plan->seg[r->plan->n], 0, (L2R_MAX_SEGS - r->plan->n) * sizeof(l2r_seg));
    CUDA_TRY(cudaMemcpy(r->d_plan, r->plan, sizeof *r->plan, cudaMemcpyHostToDevice), "l2 prefetcher plan");
    *d_plan_out = r->d_plan;
    r->d_plan = NULL;
    return TERN_OK;
}

void tern_cuda_l2r_abandon(tern_cuda *c)
{
    if (c->l2r) c->l2r->rec = 0;
}
