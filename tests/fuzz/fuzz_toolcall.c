/* libFuzzer target: model output through the streaming text parsers (stop
 * strings, <think> splitting, tool-call routing) and the tool-call markup
 * parser. The input is cut into deltas at 0xFF bytes. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "text/stop.h"
#include "text/think.h"
#include "text/toolcall.h"

static const char TOOLS[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"city\":{\"type\":\"string\"},\"n\":{\"type\":\"integer\"},\"o\":{\"type\":\"object\"}}}}}]";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static json_t *tools;
    if (!tools) tools = json_loads(TOOLS, 0, NULL);
    const char *const stops[] = {"</s>", "STOP", "\n\n\n"};
    tern_stop *stop = NULL;
    if (tern_stop_create(stops, 3, &stop) != TERN_OK) return 0;
    tern_think think;
    tern_tools router;
    tern_think_init(&think, size && (data[0] & 1));
    tern_tools_init(&router);
    tern_buf a, content, reasoning;
    tern_buf_init(&a);
    tern_buf_init(&content);
    tern_buf_init(&reasoning);
    size_t i = 0;
    int hit = 0;
    while (i < size && !hit) {
        size_t j = i;
        while (j < size && data[j] != 0xFF) j++;
        tern_buf_clear(&a);
        hit = tern_stop_push(stop, (const char *)data + i, j - i, &a);
        if (hit < 0) break;
        tern_buf b;
        tern_buf_init(&b);
        tern_think_push(&think, tern_buf_str(&a), a.len, &b, &reasoning);
        tern_tools_push(&router, tern_buf_str(&b), b.len, &content);
        tern_buf_free(&b);
        i = j + 1;
    }
    tern_buf_clear(&a);
    tern_stop_flush(stop, &a);
    tern_think_push(&think, tern_buf_str(&a), a.len, &content, &reasoning);
    tern_think_flush(&think, &content, &reasoning);
    json_t *calls = NULL;
    tern_tools_finish(&router, tools, &content, &calls);
    json_decref(calls);
    /* The markup parser on the raw input as well. */
    json_decref(tern_tools_parse((const char *)data, size, tools));
    tern_buf_free(&a);
    tern_buf_free(&content);
    tern_buf_free(&reasoning);
    tern_tools_free(&router);
    tern_think_free(&think);
    tern_stop_free(stop);
    return 0;
}
