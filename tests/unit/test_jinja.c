/* Chat-template interpreter: expressions, filters, whitespace control, loops,
 * macros, errors with template lines, malformed templates, limits, loading.
 * Expected strings were rendered with transformers' Jinja environment. */
#include "check.h"
#include "tern/chat_template.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *MSGS = "[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":\"yo\"}]";

/* Renders src with MSGS; returns owned output or NULL (message in tern_last_error). */
static char *render(const char *src, int agp, const char *kwargs, tern_status *st_out)
{
    tern_chat_template *t = NULL;
    char *out = NULL;
    tern_status st = tern_chat_template_create(src, "<s>", "</s>", &t);
    if (st == TERN_OK)
        st = tern_chat_template_render(t, MSGS, NULL, agp, kwargs, &out);
    tern_chat_template_free(t);
    if (st_out)
        *st_out = st;
    return out;
}

static void expect(const char *src, const char *want)
{
    char *got = render(src, 0, NULL, NULL);
    CHECK_MSG(got && !strcmp(got, want), "template %s\n  want [%s]\n  got  [%s] (%s)", src, want, got ? got : "(null)",
              got ? "" : tern_last_error());
    free(got);
}

/* Fails with code and a message containing needle. */
static void expect_error(const char *src, tern_status code, const char *needle)
{
    tern_status st;
    char *got = render(src, 0, NULL, &st);
    CHECK_MSG(!got && st == code && strstr(tern_last_error(), needle), "template %s\n  want error %d containing [%s]\n"
              "  got status %d [%s] output [%s]", src, code, needle, st, tern_last_error(), got ? got : "(null)");
    free(got);
}

static const struct {
    const char *src, *want;
} CASES[] = {
#include "test_jinja_cases.inc"
};

static void test_reference_cases(void)
{
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++)
        expect(CASES[i].src, CASES[i].want);
}

static void test_variables(void)
{
    char *out = render("{{ bos_token }}{{ eos_token }}{{ add_generation_prompt }}{{ enable_thinking }}{{ tools }}", 1,
                       "{\"enable_thinking\": false}", NULL);
    CHECK(out && !strcmp(out, "<s></s>TrueFalseNone"));
    free(out);
    /* null-valued keys are dropped; reasoning is aliased under thinking and reasoning_content */
    tern_chat_template *t = NULL;
    CHECK(tern_chat_template_create("{% for m in messages %}{{ m.content is defined }}{{ m | tojson }}{% endfor %}", NULL,
                                    NULL, &t) == TERN_OK);
    CHECK(tern_chat_template_render(t, "[{\"role\":\"assistant\",\"content\":null,\"reasoning\":\"r\"}]", NULL, 0, NULL,
                                    &out) == TERN_OK);
    CHECK(out && !strcmp(out, "False{\"thinking\": \"r\", \"role\": \"assistant\", \"reasoning\": \"r\", "
                              "\"reasoning_content\": \"r\"}"));
    free(out);
    CHECK(tern_chat_template_render(t, "[]", NULL, 0, NULL, &out) == TERN_E_INVALID);
    CHECK(tern_chat_template_render(t, "{\"not\": \"a list\"}", NULL, 0, NULL, &out) == TERN_E_INVALID);
    CHECK(tern_chat_template_render(t, "[1, 2", NULL, 0, NULL, &out) == TERN_E_INVALID);
    CHECK(tern_chat_template_render(t, "[{}]", "{}", 0, NULL, &out) == TERN_E_INVALID);
    CHECK(tern_chat_template_render(t, "[{}]", NULL, 0, "[]", &out) == TERN_E_INVALID);
    CHECK(tern_chat_template_render(t, "[1]", NULL, 0, NULL, &out) == TERN_E_INVALID);
    tern_chat_template_free(t);
}

static void test_whitespace(void)
{
    expect("{% for x in [1, 2] %}\n  {{ x }}\n{% endfor %}\n", "  1\n  2\n");
    expect("{%- for x in [1, 2] -%}\n  {{ x }}\n{%- endfor %}", "12");
    expect("a\n  {%+ if true %}b{% endif %}", "a\n  b");
    expect("{% if true +%}\nb{% endif %}", "\nb");
    expect("{% raw %}{{ x }}{% endraw %}", "{{ x }}");
    expect("line\r\n{% if true %}\r\nx\r\n{% endif %}\r\n", "line\nx\n");
    expect("{{ {'a': {'b': 1}} }}", "{'a': {'b': 1}}");
}

