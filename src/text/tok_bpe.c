/* BPE model: one pre-tokenized word to ids.
 *
 * The word starts as one symbol per character (with continuing_subword_prefix
 * on all but the first and end_of_word_suffix on the last; unknown characters
 * become <0xXX> byte tokens with byte_fallback, else the unk token, fused when
 * fuse_unk). Merges then apply lowest rank first, leftmost first on ties,
 * through a binary heap whose stale entries are skipped on pop, which is the
 * order the reference implementation applies them in. */
#include "text/tok_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct { int32_t id; int32_t prev, next; uint32_t len; } sym;
typedef struct { uint32_t rank; int32_t pos; int32_t merged; } item;

struct tok_bpe_scratch {
    sym *s; int scap;
    item *h; int hn, hcap;
    tok_buf tmp;
};

static int item_less(const item *a, const item *b)
{
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static int heap_push(tok_bpe_scratch *x, item it)
{
    if (x->hn == x->hcap) {
        int nc = x->hcap ? x->hcap * 2 : 64;
        item *p = realloc(x->h, nc * sizeof *p);
        if (!p) return -1;
        x->h = p; x->hcap = nc;
    }
    int i = x->hn++;
    while (i > 0) {
        int par = (i - 1) / 2;
        if (!item_less(&it, &x->h[par])) break;
        x->h[i] = x->h[par];
        i = par;
    }
    x->h[i] = it;
    return 0;
}

static item heap_pop(tok_bpe_scratch *x)
{
    item top = x->h[0], last = x->h[--x->hn];
    int i = 0, n = x->hn;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && item_less(&x->h[c + 1], &x->h[c])) c++;
        if (!item_less(&x->h[c], &last)) break;
        x->h[i] = x->h[c];
        i = c;
    }
    if (n) x->h[i] = last;
    return top;
}

static tern_status oom(void) { return tern_error(TERN_E_NOMEM, "tokenizer: out of memory"); }

static int add_sym(tok_bpe_scratch *x, int *n, int32_t id, uint32_t len)
{
    if (*n == x->scap) {
        int nc = x->scap ? x->scap * 2 : 64;
        sym *p = realloc(x->s, nc * sizeof *p);
        if (!p) return -1;
        x->s = p; x->scap = nc;
    }
    x->s[*n] = (sym){id, *n - 1, *n + 1, len};
    (*n)++;
    return 0;
}

static tern_status initial_symbols(const tern_tokenizer *t, tok_bpe_scratch *x, const char *w,
                                   size_t len, int *nsym)
{
    int n = 0;
    int32_t unk_id = -1;
    uint32_t unk_len = 0;
    for (size_t i = 0; i < len;) {
        size_t cl = 1;
        while (i + cl < len && ((unsigned char)w[i + cl] & 0xC0) == 0x80) cl++;
        const char *piece = w + i;
        size_t plen = cl;
        if ((t->cont_prefix && i > 0) || (t->eow_suffix && i + cl == len)) {
            x->tmp.len = 0;
            tern_status st = TERN_OK;
            if (t->cont_prefix && i > 0) st = tok_buf_put(&x->tmp, t->cont_prefix, t->cont_prefix_len);
            if (!st) st = tok_buf_put(&x->tmp, w + i, cl);
            if (!st && t->eow_suffix && i + cl == len) st = tok_buf_put(&x->tmp, t->eow_suffix, t->eow_suffix_len);
            if (st) return st;
            piece = x->tmp.p; plen = x->tmp.len;
        }
        int32_t id = tok_strmap_get(&t->vocab, piece, plen);
        if (id >= 0) {
            if (unk_id >= 0) {
                if (add_sym(x, &n, unk_id, unk_len)) return oom();
                unk_id = -1;
            }
            if (add_sym(x, &n, id, (uint32_t)cl)) return oom();
        } else {
            int all = t->byte_fallback;
            for (size_t k = 0; all && k < plen; k++) all = t->byte_ids[(unsigned char)piece[k]] >= 0;
            if (all) {
                for (size_t k = 0; k < plen; k++)
                    if (add_sym(x, &n, t->byte_ids[(unsigned char)piece[k]], 1)) return oom();
            } else if (t->unk_id >= 0) {
                if (unk_id >= 0 && t->fuse_unk) unk_len += (uint32_t)cl;
                else {
                    if (unk_id >= 0 && add_sym(x, &n, unk_id, unk_len)) return oom();
                    unk_id = t->unk_id;
                    unk_len = (uint32_t)cl;
                }
            } else {
                return tern_error(TERN_E_INVALID, "tokenizer: '%.*s' has no token and the model has "
                                  "neither byte_fallback nor an unk_token", (int)plen, piece);
            }
        }
        i += cl;
    }
    if (unk_id >= 0 && add_sym(x, &n, unk_id, unk_len)) return oom();
    if (n) x->s[n - 1].next = -1;
    *nsym = n;
    return TERN_OK;
}

tern_status tok_bpe_word(const tern_tokenizer *t, const char *w, size_t len, tok_ids *out,
                         tok_bpe_scratch **scratch)
{
    if (!len) return TERN_OK;
    if (t->ignore_merges) {
        int32_t id = tok_strmap_get(&t->vocab, w, len);
        if (id >= 0) return tok_ids_push(out, id);
    }
    if (!*scratch && !(*scratch = calloc(1, sizeof **scratch))) return oom();
    tok_bpe_scratch *x = *scratch;
    int n = 0;
    tern_status st = initial_symbols(t, x, w, len, &n);
    if (st) return st;
    sym *s = x->s;
    x->hn = 0;
    uint32_t rank;
    int32_t merged;
    for (int i = 0; i + 1 < n; i++)
        if (tok_mergemap_get(&t->merges, s[i].id, s[i + 1].id, &rank, &merged) &&
            heap_push(x, (item){rank, i, merged}))
            return oom();
    while (x->hn) {
        item top = heap_pop(x);
        sym *a = &s[top.pos];
        if (a->len == 0 || a->next < 0) continue;
        sym *b = &s[a->next];
        if (!tok_mergemap_get(&t->merges, a->id, b->id, &rank, &merged) || merged != top.merged) continue;
        a->id = top.merged;
        a->len += b->len;
        b->len = 0;
        a->next = b->next;
        if (a->next >= 0) s[a->next].prev = top.pos;
        if (a->prev >= 0 && tok_mergemap_get(&t->merges, s[a->prev].id, a->id, &rank, &merged) &&
            heap_push(x, (item){rank, a->prev, merged}))
            return oom();
        if (a->next >= 0 && tok_mergemap_get(&t->merges, a->id, s[a->next].id, &rank, &merged) &&
            heap_push(x, (item){rank, top.pos, merged}))
            return oom();
    }
    for (int i = 0; i >= 0 && i < n && !st; i = s[i].next) st = tok_ids_push(out, s[i].id);
    return st;
}

void tok_bpe_scratch_free(tok_bpe_scratch *s)
{
    if (!s) return;
    free(s->s); free(s->h); free(s->tmp.p);
    free(s);
}
