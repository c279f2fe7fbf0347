/* The prompt cache: a radix tree over token blocks whose nodes hold KV pool
 * blocks (tern_kv_block_hold), so a new request takes the longest cached
 * prefix of its prompt by sharing those blocks, with no copy and no
 * recomputation. A node is one full block: block_tokens token ids and the
 * pool block with their keys and values, under the node of the tokens
 * before them. Requests publish their full blocks after their prompt and
 * when they finish; identical prefixes are kept once.
 *
 * Exactness: a position's keys and values depend only on the tokens up to it
 * (the forward is batch-, chunk- and block-invariant), so a cached block
 * holds exactly what a cold prefill would compute.
 *
 * Memory: the cache holds at most max_blocks blocks; unreferenced leaves
 * (blocks no row uses) are evicted least recently used first, when the cap is
 * passed and whenever admission needs room. Ownership: created and driven by
 * the engine thread only; borrows the pool. */
#ifndef TERN_ENGINE_PROMPT_CACHE_H
#define TERN_ENGINE_PROMPT_CACHE_H

#include <stdint.h>

#include "engine/pcache_disk.h"
#include "kv/kv.h"

typedef struct tern_pcache tern_pcache;

typedef struct {
    uint64_t hits, misses, cached_tokens, evictions;
    long blocks;              /* resident */
} tern_pcache_stats;

tern_status tern_pcache_create(tern_kv *kv, long max_blocks, tern_pcache **out);
/* Gives the cache a disk store (borrowed; it must outlive the cache):
 * evicted prefixes are written there, and every resident one at free. */
void tern_pcache_set_disk(tern_pcache *pc, tern_pdisk *d);
/* Releases every held block (writing each prefix to the disk store first). */
void tern_pcache_free(tern_pcache *pc);
/* The longest cached prefix of toks in whole blocks, at most max_blocks:
 * writes its pool blocks to blocks_out and returns their count. The blocks
 * stay the cache's; attach them to a row. */
int tern_pcache_lookup(tern_pcache *pc, const int32_t *toks, int max_blocks, int *blocks_out);
/* Counts one admission that took n blocks from the cache (0 = a miss). */
void tern_pcache_note(tern_pcache *pc, int n);
/* Publishes n full blocks: toks[0, n*block_tokens) and the row's blocks
 * (borrowed) holding them. New nodes hold their block; known prefixes are
 * kept as they are. Best effort: out of memory stops the insert. */
void tern_pcache_insert(tern_pcache *pc, const int32_t *toks, int n, const int *blocks);
/* Evicts unreferenced leaves, least recently used first, until want blocks
 * went back to the pool or nothing more can go; returns how many went. */
long tern_pcache_evict(tern_pcache *pc, long want);
void tern_pcache_get_stats(const tern_pcache *pc, tern_pcache_stats *out);

#endif