static void test_errors_with_lines(void)
{
    expect_error("a\nb\n{{ raise_exception('boom here') }}", TERN_E_INVALID, "line 3: boom here");
    expect_error("{{ nope() }}", TERN_E_INVALID, "'nope' is undefined");
    expect_error("\n{{ missing.attr }}", TERN_E_INVALID, "line 2");
    expect_error("{{ 'a' + 1 }}", TERN_E_INVALID, "unsupported operand");
    expect_error("{{ 1 // 0 }}", TERN_E_INVALID, "division by zero");
    expect_error("{% set l = [] %}{{ l.append(1) }}", TERN_E_INVALID, "unsafe");
    expect_error("{% set x = 1 %}{% set x.y = 2 %}", TERN_E_INVALID, "non-namespace");
    expect_error("{{ 9223372036854775807 + 1 }}", TERN_E_INVALID, "overflow");
    expect_error("{{ [1] < 'a' }}", TERN_E_INVALID, "not supported");
    expect_error("{% for a, b in [1] %}{% endfor %}", TERN_E_INVALID, "not iterable");
    expect_error("{{ undefined_thing | tojson }}", TERN_E_INVALID, "not JSON serializable");
    expect_error("{{ 5(1) }}", TERN_E_INVALID, "not callable");
    /* Found by fuzzing: a base outside 0, 2..36 left strtoll's end pointer
     * unset (jinja2: ValueError, then the float try, then the default). */
    expect("{{ '0x1A' | int(0, 96) }}|{{ '7' | int(5, 1) }}|{{ '1A' | int(0, 16) }}|{{ '0x1A' | int(0, 0) }}", "0|7|26|26");
    /* Found by fuzzing: eight hex digits used to overflow a signed int. */
    expect_error("{{ '\\UFFFFFFFF' }}", TERN_E_FORMAT, "illegal Unicode character");
    expect_error("{{ '\\U00110000' }}", TERN_E_FORMAT, "illegal Unicode character");
    expect("{{ '\\U0001F600|\\u00e9' }}", "\xf0\x9f\x98\x80|\xc3\xa9");
    /* generators (select, map, ...) have no len() and are not JSON serializable, as in Jinja */
    expect_error("{{ messages | map(attribute='role') | tojson }}", TERN_E_INVALID, "generator is not JSON serializable");
    expect_error("{{ messages | selectattr('role') | length }}", TERN_E_INVALID, "has no len()");
    /* unknown filters inside if branches fail only when reached */
    expect_error("{% if true %}{{ 1 | from_json }}{% endif %}", TERN_E_INVALID, "no filter named 'from_json'");
}

static void test_malformed(void)
{
    expect_error("{% if x %}never closed", TERN_E_FORMAT, "line 1");
    expect_error("ok\n\n  {{ 1 + }}", TERN_E_FORMAT, "line 3, column 10");
    expect_error("{{ x | nosuchfilter }}", TERN_E_FORMAT, "no filter named 'nosuchfilter'");
    expect_error("{{ x is nosuchtest }}", TERN_E_FORMAT, "no test named 'nosuchtest'");
    expect_error("{% endfor %}", TERN_E_FORMAT, "unexpected tag 'endfor'");
    expect_error("{% for x in y %}{% endif %}", TERN_E_FORMAT, "unexpected tag 'endif'");
    expect_error("{# open comment", TERN_E_FORMAT, "comment");
    expect_error("{{ 'open string }}", TERN_E_FORMAT, "unexpected char");
    expect_error("{{ (1 }}", TERN_E_FORMAT, "line 1");
    expect_error("{{ ) }}", TERN_E_FORMAT, "unexpected");
    expect_error("{% break %}", TERN_E_FORMAT, "outside of a loop");
    expect_error("{% frobnicate %}", TERN_E_FORMAT, "unknown tag 'frobnicate'");
    expect_error("{% extends 'base' %}", TERN_E_FORMAT, "not supported");
    expect_error("{{ 99999999999999999999 }}", TERN_E_FORMAT, "too large");
    expect_error("{{ '\\N{DASH}' }}", TERN_E_FORMAT, "not supported");
    expect_error("{{ x", TERN_E_FORMAT, "end of template");
    expect_error("{% macro m(a=1, b) %}{% endmacro %}", TERN_E_FORMAT, "non-default argument");
    tern_chat_template *t = NULL;
    CHECK(tern_chat_template_create(NULL, NULL, NULL, &t) == TERN_E_INVALID && !t);
}

