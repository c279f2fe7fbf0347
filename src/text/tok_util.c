/* Containers used by the tokenizer: string lists, byte buffers, an arena and
 * two open-addressing hash maps (vocabulary and merges). */
#include "text/tok_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static tern_status oom(void) { return tern_error(TERN_E_NOMEM, "tokenizer: out of memory"); }

tern_status tok_buf_put(tok_buf *b, const void *s, size_t len)
{
    if (b->len + len + 1 > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 256;
        while (nc < b->len + len + 1) nc *= 2;
        char *p = realloc(b->p, nc);
        if (!p) return oom();
        b->p = p; b->cap = nc;
    }
    if (len) memcpy(b->p + b->len, s, len);
    b->len += len;
    b->p[b->len] = 0;
    return TERN_OK;
}

tern_status tok_buf_putc(tok_buf *b, char c) { return tok_buf_put(b, &c, 1); }

tern_status tok_strvec_push(tok_strvec *v, const char *s, size_t len, int first)
{
    if (v->n == v->ncap) {
        int nc = v->ncap ? v->ncap * 2 : 16;
        uint32_t *o = realloc(v->off, nc * sizeof *o);
        if (!o) return oom();
        v->off = o;
        uint32_t *l = realloc(v->ln, nc * sizeof *l);
        if (!l) return oom();
        v->ln = l;
        uint8_t *f = realloc(v->first, nc);
        if (!f) return oom();
        v->first = f;
        v->ncap = nc;
    }
    if (v->len + len + 1 > v->cap) {
        size_t nc = v->cap ? v->cap * 2 : 256;
        while (nc < v->len + len + 1) nc *= 2;
        char *p = realloc(v->buf, nc);
        if (!p) return oom();
        v->buf = p; v->cap = nc;
    }
    if (len) memcpy(v->buf + v->len, s, len);
    v->off[v->n] = (uint32_t)v->len;
    v->ln[v->n] = (uint32_t)len;
    v->first[v->n] = (uint8_t)first;
    v->len += len;
    v->n++;
    return TERN_OK;
}

void tok_strvec_clear(tok_strvec *v) { v->n = 0; v->len = 0; }

void tok_strvec_free(tok_strvec *v)
{
    free(v->buf); free(v->off); free(v->ln); free(v->first);
    memset(v, 0, sizeof *v);
}

tern_status tok_ids_push(tok_ids *v, int32_t id)
{
    if (v->n == v->cap) {
        int nc = v->cap ? v->cap * 2 : 64;
        int32_t *p = realloc(v->p, nc * sizeof *p);
        if (!p) return oom();
        v->p = p; v->cap = nc;
    }
    v->p[v->n++] = id;
    return TERN_OK;
}

/* ---- arena ---- */
struct tok_arena_block { tok_arena_block *next; size_t used, cap; char data[]; };

char *tok_arena_dup(tok_arena *a, const char *s, size_t len)
{
    tok_arena_block *b = a->head;
    if (!b || b->used + len + 1 > b->cap) {
        size_t cap = len + 1 > (1u << 20) ? len + 1 : (1u << 20);
        b = malloc(sizeof *b + cap);
        if (!b) return NULL;
        b->next = a->head; b->used = 0; b->cap = cap;
        a->head = b;
    }
    char *p = b->data + b->used;
    if (len) memcpy(p, s, len);
    p[len] = 0;
    b->used += len + 1;
    return p;
}

void tok_arena_free(tok_arena *a)
{
    for (tok_arena_block *b = a->head, *n; b; b = n) { n = b->next; free(b); }
    a->head = NULL;
}

