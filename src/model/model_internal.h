/* The loaded model as the forward pass sees it. Internal to src/model and
 * the engine; the public handle is opaque (tern/model.h). */
#ifndef TERN_MODEL_INTERNAL_H
#define TERN_MODEL_INTERNAL_H

#include <pthread.h>

#include "backend/cpu/matmul.h"
#include "core/exec.h"
#include "io/config.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "tern/model.h"

/* A weight matrix [rows, cols] (= [N, K] of a matmul) or a vector (rows 1),
 * read in place from the mapping. data NULL = absent (optional tensors).
 * Quantized matrices (dt MLX_Q4 / MLX_Q8): data is a tern_qmat owned by the
 * model (model->qmats), describing the codes, scales and biases. */
typedef struct {
    const void *data;       /* borrowed: the checkpoint mapping or the model's panel arena */
    tern_dtype dt;
    int rows, cols;
    tern_wlayout layout;    /* TERN_WL_ROWS as bound; panels after tern_model_pack_weights */
    const void *dev;        /* the CUDA backend's copy in device memory (borrowed), or NULL */
} tern_weight;

typedef struct {
    tern_weight gate, up, down;     /* [ffn, H], [ffn, H], [H, ffn] */
} tern_mlp;

typedef struct {
    tern_weight attn_norm;          /* [H] */
    tern_weight wq, wk, wv, wo;     /* [nh*hd, H], [nkv*hd, H], [nkv*hd, H], [H, nh*hd] */
    tern_weight bq, bk, bv;         /* qwen2 biases, [nh*hd], [nkv*hd], [nkv*hd] */
    tern_weight q_norm, k_norm;     /* qwen3: [hd] */
    tern_weight ffn_norm;           /* [H] */
    int is_moe;
    tern_mlp mlp;                   /* dense layers */
    tern_weight router;             /* moe: [n_experts, H] */
    tern_mlp *experts;              /* moe: n_experts of [moe_ffn, H] ... (owned array) */
} tern_layer;

typedef struct tern_backend_vt tern_backend_vt;   /* backend.h */

struct tern_model {
    tern_model_config cfg;
    char dir[4096];
    tern_tensor_set *tensors;       /* owned; every tern_weight points into it */
    tern_gguf *gguf;                /* owned, a GGUF model instead of tensors; dir is then
                                       the private directory of its tokenizer files */
    tern_layer *layers;             /* owned, cfg.n_layers */
    tern_weight embed;              /* [vocab, H] */
    tern_weight final_norm;         /* [H] */
    tern_weight lm_head;            /* [vocab, H]; = embed when tied (until packed) */
    int head_is_embed;              /* lm_head was bound to the embedding table */
    tern_exec *exec;                /* borrowed from the caller, or owned when own_exec */
    int own_exec;
    const tern_backend_vt *bk;      /* the ops the forward runs: the exec's device */
    void *dev;                      /* owned by the backend: device copies of the weights */
    tern_act_mode act_mode;
    size_t weight_bytes;            /* every weight tensor bound */
    void *arena;                    /* owned mapping: matmul weights in panels, or NULL */
    size_t arena_bytes;
    int arena_floats;               /* the arena holds the float matmul weights too */
    tern_qmat **qmats;              /* owned, n_qmats: descriptors of quantized weights */
    int n_qmats, cap_qmats;
    void **bufs;                    /* owned, n_bufs: weights rewritten at load (GGUF llama q/k rows) */
    int n_bufs, cap_bufs;
};

/* Quantized weights (weight_quant.c). */
/* Binds module's quantized matrix ("<module>.weight" uint32 codes,
 * ".scales", ".biases") as an [rows, cols] weight; bits and group come from
 * the config's quantization section and are checked against the shapes. */
tern_status tern_weight_bind_quant(struct tern_model *m, tern_weight *w, const char *module, int rows,
                                   int cols);
/* Expert e of n_e stacked in one [n_e, rows, ...] module (mlx-lm's
 * switch_mlp); e = -1: a plain matrix. */
tern_status tern_weight_bind_quant_slice(struct tern_model *m, tern_weight *w, const char *module, int rows,
                                         int cols, int e, int n_e);
/* A new descriptor owned by m (zeroed), or NULL when out of memory. */
tern_qmat *tern_model_new_qmat(struct tern_model *m);
/* Row r of w (float or quantized, rows layout) as float32 into out[w->cols]. */
void tern_weight_row_f32(const tern_weight *w, int r, float *out);
/* Bytes the weight's tensors occupy as stored (codes, scales, biases). */
size_t tern_weight_bytes(const tern_weight *w);

/* Opens a GGUF file into m->gguf, fills m->cfg and binds m->layers
 * (gguf_model.c). */
tern_status tern_gguf_model_bind(struct tern_model *m, const char *path);

/* Binds the tensors of the llama/qwen family to m->layers (llama_weights.c). */
tern_status tern_llama_bind_weights(struct tern_model *m);

/* Moves every matmul weight of a bound model (not the input embedding) into
 * m->arena in the panel layout, using m->exec's threads (weights_pack.c). When the copy
 * would not fit in the memory the system has available, or cannot be
 * mapped, the weights stay in the checkpoint mapping and TERN_OK is returned
 * (tern_model_weights_desc says "mapped"). quant_only: only the quantized
 * matrices move (to qpanel.h panels); the float ones stay mapped. */
tern_status tern_model_pack_weights(struct tern_model *m, int quant_only);

#endif
