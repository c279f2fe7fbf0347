/* CUDA context: device selection, stream, memory, graphs,
 * timers, and a read-bandwidth kernel. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/common.cuh"

struct tern_cuda_graph {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
};

extern "C" int tern_cuda_built(void) { return 1; }

extern "C" tern_status tern_cuda_open(int device, tern_cuda **out)
{
    *out = NULL;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess)
        return tern_error(TERN_E_UNSUPPORTED, "no usable CUDA device: cudaGetDeviceCount: %s (%s)",
                          cudaGetErrorString(e), cudaGetErrorName(e));
    if (device < 0 || device >= n)
        return tern_error(TERN_E_UNSUPPORTED, "no CUDA device %d: %d device%s present", device, n,
                          n == 1 ? "" : "s");
    cudaDeviceProp p;
    CUDA_TRY(cudaGetDeviceProperties(&p, device), "cudaGetDeviceProperties");
    if (p.major != 9 || p.minor != 0)
        return tern_error(TERN_E_UNSUPPORTED, "CUDA device %d (%s) is sm_%d%d; this build's kernels are for sm_90 (Hopper)",
                          device, p.name, p.major, p.minor);
    CUDA_TRY(cudaSetDevice(device), "cudaSetDevice");
    tern_cuda *c = (tern_cuda *)calloc(1, sizeof *c);
    if (!c) return tern_error(TERN_E_NOMEM, "cuda: out of memory");
    c->device = device;
    c->pdl = 1;
    const char *tg = getenv("TERN_CUDA_TRIGGER");
    /* The small kernels before the products (the attention prologue and
     * the attention) let the next kernel launch once they run: its blocks
     * then start in the room they leave (decode step 4.76 against 4.87 ms
     * at the Qwen3-8B shape). The one-row products' trigger is sk_trig
     * below. */
    c->trigger = tg ? atoi(tg) : 6;
    const char *pf = getenv("TERN_CUDA_PREFETCH");
    c->prefetch = pf ? atoi(pf) : 0;
    if (c->prefetch < 0) c->prefetch = 0;
    c->sms = p.multiProcessorCount;
    const char *mm = getenv("TERN_CUDA_MMA");
    c->mma = mm ? atoi(mm) != 0 : 1;
    const char *skx = getenv("TERN_CUDA_SKX");
    /* One-row products with x prepared once per block (0 the
     * register-buffered kernel, the same bits): 3 blocks a multiprocessor,
     * H200, Qwen3-8B shape, decode 4.87-4.88 against 4.98-4.99 ms a token
     * (2 blocks: 4.95, 4 blocks: 5.70); 5 (the default) the same but the
     * one-matrix products (o, down, q/k/v, the head) at 2 blocks with twice
     * the loads in flight, 4.70-4.72 against 4.79-4.82 at 3 (mma_skinny.cu). */
    c->sk_x = skx ? atoi(skx) : 5;
    const char *str = getenv("TERN_CUDA_SKTRIG");
    /* Each block of a one-row product lets the next kernel launch when it
     * starts its last tile (2): the next kernel's blocks then take the room
     * of the blocks that finish first and have their first weights in
     * flight before the last block ends. H100, Qwen3-8B shape, decode
     * 5.556-5.565 against 5.700-5.711 ms a token (at the start, 1:
     * 5.576-5.579), interleaved in two calls (docs/BENCHMARKS.md); H200,
     * 4.415 against 4.556 (at the start 4.419); one
     * block a multiprocessor, so that the next product's blocks all fit
     * beside the running ones, halved the bytes in flight: 6.58-6.67 ms. The
     * small-batch kernel does not: the same trigger there made 32 rows
     * decode at 2117 against 2342 tok/s. */
    c->sk_trig = str ? atoi(str) : 2;
    const char *se = getenv("TERN_CUDA_SKEARLY");
    /* 3: H100, Qwen3-8B shape, decode 5.488-5.576 against 5.539-5.630 ms
     * a token for 0, interleaved in four calls (1: 5.742-5.746, 2:
     * 5.603-5.612; docs/BENCHMARKS.md). 1 and 2 stay selectable: no H200
     * has measured any mode. */
    c->sk_early = se ? atoi(se) : 3;
    const char *ilv = getenv("TERN_CUDA_GU_ILV");
    c->gu_ilv = ilv ? atoi(ilv) : 1;
    const char *fs = getenv("TERN_CUDA_FOLD_SPLITS");
    c->fold_splits = fs ? atoi(fs) : 32;
    const char *pr = getenv("TERN_CUDA_PRO_REG");
    /* The attention prologue with a head in registers, read before the
     * wait what no kernel writes (H200, Qwen3-8B shape: decode 4.648-4.651
     * against 4.667-4.677 ms a token, interleaved in one call; 0 the
     * shared-memory kernel, the same bits). */
    c->pro_reg = pr ? atoi(pr) : 1;
    const char *wg = getenv("TERN_CUDA_WGMMA");
    /* The warpgroup-MMA GEMM (the default) gives the mma.sync GEMM's bits:
     * H200, Qwen3-8B shape, prefill of 512 tokens 37.7 against 69.6 ms. */
    c->wgmma = wg ? atoi(wg) : 1;
    /* The one-row product chain (chain.cu): up to chain_ring slots of
     * 4.5 KiB a warp within chain_smem a block (at the Qwen3-8B shape, two
     * groups take 2 slots a warp, 193 KiB; one group 4 slots; 180 KiB
     * leaves room for an attention block beside a chain block, measured no
     * faster); with chain_trig the next kernel launches at its start. */
    const char *cr = getenv("TERN_CUDA_CHAIN_RING"), *cg = getenv("TERN_CUDA_CHAIN_GROUPS");
    const char *cs = getenv("TERN_CUDA_CHAIN_SMEM"), *ct = getenv("TERN_CUDA_CHAIN_TRIG");
    c->chain_ring = cr ? atoi(cr) : 4;
    /* two groups: a layer's products in 149.5 against 165 us with one
     * (H100, docs/BENCHMARKS.md) */
    c->chain_groups = cg && atoi(cg) == 1 ? 1 : 2;
    c->chain_smem = cs ? atoi(cs) * 1024 : 200 * 1024;
    if (c->chain_smem > 227 * 1024) c->chain_smem = 227 * 1024;
    c->chain_trig = ct ? atoi(ct) : 1;
    snprintf(c->desc, sizeof c->desc, "%s (sm_%d%d, %d SMs, %.1f GiB)", p.name, p.major, p.minor,
             p.multiProcessorCount, (double)p.totalGlobalMem / (1024.0 * 1024 * 1024));
    if ((e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) != cudaSuccess ||
        (e = cudaEventCreate(&c->mark)) != cudaSuccess || (e = cudaEventCreate(&c->stop)) != cudaSuccess) {
        tern_cuda_close(c);
        return cuda_fail(e, "creating the stream");
    }
    *out = c;
    return TERN_OK;
}

