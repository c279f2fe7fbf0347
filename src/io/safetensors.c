#include "io/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The header of a real checkpoint is a few MB at most; refuse absurd sizes
 * before allocating for them. */
enum { MAX_HEADER = 256 << 20, MAX_SHARDS = 4096 };

typedef struct {
    char *path;
    void *map;      /* owned mapping, or borrowed bytes when !mapped */
    size_t size;
    int mapped;
} shard;

struct tern_tensor_set {
    shard *shards;
    int n_shards;
    tern_tensor *tensors;
    char **names;
    int n, cap;
};

static tern_status add_tensor(tern_tensor_set *s, const tern_tensor *t)
{
    if (s->n == s->cap) {
        int cap = s->cap ? s->cap * 2 : 64;
        tern_tensor *nt = realloc(s->tensors, (size_t)cap * sizeof *nt);
        if (!nt) return tern_error(TERN_E_NOMEM, "out of memory reading tensor table");
        s->tensors = nt;
        char **nn = realloc(s->names, (size_t)cap * sizeof *nn);
        if (!nn) return tern_error(TERN_E_NOMEM, "out of memory reading tensor table");
        s->names = nn;
        s->cap = cap;
    }
    s->names[s->n] = strdup(t->name);
    if (!s->names[s->n]) return tern_error(TERN_E_NOMEM, "out of memory reading tensor table");
    s->tensors[s->n] = *t;
    s->tensors[s->n].name = s->names[s->n];
    s->n++;
    return TERN_OK;
}

typedef struct { uint64_t begin, end; const char *name; } span;

static int span_cmp(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : 0;
}

static tern_status parse_entry(const char *path, const char *name, json_t *v, const uint8_t *data,
                               uint64_t data_len, const char *file, tern_tensor *t, span *sp)
{
    json_t *jd = json_object_get(v, "dtype"), *js = json_object_get(v, "shape");
    json_t *jo = json_object_get(v, "data_offsets");
    if (!json_is_string(jd) || !json_is_array(js) || !json_is_array(jo) || json_array_size(jo) != 2)
        return tern_error(TERN_E_FORMAT, "%s: tensor '%s': entry needs dtype, shape and data_offsets[2]",
                          path, name);
    memset(t, 0, sizeof *t);
    t->name = name;
    t->file = file;
    if (tern_dtype_parse(json_string_value(jd), &t->dtype) != 0)
        return tern_error(TERN_E_UNSUPPORTED, "%s: tensor '%s': dtype '%s' is not supported", path, name,
                          json_string_value(jd));
    size_t nd = json_array_size(js);
    if (nd > TERN_MAX_DIMS)
        return tern_error(TERN_E_FORMAT, "%s: tensor '%s': %zu dimensions (max %d)", path, name, nd,
                          TERN_MAX_DIMS);
    t->ndim = (int)nd;
    uint64_t count = 1;
    for (size_t i = 0; i < nd; i++) {
        json_t *d = json_array_get(js, i);
        if (!json_is_integer(d) || json_integer_value(d) < 0)
            return tern_error(TERN_E_FORMAT, "%s: tensor '%s': shape[%zu] is not a non-negative integer",
                              path, name, i);
        t->shape[i] = json_integer_value(d);
        if (t->shape[i] && count > UINT64_MAX / (uint64_t)t->shape[i])
            return tern_error(TERN_E_FORMAT, "%s: tensor '%s': shape overflows", path, name);
        count *= (uint64_t)t->shape[i];
    }
    json_t *b = json_array_get(jo, 0), *e = json_array_get(jo, 1);
    if (!json_is_integer(b) || !json_is_integer(e) || json_integer_value(b) < 0 ||
        json_integer_value(e) < json_integer_value(b))
        return tern_error(TERN_E_FORMAT, "%s: tensor '%s': data_offsets must be integers 0 <= begin <= end",
                          path, name);
    uint64_t begin = (uint64_t)json_integer_value(b), end = (uint64_t)json_integer_value(e);
    size_t esz = tern_dtype_size(t->dtype);
    if (count > UINT64_MAX / esz || end - begin != count * esz)
        return tern_error(TERN_E_FORMAT,
                          "%s: tensor '%s': %s shape needs %llu bytes but data_offsets span %llu",
                          path, name, tern_dtype_name(t->dtype), (unsigned long long)(count * esz),
                          (unsigned long long)(end - begin));
    if (end > data_len)
        return tern_error(TERN_E_FORMAT,
                          "%s: tensor '%s': data_offsets end %llu is beyond the data section (%llu bytes)",
                          path, name, (unsigned long long)end, (unsigned long long)data_len);
    t->data = data + begin;
    t->nbytes = (size_t)(end - begin);
    sp->begin = begin;
    sp->end = end;
    sp->name = name;
    return TERN_OK;
}

