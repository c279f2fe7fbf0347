/* A loaded model: config + mmapped weights + the family's forward pass.
 *
 * tern_model_load returns an owned handle; tern_model_free releases it and
 * every mapping. Models are read-only after load and may be shared by threads;
 * per-sequence state lives in KV objects (tern/kv.h) and forward batches. */
#ifndef TERN_MODEL_H
#define TERN_MODEL_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "tern/exec.h"
#include "tern/status.h"

typedef struct tern_model tern_model;

typedef enum {
    TERN_PRECISION_DEFAULT = 0, /* TERN_PRECISION env ("f32" or "bf16"), else bf16 */
    TERN_PRECISION_F32,         /* float32 activations: the reference path */
    TERN_PRECISION_BF16         /* activations rounded to bf16 for bf16-weight products */
} tern_precision;

typedef enum {
    TERN_WEIGHTS_DEFAULT = 0,   /* TERN_WEIGHTS env ("mapped" or "panels"), else panels */
    TERN_WEIGHTS_PANELS,        /* matmul weights copied at load into a decode-friendly
                                   panel layout in huge pages (more memory, faster decode);
                                   they stay mapped when the copy would not fit in the
                                   memory available */
    TERN_WEIGHTS_MAPPED         /* every weight read in place from the mmapped checkpoint */
} tern_weights_mode;

typedef struct {
    int n_threads;      /* compute threads; 0 = all online cores (ignored with exec) */
    tern_precision precision;
    tern_weights_mode weights;
    tern_exec *exec;    /* borrowed: run on this context (it must outlive the model);
                           NULL = the model makes and owns its own */
    const char *device; /* the own context's device (ignored with exec): "cpu",
                           "cuda" or "cuda:N"; NULL = TERN_DEVICE env, else cpu.
                           On a GPU the weights are uploaded once at load and
                           the KV pools of tern_model_kv_create live there */
} tern_model_opts;

/* path (borrowed): a model directory (config.json + safetensors), a Hugging
 * Face cache directory (models--org--name, resolved through refs/main or the
 * single snapshot), or a repo id ORG/NAME[@REVISION] looked up in the Hugging
 * Face hub cache (HF_HUB_CACHE, else HF_HOME/hub, else
 * ~/.cache/huggingface/hub; REVISION is a ref under refs/ or a snapshot's
 * commit hash, refs/main without it). Nothing is downloaded. opts may be NULL.
 * *out receives an owned model. */
tern_status tern_model_load(const char *path, const tern_model_opts *opts, tern_model **out);
void tern_model_free(tern_model *m);

/* Model names. tern_model_dir_resolve finds the directory that holds a checkpoint's config.json. A model is named
 * by one of:
 *   - a directory with config.json;
 *   - a Hugging Face cache entry directory (models--org--name): the snapshot
 *     named by refs/main, else its only snapshot;
 *   - a repo id ORG/NAME[@REVISION], looked up in the Hugging Face hub cache
 *     (HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub) as
 *     models--ORG--NAME; REVISION is a ref under refs/ (a branch or tag, e.g.
 *     main) or a commit hash present under snapshots/; without it refs/main.
 * Nothing is downloaded: a repo id that is not in the cache is refused with a
 * message naming where it looked and the huggingface-cli command to get it. */
/* path borrowed; writes the resolved directory into out (size cap). */
tern_status tern_model_dir_resolve(const char *path, char *out, size_t cap);
/* Splits "ORG/NAME[@REVISION]" (borrowed) into org, name and rev (each of
 * size cap; rev "" when absent). Returns 1 when spec has that shape, else 0. */
int tern_model_repo_id_parse(const char *spec, char *org, char *name, char *rev, size_t cap);
/* The hub cache directory (HF_HUB_CACHE, else HF_HOME/hub, else
 * $HOME/.cache/huggingface/hub) written into out (size cap). */
void tern_hf_hub_cache_dir(char *out, size_t cap);

int tern_model_vocab_size(const tern_model *m);
/* The execution context the model runs on (borrowed; the model's own or
 * the one it was loaded with). */
tern_exec *tern_model_exec(const tern_model *m);
int tern_model_max_context(const tern_model *m);
/* End-of-sequence ids from config.json (borrowed array, *n set). */
const int32_t *tern_model_eos_ids(const tern_model *m, int *n);
/* Directory the model was loaded from (borrowed). */
const char *tern_model_dir(const tern_model *m);
const char *tern_model_type(const tern_model *m);
size_t tern_model_weight_bytes(const tern_model *m);
/* Bytes of weights read for one decoded token (all but the embedding gather). */
size_t tern_model_decode_bytes(const tern_model *m);
/* The read bandwidth of the model's GPU in GB/s, measured now (10 passes
 * over 2 GiB with 16-byte loads, the weight stream's pattern); 0 for a
 * model on the CPU or when the measurement fails. copy_gbps (may be NULL)
 * receives the device-to-device copy bandwidth measured right after (10
 * copies of 1 GiB, read and write both counted), or 0. */
double tern_model_device_bandwidth(tern_model *m, double *copy_gbps);
/* Where the matmul weights live: "mapped", "panels" or "panels-huge" (static string). */
const char *tern_model_weights_desc(const tern_model *m);
/* Prints what a checkpoint is (architecture, shapes, parameters, bytes by
 * dtype, bits per weight by module, KV bytes per token) without loading its
 * weights; device names where it would run (NULL = "cpu"). out borrowed. */
tern_status tern_model_inspect(const char *path, const char *device, FILE *out);
/* The tokenizer and chat template files of a model: its directory (a repo id
 * resolved in the hub cache), or for a .gguf file a temporary directory with
 * tokenizer.json / tokenizer_config.json written from its metadata (*temp
 * set: remove it with tern_model_text_dir_close). */
tern_status tern_model_text_dir_open(const char *model, char *dir, size_t cap, int *temp);
void tern_model_text_dir_close(const char *dir, int temp);
/* The model's identity for caches kept on disk: a hash of config.json and
 * of every weight file's name, size and header. */
uint64_t tern_model_fingerprint(const tern_model *m);
/* Logits of a prompt run from an empty state: out is [n, vocab] with all set,
 * else [1, vocab] for the last position (borrowed, caller-sized). */
tern_status tern_model_logits(tern_model *m, const int32_t *ids, int n, int all, float *out);

#endif
