/* The run-ahead L2 prefetcher of captured one-row passes (l2run.cu;
 * internal to the CUDA backend). */
#ifndef TERN_BACKEND_CUDA_L2RUN_CUH
#define TERN_BACKEND_CUDA_L2RUN_CUH

#include <stddef.h>

#include "backend/cuda/cuda.h"

enum { L2R_MAX_SEGS = 1024 };

/* One product's weights in the plan: bytes of p0 (and as many of p1, read
 * in step with p0: a SwiGLU pair), which its tiles consume as len bytes of
 * the pass's stream from position pos, units u0 .. u0 + units - 1 of the
 * prefetcher. */
struct l2r_seg {
    const char *p0, *p1;
    unsigned long long bytes, pos, len, u0, units;
};

/* Before a capture begins (outside it): the state and this capture's plan
 * array, when TERN_CUDA_L2R is on. */
tern_status tern_cuda_l2r_prepare(tern_cuda *c);
/* Just after the capture begins: forks the prefetcher onto its stream and
 * starts recording the plan. */
tern_status tern_cuda_l2r_fork(tern_cuda *c);
/* While recording: appends a product's weights (w1 NULL for one matrix;
 * consumed: the bytes its tiles count) and returns the counter its kernel
 * adds each tile's bytes / 256 to; NULL when not recording (the kernel adds
 * nothing). */
unsigned *tern_cuda_l2r_add(tern_cuda *c, const void *w0, const void *w1, size_t bytes_each, size_t consumed);
/* While recording with TERN_CUDA_L2R_MODE bit 8: the device address of the
 * plan's next segment (the next product's weights, zeros when none), which a
 * product's blocks prefetch the first l2r_mb MB of as they start their last
 * tile; NULL otherwise. */
const l2r_seg *tern_cuda_l2r_next(tern_cuda *c);
/* Just before the capture ends: joins the prefetcher and zeroes the counter
 * at the graph's end. */
tern_status tern_cuda_l2r_join(tern_cuda *c);
/* After the capture ended: uploads the plan and hands its device array to
 * the graph (*d_plan_out, cudaFree with it; NULL when none). */
tern_status tern_cuda_l2r_commit(tern_cuda *c, void **d_plan_out);
/* A capture that failed: stops recording. */
void tern_cuda_l2r_abandon(tern_cuda *c);
void tern_cuda_l2r_free(tern_cuda *c);

#endif
