/* Tool-call router and parsers (see toolcall.h). */
#include "text/toolcall.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "text/think.h"

static const char TOOL_OPEN[] = "<tool_call>";
static const char TOOL_CLOSE[] = "</tool_call>";
static const char FUNC_OPEN[] = "<function=";
static const char FUNC_CLOSE[] = "</function>";
static const char PARAM_OPEN[] = "<parameter=";
static const char PARAM_CLOSE[] = "</parameter>";

void tern_tools_init(tern_tools *t)
{
    t->capturing = 0;
    tern_buf_init(&t->pending);
    tern_buf_init(&t->markup);
}

void tern_tools_free(tern_tools *t)
{
    tern_buf_free(&t->pending);
    tern_buf_free(&t->markup);
}

static const char *last_of(const char *s, const char *lit)
{
    const char *last = NULL;
    for (const char *p = s; (p = strstr(p, lit)); p++) last = p;
    return last;
}

int tern_tools_seed(tern_tools *t, const char *prefill)
{
    if (!prefill) return 0;
    const char *open = last_of(prefill, TOOL_OPEN);
    const char *close = TOOL_CLOSE;
    if (!open) { open = last_of(prefill, FUNC_OPEN); close = FUNC_CLOSE; }
    if (!open || strstr(open, close)) return 0;
    t->capturing = 1;
    return tern_buf_puts(&t->markup, open);
}

int tern_tools_push(tern_tools *t, const char *text, size_t len, tern_buf *content)
{
    if (t->capturing) return tern_buf_append(&t->markup, text, len);
    if (tern_buf_append(&t->pending, text, len)) return -1;
    const char *p = tern_buf_str(&t->pending);
    size_t n = t->pending.len;
    const char *a = memmem(p, n, TOOL_OPEN, sizeof TOOL_OPEN - 1);
    const char *b = memmem(p, n, FUNC_OPEN, sizeof FUNC_OPEN - 1);
    const char *hit = a && (!b || a < b) ? a : b;
    if (hit) {
        if (tern_buf_append(content, p, (size_t)(hit - p))) return -1;
        if (tern_buf_append(&t->markup, hit, n - (size_t)(hit - p))) return -1;
        tern_buf_clear(&t->pending);
        t->capturing = 1;
        return 0;
    }
    size_t k1 = tern_partial_suffix(p, n, TOOL_OPEN), k2 = tern_partial_suffix(p, n, FUNC_OPEN);
    size_t keep = k1 > k2 ? k1 : k2;
    if (tern_buf_append(content, p, n - keep)) return -1;
    tern_buf_consume(&t->pending, n - keep);
    return 0;
}

int tern_tools_finish(tern_tools *t, const json_t *tools, tern_buf *content, json_t **calls)
{
    *calls = NULL;
    if (tern_buf_append(content, tern_buf_str(&t->pending), t->pending.len)) return -1;
    tern_buf_clear(&t->pending);
    if (!t->capturing) return 0;
    *calls = tern_tools_parse(tern_buf_str(&t->markup), t->markup.len, tools);
    if (!*calls && tern_buf_append(content, tern_buf_str(&t->markup), t->markup.len)) return -1;
    tern_buf_clear(&t->markup);
    return 0;
}

void tern_random_id(char *out, const char *prefix, int n_hex)
{
    unsigned char rnd[32];
    if (n_hex > 64) n_hex = 64;
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        /* No entropy source: fall back to a clock-derived value (ids need only be unique-ish). */
        unsigned long long x = (unsigned long long)time(NULL) ^ (unsigned long long)clock() * 0x9e3779b97f4a7c15ULL;
        for (size_t i = 0; i < sizeof rnd; i++) { x ^= x >> 13; x ^= x << 7; x ^= x >> 17; rnd[i] = (unsigned char)x; }
    }
    size_t pl = strlen(prefix);
    memcpy(out, prefix, pl);
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < n_hex; i++) out[pl + (size_t)i] = hex[(rnd[i / 2] >> ((i & 1) ? 0 : 4)) & 15];
    out[pl + (size_t)n_hex] = '\0';
}

