/* Request parsing and validation (mlx_lm.server's messages), the Anthropic
 * translation, response shaping, and a deterministic fuzz of the parser. */
#include "check.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/reply.h"
#include "server/request.h"

static srv_defaults D;

static tern_status parse(srv_api api, const char *body, srv_request *r)
{
    return srv_request_parse(api, body, strlen(body), &D, r);
}

/* Expects a 400 whose message starts with want. */
static void expect_error(srv_api api, const char *body, const char *want)
{
    srv_request r;
    tern_status st = parse(api, body, &r);
    CHECK_MSG(st == TERN_E_INVALID && !strncmp(tern_last_error(), want, strlen(want)),
              "body %s: got %d '%s', want '%s'", body, st, tern_last_error(), want);
    srv_request_free(&r);
}

static void test_valid(void)
{
    srv_request r;
    CHECK(parse(SRV_API_CHAT,
                "{\"model\":\"m\",\"messages\":[{\"role\":\"developer\",\"content\":\"sys\"},"
                "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]},"
                "{\"role\":\"assistant\",\"content\":\"pre\"}],"
                "\"stream\":true,\"max_completion_tokens\":7,\"max_tokens\":9,\"temperature\":0.5,\"top_k\":3,"
                "\"stop\":[\"x\",\"\",\"yy\"],\"logit_bias\":{\"12\":5,\"7\":-1.5},\"seed\":42,\"logprobs\":true,"
                "\"top_logprobs\":3,\"unknown_field\":[1,2],\"chat_template_kwargs\":{\"enable_thinking\":false}}",
                &r) == TERN_OK);
    CHECK(r.stream == 1 && r.max_tokens == 7 && r.sampling.temperature == 0.5f && r.sampling.top_k == 3);
    CHECK(!strcmp(r.model, "m") && r.n_stop == 2 && !strcmp(r.stop[1], "yy"));
    CHECK(r.sampling.n_bias == 2 && r.has_seed && r.sampling.seed == 42 && r.logprobs && r.top_logprobs == 3);
    CHECK(json_array_size(r.messages) == 2 && r.prefill && !strcmp(r.prefill, "pre"));
    json_t *m0 = json_array_get(r.messages, 0), *m1 = json_array_get(r.messages, 1);
    CHECK(!strcmp(json_string_value(json_object_get(m0, "role")), "system"));
    CHECK(!strcmp(json_string_value(json_object_get(m1, "content")), "ab"));
    CHECK(json_is_false(json_object_get(r.template_kwargs, "enable_thinking")));
    srv_request_free(&r);

    CHECK(parse(SRV_API_TEXT, "{\"prompt\":\"def f(\",\"stop\":\"\\n\"}", &r) == TERN_OK);
    CHECK(!strcmp(r.prompt, "def f(") && r.max_tokens == 512 && r.n_stop == 1 && r.top_logprobs == -1);
    CHECK(!strcmp(r.model, "default_model") && r.sampling.top_p == 1.0f);
    srv_request_free(&r);
}

