/* tern_model_inspect for a .gguf file (inspect_gguf.c): the metadata, the
 * tensors' types and bits per weight by module, printed to out (borrowed). */
#ifndef TERN_MODEL_INSPECT_GGUF_H
#define TERN_MODEL_INSPECT_GGUF_H

#include <stdio.h>

#include "tern/status.h"

tern_status tern_inspect_gguf(const char *path, const char *device, FILE *out);

#endif
