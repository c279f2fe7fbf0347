/* Server text pipeline: stop matcher, think splitter, tool-call router and
 * parsers, checked on fixed cases and on random splits of the same text. */
#include "check.h"

#include <stdlib.h>
#include <string.h>

#include "server/pipe.h"
#include "text/stop.h"
#include "text/think.h"
#include "text/toolcall.h"

static unsigned long long rng = 88172645463325252ULL;
static unsigned rnd(unsigned n) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return (unsigned)(rng % n); }

/* Feeds text to a fresh matcher in random pieces; returns emitted text (owned) and *hit. */
static char *stop_run(const char *const *seqs, int n, const char *text, int *hit, int *streamed_stop_bytes)
{
    tern_stop *s;
    CHECK(tern_stop_create(seqs, n, &s) == TERN_OK);
    srv_buf out;
    srv_buf_init(&out);
    size_t len = strlen(text), i = 0;
    *hit = 0;
    while (i < len && !*hit) {
        size_t k = 1 + rnd(4);
        if (k > len - i) k = len - i;
        *hit = tern_stop_push(s, text + i, k, &out);
        i += k;
    }
    if (!*hit) tern_stop_flush(s, &out);
    *streamed_stop_bytes = 0;
    for (int j = 0; j < n; j++)
        if (seqs[j][0] && strstr(srv_buf_str(&out), seqs[j])) *streamed_stop_bytes = 1;
    tern_stop_free(s);
    return srv_buf_take(&out);
}

static void test_stop(void)
{
    const char *seqs[] = {"END", "\n\n", ""};
    for (int rep = 0; rep < 200; rep++) {
        int hit, leaked;
        char *o = stop_run(seqs, 3, "hello EN world\nEND tail", &hit, &leaked);
        CHECK(hit == 1 && !leaked);
        CHECK(!strcmp(o, "hello EN world\n"));
        free(o);
        o = stop_run(seqs, 3, "no stop here E", &hit, &leaked);
        CHECK(hit == 0 && !strcmp(o, "no stop here E"));
        free(o);
        o = stop_run(seqs, 3, "a\n\nb END", &hit, &leaked);
        CHECK(hit == 1 && !strcmp(o, "a"));
        free(o);
    }
    /* The earliest match wins even if a later sequence completes first in the list. */
    const char *two[] = {"bcd", "cx"};
    int hit, leaked;
    char *o = stop_run(two, 2, "abcxbcd", &hit, &leaked);
    CHECK(hit && !strcmp(o, "ab"));
    free(o);
    /* Held-back text never leaks before the decision. */
    tern_stop *s;
    const char *one[] = {"STOP"};
    CHECK(tern_stop_create(one, 1, &s) == TERN_OK);
    srv_buf b;
    srv_buf_init(&b);
    CHECK(tern_stop_push(s, "abcST", 5, &b) == 0 && !strcmp(srv_buf_str(&b), "abc"));
    CHECK(tern_stop_push(s, "O", 1, &b) == 0 && !strcmp(srv_buf_str(&b), "abc"));
    CHECK(tern_stop_push(s, "x", 1, &b) == 0 && !strcmp(srv_buf_str(&b), "abcSTOx"));
    CHECK(tern_stop_push(s, "STOP!", 5, &b) == 1 && !strcmp(srv_buf_str(&b), "abcSTOx"));
    CHECK(tern_stop_push(s, "more", 4, &b) == 1 && tern_stop_matched(s));
    tern_stop_free(s);
    srv_buf_free(&b);
    /* No sequences: pass-through. */
    CHECK(tern_stop_create(NULL, 0, &s) == TERN_OK);
    srv_buf_init(&b);
    CHECK(tern_stop_push(s, "x", 1, &b) == 0 && !strcmp(srv_buf_str(&b), "x"));
    tern_stop_free(s);
    srv_buf_free(&b);
}

