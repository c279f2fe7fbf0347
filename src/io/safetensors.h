/* Safetensors checkpoints, single file or sharded, memory-mapped.
 *
 * File layout (all little-endian):
 *   [0, 8)          u64 N = length of the JSON header
 *   [8, 8+N)        JSON object: name -> {"dtype": "BF16", "shape": [..],
 *                   "data_offsets": [begin, end]}, plus optional "__metadata__"
 *   [8+N, EOF)      tensor data; offsets are relative to 8+N
 * Checks made at open: header length within the file, valid JSON, known dtype,
 * end - begin == prod(shape) * dtype size, offsets inside the data section,
 * no two tensors overlapping. Every failure names the file and the problem.
 *
 * A sharded checkpoint is model.safetensors.index.json whose "weight_map"
 * maps tensor names to shard files in the same directory. */
#ifndef TERN_IO_SAFETENSORS_H
#define TERN_IO_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "tern/dtype.h"
#include "tern/status.h"

#define TERN_MAX_DIMS 8

typedef struct {
    const char *name;          /* borrowed from the set */
    tern_dtype dtype;
    int ndim;
    int64_t shape[TERN_MAX_DIMS];
    const void *data;          /* points into the read-only mapping */
    size_t nbytes;
    const char *file;          /* shard path, borrowed from the set */
} tern_tensor;

typedef struct tern_tensor_set tern_tensor_set;

/* Opens dir/model.safetensors.index.json if present, else dir/model.safetensors.
 * *out receives an owned set; tensors stay valid until tern_tensors_close. */
tern_status tern_tensors_open_dir(const char *dir, tern_tensor_set **out);
/* Opens one .safetensors file. */
tern_status tern_tensors_open_file(const char *path, tern_tensor_set **out);
/* Reads a safetensors file image held in memory: bytes[0, len) is borrowed
 * and must outlive the set; name (borrowed) stands for the file in messages. */
tern_status tern_tensors_open_memory(const void *bytes, size_t len, const char *name, tern_tensor_set **out);
void tern_tensors_close(tern_tensor_set *s);

/* Returns the tensor (borrowed) or NULL. */
const tern_tensor *tern_tensors_find(const tern_tensor_set *s, const char *name);
int tern_tensors_count(const tern_tensor_set *s);
const tern_tensor *tern_tensors_at(const tern_tensor_set *s, int i);

/* Finds name and checks its dtype is a float type and its shape equals the
 * expected dims (ndim entries). A missing tensor or mismatch is TERN_E_FORMAT
 * with a message naming the tensor and the file. */
tern_status tern_tensors_expect(const tern_tensor_set *s, const char *name, int ndim,
                                const int64_t *dims, const tern_tensor **out);

#endif