static void test_errors(void)
{
    const char *msgs = "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]";
    char b[512];
#define E(field, want) do { snprintf(b, sizeof b, "{%s,%s}", msgs, field); expect_error(SRV_API_CHAT, b, want); } while (0)
    E("\"stream\":1", "stream must be of type bool");
    E("\"max_tokens\":0", "max_tokens must be at least 1");
    E("\"max_tokens\":1.5", "max_tokens must be of type int");
    E("\"temperature\":-0.1", "temperature must be at least 0");
    E("\"temperature\":\"hot\"", "temperature must be of type ('float', 'int')");
    E("\"top_p\":1.5", "top_p must be at most 1");
    E("\"top_k\":-2", "top_k must be at least 0");
    E("\"min_p\":2", "min_p must be at most 1");
    E("\"repetition_penalty\":-1", "repetition_penalty must be at least 0");
    E("\"logprobs\":3", "logprobs must be of type bool");
    E("\"top_logprobs\":\"3\"", "top_logprobs must be of type int");
    E("\"top_logprobs\":-3", "top_logprobs must be at least 0");
    E("\"top_logprobs\":12", "top_logprobs must be at most 11");
    E("\"repetition_context_size\":-1", "repetition_context_size must be at least 0");
    E("\"logit_bias\":[1]", "logit_bias must be of type dict");
    E("\"logit_bias\":{\"a\":1}", "logit_bias must be a dict of int to float");
    E("\"logit_bias\":{\"1\":\"x\"}", "logit_bias must be a dict of int to float");
    E("\"logit_bias\":{\"99999\":1}", "logit_bias token id 99999 is out of range");
    E("\"xtc_probability\":1.5", "xtc_probability must be at most 1");
    E("\"xtc_threshold\":1.7", "xtc_threshold must be at most 1");
    E("\"xtc_threshold\":\"a\"", "xtc_threshold must be of type float");
    E("\"presence_context_size\":-1", "presence_context_size must be at least 0");
    E("\"frequency_penalty\":[]", "frequency_penalty must be of type ('float', 'int')");
    E("\"model\":3", "requested_model must be of type str");
    E("\"seed\":1.5", "seed must be of type int");
    E("\"stop\":[1]", "stop must be a string or a list");
    E("\"tools\":{}", "tools must be a list");
#undef E
    {
        char big[2200];
        snprintf(big, sizeof big, "{%s,\"stop\":[\"%01100d\"]}", msgs, 0);
        expect_error(SRV_API_CHAT, big, "stop strings must be at most 1024 bytes long");
    }
    expect_error(SRV_API_CHAT, "{\"messages\":[", "Invalid JSON in request body");
    expect_error(SRV_API_CHAT, "[1,2]", "Request should be a JSON dictionary");
    expect_error(SRV_API_CHAT, "{}", "Request did not contain messages");
    expect_error(SRV_API_CHAT, "{\"messages\":[]}", "messages must be a non-empty list");
    expect_error(SRV_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}",
                 "Only 'text' content type is supported.");
    expect_error(SRV_API_CHAT, "{\"messages\":[{\"content\":\"x\"}]}", "each message needs a string role");
    expect_error(SRV_API_TEXT, "{\"prompt\":\"\"}", "prompt must be a non-empty string");
    expect_error(SRV_API_TEXT, "{\"prompt\":[1,2]}", "prompt must be a non-empty string");
    expect_error(SRV_API_ANTHROPIC, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", "max_tokens: field required");
    expect_error(SRV_API_ANTHROPIC, "{\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\"}]}]}",
                 "messages: content block type \"image\" is not supported");
}

static void test_anthropic(void)
{
    srv_request r;
    CHECK(parse(SRV_API_ANTHROPIC,
                "{\"model\":\"claude\",\"max_tokens\":16,\"system\":[{\"type\":\"text\",\"text\":\"be brief\"}],"
                "\"stop_sequences\":[\"END\"],\"messages\":[{\"role\":\"user\",\"content\":\"weather?\"},"
                "{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"w\",\"input\":{\"c\":\"x\"}}]},"
                "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_1\",\"content\":\"sunny\"}]}],"
                "\"tools\":[{\"name\":\"w\",\"description\":\"d\",\"input_schema\":{\"type\":\"object\"}},{\"type\":\"web_search\",\"name\":\"ws\"}]}",
                &r) == TERN_OK);
    CHECK(r.max_tokens == 16 && r.n_stop == 1 && json_array_size(r.messages) == 4 && json_array_size(r.tools) == 1);
    json_t *m = json_array_get(r.messages, 2);
    CHECK(!strcmp(json_string_value(json_object_get(m, "role")), "assistant"));
    CHECK(json_is_object(json_object_get(json_object_get(json_array_get(json_object_get(m, "tool_calls"), 0), "function"), "arguments")));
    CHECK(!strcmp(json_string_value(json_object_get(json_array_get(r.messages, 3), "role")), "tool"));
    srv_request_free(&r);
}