extern "C" void tern_cuda_close(tern_cuda *c)
{
    if (!c) return;
    if (c->blas) c->blas_destroy(c->blas);
    for (int i = 0; i < c->n_prof; i++) cudaEventDestroy(c->prof[i]);
    free(c->prof);
    if (c->mark) cudaEventDestroy(c->mark);
    if (c->stop) cudaEventDestroy(c->stop);
    if (c->stream) cudaStreamDestroy(c->stream);
    if (c->mma_tmp) cudaFree(c->mma_tmp);
    tiled_free(c);
    free(c);
}

extern "C" void tern_cuda_set_pdl(tern_cuda *c, int on) { c->pdl = on != 0; }
extern "C" int tern_cuda_set_wgmma(tern_cuda *c, int mode)
{
    int was = c->wgmma;
    c->wgmma = mode;
    return was;
}
extern "C" int tern_cuda_set_fold_splits(tern_cuda *c, int n)
{
    int was = c->fold_splits;
    c->fold_splits = n;
    return was;
}

extern "C" int tern_cuda_set_gu_ilv(tern_cuda *c, int on)
{
    int was = c->gu_ilv;
    c->gu_ilv = on;
    return was;
}

extern "C" int tern_cuda_set_timeline(tern_cuda *c, unsigned long long *d_buf, int launches)
{
    int n = c->tl_seq;
    c->tl = d_buf, c->tl_cap = d_buf ? launches : 0, c->tl_seq = 0;
    return n;
}