static void think_run(const char *text, int inside, char **content, char **reasoning)
{
    tern_think t;
    tern_think_init(&t, inside);
    srv_buf c, r;
    srv_buf_init(&c);
    srv_buf_init(&r);
    size_t len = strlen(text), i = 0;
    while (i < len) {
        size_t k = 1 + rnd(5);
        if (k > len - i) k = len - i;
        size_t before = r.len;
        tern_think_push(&t, text + i, k, &c, &r);
        /* A tag never leaks, whole or partial, into either side. */
        CHECK(!strstr(srv_buf_str(&c), "<th") && !strstr(srv_buf_str(&r) + (before > 8 ? before - 8 : 0), "</th"));
        i += k;
    }
    tern_think_flush(&t, &c, &r);
    tern_think_free(&t);
    *content = srv_buf_take(&c);
    *reasoning = srv_buf_take(&r);
}

static void test_think(void)
{
    for (int rep = 0; rep < 200; rep++) {
        char *c, *r;
        think_run("<think>plan a</think>\n\nanswer", 0, &c, &r);
        CHECK(!strcmp(c, "\n\nanswer") && !strcmp(r, "plan a"));
        free(c); free(r);
        think_run("still thinking</think>done", 1, &c, &r);
        CHECK(!strcmp(c, "done") && !strcmp(r, "still thinking"));
        free(c); free(r);
        think_run("a < b <thin", 0, &c, &r);
        CHECK(!strcmp(c, "a < b <thin") && !strcmp(r, ""));
        free(c); free(r);
    }
}

static const char *TOOLS_JSON =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"city\":{\"type\":\"string\"},\"days\":{\"type\":\"integer\"},\"metric\":{\"type\":\"boolean\"}}}}}]";

static void test_tool_parse(void)
{
    json_t *tools = json_loads(TOOLS_JSON, 0, NULL);
    const char *hermes = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
    json_t *calls = tern_tools_parse(hermes, strlen(hermes), tools);
    CHECK(calls && json_array_size(calls) == 1);
    json_t *fn = json_object_get(json_array_get(calls, 0), "function");
    CHECK(!strcmp(json_string_value(json_object_get(fn, "name")), "get_weather"));
    CHECK(!strcmp(json_string_value(json_object_get(fn, "arguments")), "{\"city\": \"Paris\"}"));
    CHECK(!strncmp(json_string_value(json_object_get(json_array_get(calls, 0), "id")), "call_", 5));
    json_decref(calls);

    const char *coder = "<tool_call>\n<function=get_weather>\n<parameter=city>\nSan Francisco\n</parameter>\n"
                        "<parameter=days>\n3\n</parameter>\n<parameter=metric>\ntrue\n</parameter>\n</function>\n</tool_call>";
    calls = tern_tools_parse(coder, strlen(coder), tools);
    CHECK(calls && json_array_size(calls) == 1);
    fn = json_object_get(json_array_get(calls, 0), "function");
    json_t *args = json_loads(json_string_value(json_object_get(fn, "arguments")), 0, NULL);
    CHECK(args && !strcmp(json_string_value(json_object_get(args, "city")), "San Francisco"));
    CHECK(json_integer_value(json_object_get(args, "days")) == 3 && json_is_true(json_object_get(args, "metric")));
    json_decref(args);
    json_decref(calls);

    /* Two calls, bare <function=> form, unknown parameter kept as a string. */
    const char *two = "<function=a><parameter=x>1</parameter></function>\n<function=b></function>";
    calls = tern_tools_parse(two, strlen(two), tools);
    CHECK(calls && json_array_size(calls) == 2);
    fn = json_object_get(json_array_get(calls, 0), "function");
    CHECK(!strcmp(json_string_value(json_object_get(fn, "arguments")), "{\"x\": \"1\"}"));
    json_decref(calls);

    const char *bad[] = {"<tool_call>not json</tool_call>", "<tool_call>{\"arguments\": {}}</tool_call>",
                         "<function=>x</function>", "<tool_call>{\"name\": \"f\"}</tool_call> trailing", ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) CHECK(tern_tools_parse(bad[i], strlen(bad[i]), tools) == NULL);
    json_decref(tools);
}

