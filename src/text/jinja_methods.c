/* Methods of str, dict and list values as the sandbox exposes them (the
 * mutating ones are refused as unsafe, as Jinja's immutable sandbox does),
 * the global functions of the chat-template environment, and the argument
 * and string helpers shared with the filters. */
#include "text/jinja_interp.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <utf8proc.h>

jinja_val jinja_arg(const jinja_args *a, size_t index, const char *name, jinja_val dflt)
{
    if (index < a->npos)
        return a->pos[index];
    for (size_t i = 0; name && i < a->nkw; i++)
        if (!strcmp(a->kwnames[i], name))
            return a->kwvals[i];
    return dflt;
}

void jinja_check_args(jinja_ctx *c, const jinja_args *a, size_t max_pos, const char *const *kw, const char *what)
{
    if (a->npos > max_pos)
        jinja_fail(c->rt, "%s takes at most %zu positional argument(s) (%zu given)", what, max_pos, a->npos);
    for (size_t i = 0; i < a->nkw; i++) {
        int ok = 0;
        for (const char *const *k = kw; k && *k && !ok; k++)
            ok = !strcmp(*k, a->kwnames[i]);
        if (!ok)
            jinja_fail(c->rt, "%s got an unexpected keyword argument '%s'", what, a->kwnames[i]);
    }
}

static int in_chars(int32_t cp, const jinja_str *chars)
{
    if (!chars)
        return jinja_is_space(cp);
    for (size_t i = 0; i < chars->len;) {
        int32_t x;
        i += jinja_utf8_decode(chars->data + i, chars->len - i, &x);
        if (x == cp)
            return 1;
    }
    return 0;
}

jinja_val jinja_str_strip(jinja_ctx *c, jinja_val s, jinja_val chars, int left, int right)
{
    s = jinja_to_str(c->rt, s);
    const jinja_str *set = NULL;
    if (chars.kind == JV_STR)
        set = chars.u.s;
    else if (chars.kind != JV_NONE && chars.kind != JV_UNDEF)
        jinja_fail(c->rt, "strip arg must be None or str");
    const char *d = s.u.s->data;
    size_t n = s.u.s->len, a = 0, b = n;
    if (left)
        while (a < n) {
            int32_t cp;
            size_t k = jinja_utf8_decode(d + a, n - a, &cp);
            if (!in_chars(cp, set))
                break;
            a += k;
        }
    if (right) {
        size_t end = a;   /* end of the last kept code point */
        for (size_t i = a; i < n;) {
            int32_t cp;
            size_t k = jinja_utf8_decode(d + i, n - i, &cp);
            i += k;
            if (!in_chars(cp, set))
                end = i;
        }
        b = end;
    }
    if (a == 0 && b == n)
        return s;
    return jinja_str_new(c->rt, d + a, b - a);
}

jinja_val jinja_str_replace(jinja_ctx *c, jinja_val s, jinja_val old, jinja_val repl, int64_t count)
{
    s = jinja_to_str(c->rt, s);
    if (old.kind != JV_STR || repl.kind != JV_STR)
        jinja_fail(c->rt, "replace() arguments must be str");
    const jinja_str *S = s.u.s, *O = old.u.s, *R = repl.u.s;
    jinja_buf b = {0};
    size_t i = 0;
    int64_t done = 0;
    if (O->len == 0) {   /* Python inserts the replacement between every code point */
        while (i <= S->len) {
            if (count < 0 || done < count) {
                jinja_buf_put(c->rt, &b, R->data, R->len);
                done++;
            }
            if (i == S->len)
                break;
            int32_t cp;
            size_t k = jinja_utf8_decode(S->data + i, S->len - i, &cp);
            jinja_buf_put(c->rt, &b, S->data + i, k);
            i += k;
        }
        return jinja_buf_to_str(c->rt, &b);
    }
    while (i < S->len) {
        const char *hit = (count < 0 || done < count) ? memmem(S->data + i, S->len - i, O->data, O->len) : NULL;
        if (!hit) {
            jinja_buf_put(c->rt, &b, S->data + i, S->len - i);
            break;
        }
        jinja_buf_put(c->rt, &b, S->data + i, (size_t)(hit - (S->data + i)));
        jinja_buf_put(c->rt, &b, R->data, R->len);
        i = (size_t)(hit - S->data) + O->len;
        done++;
    }
    return jinja_buf_to_str(c->rt, &b);
}

