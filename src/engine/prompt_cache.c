/* Radix tree of token blocks over the KV pool (prompt_cache.h). Children
 * are a singly linked list searched by a hash of the block's tokens, then
 * compared in full. */
#include "engine/prompt_cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct pc_node {
    struct pc_node *parent, *child, *next;   /* first child, next sibling */
    int32_t *toks;      /* owned, block_tokens ids */
    uint64_t hash;
    int block;          /* held pool block */
    uint64_t used;      /* LRU clock */
} pc_node;

struct tern_pcache {
    tern_kv *kv;
    int bt;
    long max_blocks;
    pc_node root;
    tern_pdisk *disk;   /* borrowed, or NULL */
    long n;
    uint64_t clock;
    tern_pcache_stats st;
};

static uint64_t hash_toks(const int32_t *t, int n)
{
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < n; i++) h = (h ^ (uint32_t)t[i]) * 1099511628211ull;
    return h;
}

tern_status tern_pcache_create(tern_kv *kv, long max_blocks, tern_pcache **out)
{
    *out = NULL;
    tern_pcache *pc = calloc(1, sizeof *pc);
    if (!pc) return tern_error(TERN_E_NOMEM, "prompt cache: out of memory");
    tern_kv_stats ks;
    tern_kv_get_stats(kv, &ks);
    pc->kv = kv;
    pc->bt = ks.block_tokens;
    pc->max_blocks = max_blocks;
    pc->root.block = -1;
    *out = pc;
    return TERN_OK;
}

void tern_pcache_set_disk(tern_pcache *pc, tern_pdisk *d) { pc->disk = d; }

/* Writes the prefix that ends at node c (root to c) to the disk store. */
static void persist(tern_pcache *pc, const pc_node *c)
{
    if (!pc->disk) return;
    int depth = 0;
    for (const pc_node *p = c; p != &pc->root; p = p->parent) depth++;
    int32_t *toks = malloc((size_t)depth * pc->bt * sizeof *toks);
    int *blocks = malloc((size_t)depth * sizeof *blocks);
    if (toks && blocks) {
        int i = depth;
        for (const pc_node *p = c; p != &pc->root; p = p->parent) {
            i--;
            memcpy(toks + (long)i * pc->bt, p->toks, (size_t)pc->bt * sizeof *toks);
            blocks[i] = p->block;
        }
        /* Best effort: a full disk or an I/O error costs the entry only. */
        if (tern_pdisk_store(pc->disk, toks, depth, blocks) != TERN_OK)
            fprintf(stderr, "WARNING:tern.cache:%s\n", tern_last_error());
    }
    free(toks);
    free(blocks);
}

static void persist_leaves(tern_pcache *pc, const pc_node *n)
{
    for (const pc_node *c = n->child; c; c = c->next) {
        if (c->child) persist_leaves(pc, c);
        else persist(pc, c);
    }
}

static void free_subtree(tern_pcache *pc, pc_node *n)
{
    pc_node *c = n->child;
    while (c) {
        pc_node *next = c->next;
        free_subtree(pc, c);
        tern_kv_block_release(pc->kv, c->block);
        free(c->toks);
        free(c);
        c = next;
    }
    n->child = NULL;
}

void tern_pcache_free(tern_pcache *pc)
{
    if (!pc) return;
    persist_leaves(pc, &pc->root);
    free_subtree(pc, &pc->root);
    free(pc);
}

static pc_node *find_child(const pc_node *n, const int32_t *toks, uint64_t h, int bt)
{
    for (pc_node *c = n->child; c; c = c->next)
        if (c->hash == h && !memcmp(c->toks, toks, (size_t)bt * sizeof *toks)) return c;
    return NULL;
}

int tern_pcache_lookup(tern_pcache *pc, const int32_t *toks, int max_blocks, int *blocks_out)
{
    pc_node *n = &pc->root;
    int k = 0;
    uint64_t now = ++pc->clock;
    while (k < max_blocks) {
        const int32_t *t = toks + (long)k * pc->bt;
        pc_node *c = find_child(n, t, hash_toks(t, pc->bt), pc->bt);
        if (!c) break;
        c->used = now;
        blocks_out[k++] = c->block;
        n = c;
    }
    return k;
}

void tern_pcache_note(tern_pcache *pc, int k)
{
    if (k) {
        pc->st.hits++;
        pc->st.cached_tokens += (uint64_t)k * (uint64_t)pc->bt;
    } else {
        pc->st.misses++;
    }
}

void tern_pcache_insert(tern_pcache *pc, const int32_t *toks, int count, const int *blocks)
{
    if (pc->max_blocks <= 0) return;
    pc_node *n = &pc->root;
    uint64_t now = ++pc->clock;
    for (int i = 0; i < count; i++) {
        const int32_t *t = toks + (long)i * pc->bt;
        uint64_t h = hash_toks(t, pc->bt);
        pc_node *c = find_child(n, t, h, pc->bt);
        if (!c) {
            c = calloc(1, sizeof *c);
            if (c) c->toks = malloc((size_t)pc->bt * sizeof *c->toks);
            if (!c || !c->toks) {
                free(c);
                return;
            }
            memcpy(c->toks, t, (size_t)pc->bt * sizeof *t);
            c->hash = h;
            c->block = blocks[i];
            c->parent = n;
            c->next = n->child;
            n->child = c;
            tern_kv_block_hold(pc->kv, c->block);
            pc->n++;
        }
        c->used = now;
        n = c;
    }
    if (pc->n > pc->max_blocks) tern_pcache_evict(pc, pc->n - pc->max_blocks);
}

/* Leaves whose block no row uses, oldest first, gathered into an array. */
static void gather(const tern_pcache *pc, pc_node *n, pc_node **out, long *cnt)
{
    for (pc_node *c = n->child; c; c = c->next) {
        if (c->child) gather(pc, c, out, cnt);
        else if (tern_kv_block_refs(pc->kv, c->block) == 1) out[(*cnt)++] = c;
    }
}

static int older(const void *a, const void *b)
{
    const pc_node *x = *(pc_node *const *)a, *y = *(pc_node *const *)b;
    return x->used < y->used ? -1 : x->used > y->used;
}

static void unlink_node(pc_node *c)
{
    pc_node **pp = &c->parent->child;
    while (*pp != c) pp = &(*pp)->next;
    *pp = c->next;
}

long tern_pcache_evict(tern_pcache *pc, long want)
{
    long freed = 0;
    while (freed < want && pc->n > 0) {
        pc_node **leaves = malloc((size_t)pc->n * sizeof *leaves);
        if (!leaves) break;
        long cnt = 0;
        gather(pc, &pc->root, leaves, &cnt);
        if (!cnt) { free(leaves); break; }
        qsort(leaves, (size_t)cnt, sizeof *leaves, older);
        /* Evicting a leaf can make its parent a leaf: the next pass sees it. */
        for (long i = 0; i < cnt && freed < want; i++) {
            pc_node *c = leaves[i];
            persist(pc, c);
            unlink_node(c);
            tern_kv_block_release(pc->kv, c->block);
            free(c->toks);
            free(c);
            pc->n--;
            pc->st.evictions++;
            freed++;
        }
        free(leaves);
    }
    return freed;
}

void tern_pcache_get_stats(const tern_pcache *pc, tern_pcache_stats *out)
{
    *out = pc->st;
    out->blocks = pc->n;
}