static void test_limits(void)
{
    expect_error("{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}", TERN_E_INVALID, "deeper");
    expect_error("{{ 'x' * 200000000 }}", TERN_E_INVALID, "limit");
    expect_error("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", TERN_E_INVALID,
                 "steps");
    expect_error("{{ range(1000000) | length }}", TERN_E_INVALID, "range too big");
    /* values nested by a loop: printing, comparing and tojson stop at a depth limit */
    const char *nest = "{% set ns = namespace(x=[]) %}{% for i in range(5000) %}{% set ns.x = [ns.x] %}{% endfor %}";
    char buf[512];
    snprintf(buf, sizeof buf, "%s{{ ns.x }}", nest);
    expect_error(buf, TERN_E_INVALID, "nested deeper");
    snprintf(buf, sizeof buf, "%s{{ ns.x < ns.x }}", nest);
    expect_error(buf, TERN_E_INVALID, "nested deeper");
    snprintf(buf, sizeof buf, "%s{{ ns.x | tojson }}", nest);
    expect_error(buf, TERN_E_INVALID, "nested deeper");
    snprintf(buf, sizeof buf, "%s{{ ns.x == ns.x }}", nest);
    expect(buf, "False");
    /* deeply nested expressions are refused by the parser, not the C stack */
    size_t n = 5000;
    char *deep = malloc(4 * n + 16);
    char *p = deep;
    p += sprintf(p, "{{ ");
    for (size_t i = 0; i < n; i++)
        *p++ = '(';
    *p++ = '1';
    for (size_t i = 0; i < n; i++)
        *p++ = ')';
    sprintf(p, " }}");
    expect_error(deep, TERN_E_FORMAT, "nested too deeply");
    p = deep;
    for (size_t i = 0; i < n / 10; i++)
        p += sprintf(p, "{%% if 1 %%}");
    *p = 0;
    expect_error(deep, TERN_E_FORMAT, "nested too deeply");
    free(deep);
}

static void test_load(void)
{
    const char *shared = check_shared_dir();
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/fixtures/tokenizers/qwen3", shared);
    tern_chat_template *t = NULL;
    if (tern_chat_template_load(dir, &t) != TERN_OK) {
        fprintf(stderr, "skipping fixture loads: %s\n", tern_last_error());
        return;
    }
    CHECK(tern_chat_template_has_thinking(t) == 1);
    char *out = NULL;
    CHECK(tern_chat_template_render(t, "[{\"role\":\"user\",\"content\":\"Hi\"}]", NULL, 1, "{\"enable_thinking\":false}",
                                    &out) == TERN_OK);
    CHECK(out && !strcmp(out, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"));
    free(out);
    tern_chat_template_free(t);
    snprintf(dir, sizeof dir, "%s/fixtures/tokenizers/gemma3", shared);
    CHECK(tern_chat_template_load(dir, &t) == TERN_OK);
    CHECK(tern_chat_template_has_thinking(t) == 0);
    CHECK(tern_chat_template_render(t, "[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"user\",\"content\":\"b\"}]",
                                    NULL, 1, NULL, &out) == TERN_E_INVALID);
    CHECK(strstr(tern_last_error(), "Conversation roles must alternate") != NULL);
    tern_chat_template_free(t);
    CHECK(tern_chat_template_load("/nonexistent/dir", &t) == TERN_E_FORMAT && !t);
}

int main(void)
{
    test_reference_cases();
    test_variables();
    test_whitespace();
    test_errors_with_lines();
    test_malformed();
    test_limits();
    test_load();
    return check_summary("jinja");
}