static int is_cased_letter(int32_t cp)
{
    utf8proc_category_t k = utf8proc_category(cp);
    return k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT;
}

/* mode 0 lower, 1 upper, 2 str.title, 3 capitalize, 4 Jinja's title filter */
jinja_val jinja_str_case(jinja_ctx *c, jinja_val s, int mode)
{
    s = jinja_to_str(c->rt, s);
    jinja_buf b = {0};
    int prev_cased = 0, first = 1, word_start = 1;
    for (size_t i = 0; i < s.u.s->len;) {
        int32_t cp, o;
        size_t k = jinja_utf8_decode(s.u.s->data + i, s.u.s->len - i, &cp);
        i += k;
        switch (mode) {
        case 0: o = utf8proc_tolower(cp); break;
        case 1: o = utf8proc_toupper(cp); break;
        case 2: o = prev_cased ? utf8proc_tolower(cp) : utf8proc_totitle(cp); break;
        case 3: o = first ? utf8proc_totitle(cp) : utf8proc_tolower(cp); break;
        default: {
            int sep = cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || jinja_is_space(cp);
            o = word_start && !sep ? utf8proc_toupper(cp) : utf8proc_tolower(cp);
            if (sep)
                o = cp;
            word_start = sep;
            break;
        }
        }
        prev_cased = is_cased_letter(cp);
        first = 0;
        char u[4];
        jinja_buf_put(c->rt, &b, u, jinja_utf8_encode(o, u));
    }
    return jinja_buf_to_str(c->rt, &b);
}

static jinja_val split(jinja_ctx *c, jinja_val s, jinja_val sep, int64_t maxsplit, int from_right)
{
    const char *d = s.u.s->data;
    size_t n = s.u.s->len;
    jinja_val out = jinja_list_new(c->rt, 0);
    if (sep.kind == JV_STR) {
        const jinja_str *S = sep.u.s;
        if (S->len == 0)
            jinja_fail(c->rt, "empty separator");
        if (!from_right) {
            size_t i = 0;
            while (maxsplit < 0 || (int64_t)out.u.l->len < maxsplit) {
                const char *hit = memmem(d + i, n - i, S->data, S->len);
                if (!hit)
                    break;
                jinja_list_push(c->rt, out, jinja_str_new(c->rt, d + i, (size_t)(hit - d) - i));
                i = (size_t)(hit - d) + S->len;
            }
            jinja_list_push(c->rt, out, jinja_str_new(c->rt, d + i, n - i));
            return out;
        }
        /* rsplit: collect from the right, then reverse */
        size_t end = n;
        jinja_val rev = jinja_list_new(c->rt, 0);
        while (maxsplit < 0 || (int64_t)rev.u.l->len < maxsplit) {
            const char *hit = NULL;
            for (size_t j = end; j >= S->len; j--)
                if (!memcmp(d + j - S->len, S->data, S->len)) {
                    hit = d + j - S->len;
                    break;
                }
            if (!hit)
                break;
            size_t at = (size_t)(hit - d);
            jinja_list_push(c->rt, rev, jinja_str_new(c->rt, d + at + S->len, end - at - S->len));
            end = at;
        }
        jinja_list_push(c->rt, out, jinja_str_new(c->rt, d, end));
        for (size_t k = rev.u.l->len; k > 0; k--)
            jinja_list_push(c->rt, out, rev.u.l->items[k - 1]);
        return out;
    }
    if (sep.kind != JV_NONE && sep.kind != JV_UNDEF)
        jinja_fail(c->rt, "must be str or None, not %s", jinja_type_name(sep));
    /* whitespace runs; leading/trailing whitespace never yields empty strings */
    size_t *starts = jinja_alloc(c->rt, (n + 1) * sizeof *starts), *ends = jinja_alloc(c->rt, (n + 1) * sizeof *ends);
    size_t nw = 0;
    for (size_t i = 0; i < n;) {
        int32_t cp;
        size_t k = jinja_utf8_decode(d + i, n - i, &cp);
        if (jinja_is_space(cp)) {
            i += k;
            continue;
        }
        starts[nw] = i;
        while (i < n) {
            k = jinja_utf8_decode(d + i, n - i, &cp);
            if (jinja_is_space(cp))
                break;
            i += k;
        }
        ends[nw++] = i;
    }
    if (maxsplit < 0 || (size_t)maxsplit + 1 >= nw) {
        for (size_t w = 0; w < nw; w++)
            jinja_list_push(c->rt, out, jinja_str_new(c->rt, d + starts[w], ends[w] - starts[w]));
        return out;
    }
    if (!from_right) {
        for (size_t w = 0; w < (size_t)maxsplit; w++)
            jinja_list_push(c->rt, out, jinja_str_new(c->rt, d + starts[w], ends[w] - starts[w]));
        jinja_val rest = jinja_str_new(c->rt, d + starts[maxsplit], n - starts[maxsplit]);
        jinja_list_push(c->rt, out, jinja_str_strip(c, rest, jinja_none(), 0, 1));
        return out;
    }
    size_t first = nw - (size_t)maxsplit;
    jinja_val head = jinja_str_new(c->rt, d, ends[first - 1]);
    jinja_list_push(c->rt, out, jinja_str_strip(c, head, jinja_none(), 1, 0));
    for (size_t w = first; w < nw; w++)
        jinja_list_push(c->rt, out, jinja_str_new(c->rt, d + starts[w], ends[w] - starts[w]));
    return out;
}

