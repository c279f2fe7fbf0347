/* The second half of attention: out[q, :] (+)= sum_{j < len[q]} p[q, j] * V[j, :]
 * for a block of queries sharing one head's values V [*, hd] (contiguous).
 *
 * Each output element is accumulated in key order j = 0, 1, ... with one
 * multiply-add per key, whatever the block size, so a query's output is the
 * same alone or in any block. With accumulate set, out holds the running sum
 * of the earlier keys and the new ones continue it: running the keys of a
 * paged row block after block gives the bits of one pass over all of them.
 * len[q] <= 0 leaves out[q] as it is (accumulate) or zero. All pointers
 * borrowed. */
#ifndef TERN_CPU_ATTN_PV_H
#define TERN_CPU_ATTN_PV_H

void tern_attn_pv(const float *p, long ldp, const int *len, int M, const float *V, int hd, float *out,
                  long ldo, int accumulate);

/* ISA variants (attn_pv_avx512.c); same contract. */
void tern_attn_pv_avx512(const float *p, long ldp, const int *len, int M, const float *V, int hd, float *out,
                         long ldo, int accumulate);

#endif
