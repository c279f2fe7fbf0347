/* libFuzzer target: a chat template source through the Jinja lexer, parser
 * and renderer, rendered for a fixed conversation with tools. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tern/chat_template.h"

static const char MESSAGES[] =
    "[{\"role\":\"system\",\"content\":\"You are helpful.\"},"
    "{\"role\":\"user\",\"content\":\"Hi <b>there</b> \\u00e9\"},"
    "{\"role\":\"assistant\",\"content\":\"\",\"reasoning_content\":\"think\","
    "\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":{\"x\":[1,2.5,null,true]}}}]},"
    "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"42\"},"
    "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"again\"}]}]";
static const char TOOLS[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":\"d\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"array\"}},\"required\":[\"x\"]}}}]";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *src = malloc(size + 1);
    if (!src) return 0;
    memcpy(src, data, size);
    src[size] = '\0';
    tern_chat_template *t = NULL;
    if (tern_chat_template_create(src, "<s>", "</s>", &t) == TERN_OK) {
        tern_chat_template_set_limits(t, 1 << 20, 200000);
        char *out = NULL;
        if (tern_chat_template_render(t, MESSAGES, TOOLS, 1, "{\"enable_thinking\":false}", &out) == TERN_OK) free(out);
        tern_chat_template_free(t);
    }
    free(src);
    return 0;
}
