/* Fuzz: thousands of deterministic random mutations of the real chat templates
 * (and of a few feature templates) go through parse and render. Nothing may
 * crash or leak; every failure must carry a message. Bounded to ~10 s. */
#include "check.h"
#include "tern/chat_template.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static size_t rnd_below(size_t n) { return n ? (size_t)(rnd() % n) : 0; }

static const char *const PIECES[] = {
    "{{", "}}", "{%", "%}", "{#", "#}", "{%-", "-%}", "{{-", "-}}", "'", "\"", "(", ")", "[", "]", "{", "}",
    "|", ".", ",", ":", "=", "==", "~", "+", "-", "*", "**", "/", "//", "%", " if ", " else ", " for ", " in ",
    " endfor", " endif", " set ", " macro ", "endmacro", " loop.index", " not ", " is ", " defined", " and ",
    " or ", "namespace(", "raise_exception(", "tojson", "|length", "[::-1]", "messages", "message.content",
    " ", "\n", "\t", "\\", "\\u00e9", "\\x4", "é", "😀", "\xc3", "\xff", "0", "1e9", "-1", "9999999999999999999",
    "caller()", "range(", "{% call %}", "{% raw %}", "{% endraw %}", "{% break %}", "{% filter upper %}",
};

static const char *const SEEDS[] = {
    "{% macro m(a, b=2) %}{{ a ~ b }}{{ caller() if caller is defined }}{% endmacro %}{% call m(1) %}x{% endcall %}",
    "{% for m in messages if m.role != 'x' %}{{ loop.index }}{{ m | tojson(indent=2) }}{% else %}e{% endfor %}",
    "{% set ns = namespace(a=[]) %}{% set ns.a = ns.a + [1] %}{{ ns.a | map('string') | join(',') }}",
    "{{ messages[0].content.split(' ')[::-1] | join('-') | replace('a', 'b') | title | trim }}",
    "{% raw %}{{ x }}{% endraw %}{# c #}{%- if tools -%}{{ tools | tojson }}{%+ endif +%}",
};

static char *mutate(const char *src)
{
    size_t n = strlen(src), cap = n * 2 + 256;
    char *s = malloc(cap);
    memcpy(s, src, n + 1);
    int edits = rnd_below(2) ? 1 : 1 + (int)rnd_below(4);
    for (int e = 0; e < edits; e++) {
        size_t at = rnd_below(n + 1);
        switch (rnd_below(5)) {
        case 0: {   /* delete a span */
            size_t len = rnd_below(n - at < 40 ? n - at + 1 : 40);
            memmove(s + at, s + at + len, n - at - len + 1);
            n -= len;
            break;
        }
        case 1: {   /* insert a piece */
            const char *p = PIECES[rnd_below(sizeof PIECES / sizeof PIECES[0])];
            size_t k = strlen(p);
            if (n + k + 1 > cap)
                break;
            memmove(s + at + k, s + at, n - at + 1);
            memcpy(s + at, p, k);
            n += k;
            break;
        }
        case 2: {   /* duplicate a span elsewhere */
            size_t from = rnd_below(n + 1), len = rnd_below(n - from < 60 ? n - from + 1 : 60);
            if (n + len + 1 > cap)
                break;
            char tmp[64];
            memcpy(tmp, s + from, len);
            memmove(s + at + len, s + at, n - at + 1);
            memcpy(s + at, tmp, len);
            n += len;
            break;
        }
        case 3:   /* replace one byte (never NUL) */
            if (at < n)
                s[at] = (char)(1 + rnd_below(255));
            break;
        default: {   /* swap two bytes */
            size_t b = rnd_below(n + 1);
            if (at < n && b < n) {
                char t = s[at];
                s[at] = s[b];
                s[b] = t;
            }
            break;
        }
        }
    }
    return s;
}

