/* Chat templates: loading from a model directory, parsing once, and rendering
 * with the variables transformers' apply_chat_template passes (messages,
 * tools, documents, add_generation_prompt, the special tokens, extra kwargs). */
#include "tern/chat_template.h"

#include "core/readall.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/jinja_interp.h"

enum { MAX_TOKENS = 32 };

struct tern_chat_template {
    jinja_rt rt;              /* owns the syntax tree */
    jinja_node *root;
    char *source;             /* owned */
    char *token_names[MAX_TOKENS];   /* owned: "bos_token", "eos_token", ... */
    char *tokens[MAX_TOKENS];        /* owned values of those names */
    int ntokens;
    int has_thinking;
    size_t max_output;        /* 0: default */
    unsigned long long max_steps;
};

enum { MAX_DEPTH = 400, MAX_STEPS = 10 * 1000 * 1000 };

void tern_chat_template_free(tern_chat_template *t)
{
    if (!t)
        return;
    jinja_rt_release(&t->rt);
    free(t->source);
    for (int i = 0; i < t->ntokens; i++) {
        free(t->token_names[i]);
        free(t->tokens[i]);
    }
    free(t);
}

/* names/values: n special tokens (borrowed), copied into the template. */
static tern_status create_with_tokens(const char *source, const char *const *names, const char *const *values, int n,
                                      tern_chat_template **out)
{
    *out = NULL;
    if (!source)
        return tern_error(TERN_E_INVALID, "chat template: no source");
    tern_chat_template *t = calloc(1, sizeof *t);
    if (!t)
        return tern_error(TERN_E_NOMEM, "chat template: out of memory");
    t->source = strdup(source);
    int oom = !t->source;
    for (int i = 0; i < n && i < MAX_TOKENS; i++) {
        if (!values[i])
            continue;
        t->token_names[t->ntokens] = strdup(names[i]);
        t->tokens[t->ntokens] = strdup(values[i]);
        oom |= !t->token_names[t->ntokens] || !t->tokens[t->ntokens];
        t->ntokens++;
    }
    jinja_rt_init(&t->rt);
    if (oom) {
        tern_chat_template_free(t);
        return tern_error(TERN_E_NOMEM, "chat template: out of memory");
    }
    jmp_buf jmp;
    t->rt.jmp = &jmp;
    if (setjmp(jmp)) {
        tern_status st = tern_error(TERN_E_FORMAT, "chat template: %s", t->rt.msg);
        tern_chat_template_free(t);
        return st;
    }
    jinja_toks toks;
    jinja_lex(&t->rt, t->source, strlen(t->source), &toks);
    t->root = jinja_parse(&t->rt, &toks);
    t->rt.jmp = NULL;
    char err[300];
    if (jinja_validate(t->root, err, sizeof err)) {
        tern_chat_template_free(t);
        return tern_error(TERN_E_FORMAT, "chat template: %s", err);
    }
    t->has_thinking = strstr(source, "enable_thinking") && strstr(source, "<think>");
    *out = t;
    return TERN_OK;
}

tern_status tern_chat_template_create(const char *source, const char *bos_token, const char *eos_token,
                                      tern_chat_template **out)
{
    const char *names[2] = {"bos_token", "eos_token"}, *values[2] = {bos_token, eos_token};
    return create_with_tokens(source, names, values, 2, out);
}

void tern_chat_template_set_limits(tern_chat_template *t, size_t max_output, unsigned long long max_steps)
{
    t->max_output = max_output;
    t->max_steps = max_steps;
}

const char *tern_chat_template_source(const tern_chat_template *t)
{
    return t->source;
}

int tern_chat_template_has_thinking(const tern_chat_template *t)
{
    return t && t->has_thinking;
}

static char *read_file(const char *path, int *missing)
{
    FILE *f = fopen(path, "rb");
    *missing = !f;
    if (!f)
        return NULL;
    char *buf = tern_read_all(f);
    fclose(f);
    return buf;
}

/* A special token is a string or an AddedToken object {"content": ...}. */
static const char *token_string(const json_t *v)
{
    if (json_is_string(v))
        return json_string_value(v);
    if (json_is_object(v) && json_is_string(json_object_get(v, "content")))
        return json_string_value(json_object_get(v, "content"));
    return NULL;
}