static tern_status parse_shard(tern_tensor_set *s, shard *sh, const char *path);

/* Maps path and appends its tensors. */
static tern_status load_shard(tern_tensor_set *s, const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return tern_error(TERN_E_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return tern_error(TERN_E_IO, "%s: not a regular file", path);
    }
    size_t size = (size_t)st.st_size;
    if (size < 8) {
        close(fd);
        return tern_error(TERN_E_FORMAT, "%s: file is %zu bytes, too short for a safetensors header", path,
                          size);
    }
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return tern_error(TERN_E_IO, "%s: mmap failed: %s", path, strerror(errno));
    shard *sh = &s->shards[s->n_shards++];
    sh->map = map;
    sh->size = size;
    sh->mapped = 1;
    return parse_shard(s, sh, path);
}

/* Reads the header of a shard whose bytes are sh->map[0, sh->size) and
 * appends its tensors. */
static tern_status parse_shard(tern_tensor_set *s, shard *sh, const char *path)
{
    size_t size = sh->size;
    sh->path = strdup(path);
    if (!sh->path) return tern_error(TERN_E_NOMEM, "out of memory");
    if (size < 8)
        return tern_error(TERN_E_FORMAT, "%s: %zu bytes, too short for a safetensors header", path, size);
    const uint8_t *p = sh->map;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | p[i];
    if (hlen > size - 8)
        return tern_error(TERN_E_FORMAT, "%s: header length %llu is beyond the end of the file (%zu bytes)",
                          path, (unsigned long long)hlen, size);
    if (hlen > MAX_HEADER)
        return tern_error(TERN_E_FORMAT, "%s: header length %llu exceeds the %d-byte limit", path,
                          (unsigned long long)hlen, MAX_HEADER);
    json_error_t jerr;
    json_t *root = json_loadb((const char *)p + 8, (size_t)hlen, 0, &jerr);
    if (!root)
        return tern_error(TERN_E_FORMAT, "%s: header is not valid JSON (%s at byte %d)", path, jerr.text,
                          jerr.position);
    if (!json_is_object(root)) {
        json_decref(root);
        return tern_error(TERN_E_FORMAT, "%s: header is not a JSON object", path);
    }
    const uint8_t *data = p + 8 + hlen;
    uint64_t data_len = size - 8 - hlen;
    size_t nt = json_object_size(root);
    span *spans = calloc(nt ? nt : 1, sizeof *spans);
    if (!spans) { json_decref(root); return tern_error(TERN_E_NOMEM, "out of memory"); }
    int ns = 0;
    tern_status st2 = TERN_OK;
    const char *name;
    json_t *v;
    json_object_foreach(root, name, v) {
        if (!strcmp(name, "__metadata__")) continue;
        if (!json_is_object(v)) {
            st2 = tern_error(TERN_E_FORMAT, "%s: tensor '%s': entry is not an object", path, name);
            break;
        }
        tern_tensor t;
        st2 = parse_entry(path, name, v, data, data_len, sh->path, &t, &spans[ns]);
        if (st2) break;
        if ((st2 = add_tensor(s, &t))) break;
        spans[ns].name = s->names[s->n - 1];
        ns++;
    }
    if (!st2) {
        qsort(spans, (size_t)ns, sizeof *spans, span_cmp);
        for (int i = 1; i < ns; i++)
            if (spans[i].begin < spans[i - 1].end) {
                st2 = tern_error(TERN_E_FORMAT, "%s: tensors '%s' and '%s' overlap in the data section", path,
                                 spans[i - 1].name, spans[i].name);
                break;
            }
    }
    free(spans);
    json_decref(root);
    return st2;
}

static tern_status set_new(int max_shards, tern_tensor_set **out)
{
    tern_tensor_set *s = calloc(1, sizeof *s);
    if (!s) return tern_error(TERN_E_NOMEM, "out of memory");
    s->shards = calloc((size_t)max_shards, sizeof *s->shards);
    if (!s->shards) { free(s); return tern_error(TERN_E_NOMEM, "out of memory"); }
    *out = s;
    return TERN_OK;
}

tern_status tern_tensors_open_file(const char *path, tern_tensor_set **out)
{
    *out = NULL;
    tern_tensor_set *s;
    tern_status st = set_new(1, &s);
    if (st) return st;
    if ((st = load_shard(s, path))) { tern_tensors_close(s); return st; }
    *out = s;
    return TERN_OK;
}

tern_status tern_tensors_open_memory(const void *bytes, size_t len, const char *name, tern_tensor_set **out)
{
    *out = NULL;
    tern_tensor_set *s;
    tern_status st = set_new(1, &s);
    if (st) return st;
    shard *sh = &s->shards[s->n_shards++];
    sh->map = (void *)bytes;
    sh->size = len;
    if ((st = parse_shard(s, sh, name ? name : "(memory)"))) { tern_tensors_close(s); return st; }
    *out = s;
    return TERN_OK;
}