static int affix_match(jinja_ctx *c, jinja_val s, jinja_val affix, int at_end)
{
    if (affix.kind == JV_LIST && affix.u.l->is_tuple) {
        for (size_t i = 0; i < affix.u.l->len; i++)
            if (affix_match(c, s, affix.u.l->items[i], at_end))
                return 1;
        return 0;
    }
    if (affix.kind != JV_STR)
        jinja_fail(c->rt, "%s first arg must be str or a tuple of str, not %s", at_end ? "endswith" : "startswith",
                   jinja_type_name(affix));
    size_t n = s.u.s->len, k = affix.u.s->len;
    if (k > n)
        return 0;
    return !memcmp(s.u.s->data + (at_end ? n - k : 0), affix.u.s->data, k);
}

static int64_t int_arg(jinja_ctx *c, jinja_val v, int64_t dflt)
{
    if (v.kind == JV_UNDEF || v.kind == JV_NONE)
        return dflt;
    if (v.kind == JV_INT)
        return v.u.i;
    if (v.kind == JV_BOOL)
        return v.u.b;
    jinja_fail(c->rt, "an integer is required, not %s", jinja_type_name(v));
}

static jinja_val str_find(jinja_ctx *c, jinja_val s, jinja_val sub, int rev, int must)
{
    if (sub.kind != JV_STR)
        jinja_fail(c->rt, "must be str, not %s", jinja_type_name(sub));
    const char *d = s.u.s->data, *hit = NULL;
    size_t n = s.u.s->len, k = sub.u.s->len;
    if (!rev) {
        hit = k == 0 ? d : memmem(d, n, sub.u.s->data, k);
    } else {
        for (size_t j = n + 1; j-- > k;)
            if (!memcmp(d + j - k, sub.u.s->data, k)) {
                hit = d + j - k;
                break;
            }
    }
    if (!hit) {
        if (must)
            jinja_fail(c->rt, "substring not found");
        return jinja_int(-1);
    }
    return jinja_int((int64_t)jinja_utf8_count(d, (size_t)(hit - d)));
}

static int64_t count_sub(jinja_val s, jinja_val sub)
{
    size_t n = s.u.s->len, k = sub.u.s->len;
    if (k == 0)
        return (int64_t)jinja_utf8_count(s.u.s->data, n) + 1;
    int64_t count = 0;
    for (const char *p = s.u.s->data, *end = p + n; (p = memmem(p, (size_t)(end - p), sub.u.s->data, k)); p += k)
        count++;
    return count;
}

