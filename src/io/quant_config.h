/* The quantization section of an MLX checkpoint's config.json.
 *
 * mlx-lm writes `quantization` (and the same object as
 * `quantization_config`):
 *   {"group_size": 64, "bits": 4, "mode": "affine",
 *    "model.layers.0.mlp.down_proj": {"group_size": 32, "bits": 8},
 *    "model.layers.0.mlp.gate": false, ...}
 * Top-level integers are the default for every quantized module; an object
 * keyed by a module path overrides them for that module; `false` keeps the
 * module in float. Only the affine mode with 4 or 8 bits and groups of 32,
 * 64 or 128 is accepted; other modes (mxfp4, ...), bit widths, and the
 * `quantization_config` of other tools (`quant_method`: gptq, awq, fp8, ...)
 * are refused with an error naming the file and the field. */
#ifndef TERN_IO_QUANT_CONFIG_H
#define TERN_IO_QUANT_CONFIG_H

#include <jansson.h>

#include "tern/status.h"

typedef struct {
    char *module;       /* owned module path, e.g. "model.layers.3.mlp.up_proj" */
    int bits, group;    /* bits 0: kept in float */
} tern_quant_override;

typedef struct {
    int present;        /* the config has a quantization section */
    int bits, group;    /* defaults */
    tern_quant_override *ov;    /* owned, n_ov entries */
    int n_ov;
} tern_quant_config;

/* Reads the section from top (borrowed JSON of config.json at path) into
 * *q (owned fields; release with tern_quant_config_clear). No section:
 * q->present = 0 and TERN_OK. */
tern_status tern_quant_config_parse(const char *path, json_t *top, tern_quant_config *q);
void tern_quant_config_clear(tern_quant_config *q);

/* Bits and group of a module (its path without ".weight"); *bits = 0 when
 * the module is not quantized. */
void tern_quant_config_lookup(const tern_quant_config *q, const char *module, int *bits, int *group);

#endif