static void test_reply(void)
{
    srv_buf b;
    srv_buf_init(&b);
    srv_reply r;
    CHECK(srv_reply_init(&r, SRV_API_CHAT, 0, 0, "m") == 0);
    srv_reply_end e = {.content = "hi", .reasoning = "", .finish = "stop", .prompt_tokens = 3, .completion_tokens = 2};
    CHECK(srv_reply_finish(&r, &e, &b) == 0);
    json_t *j = json_loads(srv_buf_str(&b), 0, NULL);
    CHECK(j && !strcmp(json_string_value(json_object_get(j, "object")), "chat.completion"));
    CHECK(!strncmp(json_string_value(json_object_get(j, "id")), "chatcmpl-", 9));
    json_t *msg = json_object_get(json_array_get(json_object_get(j, "choices"), 0), "message");
    CHECK(!strcmp(json_string_value(json_object_get(msg, "content")), "hi"));
    CHECK(!json_object_get(msg, "reasoning") && !json_object_get(msg, "tool_calls"));
    CHECK(json_integer_value(json_object_get(json_object_get(json_object_get(j, "usage"), "prompt_tokens_details"), "cached_tokens")) == 0);
    CHECK(json_integer_value(json_object_get(json_object_get(j, "usage"), "total_tokens")) == 5);
    json_decref(j);
    srv_reply_free(&r);

    srv_buf_clear(&b);
    CHECK(srv_reply_init(&r, SRV_API_CHAT, 1, 0, "m") == 0);
    CHECK(srv_reply_begin(&r, 3, &b) == 0 && srv_reply_delta(&r, "a", "", &b) == 0 && srv_reply_finish(&r, &e, &b) == 0);
    CHECK(strstr(srv_buf_str(&b), "\"role\": \"assistant\"") && strstr(srv_buf_str(&b), "\n\ndata: [DONE]\n\n"));
    srv_reply_free(&r);

    srv_buf_clear(&b);
    CHECK(srv_reply_init(&r, SRV_API_ANTHROPIC, 1, 0, "m") == 0);
    CHECK(srv_reply_begin(&r, 3, &b) == 0 && srv_reply_delta(&r, "a", "", &b) == 0 && srv_reply_finish(&r, &e, &b) == 0);
    const char *s = srv_buf_str(&b);
    CHECK(strstr(s, "event: message_start") && strstr(s, "event: content_block_delta") && strstr(s, "\"end_turn\"") &&
          strstr(s, "event: message_stop"));
    srv_reply_free(&r);
    srv_buf_free(&b);

    char *err = srv_error_body(SRV_API_CHAT, 400, "bad \"x\"");
    CHECK(err && !strcmp(err, "{\"error\": {\"message\": \"bad \\\"x\\\"\", \"type\": \"invalid_request_error\", \"param\": null, \"code\": null}}"));
    free(err);
}

/* Random mutations of valid bodies: the parser must answer every one without
 * crashing or leaking; accepted ones are also shaped into replies. */
static unsigned long long rng = 0x2545F4914F6CDD1DULL;
static unsigned rnd(unsigned n) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return (unsigned)(rng % n); }