static int all_chars(jinja_val s, int (*pred)(int32_t))
{
    if (s.u.s->len == 0)
        return 0;
    for (size_t i = 0; i < s.u.s->len;) {
        int32_t cp;
        i += jinja_utf8_decode(s.u.s->data + i, s.u.s->len - i, &cp);
        if (!pred(cp))
            return 0;
    }
    return 1;
}

static int p_digit(int32_t cp) { return utf8proc_category(cp) == UTF8PROC_CATEGORY_ND; }
static int p_alpha(int32_t cp)
{
    utf8proc_category_t k = utf8proc_category(cp);
    return k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO;
}
static int p_alnum(int32_t cp) { return p_alpha(cp) || (utf8proc_category(cp) >= UTF8PROC_CATEGORY_ND && utf8proc_category(cp) <= UTF8PROC_CATEGORY_NO); }
static int p_space(int32_t cp) { return jinja_is_space(cp); }

static int case_test(jinja_val s, int upper)
{
    int cased = 0;
    for (size_t i = 0; i < s.u.s->len;) {
        int32_t cp;
        i += jinja_utf8_decode(s.u.s->data + i, s.u.s->len - i, &cp);
        if (upper ? utf8proc_tolower(cp) != cp && utf8proc_category(cp) != UTF8PROC_CATEGORY_LT : utf8proc_toupper(cp) != cp)
            cased = 1;
        else if (upper ? utf8proc_toupper(cp) != cp : utf8proc_tolower(cp) != cp)
            return 0;
    }
    return cased;
}

static jinja_val str_join(jinja_ctx *c, jinja_val sep, jinja_val items)
{
    items = jinja_iterable_list(c, items);
    jinja_buf b = {0};
    for (size_t i = 0; i < items.u.l->len; i++) {
        if (items.u.l->items[i].kind != JV_STR)
            jinja_fail(c->rt, "sequence item %zu: expected str instance, %s found", i,
                       jinja_type_name(items.u.l->items[i]));
        if (i)
            jinja_buf_put(c->rt, &b, sep.u.s->data, sep.u.s->len);
        jinja_buf_put(c->rt, &b, items.u.l->items[i].u.s->data, items.u.l->items[i].u.s->len);
    }
    return jinja_buf_to_str(c->rt, &b);
}

static jinja_val pad(jinja_ctx *c, jinja_val s, const jinja_args *a, int where)
{
    int64_t width = int_arg(c, jinja_arg(a, 0, NULL, jinja_none()), 0);
    jinja_val fill = jinja_arg(a, 1, NULL, jinja_none());
    const char *f = fill.kind == JV_STR ? fill.u.s->data : " ";
    size_t fl = fill.kind == JV_STR ? fill.u.s->len : 1;
    int64_t len = (int64_t)jinja_utf8_count(s.u.s->data, s.u.s->len);
    if (width <= len)
        return s;
    int64_t total = width - len, left = where < 0 ? 0 : where > 0 ? total : total / 2 + (total & width & 1);
    jinja_buf b = {0};
    for (int64_t i = 0; i < left; i++)
        jinja_buf_put(c->rt, &b, f, fl);
    jinja_buf_put(c->rt, &b, s.u.s->data, s.u.s->len);
    for (int64_t i = 0; i < total - left; i++)
        jinja_buf_put(c->rt, &b, f, fl);
    return jinja_buf_to_str(c->rt, &b);
}

static const char *const STR_METHODS[] = {
    "startswith", "endswith", "split", "rsplit", "strip", "lstrip", "rstrip", "replace", "upper", "lower",
    "title", "capitalize", "find", "rfind", "index", "rindex", "count", "format", "join", "isdigit", "isalpha",
    "isalnum", "isspace", "islower", "isupper", "center", "ljust", "rjust", "splitlines", "removeprefix",
    "removesuffix", "casefold", "swapcase", "zfill", "isnumeric", "isdecimal", NULL};
static const char *const DICT_METHODS[] = {"items", "keys", "values", "get", "copy", NULL};
static const char *const DICT_UNSAFE[] = {"pop", "popitem", "setdefault", "update", "clear", NULL};
static const char *const LIST_METHODS[] = {"count", "index", "copy", NULL};
static const char *const LIST_UNSAFE[] = {"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear", NULL};