tern_status tern_chat_template_load(const char *dir, tern_chat_template **out)
{
    *out = NULL;
    char path[4096];
    int missing;
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    json_t *cfg = NULL;
    char *cfg_text = read_file(path, &missing);
    if (cfg_text) {
        json_error_t e;
        cfg = json_loads(cfg_text, JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL, &e);
        free(cfg_text);
        if (!cfg || !json_is_object(cfg)) {
            json_decref(cfg);
            return tern_error(TERN_E_FORMAT, "%s: line %d: %s", path, e.line, cfg ? "not a JSON object" : e.text);
        }
    } else if (!missing) {
        return tern_error(TERN_E_IO, "%s: cannot read", path);
    }
    /* Every "<x>_token" entry with a string value: transformers passes the
     * tokenizer's special tokens (bos, eos, pad, unk, extra ones) to the template. */
    const char *names[MAX_TOKENS], *values[MAX_TOKENS];
    int ntok = 0;
    const char *key;
    json_t *val;
    if (cfg)
        json_object_foreach(cfg, key, val) {
            size_t kl = strlen(key);
            const char *v = token_string(val);
            if (ntok < MAX_TOKENS && v && kl > 6 && !strcmp(key + kl - 6, "_token")) {
                names[ntok] = key;
                values[ntok++] = v;
            }
        }

    char jpath[4096];
    snprintf(jpath, sizeof jpath, "%s/chat_template.jinja", dir);
    char *source = read_file(jpath, &missing);
    if (!source && !missing) {
        json_decref(cfg);
        return tern_error(TERN_E_IO, "%s: cannot read", jpath);
    }
    const char *from_cfg = NULL;
    if (!source && cfg) {
        json_t *ct = json_object_get(cfg, "chat_template");
        if (json_is_string(ct)) {
            from_cfg = json_string_value(ct);
        } else if (json_is_array(ct)) {
            size_t i;
            json_t *entry;
            json_array_foreach(ct, i, entry) {
                const char *name = json_string_value(json_object_get(entry, "name"));
                if (name && !strcmp(name, "default"))
                    from_cfg = json_string_value(json_object_get(entry, "template"));
            }
            if (!from_cfg) {
                json_decref(cfg);
                return tern_error(TERN_E_FORMAT, "%s: chat_template has no template named \"default\"", path);
            }
        }
    }
    if (!source && !from_cfg) {
        json_decref(cfg);
        return tern_error(TERN_E_FORMAT, "%s: no chat template (neither chat_template.jinja nor a chat_template "
                                         "entry in tokenizer_config.json)", dir);
    }
    tern_status st = create_with_tokens(source ? source : from_cfg, names, values, ntok, out);
    if (st != TERN_OK)
        tern_error_wrap(st, "%s", source ? jpath : path);
    free(source);
    json_decref(cfg);
    return st;
}

static json_t *parse_json(const char *text, const char *what, json_type want, tern_status *st)
{
    json_error_t e;
    json_t *j = json_loads(text, JSON_ALLOW_NUL | JSON_DECODE_ANY, &e);
    if (!j) {
        *st = tern_error(TERN_E_INVALID, "%s: invalid JSON at line %d, column %d: %s", what, e.line, e.column, e.text);
        return NULL;
    }
    if (json_typeof(j) != want) {
        json_decref(j);
        *st = tern_error(TERN_E_INVALID, "%s: expected a JSON %s", what, want == JSON_ARRAY ? "array" : "object");
        return NULL;
    }
    *st = TERN_OK;
    return j;
}

/* transformers drops null-valued keys of each message and exposes reasoning
 * under both "thinking" (first) and "reasoning_content". */
static jinja_val normalize_messages(jinja_rt *rt, jinja_val msgs)
{
    static const char *const reasoning_keys[] = {"reasoning_content", "thinking", "reasoning"};
    jinja_val out = jinja_list_new(rt, msgs.u.l->len);
    for (size_t i = 0; i < msgs.u.l->len; i++) {
        jinja_val m = msgs.u.l->items[i];
        if (m.kind != JV_DICT)
            jinja_fail(rt, "messages[%zu] is not an object", i);
        jinja_val clean = jinja_dict_new(rt);
        for (size_t k = 0; k < m.u.d->len; k++)
            if (m.u.d->vals[k].kind != JV_NONE)
                jinja_dict_set(rt, clean, m.u.d->keys[k], m.u.d->vals[k]);
        jinja_val reasoning = jinja_none();
        for (int r = 0; r < 3 && reasoning.kind == JV_NONE; r++)
            jinja_dict_get_cstr(clean, reasoning_keys[r], &reasoning);
        if (reasoning.kind != JV_NONE) {
            jinja_val aliased = jinja_dict_new(rt);
            jinja_dict_set(rt, aliased, jinja_cstr(rt, "thinking"), reasoning);
            for (size_t k = 0; k < clean.u.d->len; k++)
                jinja_dict_set(rt, aliased, clean.u.d->keys[k], clean.u.d->vals[k]);
            jinja_dict_set(rt, aliased, jinja_cstr(rt, "reasoning_content"), reasoning);
            clean = aliased;
        }
        jinja_list_push(rt, out, clean);
    }
    return out;
}