/* ---- parsing ---- */

typedef struct { const char *p; size_t n; } span;

static int starts(span s, const char *lit) { size_t l = strlen(lit); return s.n >= l && !memcmp(s.p, lit, l); }
static span skip(span s, size_t k) { s.p += k; s.n -= k; return s; }
static span trim(span s)
{
    while (s.n && (s.p[0] == ' ' || s.p[0] == '\n' || s.p[0] == '\t' || s.p[0] == '\r')) s = skip(s, 1);
    while (s.n && (s.p[s.n - 1] == ' ' || s.p[s.n - 1] == '\n' || s.p[s.n - 1] == '\t' || s.p[s.n - 1] == '\r')) s.n--;
    return s;
}
static const char *find(span s, const char *lit) { return memmem(s.p, s.n, lit, strlen(lit)); }

/* The declared JSON-schema type of a parameter, or NULL (borrowed). */
static const char *param_type(const json_t *tools, const char *fn, const char *param)
{
    size_t i;
    const json_t *tool;
    json_array_foreach((json_t *)tools, i, tool) {
        const json_t *f = json_object_get(tool, "function");
        if (!f) f = tool;
        const char *name = json_string_value(json_object_get(f, "name"));
        if (!name || strcmp(name, fn)) continue;
        const json_t *params = json_object_get(f, "parameters");
        if (!params) params = json_object_get(f, "input_schema");
        const json_t *prop = json_object_get(json_object_get(params, "properties"), param);
        const json_t *type = json_object_get(prop, "type");
        if (json_is_string(type)) return json_string_value(type);
        if (json_is_array(type)) {
            size_t j;
            const json_t *ty;
            json_array_foreach((json_t *)type, j, ty)
                if (json_is_string(ty) && strcmp(json_string_value(ty), "null")) return json_string_value(ty);
        }
        return NULL;
    }
    return NULL;
}

static json_t *typed_value(span v, const char *type)
{
    if (type && strcmp(type, "string")) {
        json_t *j = json_loadb(v.p, v.n, JSON_DECODE_ANY, NULL);
        if (j) {
            int ok = (!strcmp(type, "integer") && json_is_integer(j)) ||
                     (!strcmp(type, "number") && json_is_number(j)) ||
                     (!strcmp(type, "boolean") && json_is_boolean(j)) ||
                     (!strcmp(type, "object") && json_is_object(j)) ||
                     (!strcmp(type, "array") && json_is_array(j)) ||
                     (!strcmp(type, "null") && json_is_null(j));
            if (ok) return j;
            json_decref(j);
        }
    }
    return json_stringn(v.p, v.n);
}

static json_t *make_call(const char *name, size_t name_len, json_t *args /* stolen */)
{
    char *a = json_is_string(args) ? strdup(json_string_value(args))
                                   : json_dumps(args, JSON_ENCODE_ANY);
    json_decref(args);
    if (!a) return NULL;
    char id[32];
    tern_random_id(id, "call_", 8);
    json_t *fn = json_pack("{s:s%,s:s}", "name", name, name_len, "arguments", a);
    free(a);
    if (!fn) return NULL;
    return json_pack("{s:o,s:s,s:s}", "function", fn, "type", "function", "id", id);
}

/* <function=NAME>(<parameter=P>V</parameter>)*</function>; s starts at "<function=".
 * Appends one call to calls and returns the rest after the block, or sets *ok = 0. */
