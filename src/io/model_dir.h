/* Finds the directory that holds a checkpoint's config.json: the path itself,
 * or inside a Hugging Face cache entry (models--org--name) the snapshot named
 * by refs/main, else its only snapshot. */
#ifndef TERN_IO_MODEL_DIR_H
#define TERN_IO_MODEL_DIR_H

#include <stddef.h>

#include "tern/status.h"

/* Writes the resolved directory into out (size cap). */
tern_status tern_model_dir_resolve(const char *path, char *out, size_t cap);

#endif