extern "C" int tern_cuda_set_pro_reg(tern_cuda *c, int on)
{
    int was = c->pro_reg;
    c->pro_reg = on;
    return was;
}

extern "C" int tern_cuda_set_sk_x(tern_cuda *c, int mode)
{
    int was = c->sk_x;
    c->sk_x = mode;
    return was;
}

extern "C" int tern_cuda_set_sk_early(tern_cuda *c, int mode)
{
    int was = c->sk_early;
    c->sk_early = mode;
    return was;
}



extern "C" const char *tern_cuda_describe(const tern_cuda *c) { return c->desc; }

extern "C" tern_status tern_cuda_alloc(tern_cuda *c, size_t bytes, void **d_out)
{
    cudaError_t e = cudaMalloc(d_out, bytes ? bytes : 16);
    if (e != cudaSuccess) {
        *d_out = NULL;
        cudaGetLastError();
        return tern_error(TERN_E_NOMEM, "cuda: cannot allocate %zu bytes on the device: %s", bytes,
                          cudaGetErrorString(e));
    }
    return TERN_OK;
}

extern "C" void tern_cuda_free(tern_cuda *c, void *d)
{
    if (!d) return;
    if (c && c->n_tiled) tern_cuda_tiled_forget(c, d, 0);
    cudaFree(d);
}

extern "C" tern_status tern_cuda_upload(tern_cuda *c, void *d_dst, const void *src, size_t bytes)
{
    CUDA_TRY(cudaMemcpyAsync(d_dst, src, bytes, cudaMemcpyHostToDevice, c->stream), "upload");
    CUDA_TRY(cudaStreamSynchronize(c->stream), "upload");
    return TERN_OK;
}

extern "C" tern_status tern_cuda_download(tern_cuda *c, void *dst, const void *d_src, size_t bytes)
{
    CUDA_TRY(cudaMemcpyAsync(dst, d_src, bytes, cudaMemcpyDeviceToHost, c->stream), "download");
    CUDA_TRY(cudaStreamSynchronize(c->stream), "download");
    return TERN_OK;
}

extern "C" tern_status tern_cuda_upload_async(tern_cuda *c, void *d_dst, const void *src, size_t bytes)
{
    CUDA_TRY(cudaMemcpyAsync(d_dst, src, bytes, cudaMemcpyHostToDevice, c->stream), "upload");
    return TERN_OK;
}

extern "C" tern_status tern_cuda_host_alloc(tern_cuda *c, size_t bytes, void **out)
{
    cudaError_t e = cudaMallocHost(out, bytes);
    if (e != cudaSuccess) {
        *out = NULL;
        return tern_error(TERN_E_NOMEM, "cuda: cannot allocate %zu bytes of pinned memory", bytes);
    }
    return TERN_OK;
}

extern "C" void tern_cuda_host_free(tern_cuda *c, void *p)
{
    if (p) cudaFreeHost(p);
}

extern "C" tern_status tern_cuda_memset(tern_cuda *c, void *d, int value, size_t bytes)
{
    CUDA_TRY(cudaMemsetAsync(d, value, bytes, c->stream), "memset");
    return TERN_OK;
}

