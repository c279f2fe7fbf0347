/* config.json of a Hugging Face checkpoint -> tern_model_config.
 *
 * Families: llama, qwen2, qwen3, qwen3_moe. Rope settings are read from either
 * the transformers-5 `rope_parameters` dict or the older flat `rope_theta` +
 * `rope_scaling`; the inverse frequencies and attention factor that the
 * forward pass needs are derived here once (rope.c). Fields are read from
 * `text_config` when present. */
#ifndef TERN_IO_CONFIG_H
#define TERN_IO_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "io/quant_config.h"
#include "tern/status.h"

#define TERN_MAX_EOS 16

typedef enum {
    TERN_ROPE_DEFAULT = 0,
    TERN_ROPE_LINEAR,
    TERN_ROPE_LLAMA3,
    TERN_ROPE_YARN
} tern_rope_type;

typedef struct {
    tern_rope_type type;
    double theta;
    double factor;
    double low_freq_factor, high_freq_factor;   /* llama3 */
    int original_max_pos;                        /* llama3, yarn */
    double beta_fast, beta_slow;                 /* yarn */
    double mscale, mscale_all_dim;               /* yarn (DeepSeek style) */
    double attention_factor;                     /* yarn; < 0 = derive */
    int truncate;                                /* yarn */
    double partial_rotary_factor;                /* fraction of head_dim rotated */
    int freq_round; /* inv_freq rounded to the checkpoint dtype, as transformers
                       does: 0 none, 1 bfloat16, 2 float16 */
} tern_rope_config;

typedef enum {
    TERN_ARCH_LLAMA = 0,   /* llama, qwen2, qwen3: dense decoder */
    TERN_ARCH_QWEN3_MOE
} tern_arch;

typedef struct {
    char model_type[32];
    tern_arch arch;
    int hidden, n_layers, n_heads, n_kv_heads, head_dim, ffn, vocab, max_pos;
    float rms_eps;
    int tie_embeddings;
    int attention_bias;   /* q/k/v biases (qwen2) */
    int qk_norm;          /* RMSNorm on q and k per head (qwen3) */
    /* mixture of experts */
    int n_experts, n_experts_per_tok, norm_topk_prob, moe_ffn, decoder_sparse_step;
    uint8_t *layer_is_moe;  /* owned, n_layers entries */
    tern_rope_config rope;
    int rope_dim;           /* rotated dimensions per head (even) */
    float *inv_freq;        /* owned, rope_dim/2 entries */
    float rope_attn_factor; /* multiplies cos and sin (yarn), 1 otherwise */
    int32_t eos[TERN_MAX_EOS];
    int n_eos;
    int32_t bos;            /* -1 when absent */
    tern_quant_config quant;/* MLX quantization section (owned); present 0 if none */
} tern_model_config;

/* Reads dir/config.json into *cfg (fields owned by cfg; release with
 * tern_config_clear). Unknown model_type or rope type is TERN_E_UNSUPPORTED;
 * missing or mistyped fields are TERN_E_FORMAT, naming the file and field. */
tern_status tern_config_load(const char *dir, tern_model_config *cfg);
/* Same from config.json text json[0, len) (borrowed); name (borrowed, may be
 * NULL) stands for the file in messages. */
tern_status tern_config_parse(const char *json, size_t len, const char *name, tern_model_config *cfg);
void tern_config_clear(tern_model_config *cfg);

/* Derives inv_freq / rope_attn_factor from cfg->rope (rope.c). */
tern_status tern_rope_init(tern_model_config *cfg);

#endif