static int in_table(const char *const *t, const char *name)
{
    for (; *t; t++)
        if (!strcmp(*t, name))
            return 1;
    return 0;
}

int jinja_has_method(jinja_val v, const char *name)
{
    switch (v.kind) {
    case JV_STR: return in_table(STR_METHODS, name);
    case JV_DICT: return !v.u.d->is_namespace && (in_table(DICT_METHODS, name) || in_table(DICT_UNSAFE, name));
    case JV_LIST: return jinja_is_plain_list(v) && (in_table(LIST_METHODS, name) || in_table(LIST_UNSAFE, name));
    default: return 0;
    }
}

static jinja_val str_method(jinja_ctx *c, jinja_val s, const char *m, const jinja_args *a)
{
    jinja_val none = jinja_none();
    jinja_val a0 = jinja_arg(a, 0, NULL, none), a1 = jinja_arg(a, 1, NULL, none);
    if (!strcmp(m, "startswith") || !strcmp(m, "endswith"))
        return jinja_bool(affix_match(c, s, a0, m[0] == 'e'));
    if (!strcmp(m, "split") || !strcmp(m, "rsplit"))
        return split(c, s, jinja_arg(a, 0, "sep", none), int_arg(c, jinja_arg(a, 1, "maxsplit", none), -1), m[0] == 'r');
    if (!strcmp(m, "strip"))
        return jinja_str_strip(c, s, a0, 1, 1);
    if (!strcmp(m, "lstrip"))
        return jinja_str_strip(c, s, a0, 1, 0);
    if (!strcmp(m, "rstrip"))
        return jinja_str_strip(c, s, a0, 0, 1);
    if (!strcmp(m, "replace"))
        return jinja_str_replace(c, s, a0, a1, int_arg(c, jinja_arg(a, 2, "count", none), -1));
    if (!strcmp(m, "upper"))
        return jinja_str_case(c, s, 1);
    if (!strcmp(m, "lower") || !strcmp(m, "casefold"))
        return jinja_str_case(c, s, 0);
    if (!strcmp(m, "title"))
        return jinja_str_case(c, s, 2);
    if (!strcmp(m, "capitalize"))
        return jinja_str_case(c, s, 3);
    if (!strcmp(m, "find") || !strcmp(m, "rfind") || !strcmp(m, "index") || !strcmp(m, "rindex"))
        return str_find(c, s, a0, m[0] == 'r', strstr(m, "index") != NULL);
    if (!strcmp(m, "count")) {
        if (a0.kind != JV_STR)
            jinja_fail(c->rt, "must be str, not %s", jinja_type_name(a0));
        return jinja_int(count_sub(s, a0));
    }
    if (!strcmp(m, "format"))
        return jinja_brace_format(c, s, a);
    if (!strcmp(m, "join"))
        return str_join(c, s, a0);
    if (!strcmp(m, "isdigit") || !strcmp(m, "isnumeric") || !strcmp(m, "isdecimal"))
        return jinja_bool(all_chars(s, p_digit));
    if (!strcmp(m, "isalpha"))
        return jinja_bool(all_chars(s, p_alpha));
    if (!strcmp(m, "isalnum"))
        return jinja_bool(all_chars(s, p_alnum));
    if (!strcmp(m, "isspace"))
        return jinja_bool(all_chars(s, p_space));
    if (!strcmp(m, "islower") || !strcmp(m, "isupper"))
        return jinja_bool(case_test(s, m[2] == 'u'));
    if (!strcmp(m, "center") || !strcmp(m, "ljust") || !strcmp(m, "rjust"))
        return pad(c, s, a, m[0] == 'c' ? 0 : m[0] == 'l' ? -1 : 1);
    if (!strcmp(m, "zfill")) {
        int64_t width = int_arg(c, a0, 0), len = (int64_t)jinja_utf8_count(s.u.s->data, s.u.s->len);
        if (width <= len)
            return s;
        jinja_buf b = {0};
        size_t sign = s.u.s->len && (s.u.s->data[0] == '-' || s.u.s->data[0] == '+');
        jinja_buf_put(c->rt, &b, s.u.s->data, sign);
        for (int64_t i = 0; i < width - len; i++)
            jinja_buf_put(c->rt, &b, "0", 1);
        jinja_buf_put(c->rt, &b, s.u.s->data + sign, s.u.s->len - sign);
        return jinja_buf_to_str(c->rt, &b);
    }
    if (!strcmp(m, "swapcase")) {
        jinja_buf b = {0};
        for (size_t i = 0; i < s.u.s->len;) {
            int32_t cp;
            i += jinja_utf8_decode(s.u.s->data + i, s.u.s->len - i, &cp);
            int32_t o = utf8proc_toupper(cp) != cp ? utf8proc_toupper(cp) : utf8proc_tolower(cp);
            char u[4];
            jinja_buf_put(c->rt, &b, u, jinja_utf8_encode(o, u));
        }
        return jinja_buf_to_str(c->rt, &b);
    }
    if (!strcmp(m, "removeprefix") || !strcmp(m, "removesuffix")) {
        if (a0.kind != JV_STR)
            jinja_fail(c->rt, "%s() argument must be str", m);
        int suffix = m[6] == 's';
        if (!affix_match(c, s, a0, suffix))
            return s;
        size_t k = a0.u.s->len;
        return jinja_str_new(c->rt, s.u.s->data + (suffix ? 0 : k), s.u.s->len - k);
    }
    if (!strcmp(m, "splitlines")) {
        jinja_val out = jinja_list_new(c->rt, 0);
        const char *d = s.u.s->data;
        size_t n = s.u.s->len, start = 0;
        int keep = jinja_truthy(jinja_arg(a, 0, "keepends", none));
        for (size_t i = 0; i < n;) {
            int32_t cp;
            size_t k = jinja_utf8_decode(d + i, n - i, &cp);
            int brk = cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c || (cp >= 0x1c && cp <= 0x1e) ||
                      cp == 0x85 || cp == 0x2028 || cp == 0x2029;
            size_t next = i + k;
            if (brk && cp == '\r' && next < n && d[next] == '\n')
                next++;
            if (brk) {
                jinja_list_push(c->rt, out, jinja_str_new(c->rt, d + start, (keep ? next : i) - start));
                start = next;
            }
            i = next;
        }
        if (start < n)
            jinja_list_push(c->rt, out, jinja_str_new(c->rt, d + start, n - start));
        return out;
    }
    jinja_fail(c->rt, "'str' object has no attribute '%s'", m);
}