/* ---- hashing ---- */
static uint64_t hash_bytes(const char *s, size_t len)
{
    uint64_t h = 0x9E3779B97F4A7C15ull ^ len;
    while (len >= 8) {
        uint64_t w; memcpy(&w, s, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDull; h ^= h >> 32;
        s += 8; len -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, len);
    /* Full avalanche: the table index takes the low bits. */
    h ^= w;
    h ^= h >> 33; h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 33; h *= 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 33;
    return h;
}

/* Zeroed table. Big ones are fresh anonymous mappings (already zero) that
 * ask for huge pages, since lookups land on random pages and TLB misses
 * otherwise dominate loading. Release with table_free and the same sizes. */
#define BIG_TABLE (4u << 20)
static void *table_alloc(size_t n, size_t size)
{
    size_t bytes = n * size;
    if (bytes < BIG_TABLE) return calloc(n, size);
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    madvise(p, bytes, MADV_HUGEPAGE);
    return p;
}

static void table_free(void *p, size_t n, size_t size)
{
    if (!p) return;
    if (n * size < BIG_TABLE) free(p);
    else munmap(p, n * size);
}

static uint32_t pow2_for(uint32_t expect)
{
    uint32_t cap = 16;
    while (cap < expect + expect / 2 + 16) cap *= 2;
    return cap;
}

tern_status tok_strmap_init(tok_strmap *m, uint32_t expect)
{
    memset(m, 0, sizeof *m);
    m->cap = pow2_for(expect);
    m->slot = table_alloc(m->cap, sizeof *m->slot);
    if (!m->slot) { m->cap = 0; return oom(); }
    return TERN_OK;
}

_Static_assert(sizeof(tok_strslot) == 32, "two slots per cache line");

static const char *slot_key(const tok_strslot *s)
{
    if (s->klen <= TOK_INLINE) return s->k;
    const char *p;
    memcpy(&p, s->k, sizeof p);
    return p;
}

static int slot_is(const tok_strslot *s, uint32_t hh, const char *k, size_t klen)
{
    return s->hash == hh && s->klen == klen && !memcmp(slot_key(s), k, klen);
}

static void strmap_insert(tok_strmap *m, const char *k, uint32_t klen, int32_t v, uint64_t h)
{
    uint32_t mask = m->cap - 1, i = (uint32_t)h & mask, hh = (uint32_t)(h >> 32) | 1;
    while (m->slot[i].hash) {
        if (slot_is(&m->slot[i], hh, k, klen)) { m->slot[i].val = v; return; }
        i = (i + 1) & mask;
    }
    tok_strslot *s = &m->slot[i];
    s->hash = hh; s->val = v; s->klen = klen;
    if (klen <= TOK_INLINE) memcpy(s->k, k, klen);
    else memcpy(s->k, &k, sizeof k);
    m->n++;
}

/* k must outlive the map when longer than TOK_INLINE bytes. */
tern_status tok_strmap_put(tok_strmap *m, const char *k, uint32_t klen, int32_t v)
{
    return tok_strmap_put_h(m, k, klen, v, hash_bytes(k, klen));
}

tern_status tok_strmap_put_h(tok_strmap *m, const char *k, uint32_t klen, int32_t v, uint64_t h)
{
    if ((m->n + 1) * 3 > m->cap * 2 || !m->cap) {
        tok_strmap nm;
        tern_status st = tok_strmap_init(&nm, m->cap + 16);
        if (st) return st;
        for (uint32_t i = 0; i < m->cap; i++)
            if (m->slot[i].hash) {
                const char *key = slot_key(&m->slot[i]);
                strmap_insert(&nm, key, m->slot[i].klen, m->slot[i].val, hash_bytes(key, m->slot[i].klen));
            }
        tok_strmap_free(m);
        *m = nm;
    }
    strmap_insert(m, k, klen, v, h);
    return TERN_OK;
}

uint64_t tok_hash(const char *k, size_t klen) { return hash_bytes(k, klen); }

void tok_strmap_prefetch(const tok_strmap *m, uint64_t h)
{
    if (m->cap) __builtin_prefetch(&m->slot[(uint32_t)h & (m->cap - 1)]);
}

int32_t tok_strmap_get(const tok_strmap *m, const char *k, size_t klen)
{
    return tok_strmap_get_h(m, k, klen, hash_bytes(k, klen));
}

int32_t tok_strmap_get_h(const tok_strmap *m, const char *k, size_t klen, uint64_t h)
{
    if (!m->cap) return -1;
    uint32_t mask = m->cap - 1, i = (uint32_t)h & mask, hh = (uint32_t)(h >> 32) | 1;
    while (m->slot[i].hash) {
        if (slot_is(&m->slot[i], hh, k, klen)) return m->slot[i].val;
        i = (i + 1) & mask;
    }
    return -1;
}

void tok_strmap_free(tok_strmap *m)
{
    table_free(m->slot, m->cap, sizeof *m->slot);
    memset(m, 0, sizeof *m);
}

static uint32_t hash_pair(uint64_t k)
{
    k ^= k >> 33; k *= 0xFF51AFD7ED558CCDull; k ^= k >> 33;
    return (uint32_t)k;
}

tern_status tok_mergemap_init(tok_mergemap *m, uint32_t expect)
{
    memset(m, 0, sizeof *m);
    m->cap = pow2_for(expect);
    m->slot = table_alloc(m->cap, sizeof *m->slot);
    if (!m->slot) { m->cap = 0; return oom(); }
    return TERN_OK;
}

tern_status tok_mergemap_put(tok_mergemap *m, int32_t a, int32_t b, uint32_t rank, int32_t merged)
{
    if ((m->n + 1) * 3 > m->cap * 2 || !m->cap) {
        tok_mergemap nm;
        tern_status st = tok_mergemap_init(&nm, m->cap + 16);
        if (st) return st;
        for (uint32_t i = 0; i < m->cap; i++)
            if (m->slot[i].key) {
                uint64_t k = m->slot[i].key - 1;
                tok_mergemap_put(&nm, (int32_t)(k >> 32), (int32_t)(uint32_t)k, m->slot[i].rank, m->slot[i].merged);
            }
        tok_mergemap_free(m);
        *m = nm;
    }
    uint64_t key = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
    uint32_t mask = m->cap - 1, i = hash_pair(key) & mask;
    while (m->slot[i].key) {
        if (m->slot[i].key == key) { m->slot[i].rank = rank; m->slot[i].merged = merged; return TERN_OK; }
        i = (i + 1) & mask;
    }
    m->slot[i] = (tok_mergeslot){key, rank, merged};
    m->n++;
    return TERN_OK;
}

void tok_mergemap_prefetch(const tok_mergemap *m, int32_t a, int32_t b)
{
    uint64_t key = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
    if (m->cap) __builtin_prefetch(&m->slot[hash_pair(key) & (m->cap - 1)]);
}

int tok_mergemap_get(const tok_mergemap *m, int32_t a, int32_t b, uint32_t *rank, int32_t *merged)
{
    if (!m->cap) return 0;
    uint64_t key = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
    uint32_t mask = m->cap - 1, i = hash_pair(key) & mask;
    while (m->slot[i].key) {
        if (m->slot[i].key == key) { *rank = m->slot[i].rank; *merged = m->slot[i].merged; return 1; }
        i = (i + 1) & mask;
    }
    return 0;
}

void tok_mergemap_free(tok_mergemap *m)
{
    table_free(m->slot, m->cap, sizeof *m->slot);
    memset(m, 0, sizeof *m);
}