static void test_fuzz(void)
{
    const char *seeds[] = {
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":null,"
        "\"tool_calls\":[{\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"}}]}],"
        "\"stop\":[\"a\",\"b\"],\"logit_bias\":{\"1\":2.5},\"top_logprobs\":2,\"logprobs\":true,\"stream\":false,"
        "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{}}}],\"seed\":1,\"max_tokens\":5}",
        "{\"prompt\":\"x = 1\\n\",\"max_tokens\":4,\"temperature\":0.7,\"top_p\":0.9,\"min_p\":0.1,\"xtc_probability\":0.5,"
        "\"xtc_threshold\":0.1,\"presence_penalty\":0.5,\"frequency_penalty\":0.2,\"repetition_penalty\":1.1}",
        "{\"model\":\"c\",\"max_tokens\":8,\"system\":\"s\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\","
        "\"text\":\"q\"},{\"type\":\"tool_result\",\"tool_use_id\":\"t\",\"content\":[{\"type\":\"text\",\"text\":\"r\"}]}]}],"
        "\"tools\":[{\"name\":\"w\",\"input_schema\":{\"type\":\"object\"}}],\"stop_sequences\":[\"E\"],\"stream\":true}",
    };
    const srv_api apis[] = {SRV_API_CHAT, SRV_API_TEXT, SRV_API_ANTHROPIC};
    const char alphabet[] = "{}[]\":,0123456789-.eE truefalsnul\\u00ff\x80\x01" "abc";
    int accepted = 0, total = 0;
    clock_t start = clock();
    for (int it = 0; it < 60000 && (double)(clock() - start) / CLOCKS_PER_SEC < 6.0; it++) {
        int which = it % 3;
        size_t len = strlen(seeds[which]);
        char buf[1024];
        memcpy(buf, seeds[which], len);
        int nmut = 1 + (int)rnd(4);
        for (int k = 0; k < nmut; k++) {
            unsigned op = rnd(4), pos = rnd((unsigned)len + 1);
            if (op == 0 && pos < len) buf[pos] = alphabet[rnd(sizeof alphabet - 1)];
            else if (op == 1 && len < sizeof buf - 1) { memmove(buf + pos + 1, buf + pos, len - pos); buf[pos] = alphabet[rnd(sizeof alphabet - 1)]; len++; }
            else if (op == 2 && pos < len) { memmove(buf + pos, buf + pos + 1, len - pos - 1); len--; }
            else len = pos;
        }
        srv_request r;
        tern_status st = srv_request_parse(apis[which], buf, len, &D, &r);
        total++;
        if (st == TERN_OK) {
            accepted++;
            srv_reply rep;
            srv_buf out;
            srv_buf_init(&out);
            srv_reply_init(&rep, r.api, r.stream, r.include_usage, r.model);
            srv_reply_end e = {.content = "x", .reasoning = "", .finish = "length", .tool_calls = r.tools};
            srv_reply_begin(&rep, 1, &out);
            srv_reply_delta(&rep, "y", "z", &out);
            srv_reply_finish(&rep, &e, &out);
            srv_reply_free(&rep);
            srv_buf_free(&out);
        } else {
            CHECK(st == TERN_E_INVALID && tern_last_error()[0]);
        }
        srv_request_free(&r);
    }
    fprintf(stderr, "fuzz: %d bodies, %d accepted\n", total, accepted);
    CHECK(total > 1000 && accepted > 0);
}

/* The per-token string escaper writes exactly what jansson writes. */
static void test_escape(void)
{
    const char *cases[] = {"plain", "", "q\"uote\\back/slash", "\n\r\t\b\f\x01\x1f\x7f",
                           "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xe4\xb8\xad"};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        json_t *j = json_string(cases[i]);
        srv_buf a, b;
        srv_buf_init(&a);
        srv_buf_init(&b);
        srv_json_append(&a, j);
        srv_json_append_string(&b, cases[i], strlen(cases[i]));
        CHECK_MSG(!strcmp(srv_buf_str(&a), srv_buf_str(&b)), "%s vs %s", srv_buf_str(&a), srv_buf_str(&b));
        srv_buf_free(&a);
        srv_buf_free(&b);
        json_decref(j);
    }
    /* The fast streamed delta equals the one built with jansson. */
    srv_reply r;
    CHECK(srv_reply_init(&r, SRV_API_CHAT, 1, 0, "m\x01tern-delta\x01") == 0);
    srv_buf fast;
    srv_buf_init(&fast);
    CHECK(srv_reply_delta(&r, "x \"\xc3\xa9\n", "", &fast) == 0);
    json_t *ev = json_loads(srv_buf_str(&fast) + 6, 0, NULL);
    CHECK(ev && !strcmp(json_string_value(json_object_get(json_object_get(json_array_get(
                  json_object_get(ev, "choices"), 0), "delta"), "content")), "x \"\xc3\xa9\n"));
    CHECK(ev && !strcmp(json_string_value(json_object_get(ev, "model")), "m\x01tern-delta\x01"));
    json_decref(ev);
    srv_buf_clear(&fast);
    CHECK(srv_reply_delta(&r, "", "think", &fast) == 0 && strstr(srv_buf_str(&fast), "\"reasoning\": \"think\"}"));
    CHECK(!strncmp(srv_buf_str(&fast), "data: {", 7) && !strcmp(srv_buf_str(&fast) + fast.len - 2, "\n\n"));
    srv_buf_free(&fast);
    srv_reply_free(&r);
}

int main(void)
{
    test_escape();
    srv_defaults_init(&D);
    D.vocab_size = 8192;
    test_valid();
    test_errors();
    test_anthropic();
    test_reply();
    test_fuzz();
    return check_summary("server_request");
}