extern "C" tern_status tern_cuda_copy(tern_cuda *c, void *d_dst, const void *d_src, size_t bytes)
{
    CUDA_TRY(cudaMemcpyAsync(d_dst, d_src, bytes, cudaMemcpyDeviceToDevice, c->stream), "device copy");
    return TERN_OK;
}

extern "C" tern_status tern_cuda_download_async(tern_cuda *c, void *dst, const void *d_src, size_t bytes)
{
    CUDA_TRY(cudaMemcpyAsync(dst, d_src, bytes, cudaMemcpyDeviceToHost, c->stream), "download");
    return TERN_OK;
}

extern "C" tern_status tern_cuda_sync(tern_cuda *c)
{
    CUDA_TRY(cudaStreamSynchronize(c->stream), "synchronize");
    return TERN_OK;
}

extern "C" tern_status tern_cuda_graph_begin(tern_cuda *c)
{
    CUDA_TRY(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal), "graph capture");
    return TERN_OK;
}

extern "C" tern_status tern_cuda_graph_end(tern_cuda *c, tern_cuda_graph **out)
{
    *out = NULL;
    tern_cuda_graph *g = (tern_cuda_graph *)calloc(1, sizeof *g);
    cudaGraph_t graph = NULL;
    cudaError_t e = cudaStreamEndCapture(c->stream, &graph);
    if (e != cudaSuccess || !g) {
        free(g);
        if (graph) cudaGraphDestroy(graph);
        return e != cudaSuccess ? cuda_fail(e, "graph capture") : tern_error(TERN_E_NOMEM, "cuda: out of memory");
    }
    g->graph = graph;
    if ((e = cudaGraphInstantiate(&g->exec, graph, 0)) != cudaSuccess) {
        cudaGraphDestroy(graph);
        free(g);
        return cuda_fail(e, "graph instantiate");
    }
    *out = g;
    return TERN_OK;
}

extern "C" tern_status tern_cuda_graph_launch(tern_cuda *c, tern_cuda_graph *g)
{
    CUDA_TRY(cudaGraphLaunch(g->exec, c->stream), "graph launch");
    return TERN_OK;
}

extern "C" void tern_cuda_graph_free(tern_cuda_graph *g)
{
    if (!g) return;
    cudaGraphExecDestroy(g->exec);
    cudaGraphDestroy(g->graph);
    free(g);
}

extern "C" tern_status tern_cuda_timer_mark(tern_cuda *c)
{
    CUDA_TRY(cudaEventRecord(c->mark, c->stream), "event record");
    return TERN_OK;
}

extern "C" tern_status tern_cuda_timer_elapsed(tern_cuda *c, float *ms)
{
    CUDA_TRY(cudaEventRecord(c->stop, c->stream), "event record");
    CUDA_TRY(cudaEventSynchronize(c->stop), "event synchronize");
    CUDA_TRY(cudaEventElapsedTime(ms, c->mark, c->stop), "event elapsed");
    return TERN_OK;
}

extern "C" tern_status tern_cuda_prof_record(tern_cuda *c, int i)
{
    enum { MAX = 4096 };
    if (i < 0 || i >= MAX) return tern_error(TERN_E_RANGE, "cuda: profile event %d", i);
    if (!c->prof && !(c->prof = (cudaEvent_t *)calloc(MAX, sizeof *c->prof)))
        return tern_error(TERN_E_NOMEM, "cuda: out of memory");
    while (c->n_prof <= i) {
        CUDA_TRY(cudaEventCreate(&c->prof[c->n_prof]), "event create");
        c->n_prof++;
    }
    CUDA_TRY(cudaEventRecord(c->prof[i], c->stream), "event record");
    return TERN_OK;
}

