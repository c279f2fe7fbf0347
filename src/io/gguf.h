/* GGUF files (llama.cpp's single-file checkpoints), memory-mapped.
 *
 * Byte layout (all little-endian), versions 2 and 3:
 *   [0, 4)     magic "GGUF"
 *   [4, 8)     u32 version
 *   [8, 16)    u64 tensor count T
 *   [16, 24)   u64 metadata count KV
 *   KV times:  key (string), u32 value type, value
 *   T times:   name (string), u32 n_dims (1..4), n_dims x u64 ne (ne[0] is the
 *              fastest-varying dimension: the row length), u32 ggml type,
 *              u64 offset (from the start of the data section, a multiple of
 *              the alignment)
 *   padding to the alignment (metadata "general.alignment", u32, default 32)
 *   data section to the end of the file.
 * A string is u64 length + that many bytes (UTF-8, no terminator). Value
 * types: 0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32, 7 bool (u8),
 * 8 string, 9 array (u32 element type, u64 count, elements; arrays of
 * arrays are refused), 10 u64, 11 i64, 12 f64.
 * Tensor data: F32, F16, BF16 rows as they are; block formats store each row
 * as ne[0] / block_elems blocks (see backend/cpu/gguf_blocks.h):
 *   Q8_0 (34 bytes per 32), Q4_0 (18 per 32), Q4_K (144 per 256),
 *   Q5_K (176 per 256), Q6_K (210 per 256).
 * Checks made at open: every count, length and offset against the bytes that
 * remain (so a truncated file or an absurd count is an error, never a large
 * allocation or a read past the end), known value and tensor types, row
 * lengths a multiple of the block, tensors inside the data section and not
 * overlapping. Every failure names the file, the byte offset and what was
 * expected. */
#ifndef TERN_IO_GGUF_H
#define TERN_IO_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "tern/dtype.h"
#include "tern/status.h"

typedef enum {
    TERN_GGUF_U8 = 0, TERN_GGUF_I8, TERN_GGUF_U16, TERN_GGUF_I16, TERN_GGUF_U32, TERN_GGUF_I32,
    TERN_GGUF_F32, TERN_GGUF_BOOL, TERN_GGUF_STRING, TERN_GGUF_ARRAY, TERN_GGUF_U64, TERN_GGUF_I64,
    TERN_GGUF_F64, TERN_GGUF_TYPE_COUNT
} tern_gguf_type;

typedef struct {
    const char *key;            /* borrowed from the file, NUL-terminated copy */
    tern_gguf_type type;
    /* scalars: the value; strings: str/len; arrays: elem type, count and the
     * first element (strings in arrays: walk with tern_gguf_array_str) */
    union { uint64_t u; int64_t i; double f; } v;
    const char *str;            /* borrowed (points into the mapping), len bytes */
    uint64_t len;
    tern_gguf_type elem;
    uint64_t count;
    const uint8_t *data;
    uint64_t offset;            /* file offset of the value, for messages */
} tern_gguf_kv;

typedef struct {
    const char *name;           /* owned by the file object, NUL-terminated */
    tern_dtype dtype;           /* F32, F16, BF16 or a GGUF block format */
    int n_dims;
    int64_t ne[4];
    const void *data;           /* into the mapping */
    size_t nbytes;
    uint64_t info_offset;       /* file offset of the tensor's info record */
} tern_gguf_tensor;

typedef struct tern_gguf tern_gguf;

/* Validates a file image already in memory (data borrowed: it must outlive
 * the object; name is used in messages). *out owned (tern_gguf_close). */
tern_status tern_gguf_open_memory(const void *data, size_t size, const char *name, tern_gguf **out);
/* Opens and validates path; *out owned (tern_gguf_close). */
tern_status tern_gguf_open(const char *path, tern_gguf **out);
void tern_gguf_close(tern_gguf *g);

const char *tern_gguf_path(const tern_gguf *g);
int tern_gguf_n_kv(const tern_gguf *g);
const tern_gguf_kv *tern_gguf_kv_at(const tern_gguf *g, int i);
const tern_gguf_kv *tern_gguf_find_kv(const tern_gguf *g, const char *key);
int tern_gguf_n_tensors(const tern_gguf *g);
const tern_gguf_tensor *tern_gguf_tensor_at(const tern_gguf *g, int i);
const tern_gguf_tensor *tern_gguf_find_tensor(const tern_gguf *g, const char *name);

/* Typed metadata: TERN_OK and *out, or TERN_E_FORMAT naming the key (absent
 * or of another type; integers of any width are accepted where they fit). */
tern_status tern_gguf_get_int(const tern_gguf *g, const char *key, int64_t *out);
tern_status tern_gguf_get_float(const tern_gguf *g, const char *key, double *out);
/* *s borrowed into the mapping (not NUL-terminated), *len bytes. */
tern_status tern_gguf_get_str(const tern_gguf *g, const char *key, const char **s, uint64_t *len);

/* Walks the strings of a string array: *pos starts at 0 (a cursor into
 * kv->data); returns each string in turn. */
void tern_gguf_array_str(const tern_gguf_kv *kv, uint64_t *pos, const char **s, uint64_t *len);
/* Element i of a numeric array as int64 / double. */
int64_t tern_gguf_array_int(const tern_gguf_kv *kv, uint64_t i);
double tern_gguf_array_float(const tern_gguf_kv *kv, uint64_t i);

#endif