static tern_status open_index(const char *dir, const char *index_path, tern_tensor_set **out)
{
    json_error_t jerr;
    json_t *root = json_load_file(index_path, 0, &jerr);
    if (!root)
        return tern_error(TERN_E_FORMAT, "%s: not valid JSON (%s, line %d)", index_path, jerr.text, jerr.line);
    json_t *wm = json_object_get(root, "weight_map");
    if (!json_is_object(wm)) {
        json_decref(root);
        return tern_error(TERN_E_FORMAT, "%s: missing \"weight_map\" object", index_path);
    }
    /* Collect distinct shard file names in first-seen order. */
    const char **files = calloc(MAX_SHARDS, sizeof *files);
    int nf = 0;
    tern_status st = files ? TERN_OK : tern_error(TERN_E_NOMEM, "out of memory");
    const char *name;
    json_t *v;
    json_object_foreach(wm, name, v) {
        if (st) break;
        const char *f = json_string_value(v);
        if (!f || !*f || strchr(f, '/')) {
            st = tern_error(TERN_E_FORMAT, "%s: weight_map['%s'] is not a file name in the directory",
                            index_path, name);
            break;
        }
        int seen = 0;
        for (int i = 0; i < nf && !seen; i++) seen = !strcmp(files[i], f);
        if (!seen) {
            if (nf == MAX_SHARDS) { st = tern_error(TERN_E_RANGE, "%s: too many shards", index_path); break; }
            files[nf++] = f;
        }
    }
    tern_tensor_set *s = NULL;
    if (!st) st = set_new(nf ? nf : 1, &s);
    for (int i = 0; !st && i < nf; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        st = load_shard(s, path);
    }
    /* Every name in the index must be present in the shard it names. */
    json_object_foreach(wm, name, v) {
        if (st) break;
        const tern_tensor *t = tern_tensors_find(s, name);
        if (!t)
            st = tern_error(TERN_E_FORMAT, "%s: tensor '%s' is listed but missing from %s", index_path, name,
                            json_string_value(v));
    }
    free(files);
    json_decref(root);
    if (st) { tern_tensors_close(s); return st; }
    *out = s;
    return TERN_OK;
}

tern_status tern_tensors_open_dir(const char *dir, tern_tensor_set **out)
{
    *out = NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    if (access(path, F_OK) == 0) return open_index(dir, path, out);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (access(path, F_OK) == 0) return tern_tensors_open_file(path, out);
    return tern_error(TERN_E_IO, "%s: no model.safetensors or model.safetensors.index.json", dir);
}

void tern_tensors_close(tern_tensor_set *s)
{
    if (!s) return;
    for (int i = 0; i < s->n_shards; i++) {
        if (s->shards[i].map && s->shards[i].mapped) munmap(s->shards[i].map, s->shards[i].size);
        free(s->shards[i].path);
    }
    for (int i = 0; i < s->n; i++) free(s->names[i]);
    free(s->names);
    free(s->tensors);
    free(s->shards);
    free(s);
}

const tern_tensor *tern_tensors_find(const tern_tensor_set *s, const char *name)
{
    /* Linear scan: called a few hundred times at load, never per token. */
    for (int i = 0; s && i < s->n; i++)
        if (!strcmp(s->tensors[i].name, name)) return &s->tensors[i];
    return NULL;
}

int tern_tensors_count(const tern_tensor_set *s) { return s->n; }
const tern_tensor *tern_tensors_at(const tern_tensor_set *s, int i) { return &s->tensors[i]; }

tern_status tern_tensors_expect(const tern_tensor_set *s, const char *name, int ndim, const int64_t *dims,
                                const tern_tensor **out)
{
    const tern_tensor *t = tern_tensors_find(s, name);
    *out = NULL;
    if (!t) return tern_error(TERN_E_FORMAT, "missing tensor '%s'", name);
    if (t->dtype != TERN_DT_F32 && t->dtype != TERN_DT_F16 && t->dtype != TERN_DT_BF16)
        return tern_error(TERN_E_UNSUPPORTED, "%s: tensor '%s' has dtype %s; expected F32, F16 or BF16", t->file,
                          name, tern_dtype_name(t->dtype));
    int ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++) ok = t->shape[i] == dims[i];
    if (!ok) {
        char want[128] = "", got[128] = "";
        for (int i = 0; i < ndim; i++)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", i ? "," : "", (long long)dims[i]);
        for (int i = 0; i < t->ndim; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", i ? "," : "", (long long)t->shape[i]);
        return tern_error(TERN_E_FORMAT, "%s: tensor '%s' has shape [%s]; the config implies [%s]", t->file, name,
                          got, want);
    }
    *out = t;
    return TERN_OK;
}