static const char *const MESSAGES[] = {
    "[{\"role\":\"system\",\"content\":\"sys\"},{\"role\":\"user\",\"content\":\"Hi é 😀\"},"
    "{\"role\":\"assistant\",\"content\":\"<think>r</think>ok\",\"tool_calls\":[{\"type\":\"function\","
    "\"function\":{\"name\":\"f\",\"arguments\":{\"a\":1}}}]},{\"role\":\"tool\",\"content\":\"res\"},"
    "{\"role\":\"user\",\"content\":\"again\"}]",
    "[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"part\"},{\"type\":\"image\"}]}]",
    "[{\"role\":\"user\",\"content\":5},{\"content\":null},{\"role\":[1,{\"x\":true}],\"content\":{\"k\":1.5}}]",
};

static const char *TOOLS = "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}}]";

static int run_one(const char *src, size_t *parsed, size_t *rendered)
{
    tern_chat_template *t = NULL;
    tern_status st = tern_chat_template_create(src, "<s>", "</s>", &t);
    if (st != TERN_OK) {
        CHECK(t == NULL);
        CHECK(tern_last_error()[0] != 0);
        return 0;
    }
    (*parsed)++;
    tern_chat_template_set_limits(t, 1 << 20, 100000);
    for (int k = 0; k < 3; k++) {
        char *out = NULL;
        st = tern_chat_template_render(t, MESSAGES[k], (k & 1) ? TOOLS : NULL, k != 2, k == 0 ? "{\"enable_thinking\":false}" : NULL, &out);
        if (st == TERN_OK) {
            CHECK(out != NULL);
            (*rendered)++;
        } else {
            CHECK(out == NULL);
            CHECK(tern_last_error()[0] != 0);
        }
        free(out);
    }
    tern_chat_template_free(t);
    return 1;
}

int main(void)
{
    const char *names[] = {"fixtures/tokenizers/qwen3", "fixtures/tokenizers/gemma3", "fixtures/tokenizers/llama3",
                           "models/tern-demo-code-17m"};
    char *sources[16];
    size_t nsrc = 0;
    for (size_t i = 0; i < 4; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s/tokenizer_config.json", check_shared_dir(), names[i]);
        json_t *cfg = json_load_file(path, JSON_DECODE_INT_AS_REAL, NULL);
        const char *tpl = json_string_value(json_object_get(cfg, "chat_template"));
        if (tpl)
            sources[nsrc++] = strdup(tpl);
        json_decref(cfg);
    }
    for (size_t i = 0; i < sizeof SEEDS / sizeof SEEDS[0]; i++)
        sources[nsrc++] = strdup(SEEDS[i]);

    size_t parsed = 0, rendered = 0, total = 0;
    for (size_t i = 0; i < nsrc; i++)   /* the unmutated sources must all parse */
        CHECK(run_one(sources[i], &parsed, &rendered));
    clock_t start = clock();
    const size_t max_iters = 200000;
    while (total < max_iters && (double)(clock() - start) / CLOCKS_PER_SEC < 8.0) {
        char *m = mutate(sources[rnd_below(nsrc)]);
        if (rnd_below(4) == 0) {   /* stack mutations */
            char *m2 = mutate(m);
            free(m);
            m = m2;
        }
        run_one(m, &parsed, &rendered);
        free(m);
        if (rnd_below(8) == 0) {   /* broken conversations against an intact template */
            char *msgs = mutate(MESSAGES[rnd_below(3)]);
            tern_chat_template *t = NULL;
            if (tern_chat_template_create(sources[rnd_below(nsrc)], NULL, NULL, &t) == TERN_OK) {
                char *out = NULL;
                tern_status st = tern_chat_template_render(t, msgs, NULL, 1, NULL, &out);
                CHECK((st == TERN_OK) == (out != NULL));
                free(out);
            }
            tern_chat_template_free(t);
            free(msgs);
        }
        total++;
    }
    fprintf(stderr, "jinja fuzz: %zu mutants, %zu parsed, %zu renders succeeded, %.1f s\n", total, parsed, rendered,
            (double)(clock() - start) / CLOCKS_PER_SEC);
    CHECK(total >= 1000);
    for (size_t i = 0; i < nsrc; i++)
        free(sources[i]);
    return check_summary("jinja_fuzz");
}
