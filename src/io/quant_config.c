#include "io/quant_config.h"

#include <stdlib.h>
#include <string.h>

static tern_status check_pair(const char *path, const char *where, int bits, int group)
{
    if (bits != 4 && bits != 8)
        return tern_error(TERN_E_UNSUPPORTED, "%s: %s: %d-bit quantization is not supported (4, 8)",
                          path, where, bits);
    if (group != 32 && group != 64 && group != 128)
        return tern_error(TERN_E_UNSUPPORTED,
                          "%s: %s: quantization group_size %d is not supported (32, 64, 128)", path,
                          where, group);
    return TERN_OK;
}

static tern_status get_pos_int(const char *path, const char *where, json_t *obj, const char *key,
                               int dflt, int *out)
{
    json_t *v = json_object_get(obj, key);
    if (!v) {
        if (dflt < 0)
            return tern_error(TERN_E_FORMAT, "%s: %s: missing \"%s\"", path, where, key);
        *out = dflt;
        return TERN_OK;
    }
    if (!json_is_integer(v) || json_integer_value(v) <= 0 || json_integer_value(v) > 4096)
        return tern_error(TERN_E_FORMAT, "%s: %s: \"%s\" must be a positive integer", path, where, key);
    *out = (int)json_integer_value(v);
    return TERN_OK;
}

static tern_status check_mode(const char *path, const char *where, json_t *obj)
{
    json_t *mode = json_object_get(obj, "mode");
    if (mode && (!json_is_string(mode) || strcmp(json_string_value(mode), "affine")))
        return tern_error(TERN_E_UNSUPPORTED, "%s: %s: quantization mode %s is not supported "
                          "(affine)", path, where, json_is_string(mode) ? json_string_value(mode) : "?");
    return TERN_OK;
}

tern_status tern_quant_config_parse(const char *path, json_t *top, tern_quant_config *q)
{
    memset(q, 0, sizeof *q);
    const char *field = "quantization";
    json_t *sec = json_object_get(top, field);
    if (!sec || json_is_null(sec)) {
        field = "quantization_config";
        sec = json_object_get(top, field);
    }
    if (!sec || json_is_null(sec)) return TERN_OK;
    if (!json_is_object(sec)) return tern_error(TERN_E_FORMAT, "%s: \"%s\" must be an object", path, field);
    json_t *qm = json_object_get(sec, "quant_method");
    if (qm)
        return tern_error(TERN_E_UNSUPPORTED, "%s: %s.quant_method %s is not supported (MLX affine "
                          "quantization only)", path, field, json_is_string(qm) ? json_string_value(qm) : "?");
    tern_status st;
    if ((st = check_mode(path, field, sec))) return st;
    if ((st = get_pos_int(path, field, sec, "bits", -1, &q->bits))) return st;
    if ((st = get_pos_int(path, field, sec, "group_size", 64, &q->group))) return st;
    if ((st = check_pair(path, field, q->bits, q->group))) return st;
    q->present = 1;
    size_t n = json_object_size(sec);
    q->ov = calloc(n ? n : 1, sizeof *q->ov);
    if (!q->ov) return tern_error(TERN_E_NOMEM, "out of memory");
    const char *key;
    json_t *v;
    json_object_foreach(sec, key, v) {
        if (!json_is_object(v) && !json_is_false(v)) continue;  /* bits, group_size, mode, ... */
        tern_quant_override *o = &q->ov[q->n_ov];
        o->module = strdup(key);
        if (!o->module) {
            tern_quant_config_clear(q);
            return tern_error(TERN_E_NOMEM, "out of memory");
        }
        q->n_ov++;
        if (json_is_false(v)) continue;
        char where[512];
        snprintf(where, sizeof where, "%s.%s", field, key);
        if ((st = check_mode(path, where, v)) ||
            (st = get_pos_int(path, where, v, "bits", q->bits, &o->bits)) ||
            (st = get_pos_int(path, where, v, "group_size", q->group, &o->group)) ||
            (st = check_pair(path, where, o->bits, o->group))) {
            tern_quant_config_clear(q);
            return st;
        }
    }
    return TERN_OK;
}

void tern_quant_config_clear(tern_quant_config *q)
{
    for (int i = 0; i < q->n_ov; i++) free(q->ov[i].module);
    free(q->ov);
    memset(q, 0, sizeof *q);
}

void tern_quant_config_lookup(const tern_quant_config *q, const char *module, int *bits, int *group)
{
    *bits = 0;
    *group = 0;
    if (!q->present) return;
    for (int i = 0; i < q->n_ov; i++)
        if (!strcmp(q->ov[i].module, module)) {
            *bits = q->ov[i].bits;
            *group = q->ov[i].group;
            return;
        }
    *bits = q->bits;
    *group = q->group;
}