static jinja_val global_fn(jinja_ctx *c, const char *name)
{
    jinja_func *fn = jinja_alloc(c->rt, sizeof *fn);
    fn->kind = JF_GLOBAL;
    fn->name = name;
    jinja_val v = {.kind = JV_FUNC};
    v.u.fn = fn;
    return v;
}

tern_status tern_chat_template_render(const tern_chat_template *t, const char *messages_json, const char *tools_json,
                                      int add_generation_prompt, const char *kwargs_json, char **out)
{
    *out = NULL;
    if (!t || !messages_json)
        return tern_error(TERN_E_INVALID, "chat template: missing template or messages");
    tern_status st;
    json_t *jm = parse_json(messages_json, "messages", JSON_ARRAY, &st), *jt = NULL, *jk = NULL;
    if (!jm)
        return st;
    if (json_array_size(jm) == 0) {   /* as transformers refuses it */
        json_decref(jm);
        return tern_error(TERN_E_INVALID, "chat template: cannot apply a chat template to an empty conversation");
    }
    if (tools_json && !strcmp(tools_json, "null"))   /* JSON null: no tools, as None in Python */
        tools_json = NULL;
    if (kwargs_json && !strcmp(kwargs_json, "null"))
        kwargs_json = NULL;
    if (tools_json && !(jt = parse_json(tools_json, "tools", JSON_ARRAY, &st))) {
        json_decref(jm);
        return st;
    }
    if (kwargs_json && !(jk = parse_json(kwargs_json, "kwargs", JSON_OBJECT, &st))) {
        json_decref(jm);
        json_decref(jt);
        return st;
    }
    jinja_rt rt;
    jinja_rt_init(&rt);
    jmp_buf jmp;
    rt.jmp = &jmp;
    if (setjmp(jmp)) {
        if (rt.line > 0)
            st = tern_error(TERN_E_INVALID, "chat template line %d: %s", rt.line, rt.msg);
        else
            st = tern_error(TERN_E_INVALID, "chat template: %s", rt.msg);
        jinja_rt_release(&rt);
        json_decref(jm);
        json_decref(jt);
        json_decref(jk);
        return st;
    }
    if (t->max_output) {
        rt.max_output = t->max_output;
        rt.max_bytes = t->max_output < ((size_t)2 << 20) ? (size_t)16 << 20 : t->max_output * 8;
    }
    jinja_ctx ctx = {.rt = &rt, .max_depth = MAX_DEPTH, .max_steps = t->max_steps ? t->max_steps : MAX_STEPS};
    ctx.globals = jinja_scope_new(&ctx, NULL);
    static const char *const fns[] = {"raise_exception", "namespace", "dict", "range", "strftime_now"};
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
        jinja_scope_set(&ctx, ctx.globals, fns[i], global_fn(&ctx, fns[i]));
    jinja_scope *vars = jinja_scope_new(&ctx, ctx.globals);
    for (int i = 0; i < t->ntokens; i++)
        jinja_scope_set(&ctx, vars, t->token_names[i], jinja_cstr(&rt, t->tokens[i]));
    jinja_scope_set(&ctx, vars, "messages", normalize_messages(&rt, jinja_from_json(&rt, jm)));
    jinja_scope_set(&ctx, vars, "tools", jt ? jinja_from_json(&rt, jt) : jinja_none());
    jinja_scope_set(&ctx, vars, "documents", jinja_none());
    jinja_scope_set(&ctx, vars, "add_generation_prompt", jinja_bool(add_generation_prompt));
    if (jk) {
        const char *key;
        json_t *val;
        json_object_foreach(jk, key, val)
            jinja_scope_set(&ctx, vars, key, jinja_from_json(&rt, val));
    }
    jinja_buf buf = {0};
    jinja_exec(&ctx, jinja_scope_new(&ctx, vars), t->root, &buf);
    char *result = malloc(buf.len + 1);
    if (result) {
        if (buf.len)
            memcpy(result, buf.p, buf.len);
        result[buf.len] = 0;
    }
    jinja_rt_release(&rt);
    json_decref(jm);
    json_decref(jt);
    json_decref(jk);
    if (!result)
        return tern_error(TERN_E_NOMEM, "chat template: out of memory");
    *out = result;
    return TERN_OK;
}
