/* Finds the directory that holds a checkpoint's config.json. A model is named
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
#ifndef TERN_IO_MODEL_DIR_H
#define TERN_IO_MODEL_DIR_H

#include <stddef.h>

#include "tern/status.h"

/* path borrowed; writes the resolved directory into out (size cap). */
tern_status tern_model_dir_resolve(const char *path, char *out, size_t cap);

/* Splits "ORG/NAME[@REVISION]" (borrowed) into org, name and rev (each of
 * size cap; rev "" when absent). Returns 1 when spec has that shape, else 0. */
int tern_model_repo_id_parse(const char *spec, char *org, char *name, char *rev, size_t cap);

/* The hub cache directory (HF_HUB_CACHE, else HF_HOME/hub, else
 * $HOME/.cache/huggingface/hub) written into out (size cap). */
void tern_hf_hub_cache_dir(char *out, size_t cap);

#endif
