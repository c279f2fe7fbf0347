/* tern_model_inspect (tern/model.h), what `tern inspect` prints: architecture, parameter count, bytes by dtype,
 * bits per weight by module kind (quantized checkpoints), KV bytes per
 * token. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/inspect_gguf.h"
#include "io/config.h"
#include "io/model_dir.h"
#include "io/safetensors.h"
#include "tern/dtype.h"

/* Per module kind (the last part of the module path: q_proj, down_proj,
 * embed_tokens, lm_head, ...): parameters, bytes, and how many modules are
 * in each format. */
enum { KINDS_MAX = 32, FORMATS_MAX = 6 };
typedef struct {
    char kind[48];
    double params, bytes;
    char fmt[FORMATS_MAX][32];
    int fmt_n[FORMATS_MAX], n_fmt;
} kind_stat;

static void kind_add(kind_stat *ks, int *n, const char *kind, double params, double bytes, const char *fmt)
{
    int i = 0;
    while (i < *n && strcmp(ks[i].kind, kind)) i++;
    if (i == *n) {
        if (*n == KINDS_MAX) return;
        memset(&ks[i], 0, sizeof ks[i]);
        snprintf(ks[i].kind, sizeof ks[i].kind, "%s", kind);
        (*n)++;
    }
    kind_stat *k = &ks[i];
    k->params += params;
    k->bytes += bytes;
    int f = 0;
    while (f < k->n_fmt && strcmp(k->fmt[f], fmt)) f++;
    if (f == k->n_fmt) {
        if (k->n_fmt == FORMATS_MAX) return;
        snprintf(k->fmt[f], sizeof k->fmt[f], "%s", fmt);
        k->n_fmt++;
    }
    k->fmt_n[f]++;
}

/* Parameters of a tensor as the model sees it: quantized codes count as the
 * weights they encode. Returns the matrix statistics via kind_add. */
static double weight_stats(const tern_tensor_set *ts, const tern_model_config *c, const tern_tensor *t,
                           kind_stat *ks, int *nk)
{
    double n = 1;
    for (int d = 0; d < t->ndim; d++) n *= (double)t->shape[d];
    size_t nl = strlen(t->name);
    if (nl > 7 && !strcmp(t->name + nl - 7, ".weight") && t->ndim >= 2) {
        char module[512], other[560];
        snprintf(module, sizeof module, "%.*s", (int)(nl - 7), t->name);
        const char *dot = strrchr(module, '.');
        const char *kind = dot ? dot + 1 : module;
        snprintf(other, sizeof other, "%s.scales", module);
        const tern_tensor *sc = tern_tensors_find(ts, other);
        snprintf(other, sizeof other, "%s.biases", module);
        const tern_tensor *bi = tern_tensors_find(ts, other);
        int bits = 0, group = 0;
        tern_quant_config_lookup(&c->quant, module, &bits, &group);
        if (sc && bits && t->dtype == TERN_DT_U32) {
            n = n * 32 / bits;
            char fmt[32];
            snprintf(fmt, sizeof fmt, "%d-bit g%d", bits, group);
            kind_add(ks, nk, kind, n, (double)(t->nbytes + sc->nbytes + (bi ? bi->nbytes : 0)), fmt);
        } else {
            kind_add(ks, nk, kind, n, (double)t->nbytes, tern_dtype_name(t->dtype));
        }
        return n;
    }
    if (nl > 7 && (!strcmp(t->name + nl - 7, ".scales") || !strcmp(t->name + nl - 7, ".biases"))) {
        char w[512];
        snprintf(w, sizeof w, "%.*s.weight", (int)(nl - 7), t->name);
        const tern_tensor *wt = tern_tensors_find(ts, w);
        if (wt && wt->dtype == TERN_DT_U32 && t->ndim == 2) return 0;   /* part of a quantized matrix */
    }
    return n;
}