/* Whole pipeline on random splits: markup never reaches content. */
static void test_pipe(void)
{
    json_t *tools = json_loads(TOOLS_JSON, 0, NULL);
    const char *text = "<think>I should call</think>Sure. <tool_call>{\"name\": \"get_weather\", "
                       "\"arguments\": {\"city\": \"Oslo\"}}</tool_call>";
    for (int rep = 0; rep < 200; rep++) {
        srv_pipe p;
        CHECK(srv_pipe_init(&p, NULL, 0, 1, 0, 1, NULL) == TERN_OK);
        srv_buf c, r;
        srv_buf_init(&c);
        srv_buf_init(&r);
        size_t len = strlen(text), i = 0;
        while (i < len) {
            size_t k = 1 + rnd(6);
            if (k > len - i) k = len - i;
            CHECK(srv_pipe_push(&p, text + i, k, &c, &r) == 0);
            CHECK(!strchr(srv_buf_str(&c), '<'));
            i += k;
        }
        json_t *calls;
        CHECK(srv_pipe_finish(&p, tools, &c, &r, &calls) == 0);
        CHECK(!strcmp(srv_buf_str(&c), "Sure. ") && !strcmp(srv_buf_str(&r), "I should call"));
        CHECK(calls && json_array_size(calls) == 1);
        json_decref(calls);
        srv_buf_free(&c);
        srv_buf_free(&r);
        srv_pipe_free(&p);
    }
    /* Unparseable markup is released as content at the end; stop ends before it. */
    const char *stops[] = {"STOP"};
    srv_pipe p;
    CHECK(srv_pipe_init(&p, stops, 1, 0, 0, 1, NULL) == TERN_OK);
    srv_buf c, r;
    srv_buf_init(&c);
    srv_buf_init(&r);
    CHECK(srv_pipe_push(&p, "x <tool_call>oops", 17, &c, &r) == 0);
    CHECK(!strcmp(srv_buf_str(&c), "x "));
    CHECK(srv_pipe_push(&p, " STOP after", 11, &c, &r) == 1);
    json_t *calls;
    CHECK(srv_pipe_finish(&p, tools, &c, &r, &calls) == 0);
    CHECK(calls == NULL && !strcmp(srv_buf_str(&c), "x <tool_call>oops "));
    srv_buf_free(&c);
    srv_buf_free(&r);
    srv_pipe_free(&p);

    /* A prefill that leaves a call open: the reply completes it. */
    CHECK(srv_pipe_init(&p, NULL, 0, 0, 0, 1, "ok <function=get_weather>\n<parameter=city>\n") == TERN_OK);
    srv_buf_init(&c);
    srv_buf_init(&r);
    CHECK(srv_pipe_push(&p, "Rome\n</parameter>", 17, &c, &r) == 0);
    CHECK(srv_pipe_finish(&p, tools, &c, &r, &calls) == 0);
    CHECK(calls && json_array_size(calls) == 1 && c.len == 0);
    json_t *fn = json_object_get(json_array_get(calls, 0), "function");
    CHECK(!strcmp(json_string_value(json_object_get(fn, "arguments")), "{\"city\": \"Rome\"}"));
    json_decref(calls);
    srv_buf_free(&c);
    srv_buf_free(&r);
    srv_pipe_free(&p);
    /* One leading space of the reply is dropped, as mlx_lm's detokenizers do. */
    CHECK(srv_pipe_init(&p, NULL, 0, 0, 0, 0, NULL) == TERN_OK);
    srv_buf_init(&c);
    srv_buf_init(&r);
    CHECK(srv_pipe_push(&p, "", 0, &c, &r) == 0 && srv_pipe_push(&p, "  x", 3, &c, &r) == 0);
    CHECK(srv_pipe_push(&p, " y", 2, &c, &r) == 0 && !strcmp(srv_buf_str(&c), " x y"));
    srv_buf_free(&c);
    srv_buf_free(&r);
    srv_pipe_free(&p);
    /* A closed call in the prefill seeds nothing. */
    CHECK(srv_pipe_init(&p, NULL, 0, 0, 0, 1, "<tool_call>{}</tool_call>") == TERN_OK && !p.tools.capturing);
    srv_pipe_free(&p);
    json_decref(tools);
}

int main(void)
{
    test_stop();
    test_think();
    test_tool_parse();
    test_pipe();
    return check_summary("server_text");
}
