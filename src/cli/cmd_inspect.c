/* tern inspect --model DIR: architecture, parameter count, bytes by dtype,
 * KV bytes per token. */
#include <stdio.h>
#include <string.h>

#include "cli/device_opt.h"
#include "io/config.h"
#include "io/model_dir.h"
#include "io/safetensors.h"
#include "tern/dtype.h"

int tern_cmd_inspect(int argc, char **argv)
{
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc) path = argv[++i];
        else { fprintf(stderr, "usage: tern inspect --model DIR\n"); return 2; }
    }
    if (!path) { fprintf(stderr, "usage: tern inspect --model DIR\n"); return 2; }
    char dir[4096];
    tern_model_config c;
    tern_tensor_set *ts = NULL;
    if (tern_model_dir_resolve(path, dir, sizeof dir) || tern_config_load(dir, &c)) {
        fprintf(stderr, "tern: %s\n", tern_last_error());
        return 1;
    }
    if (tern_tensors_open_dir(dir, &ts)) {
        fprintf(stderr, "tern: %s\n", tern_last_error());
        tern_config_clear(&c);
        return 1;
    }
    double params = 0, bytes[TERN_DT_COUNT] = {0};
    for (int i = 0; i < tern_tensors_count(ts); i++) {
        const tern_tensor *t = tern_tensors_at(ts, i);
        double n = 1;
        for (int d = 0; d < t->ndim; d++) n *= (double)t->shape[d];
        params += n;
        bytes[t->dtype] += (double)t->nbytes;
    }
    static const char *rope_names[] = {"default", "linear", "llama3", "yarn"};
    printf("directory      %s\n", dir);
    printf("device         %s\n", cli_device_name());
    printf("architecture   %s\n", c.model_type);
    printf("layers         %d\n", c.n_layers);
    printf("hidden         %d\n", c.hidden);
    printf("heads          %d (kv %d, head_dim %d)\n", c.n_heads, c.n_kv_heads, c.head_dim);
    if (c.arch == TERN_ARCH_QWEN3_MOE)
        printf("experts        %d (top %d, ffn %d, norm_topk_prob %s)\n", c.n_experts, c.n_experts_per_tok, c.moe_ffn,
               c.norm_topk_prob ? "true" : "false");
    printf("ffn            %d\n", c.ffn);
    printf("vocab          %d\n", c.vocab);
    printf("context        %d\n", c.max_pos);
    printf("rope           %s, theta %g, factor %g, %d rotary dims\n", rope_names[c.rope.type], c.rope.theta,
           c.rope.factor, c.rope_dim);
    printf("tied embedding %s\n", c.tie_embeddings ? "yes" : "no");
    printf("tensors        %d\n", tern_tensors_count(ts));
    printf("parameters     %.0f (%.2f M)\n", params, params / 1e6);
    for (int d = 0; d < TERN_DT_COUNT; d++)
        if (bytes[d] > 0) printf("bytes %-8s %.0f (%.2f MB)\n", tern_dtype_name((tern_dtype)d), bytes[d], bytes[d] / 1e6);
    printf("kv bytes/token %ld (float32 keys and values)\n",
           (long)c.n_layers * 2 * c.n_kv_heads * c.head_dim * (long)sizeof(float));
    tern_tensors_close(ts);
    tern_config_clear(&c);
    return 0;
}
