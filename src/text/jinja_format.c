/* String formatting as Python does it: `fmt % args` (printf style, with
 * %(key)s lookups in a mapping) and str.format() without format specs. */
#include "text/jinja_interp.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Pads s (code points, not bytes) to width; left-justified with '-'. */
static void put_padded(jinja_ctx *c, jinja_buf *b, jinja_val s, int width, int left, char fill)
{
    int64_t n = (int64_t)jinja_utf8_count(s.u.s->data, s.u.s->len);
    if (!left)
        for (int64_t i = n; i < width; i++)
            jinja_buf_put(c->rt, b, &fill, 1);
    jinja_buf_put(c->rt, b, s.u.s->data, s.u.s->len);
    if (left)
        for (int64_t i = n; i < width; i++)
            jinja_buf_put(c->rt, b, " ", 1);
}

jinja_val jinja_percent_format(jinja_ctx *c, jinja_val fmt, jinja_val args)
{
    int mapping = args.kind == JV_DICT && !args.u.d->is_namespace;
    jinja_val list = args;
    if (!(jinja_is_plain_list(args) && args.u.l->is_tuple)) {
        list = jinja_list_new(c->rt, 1);
        jinja_list_push(c->rt, list, args);
    }
    size_t used = 0;
    int used_key = 0;
    jinja_buf b = {0};
    const char *s = fmt.u.s->data;
    size_t n = fmt.u.s->len;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '%') {
            jinja_buf_put(c->rt, &b, s + i, 1);
            continue;
        }
        i++;
        jinja_val a;
        int have_arg = 0;
        if (i < n && s[i] == '(') {   /* %(key)s */
            const char *close = memchr(s + i, ')', n - i);
            if (!close)
                jinja_fail(c->rt, "incomplete format key");
            if (!mapping)
                jinja_fail(c->rt, "format requires a mapping");
            jinja_val key = jinja_str_new(c->rt, s + i + 1, (size_t)(close - s) - i - 1);
            if (!jinja_dict_get(args, key, &a))
                jinja_fail(c->rt, "KeyError: '%s'", key.u.s->data);
            have_arg = used_key = 1;
            i = (size_t)(close - s) + 1;
        }
        char flags[8] = {0};
        int nf = 0;
        while (i < n && strchr("-+ 0#", s[i]) && nf < 7)
            flags[nf++] = s[i++];
        int width = 0, prec = -1;
        while (i < n && s[i] >= '0' && s[i] <= '9' && width < 100000)
            width = width * 10 + (s[i++] - '0');
        if (i < n && s[i] == '.') {
            prec = 0;
            for (i++; i < n && s[i] >= '0' && s[i] <= '9' && prec < 1000; i++)
                prec = prec * 10 + (s[i] - '0');
        }
        char conv = i < n ? s[i] : 0;
        if (conv == '%') {
            jinja_buf_put(c->rt, &b, "%", 1);
            continue;
        }
        if (!conv || !strchr("sradiufFeEgGxXoc", conv))
            jinja_fail(c->rt, "unsupported format character '%c'", conv ? conv : '?');
        if (!have_arg) {
            if (mapping && list.u.l->items[0].kind == JV_DICT) {
                a = args;   /* "%s" % {'a': 1} formats the mapping itself */
                used = 1;
            } else {
                if (used >= list.u.l->len)
                    jinja_fail(c->rt, "not enough arguments for format string");
                a = list.u.l->items[used++];
            }
        }
        int left = strchr(flags, '-') != NULL;
        if (conv == 's' || conv == 'r' || conv == 'a') {
            jinja_buf t = {0};
            if (conv == 's')
                jinja_write_str(c->rt, &t, a);
            else
                jinja_write_repr(c->rt, &t, a);
            jinja_val sv = jinja_buf_to_str(c->rt, &t);
            if (prec >= 0)
                sv = jinja_str_new(c->rt, sv.u.s->data, jinja_utf8_offset(sv.u.s->data, sv.u.s->len, (size_t)prec));
            put_padded(c, &b, sv, width, left, ' ');
            continue;
        }
        if (conv == 'c') {
            char u[4];
            jinja_val cs;
            if (a.kind == JV_STR && jinja_utf8_count(a.u.s->data, a.u.s->len) == 1)
                cs = a;
            else if (a.kind == JV_INT && a.u.i >= 0 && a.u.i <= 0x10ffff)
                cs = jinja_str_new(c->rt, u, jinja_utf8_encode((int32_t)a.u.i, u));
            else
                jinja_fail(c->rt, "%%c requires an int or a single character");
            put_padded(c, &b, cs, width, left, ' ');
            continue;
        }
        if (!jinja_is_number(a))
            jinja_fail(c->rt, "%%%c format: a real number is required, not %s", conv, jinja_type_name(a));
        char cf[32], out[512];
        int k = snprintf(cf, sizeof cf, "%%%s%d", flags, width > 400 ? 400 : width);
        if (prec >= 0)
            k += snprintf(cf + k, sizeof cf - (size_t)k, ".%d", prec > 300 ? 300 : prec);
        if (strchr("diuxXo", conv)) {
            if (a.kind == JV_FLOAT && (conv == 'x' || conv == 'X' || conv == 'o'))
                jinja_fail(c->rt, "%%%c format: an integer is required, not float", conv);
            double d = jinja_as_double(a);
            long long v = a.kind == JV_FLOAT ? (isfinite(d) && fabs(d) < 9.2e18 ? (long long)d : 0)
                                             : (long long)(a.kind == JV_BOOL ? a.u.b : a.u.i);
            snprintf(cf + k, sizeof cf - (size_t)k, "ll%c", conv == 'i' || conv == 'u' ? 'd' : conv);
            if (v < 0 && strchr("xXo", conv)) {   /* Python prints a sign, C two's complement */
                out[0] = '-';
                snprintf(out + 1, sizeof out - 1, cf, v == LLONG_MIN ? (unsigned long long)v : (unsigned long long)-v);
            } else {
                snprintf(out, sizeof out, cf, v);
            }
        } else {
            snprintf(cf + k, sizeof cf - (size_t)k, "%c", conv);
            snprintf(out, sizeof out, cf, jinja_as_double(a));
        }
        jinja_buf_puts(c->rt, &b, out);
    }
    if (!mapping && !used_key && used < list.u.l->len)
        jinja_fail(c->rt, "not all arguments converted during string formatting");
    return jinja_buf_to_str(c->rt, &b);
}

