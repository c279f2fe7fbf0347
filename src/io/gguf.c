#include "io/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Limits far above any real checkpoint and far below what would exhaust
 * memory: counts beyond them are reported as corrupt before allocating. */
enum { MAX_TENSORS = 1 << 20, MAX_KV = 1 << 20, MAX_KEY = 65536, MAX_DIMS = 4 };

struct tern_gguf {
    char *path;
    const uint8_t *map;
    size_t size;
    tern_gguf_kv *kv;
    int n_kv;
    tern_gguf_tensor *t;
    int n_t;
    char *names;            /* NUL-terminated keys and tensor names, owned */
    int mapped;             /* map is this object's mapping (else borrowed memory) */
};

typedef struct {
    const tern_gguf *g;
    uint64_t off;
} rd;

static tern_status short_read(const rd *r, uint64_t need, const char *what)
{
    return tern_error(TERN_E_FORMAT, "%s: truncated at byte %llu: %s needs %llu bytes, %llu remain",
                      r->g->path, (unsigned long long)r->off, what, (unsigned long long)need,
                      (unsigned long long)(r->g->size - r->off));
}

static tern_status take(rd *r, uint64_t n, const char *what, const uint8_t **p)
{
    if (n > r->g->size - r->off) return short_read(r, n, what);
    *p = r->g->map + r->off;
    r->off += n;
    return TERN_OK;
}

static tern_status u32_at(rd *r, const char *what, uint32_t *v)
{
    const uint8_t *p = NULL;
    tern_status st = take(r, 4, what, &p);
    if (!st) memcpy(v, p, 4);
    return st;
}

static tern_status u64_at(rd *r, const char *what, uint64_t *v)
{
    const uint8_t *p = NULL;
    tern_status st = take(r, 8, what, &p);
    if (!st) memcpy(v, p, 8);
    return st;
}

static tern_status str_at(rd *r, const char *what, const char **s, uint64_t *len)
{
    uint64_t at = r->off;
    tern_status st = u64_at(r, what, len);
    if (st) return st;
    if (*len > r->g->size - r->off)
        return tern_error(TERN_E_FORMAT, "%s: byte %llu: %s of %llu bytes runs past the end of the file "
                          "(%llu bytes remain)", r->g->path, (unsigned long long)at, what,
                          (unsigned long long)*len, (unsigned long long)(r->g->size - r->off));
    const uint8_t *p;
    take(r, *len, what, &p);
    *s = (const char *)p;
    return TERN_OK;
}

