/* libFuzzer target: HTTP request bodies through the server's parser and
 * validator. The first byte picks the route: OpenAI chat completions, text
 * completions, Anthropic messages, or Anthropic count_tokens. */
#include <stddef.h>
#include <stdint.h>

#include "server/request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    srv_defaults d;
    srv_defaults_init(&d);
    d.vocab_size = 1000;
    srv_request r;
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    tern_status st;
    switch (data[0] & 3) {
    case 0: st = srv_request_parse(SRV_API_CHAT, body, len, &d, &r); break;
    case 1: st = srv_request_parse(SRV_API_TEXT, body, len, &d, &r); break;
    case 2: st = srv_request_parse(SRV_API_ANTHROPIC, body, len, &d, &r); break;
    default: st = srv_request_parse_count(body, len, &d, &r); break;
    }
    if (st == TERN_OK) {
        /* An accepted request is one the engine can run. */
        if (r.max_tokens < 1 || (r.api != SRV_API_TEXT && !r.messages) || (r.api == SRV_API_TEXT && !r.prompt))
            __builtin_trap();
        for (int i = 0; i < r.sampling.n_bias; i++)
            if (r.sampling.bias_ids[i] < 0 || r.sampling.bias_ids[i] >= d.vocab_size) __builtin_trap();
        srv_request_free(&r);
    }
    return 0;
}
