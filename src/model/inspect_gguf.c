/* tern inspect --model FILE.gguf: architecture and hyperparameters from the
 * metadata, tensors by type, bits per weight by module kind. */
#include <stdio.h>
#include <string.h>

#include "model/inspect_gguf.h"
#include "io/gguf.h"

enum { KINDS = 32, FMTS = 4 };

typedef struct {
    char kind[48];
    double n, bytes;
    tern_dtype fmt[FMTS];
    int fmt_n[FMTS], n_fmt;
} kind_stat;

/* "blk.3.attn_q.weight" -> "attn_q"; "token_embd.weight" -> "token_embd". */
static void kind_of(const char *name, char *out, size_t cap)
{
    const char *s = name;
    if (!strncmp(s, "blk.", 4)) {
        const char *d = strchr(s + 4, '.');
        s = d ? d + 1 : s;
    }
    const char *e = strrchr(s, '.');
    size_t n = e && e > s ? (size_t)(e - s) : strlen(s);
    snprintf(out, cap, "%.*s", (int)n, s);
}

tern_status tern_inspect_gguf(const char *path, const char *device, FILE *out)
{
    tern_gguf *g;
    tern_status st = tern_gguf_open(path, &g);
    if (st) return st;
    const char *a = "?";
    uint64_t al = 1;
    tern_gguf_get_str(g, "general.architecture", &a, &al);
    fprintf(out, "file           %s\n", path);
    fprintf(out, "device         %s\n", device ? device : "cpu");
    fprintf(out, "format         GGUF, %d metadata entries, %d tensors\n", tern_gguf_n_kv(g), tern_gguf_n_tensors(g));
    fprintf(out, "architecture   %.*s\n", (int)al, a);
    static const char *keys[] = {"block_count", "embedding_length", "feed_forward_length", "attention.head_count",
                                 "attention.head_count_kv", "attention.key_length", "context_length", "expert_count",
                                 "expert_used_count", "expert_feed_forward_length"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char k[128];
        snprintf(k, sizeof k, "%.*s.%s", (int)al, a, keys[i]);
        int64_t v;
        if (tern_gguf_find_kv(g, k) && tern_gguf_get_int(g, k, &v) == TERN_OK)
            fprintf(out, "%-26s %lld\n", keys[i], (long long)v);
    }
    kind_stat ks[KINDS];
    int nk = 0;
    double params = 0, bytes = 0;
    for (int i = 0; i < tern_gguf_n_tensors(g); i++) {
        const tern_gguf_tensor *t = tern_gguf_tensor_at(g, i);
        double n = 1;
        for (int d = 0; d < t->n_dims; d++) n *= (double)t->ne[d];
        params += n;
        bytes += (double)t->nbytes;
        if (t->n_dims < 2) continue;
        char kind[48];
        kind_of(t->name, kind, sizeof kind);
        int k = 0;
        while (k < nk && strcmp(ks[k].kind, kind)) k++;
        if (k == nk) {
            if (nk == KINDS) continue;
            memset(&ks[k], 0, sizeof ks[k]);
            snprintf(ks[k].kind, sizeof ks[k].kind, "%s", kind);
            nk++;
        }
        ks[k].n += n;
        ks[k].bytes += (double)t->nbytes;
        int f = 0;
        while (f < ks[k].n_fmt && ks[k].fmt[f] != t->dtype) f++;
        if (f == ks[k].n_fmt && f < FMTS) ks[k].fmt[ks[k].n_fmt++] = t->dtype;
        if (f < FMTS) ks[k].fmt_n[f]++;
    }
    fprintf(out, "parameters     %.0f (%.2f M)\n", params, params / 1e6);
    fprintf(out, "tensor bytes   %.0f (%.2f MB), %.3f bits per parameter\n", bytes, bytes / 1e6, bytes * 8 / params);
    fprintf(out, "bits per weight by module (stored bytes * 8 / weights):\n");
    for (int k = 0; k < nk; k++) {
        fprintf(out, "  %-14s %6.3f  ", ks[k].kind, ks[k].bytes * 8 / ks[k].n);
        for (int f = 0; f < ks[k].n_fmt; f++)
            fprintf(out, "%s%s x%d", f ? ", " : "", tern_dtype_name(ks[k].fmt[f]), ks[k].fmt_n[f]);
        fprintf(out, "\n");
    }
    tern_gguf_close(g);
    return TERN_OK;
}