static const int scalar_size[TERN_GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

/* Reads one value of type ty into kv (arrays: validated, elements left in place). */
static tern_status value_at(rd *r, const char *key, uint32_t ty, tern_gguf_kv *kv)
{
    kv->offset = r->off;
    if (ty >= TERN_GGUF_TYPE_COUNT)
        return tern_error(TERN_E_FORMAT, "%s: byte %llu: metadata '%s' has unknown value type %u",
                          r->g->path, (unsigned long long)(r->off - 4), key, ty);
    kv->type = (tern_gguf_type)ty;
    const uint8_t *p;
    tern_status st;
    if (ty == TERN_GGUF_STRING) return str_at(r, key, &kv->str, &kv->len);
    if (ty != TERN_GGUF_ARRAY) {
        if ((st = take(r, (uint64_t)scalar_size[ty], key, &p))) return st;
        uint64_t u = 0;
        memcpy(&u, p, (size_t)scalar_size[ty]);
        switch (ty) {
        case TERN_GGUF_I8: kv->v.i = (int8_t)u; break;
        case TERN_GGUF_I16: kv->v.i = (int16_t)u; break;
        case TERN_GGUF_I32: kv->v.i = (int32_t)u; break;
        case TERN_GGUF_I64: kv->v.i = (int64_t)u; break;
        case TERN_GGUF_F32: { float f; memcpy(&f, p, 4); kv->v.f = f; break; }
        case TERN_GGUF_F64: memcpy(&kv->v.f, p, 8); break;
        default: kv->v.u = u; break;
        }
        return TERN_OK;
    }
    uint32_t et;
    if ((st = u32_at(r, key, &et)) || (st = u64_at(r, key, &kv->count))) return st;
    if (et >= TERN_GGUF_TYPE_COUNT || et == TERN_GGUF_ARRAY)
        return tern_error(TERN_E_FORMAT, "%s: byte %llu: metadata array '%s' has element type %u "
                          "(arrays of arrays and unknown types are not supported)", r->g->path,
                          (unsigned long long)(r->off - 12), key, et);
    kv->elem = (tern_gguf_type)et;
    kv->data = r->g->map + r->off;
    if (et != TERN_GGUF_STRING) {
        uint64_t es = (uint64_t)scalar_size[et];
        if (kv->count > (r->g->size - r->off) / es)
            return tern_error(TERN_E_FORMAT, "%s: byte %llu: metadata array '%s' claims %llu elements, "
                              "more than the %llu bytes left hold", r->g->path,
                              (unsigned long long)(r->off - 8), key, (unsigned long long)kv->count,
                              (unsigned long long)(r->g->size - r->off));
        r->off += kv->count * es;
        return TERN_OK;
    }
    /* each string takes at least its 8-byte length */
    if (kv->count > (r->g->size - r->off) / 8)
        return tern_error(TERN_E_FORMAT, "%s: byte %llu: metadata array '%s' claims %llu strings, "
                          "more than the %llu bytes left hold", r->g->path, (unsigned long long)(r->off - 8),
                          key, (unsigned long long)kv->count, (unsigned long long)(r->g->size - r->off));
    for (uint64_t i = 0; i < kv->count; i++) {
        const char *s;
        uint64_t len;
        if ((st = str_at(r, key, &s, &len))) return st;
    }
    return TERN_OK;
}

static tern_dtype ggml_type(uint32_t t, int *ok)
{
    *ok = 1;
    switch (t) {
    case 0: return TERN_DT_F32;
    case 1: return TERN_DT_F16;
    case 2: return TERN_DT_Q4_0;
    case 8: return TERN_DT_Q8_0;
    case 12: return TERN_DT_Q4_K;
    case 13: return TERN_DT_Q5_K;
    case 14: return TERN_DT_Q6_K;
    case 30: return TERN_DT_BF16;
    default: *ok = 0; return TERN_DT_F32;
    }
}

static const char *ggml_type_name(uint32_t t)
{
    static const char *names[] = {"F32", "F16", "Q4_0", "Q4_1", "Q4_2", "Q4_3", "Q5_0", "Q5_1", "Q8_0",
                                  "Q8_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS",
                                  "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS",
                                  "I8", "I16", "I32", "I64", "F64", "IQ1_M", "BF16"};
    return t < sizeof names / sizeof names[0] ? names[t] : "unknown";
}

typedef struct { uint64_t b, e; int i; } span;

static int span_cmp(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return x->b < y->b ? -1 : x->b > y->b;
}

static tern_status parse(tern_gguf *g)
{
    rd r = {g, 0};
    const uint8_t *p;
    tern_status st;
    if (g->size < 24 || memcmp(g->map, "GGUF", 4))
        return tern_error(TERN_E_FORMAT, "%s: byte 0: not a GGUF file (expected the magic \"GGUF\" and a "
                          "24-byte header, file is %zu bytes)", g->path, g->size);
    take(&r, 4, "magic", &p);
    uint32_t version;
    uint64_t n_t, n_kv;
    u32_at(&r, "version", &version);
    if (version != 2 && version != 3)
        return tern_error(TERN_E_UNSUPPORTED, "%s: byte 4: GGUF version %u is not supported (2, 3)", g->path,
                          version);
    u64_at(&r, "tensor count", &n_t);
    u64_at(&r, "metadata count", &n_kv);
    if (n_t > MAX_TENSORS || n_t > g->size / 24)
        return tern_error(TERN_E_FORMAT, "%s: byte 8: tensor count %llu is absurd for a %zu-byte file",
                          g->path, (unsigned long long)n_t, g->size);
    if (n_kv > MAX_KV || n_kv > g->size / 12)
        return tern_error(TERN_E_FORMAT, "%s: byte 16: metadata count %llu is absurd for a %zu-byte file",
                          g->path, (unsigned long long)n_kv, g->size);
    g->kv = calloc(n_kv ? n_kv : 1, sizeof *g->kv);
    g->t = calloc(n_t ? n_t : 1, sizeof *g->t);
    /* keys and names are copied NUL-terminated; their total is bounded by the file */
    g->names = malloc(g->size + 1);
    if (!g->kv || !g->t || !g->names) return tern_error(TERN_E_NOMEM, "%s: out of memory", g->path);
    size_t names_used = 0;
    uint64_t alignment = 32;
    for (uint64_t i = 0; i < n_kv; i++) {
        const char *k;
        uint64_t kl;
        uint64_t at = r.off;
        if ((st = str_at(&r, "metadata key", &k, &kl))) return st;
        if (kl == 0 || kl > MAX_KEY || memchr(k, 0, kl))
            return tern_error(TERN_E_FORMAT, "%s: byte %llu: metadata key of %llu bytes is not a valid key",
                              g->path, (unsigned long long)at, (unsigned long long)kl);
        char *key = g->names + names_used;
        memcpy(key, k, kl);
        key[kl] = 0;
        names_used += kl + 1;
        uint32_t ty;
        if ((st = u32_at(&r, key, &ty))) return st;
        tern_gguf_kv *kv = &g->kv[g->n_kv];
        kv->key = key;
        if ((st = value_at(&r, key, ty, kv))) return st;
        g->n_kv++;
        if (!strcmp(key, "general.alignment")) {
            if (kv->type != TERN_GGUF_U32 || kv->v.u == 0 || (kv->v.u & (kv->v.u - 1)) || kv->v.u > 65536)
                return tern_error(TERN_E_FORMAT, "%s: byte %llu: general.alignment must be a u32 power of "
                                  "two <= 65536", g->path, (unsigned long long)kv->offset);
            alignment = kv->v.u;
        }
    }
    for (uint64_t i = 0; i < n_t; i++) {
        tern_gguf_tensor *t = &g->t[i];
        t->info_offset = r.off;
        const char *nm;
        uint64_t nl;
        if ((st = str_at(&r, "tensor name", &nm, &nl))) return st;
        if (nl == 0 || nl > MAX_KEY || memchr(nm, 0, nl))
            return tern_error(TERN_E_FORMAT, "%s: byte %llu: tensor name of %llu bytes is not valid", g->path,
                              (unsigned long long)t->info_offset, (unsigned long long)nl);
        char *name = g->names + names_used;
        memcpy(name, nm, nl);
        name[nl] = 0;
        names_used += nl + 1;
        t->name = name;
        uint32_t nd, ty;
        if ((st = u32_at(&r, name, &nd))) return st;
        if (nd < 1 || nd > MAX_DIMS)
            return tern_error(TERN_E_FORMAT, "%s: byte %llu: tensor '%s' has %u dimensions (expected 1..4)",
                              g->path, (unsigned long long)(r.off - 4), name, nd);
        t->n_dims = (int)nd;
        uint64_t count = 1;
        for (uint32_t d = 0; d < nd; d++) {
            uint64_t ne;
            if ((st = u64_at(&r, name, &ne))) return st;
            if (ne == 0 || ne > (1ull << 40) || count > (1ull << 40) / ne)
                return tern_error(TERN_E_FORMAT, "%s: byte %llu: tensor '%s' dimension %u is %llu (absurd)",
                                  g->path, (unsigned long long)(r.off - 8), name, d, (unsigned long long)ne);
            t->ne[d] = (int64_t)ne;
            count *= ne;
        }
        for (int d = (int)nd; d < 4; d++) t->ne[d] = 1;
        if ((st = u32_at(&r, name, &ty))) return st;
        int ok;
        t->dtype = ggml_type(ty, &ok);
        if (!ok)
            return tern_error(TERN_E_UNSUPPORTED, "%s: byte %llu: tensor '%s' has type %s (%u), not supported "
                              "(F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K)", g->path,
                              (unsigned long long)(r.off - 4), name, ggml_type_name(ty), ty);
        int be, bb;
        tern_dtype_block(t->dtype, &be, &bb);
        if (t->ne[0] % be)
            return tern_error(TERN_E_FORMAT, "%s: byte %llu: tensor '%s' rows of %lld elements are not whole "
                              "%s blocks of %d", g->path, (unsigned long long)t->info_offset, name,
                              (long long)t->ne[0], tern_dtype_name(t->dtype), be);
        t->nbytes = (size_t)(count / (uint64_t)be * (uint64_t)bb);
        uint64_t off;
        if ((st = u64_at(&r, name, &off))) return st;
        if (off % alignment)
            return tern_error(TERN_E_FORMAT, "%s: byte %llu: tensor '%s' offset %llu is not a multiple of the "
                              "alignment %llu", g->path, (unsigned long long)(r.off - 8), name,
                              (unsigned long long)off, (unsigned long long)alignment);
        t->data = (const void *)(uintptr_t)off;     /* made absolute below */
        g->n_t++;
    }
    uint64_t data_start = (r.off + alignment - 1) / alignment * alignment;
    if (data_start > g->size)
        return tern_error(TERN_E_FORMAT, "%s: byte %llu: the data section starts past the end of the file",
                          g->path, (unsigned long long)data_start);
    uint64_t data_len = g->size - data_start;
    span *sp = malloc((size_t)(n_t ? n_t : 1) * sizeof *sp);
    if (!sp) return tern_error(TERN_E_NOMEM, "%s: out of memory", g->path);
    for (int i = 0; i < g->n_t; i++) {
        tern_gguf_tensor *t = &g->t[i];
        uint64_t off = (uint64_t)(uintptr_t)t->data;
        if (off > data_len || t->nbytes > data_len - off) {
            free(sp);
            return tern_error(TERN_E_FORMAT, "%s: byte %llu: tensor '%s' data [%llu, %llu) of the data section "
                              "runs past the end of the file (the section has %llu bytes: truncated?)", g->path,
                              (unsigned long long)t->info_offset, t->name, (unsigned long long)off,
                              (unsigned long long)(off + t->nbytes), (unsigned long long)data_len);
        }
        t->data = g->map + data_start + off;
        sp[i] = (span){off, off + t->nbytes, i};
    }
    qsort(sp, (size_t)g->n_t, sizeof *sp, span_cmp);
    for (int i = 1; i < g->n_t; i++)
        if (sp[i].b < sp[i - 1].e) {
            tern_status e = tern_error(TERN_E_FORMAT, "%s: byte %llu: tensors '%s' and '%s' overlap", g->path,
                                       (unsigned long long)g->t[sp[i].i].info_offset, g->t[sp[i - 1].i].name,
                                       g->t[sp[i].i].name);
            free(sp);
            return e;
        }
    free(sp);
    for (int i = 0; i < g->n_t; i++)
        for (int j = 0; j < i && g->n_t <= 4096; j++)
            if (!strcmp(g->t[i].name, g->t[j].name))
                return tern_error(TERN_E_FORMAT, "%s: byte %llu: tensor '%s' appears twice", g->path,
                                  (unsigned long long)g->t[i].info_offset, g->t[i].name);
    return TERN_OK;
}

tern_status tern_gguf_open(const char *path, tern_gguf **out)
{
    *out = NULL;
    tern_gguf *g = calloc(1, sizeof *g);
    if (!g || !(g->path = strdup(path))) {
        free(g);
        return tern_error(TERN_E_NOMEM, "out of memory");
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        tern_status st = tern_error(TERN_E_IO, "%s: cannot open: %s", path, strerror(errno));
        tern_gguf_close(g);
        return st;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        tern_gguf_close(g);
        return tern_error(TERN_E_IO, "%s: not a regular file", path);
    }
    g->size = (size_t)sb.st_size;
    if (g->size) {
        void *m = mmap(NULL, g->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            close(fd);
            tern_status st = tern_error(TERN_E_IO, "%s: mmap failed: %s", path, strerror(errno));
            tern_gguf_close(g);
            return st;
        }
        g->map = m;
        g->mapped = 1;
    }
    close(fd);
    tern_status st = parse(g);
    if (st) {
        tern_gguf_close(g);
        return st;
    }
    *out = g;
    return TERN_OK;
}

tern_status tern_gguf_open_memory(const void *data, size_t size, const char *name, tern_gguf **out)
{
    *out = NULL;
    tern_gguf *g = calloc(1, sizeof *g);
    if (!g || !(g->path = strdup(name))) {
        free(g);
        return tern_error(TERN_E_NOMEM, "out of memory");
    }
    g->map = data;
    g->size = size;
    tern_status st = parse(g);
    if (st) {
        tern_gguf_close(g);
        return st;
    }
    *out = g;
    return TERN_OK;
}

void tern_gguf_close(tern_gguf *g)
{
    if (!g) return;
    if (g->map && g->mapped) munmap((void *)g->map, g->size);
    free(g->kv);
    free(g->t);
    free(g->names);
    free(g->path);
    free(g);
}

const char *tern_gguf_path(const tern_gguf *g) { return g->path; }
int tern_gguf_n_kv(const tern_gguf *g) { return g->n_kv; }
const tern_gguf_kv *tern_gguf_kv_at(const tern_gguf *g, int i) { return &g->kv[i]; }
int tern_gguf_n_tensors(const tern_gguf *g) { return g->n_t; }
const tern_gguf_tensor *tern_gguf_tensor_at(const tern_gguf *g, int i) { return &g->t[i]; }

const tern_gguf_kv *tern_gguf_find_kv(const tern_gguf *g, const char *key)
{
    for (int i = 0; i < g->n_kv; i++)
        if (!strcmp(g->kv[i].key, key)) return &g->kv[i];
    return NULL;
}

const tern_gguf_tensor *tern_gguf_find_tensor(const tern_gguf *g, const char *name)
{
    for (int i = 0; i < g->n_t; i++)
        if (!strcmp(g->t[i].name, name)) return &g->t[i];
    return NULL;
}

tern_status tern_gguf_get_int(const tern_gguf *g, const char *key, int64_t *out)
{
    const tern_gguf_kv *kv = tern_gguf_find_kv(g, key);
    if (!kv) return tern_error(TERN_E_FORMAT, "%s: metadata '%s' is missing", g->path, key);
    switch (kv->type) {
    case TERN_GGUF_U8: case TERN_GGUF_U16: case TERN_GGUF_U32: case TERN_GGUF_BOOL:
        *out = (int64_t)kv->v.u;
        return TERN_OK;
    case TERN_GGUF_U64:
        if (kv->v.u > (uint64_t)INT64_MAX) break;
        *out = (int64_t)kv->v.u;
        return TERN_OK;
    case TERN_GGUF_I8: case TERN_GGUF_I16: case TERN_GGUF_I32: case TERN_GGUF_I64:
        *out = kv->v.i;
        return TERN_OK;
    default: break;
    }
    return tern_error(TERN_E_FORMAT, "%s: byte %llu: metadata '%s' is not an integer", g->path,
                      (unsigned long long)kv->offset, key);
}

tern_status tern_gguf_get_float(const tern_gguf *g, const char *key, double *out)
{
    const tern_gguf_kv *kv = tern_gguf_find_kv(g, key);
    if (!kv) return tern_error(TERN_E_FORMAT, "%s: metadata '%s' is missing", g->path, key);
    if (kv->type == TERN_GGUF_F32 || kv->type == TERN_GGUF_F64) {
        *out = kv->v.f;
        return TERN_OK;
    }
    int64_t i;
    if (tern_gguf_get_int(g, key, &i) == TERN_OK) {
        *out = (double)i;
        return TERN_OK;
    }
    return tern_error(TERN_E_FORMAT, "%s: byte %llu: metadata '%s' is not a number", g->path,
                      (unsigned long long)kv->offset, key);
}

tern_status tern_gguf_get_str(const tern_gguf *g, const char *key, const char **s, uint64_t *len)
{
    const tern_gguf_kv *kv = tern_gguf_find_kv(g, key);
    if (!kv) return tern_error(TERN_E_FORMAT, "%s: metadata '%s' is missing", g->path, key);
    if (kv->type != TERN_GGUF_STRING)
        return tern_error(TERN_E_FORMAT, "%s: byte %llu: metadata '%s' is not a string", g->path,
                          (unsigned long long)kv->offset, key);
    *s = kv->str;
    *len = kv->len;
    return TERN_OK;
}

void tern_gguf_array_str(const tern_gguf_kv *kv, uint64_t *pos, const char **s, uint64_t *len)
{
    memcpy(len, kv->data + *pos, 8);
    *s = (const char *)kv->data + *pos + 8;
    *pos += 8 + *len;
}

static uint64_t raw_elem(const tern_gguf_kv *kv, uint64_t i)
{
    uint64_t u = 0;
    int es = scalar_size[kv->elem];
    memcpy(&u, kv->data + i * (uint64_t)es, (size_t)es);
    return u;
}

int64_t tern_gguf_array_int(const tern_gguf_kv *kv, uint64_t i)
{
    uint64_t u = raw_elem(kv, i);
    switch (kv->elem) {
    case TERN_GGUF_I8: return (int8_t)u;
    case TERN_GGUF_I16: return (int16_t)u;
    case TERN_GGUF_I32: return (int32_t)u;
    case TERN_GGUF_F32: case TERN_GGUF_F64: return 0;    /* not an integer array */
    default: return (int64_t)u;
    }
}

double tern_gguf_array_float(const tern_gguf_kv *kv, uint64_t i)
{
    uint64_t u = raw_elem(kv, i);
    if (kv->elem == TERN_GGUF_F32) { float f; uint32_t w = (uint32_t)u; memcpy(&f, &w, 4); return f; }
    if (kv->elem == TERN_GGUF_F64) { double f; memcpy(&f, &u, 8); return f; }
    return (double)tern_gguf_array_int(kv, i);
}