extern "C" tern_status tern_cuda_prof_elapsed(tern_cuda *c, int i, int j, float *ms)
{
    if (i < 0 || j < 0 || i >= c->n_prof || j >= c->n_prof) return tern_error(TERN_E_RANGE, "cuda: profile event");
    CUDA_TRY(cudaEventElapsedTime(ms, c->prof[i], c->prof[j]), "event elapsed");
    return TERN_OK;
}

/* Grid-stride 16-byte reads, four in flight per thread, summed so the loads
 * cannot be dropped; one word per block keeps the write traffic nil. */
__global__ void read_bw_kernel(const uint4 *src, size_t n16, float *sink)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    uint32_t acc = 0;
    for (; i + 3 * stride < n16; i += 4 * stride) {
        uint4 a = ld_stream16(src + i), b = ld_stream16(src + i + stride);
        uint4 d = ld_stream16(src + i + 2 * stride), e = ld_stream16(src + i + 3 * stride);
        acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ d.x ^ d.y ^ d.z ^ d.w ^ e.x ^ e.y ^ e.z ^ e.w;
    }
    for (; i < n16; i += stride) {
        uint4 a = ld_stream16(src + i);
        acc ^= a.x ^ a.y ^ a.z ^ a.w;
    }
    acc = __reduce_xor_sync(0xffffffffu, acc);
    if (threadIdx.x == 0) sink[blockIdx.x] = __uint_as_float(acc);
}

extern "C" tern_status tern_cuda_read_bw(tern_cuda *c, const void *d_src, size_t bytes, float *d_sink)
{
    int sms = 0;
    CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, c->device), "device attribute");
    read_bw_kernel<<<(sms * 8 > 4096 ? 4096 : sms * 8), 256, 0, c->stream>>>((const uint4 *)d_src, bytes / 16, d_sink);
    return launched("read bandwidth");
}

/* splitmix64 of (seed, index) -> uniform [-scale, scale). */
__global__ void fill_random_kernel(void *d, long n, tern_dtype dt, uint64_t seed, float scale)
{
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        uint64_t z = seed * 0x9e3779b97f4a7c15ull + (uint64_t)i + 1;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        float u = (float)(z >> 40) * (1.0f / 16777216.0f);
        float v = (2.0f * u - 1.0f) * scale;
        if (dt == TERN_DT_F32) ((float *)d)[i] = v;
        else if (dt == TERN_DT_BF16) ((__nv_bfloat16 *)d)[i] = __float2bfloat16_rn(v);
        else ((__half *)d)[i] = __float2half_rn(v);
    }
}

extern "C" tern_status tern_cuda_fill_random(tern_cuda *c, void *d, long n, tern_dtype dt, uint64_t seed, float scale)
{
    if (dt != TERN_DT_F32 && dt != TERN_DT_F16 && dt != TERN_DT_BF16)
        return tern_error(TERN_E_UNSUPPORTED, "cuda fill_random: dtype %s", tern_dtype_name(dt));
    if (n <= 0) return TERN_OK;
    long b = (n + 255) / 256;
    fill_random_kernel<<<(unsigned)(b > 65536 ? 65536 : b), 256, 0, c->stream>>>(d, n, dt, seed, scale);
    return launched("fill_random");
}

extern "C" int tern_cuda_set_chain_ring(tern_cuda *c, int ring)
{
    int was = c->chain_ring;
    c->chain_ring = ring < 0 ? 0 : ring;
    return was;
}

extern "C" int tern_cuda_set_chain_groups(tern_cuda *c, int groups)
{
    int was = c->chain_groups;
    c->chain_groups = groups == 2 ? 2 : 1;
    return was;
}

extern "C" int tern_cuda_set_chain_smem(tern_cuda *c, int bytes)
{
    int was = c->chain_smem;
    c->chain_smem = bytes > 227 * 1024 ? 227 * 1024 : bytes;
    return was;
}

extern "C" int tern_cuda_set_chain_timing(tern_cuda *c, int flags)
{
    int was = c->chain_timing;
    c->chain_timing = flags & 3;
    return was;
}