/* "{} {0} {name}".format(...) without format specifications. */
jinja_val jinja_brace_format(jinja_ctx *c, jinja_val s, const jinja_args *a)
{
    jinja_buf b = {0};
    const char *d = s.u.s->data;
    size_t n = s.u.s->len, auto_index = 0;
    for (size_t i = 0; i < n; i++) {
        if (d[i] == '}' && i + 1 < n && d[i + 1] == '}') {
            jinja_buf_put(c->rt, &b, "}", 1);
            i++;
            continue;
        }
        if (d[i] != '{') {
            jinja_buf_put(c->rt, &b, d + i, 1);
            continue;
        }
        if (i + 1 < n && d[i + 1] == '{') {
            jinja_buf_put(c->rt, &b, "{", 1);
            i++;
            continue;
        }
        const char *close = memchr(d + i, '}', n - i);
        if (!close)
            jinja_fail(c->rt, "single '{' encountered in format string");
        size_t fl = (size_t)(close - d) - i - 1;
        const char *field = d + i + 1;
        if (memchr(field, ':', fl) || memchr(field, '!', fl) || memchr(field, '.', fl) || memchr(field, '[', fl))
            jinja_fail(c->rt, "format specifications are not supported in str.format");
        jinja_val v;
        if (fl == 0) {
            if (auto_index >= a->npos)
                jinja_fail(c->rt, "replacement index %zu out of range for positional args tuple", auto_index);
            v = a->pos[auto_index++];
        } else if (field[0] >= '0' && field[0] <= '9') {
            size_t idx = (size_t)strtoul(field, NULL, 10);
            if (idx >= a->npos)
                jinja_fail(c->rt, "replacement index %zu out of range for positional args tuple", idx);
            v = a->pos[idx];
        } else {
            size_t k;
            for (k = 0; k < a->nkw; k++)
                if (strlen(a->kwnames[k]) == fl && !memcmp(a->kwnames[k], field, fl))
                    break;
            if (k == a->nkw)
                jinja_fail(c->rt, "missing format key '%.*s'", (int)fl, field);
            v = a->kwvals[k];
        }
        jinja_write_str(c->rt, &b, v);
        i = (size_t)(close - d);
    }
    return jinja_buf_to_str(c->rt, &b);
}