jinja_val jinja_call_method(jinja_ctx *c, jinja_val self, const char *m, const jinja_args *a)
{
    if (self.kind == JV_STR)
        return str_method(c, self, m, a);
    if (self.kind == JV_DICT) {
        if (in_table(DICT_UNSAFE, m))
            jinja_fail(c->rt, "access to attribute '%s' of 'dict' object is unsafe", m);
        if (!strcmp(m, "get")) {
            jinja_val v;
            if (jinja_dict_get(self, jinja_arg(a, 0, NULL, jinja_none()), &v))
                return v;
            return jinja_arg(a, 1, NULL, jinja_none());
        }
        jinja_val out = jinja_iter_new(c->rt, self.u.d->len, m[0] == 'k' ? JL_DICT_KEYS : m[0] == 'v' ? JL_DICT_VALUES : JL_DICT_ITEMS);
        if (!strcmp(m, "copy")) {
            jinja_val d = jinja_dict_new(c->rt);
            for (size_t i = 0; i < self.u.d->len; i++)
                jinja_dict_set(c->rt, d, self.u.d->keys[i], self.u.d->vals[i]);
            return d;
        }
        for (size_t i = 0; i < self.u.d->len; i++) {
            if (m[0] == 'k') {
                jinja_list_push(c->rt, out, self.u.d->keys[i]);
            } else if (m[0] == 'v') {
                jinja_list_push(c->rt, out, self.u.d->vals[i]);
            } else {
                jinja_val pair = jinja_list_new(c->rt, 2);
                pair.u.l->is_tuple = 1;
                jinja_list_push(c->rt, pair, self.u.d->keys[i]);
                jinja_list_push(c->rt, pair, self.u.d->vals[i]);
                jinja_list_push(c->rt, out, pair);
            }
        }
        return out;
    }
    if (self.kind == JV_LIST) {
        if (in_table(LIST_UNSAFE, m))
            jinja_fail(c->rt, "access to attribute '%s' of '%s' object is unsafe", m, jinja_type_name(self));
        jinja_val x = jinja_arg(a, 0, NULL, jinja_none());
        if (!strcmp(m, "copy")) {
            jinja_val out = jinja_list_new(c->rt, self.u.l->len);
            for (size_t i = 0; i < self.u.l->len; i++)
                jinja_list_push(c->rt, out, self.u.l->items[i]);
            return out;
        }
        int64_t count = 0;
        for (size_t i = 0; i < self.u.l->len; i++)
            if (jinja_equal(self.u.l->items[i], x)) {
                if (m[0] == 'i')
                    return jinja_int((int64_t)i);
                count++;
            }
        if (m[0] == 'i')
            jinja_fail(c->rt, "value is not in list");
        return jinja_int(count);
    }
    jinja_fail(c->rt, "'%s' object has no attribute '%s'", jinja_type_name(self), m);
}