static span parse_function(span s, const json_t *tools, json_t *calls, int *ok)
{
    s = skip(s, sizeof FUNC_OPEN - 1);
    const char *gt = memchr(s.p, '>', s.n);
    if (!gt) { *ok = 0; return s; }
    span name = trim((span){s.p, (size_t)(gt - s.p)});
    if (!name.n || name.n > 256) { *ok = 0; return s; }
    s = skip(s, (size_t)(gt - s.p) + 1);
    const char *end = find(s, FUNC_CLOSE);
    span body = {s.p, end ? (size_t)(end - s.p) : s.n};
    span rest = end ? skip(s, (size_t)(end - s.p) + sizeof FUNC_CLOSE - 1) : skip(s, s.n);
    char fname[260];
    memcpy(fname, name.p, name.n);
    fname[name.n] = '\0';
    json_t *args = json_object();
    for (;;) {
        body = trim(body);
        if (!body.n) break;
        if (!starts(body, PARAM_OPEN)) { *ok = 0; break; }
        body = skip(body, sizeof PARAM_OPEN - 1);
        const char *pg = memchr(body.p, '>', body.n);
        if (!pg) { *ok = 0; break; }
        span pname = trim((span){body.p, (size_t)(pg - body.p)});
        body = skip(body, (size_t)(pg - body.p) + 1);
        const char *pe = find(body, PARAM_CLOSE);
        const char *next = find(body, PARAM_OPEN);
        size_t vlen = pe ? (size_t)(pe - body.p) : body.n;
        if (next && (size_t)(next - body.p) < vlen) { pe = NULL; vlen = (size_t)(next - body.p); }
        span v = {body.p, vlen};
        if (v.n && v.p[0] == '\n') v = skip(v, 1);
        if (v.n && v.p[v.n - 1] == '\n') v.n--;
        body = skip(body, vlen + (pe ? sizeof PARAM_CLOSE - 1 : 0));
        if (!pname.n || pname.n > 256) { *ok = 0; break; }
        char pbuf[260];
        memcpy(pbuf, pname.p, pname.n);
        pbuf[pname.n] = '\0';
        json_t *val = typed_value(v, tools ? param_type(tools, fname, pbuf) : NULL);
        if (!val || json_object_set_new(args, pbuf, val)) { *ok = 0; break; }
    }
    if (!*ok) { json_decref(args); return rest; }
    json_t *call = make_call(fname, name.n, args);
    if (!call || json_array_append_new(calls, call)) *ok = 0;
    return rest;
}

static int parse_json_call(span body, json_t *calls)
{
    json_t *j = json_loadb(body.p, body.n, 0, NULL);
    if (!j) return 0;
    const char *name = json_string_value(json_object_get(j, "name"));
    json_t *args = json_object_get(j, "arguments");
    if (!args) args = json_object_get(j, "parameters");
    if (!args) args = json_object_get(j, "args");
    int ok = name && (!args || json_is_object(args) || json_is_string(args));
    if (ok) {
        json_t *call = make_call(name, strlen(name), args ? json_incref(args) : json_object());
        ok = call && !json_array_append_new(calls, call);
    }
    json_decref(j);
    return ok;
}

json_t *tern_tools_parse(const char *markup, size_t len, const json_t *tools)
{
    json_t *calls = json_array();
    if (!calls) return NULL;
    span s = {markup, len};
    int ok = 1;
    while (ok) {
        s = trim(s);
        if (!s.n) break;
        if (starts(s, TOOL_OPEN)) {
            s = skip(s, sizeof TOOL_OPEN - 1);
            const char *end = find(s, TOOL_CLOSE);
            span body = trim((span){s.p, end ? (size_t)(end - s.p) : s.n});
            s = end ? skip(s, (size_t)(end - s.p) + sizeof TOOL_CLOSE - 1) : skip(s, s.n);
            if (starts(body, "{")) {
                ok = parse_json_call(body, calls);
            } else if (starts(body, FUNC_OPEN)) {
                while (ok && body.n) {
                    body = parse_function(body, tools, calls, &ok);
                    body = trim(body);
                    if (body.n && !starts(body, FUNC_OPEN)) ok = 0;
                }
            } else {
                ok = 0;
            }
        } else if (starts(s, FUNC_OPEN)) {
            s = parse_function(s, tools, calls, &ok);
        } else {
            ok = 0;
        }
    }
    if (!ok || json_array_size(calls) == 0) { json_decref(calls); return NULL; }
    return calls;
}