tern_status tern_model_inspect(const char *path, const char *device, FILE *out)
{
    size_t pl = strlen(path);
    if (pl > 5 && !strcmp(path + pl - 5, ".gguf")) return tern_inspect_gguf(path, device, out);
    char dir[4096];
    tern_model_config c;
    tern_tensor_set *ts = NULL;
    tern_status st = tern_model_dir_resolve(path, dir, sizeof dir);
    if (!st) st = tern_config_load(dir, &c);
    if (st) return st;
    if ((st = tern_tensors_open_dir(dir, &ts))) {
        tern_config_clear(&c);
        return st;
    }
    double params = 0, bytes[TERN_DT_COUNT] = {0};
    kind_stat *ks = calloc(KINDS_MAX, sizeof *ks);
    int nk = 0;
    if (!ks) {
        tern_tensors_close(ts);
        tern_config_clear(&c);
        return tern_error(TERN_E_NOMEM, "inspect: out of memory");
    }
    for (int i = 0; i < tern_tensors_count(ts); i++) {
        const tern_tensor *t = tern_tensors_at(ts, i);
        params += weight_stats(ts, &c, t, ks, &nk);
        bytes[t->dtype] += (double)t->nbytes;
    }
    static const char *rope_names[] = {"default", "linear", "llama3", "yarn"};
    fprintf(out, "directory      %s\n", dir);
    fprintf(out, "device         %s\n", device ? device : "cpu");
    fprintf(out, "architecture   %s\n", c.model_type);
    fprintf(out, "layers         %d\n", c.n_layers);
    fprintf(out, "hidden         %d\n", c.hidden);
    fprintf(out, "heads          %d (kv %d, head_dim %d)\n", c.n_heads, c.n_kv_heads, c.head_dim);
    if (c.arch == TERN_ARCH_QWEN3_MOE)
        fprintf(out, "experts        %d (top %d, ffn %d, norm_topk_prob %s)\n", c.n_experts, c.n_experts_per_tok, c.moe_ffn,
               c.norm_topk_prob ? "true" : "false");
    fprintf(out, "ffn            %d\n", c.ffn);
    fprintf(out, "vocab          %d\n", c.vocab);
    fprintf(out, "context        %d\n", c.max_pos);
    fprintf(out, "rope           %s, theta %g, factor %g, %d rotary dims\n", rope_names[c.rope.type], c.rope.theta,
           c.rope.factor, c.rope_dim);
    fprintf(out, "tied embedding %s\n", c.tie_embeddings ? "yes" : "no");
    fprintf(out, "tensors        %d\n", tern_tensors_count(ts));
    fprintf(out, "parameters     %.0f (%.2f M)\n", params, params / 1e6);
    for (int d = 0; d < TERN_DT_COUNT; d++)
        if (bytes[d] > 0) fprintf(out, "bytes %-8s %.0f (%.2f MB)\n", tern_dtype_name((tern_dtype)d), bytes[d], bytes[d] / 1e6);
    if (c.quant.present)
        fprintf(out, "quantization   MLX affine, %d bits, group %d by default, %d per-module entries\n", c.quant.bits,
               c.quant.group, c.quant.n_ov);
    fprintf(out, "bits per weight by module (stored bytes * 8 / weights, scales and biases included):\n");
    for (int i = 0; i < nk; i++) {
        fprintf(out, "  %-14s %6.3f  ", ks[i].kind, ks[i].params > 0 ? ks[i].bytes * 8 / ks[i].params : 0.0);
        for (int f = 0; f < ks[i].n_fmt; f++) fprintf(out, "%s%s x%d", f ? ", " : "", ks[i].fmt[f], ks[i].fmt_n[f]);
        fprintf(out, "\n");
    }
    free(ks);
    fprintf(out, "kv bytes/token %ld (float32 keys and values)\n",
           (long)c.n_layers * 2 * c.n_kv_heads * c.head_dim * (long)sizeof(float));
    tern_tensors_close(ts);
    tern_config_clear(&c);
    return TERN_OK;
}