jinja_val jinja_call_global(jinja_ctx *c, const char *name, const jinja_args *a)
{
    if (!strcmp(name, "raise_exception")) {
        jinja_val msg = jinja_to_str(c->rt, jinja_arg(a, 0, "message", jinja_none()));
        jinja_fail(c->rt, "%s", msg.u.s->data);
    }
    if (!strcmp(name, "namespace") || !strcmp(name, "dict")) {
        jinja_val ns = jinja_dict_new(c->rt);
        ns.u.d->is_namespace = name[0] == 'n';
        if (a->npos > 1)
            jinja_fail(c->rt, "%s expected at most 1 positional argument", name);
        if (a->npos == 1) {
            jinja_val init = a->pos[0];
            if (init.kind != JV_DICT || init.u.d->is_namespace)
                jinja_fail(c->rt, "%s() argument must be a mapping", name);
            for (size_t i = 0; i < init.u.d->len; i++)
                jinja_dict_set(c->rt, ns, init.u.d->keys[i], init.u.d->vals[i]);
        }
        for (size_t i = 0; i < a->nkw; i++) {
            if (ns.u.d->is_namespace && a->kwnames[i][0] == '_')
                jinja_fail(c->rt, "cannot store underscore-prefixed attribute '%s' on a namespace", a->kwnames[i]);
            jinja_dict_set(c->rt, ns, jinja_cstr(c->rt, a->kwnames[i]), a->kwvals[i]);
        }
        return ns;
    }
    if (!strcmp(name, "range")) {
        jinja_check_args(c, a, 3, NULL, "range()");
        if (a->npos == 0)
            jinja_fail(c->rt, "range expected at least 1 argument, got 0");
        int64_t start = 0, stop, step = 1;
        if (a->npos == 1) {
            stop = int_arg(c, a->pos[0], 0);
        } else {
            start = int_arg(c, a->pos[0], 0);
            stop = int_arg(c, a->pos[1], 0);
            if (a->npos == 3)
                step = int_arg(c, a->pos[2], 1);
        }
        if (step == 0)
            jinja_fail(c->rt, "range() arg 3 must not be zero");
        double count = step > 0 ? ((double)stop - (double)start) / (double)step : ((double)start - (double)stop) / (double)-step;
        if (count > 100000)
            jinja_fail(c->rt, "range too big, the sandbox blocks ranges larger than 100000");
        jinja_val out = jinja_list_new(c->rt, count > 0 ? (size_t)count + 1 : 0);
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
            jinja_list_push(c->rt, out, jinja_int(i));
        return out;
    }
    if (!strcmp(name, "strftime_now")) {
        jinja_val fmt = jinja_arg(a, 0, "format", jinja_none());
        if (fmt.kind != JV_STR)
            jinja_fail(c->rt, "strftime_now() argument must be str");
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        char out[512];
        size_t n = strftime(out, sizeof out, fmt.u.s->data, &tm);
        return jinja_str_new(c->rt, out, n);
    }
    jinja_fail(c->rt, "'%s' is not callable", name);
}
