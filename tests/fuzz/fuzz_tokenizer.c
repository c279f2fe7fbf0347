/* libFuzzer target: tokenizer.json text loaded into a tokenizer (model,
 * added tokens, normalizer, pre-tokenizer, decoder, post-processor), then a
 * fixed text encoded and decoded through whatever pipeline it describes. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tern/tokenizer.h"

static const char TEXT[] = "Hello, World! 12345 caf\xc3\xa9  \xe2\x80\x94 <|im_start|>user\n\tx=1;\xf0\x9f\x98\x80";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tern_tokenizer *t = NULL;
    if (tern_tokenizer_load_json((const char *)data, size, &t) != TERN_OK) return 0;
    int32_t *ids = NULL;
    int n = 0;
    if (tern_tokenizer_encode(t, TEXT, sizeof TEXT - 1, 1, &ids, &n) == TERN_OK) {
        char *text = NULL;
        if (tern_tokenizer_decode(t, ids, n, 0, &text) == TERN_OK) free(text);
        tern_detok *d = NULL;
        if (tern_detok_create(t, 1, &d) == TERN_OK) {
            for (int i = 0; i < n; i++) {
                char *delta = NULL;
                if (tern_detok_push(d, ids[i], &delta) != TERN_OK) break;
                free(delta);
            }
            char *rest = NULL;
            if (tern_detok_flush(d, &rest) == TERN_OK) free(rest);
            tern_detok_free(d);
        }
        free(ids);
    }
    tern_tokenizer_free(t);
    return 0;
}
