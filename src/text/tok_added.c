/* Byte trie over the added tokens, for leftmost-longest matching of added
 * tokens in the input (done before the model, as the reference does). */
#include "text/tok_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct { int32_t child, sibling, tok; unsigned char byte; } trie_node;

struct tok_trie {
    trie_node *nodes; int n, cap;
    uint8_t first[256];
};

static int32_t new_node(tok_trie *t, unsigned char byte)
{
    if (t->n == t->cap) {
        int nc = t->cap ? t->cap * 2 : 256;
        trie_node *p = realloc(t->nodes, nc * sizeof *p);
        if (!p) return -1;
        t->nodes = p; t->cap = nc;
    }
    t->nodes[t->n] = (trie_node){-1, -1, -1, byte};
    return t->n++;
}

tern_status tok_trie_build(tok_trie **out, const tok_added *toks, int n, int normalized)
{
    tok_trie *t = calloc(1, sizeof *t);
    if (!t || new_node(t, 0) < 0) { free(t); return tern_error(TERN_E_NOMEM, "tokenizer: out of memory"); }
    for (int i = 0; i < n; i++) {
        if (!toks[i].normalized != !normalized || toks[i].nlen == 0) continue;
        int32_t cur = 0;
        for (size_t k = 0; k < toks[i].nlen; k++) {
            unsigned char b = (unsigned char)toks[i].ncontent[k];
            int32_t c = t->nodes[cur].child;
            while (c >= 0 && t->nodes[c].byte != b) c = t->nodes[c].sibling;
            if (c < 0) {
                c = new_node(t, b);
                if (c < 0) { tok_trie_free(t); return tern_error(TERN_E_NOMEM, "tokenizer: out of memory"); }
                t->nodes[c].sibling = t->nodes[cur].child;
                t->nodes[cur].child = c;
            }
            cur = c;
        }
        /* A later duplicate of the same content wins, as in a map insert. */
        t->nodes[cur].tok = i;
        t->first[(unsigned char)toks[i].ncontent[0]] = 1;
    }
    *out = t;
    return TERN_OK;
}

void tok_trie_free(tok_trie *t)
{
    if (!t) return;
    free(t->nodes);
    free(t);
}

int tok_trie_maybe(const tok_trie *t, unsigned char c) { return t && t->first[c]; }

int tok_trie_match(const tok_trie *t, const char *s, size_t len, size_t *mlen)
{
    if (!t || !len || !t->first[(unsigned char)s[0]]) return -1;
    int32_t cur = 0;
    int best = -1;
    for (size_t k = 0; k < len; k++) {
        unsigned char b = (unsigned char)s[k];
        int32_t c = t->nodes[cur].child;
        while (c >= 0 && t->nodes[c].byte != b) c = t->nodes[c].sibling;
        if (c < 0) break;
        cur = c;
        if (t->nodes[cur].tok >= 0) { best = t->nodes[cur].tok; *mlen = k + 1; }
    }
    return best;
}
