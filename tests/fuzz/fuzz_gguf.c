/* libFuzzer target: a GGUF file image (header, metadata, tensor infos, data)
 * read by the GGUF loader, then its tokenizer metadata turned into the
 * tokenizer.json / tokenizer_config.json the text layer reads. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "io/gguf.h"
#include "model/gguf_tok.h"

#include <stdio.h>
#define TRAP() (fprintf(stderr, "invariant broken at line %d\n", __LINE__), __builtin_trap())

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tern_gguf *g = NULL;
    if (tern_gguf_open_memory(data, size, "fuzz.gguf", &g) != TERN_OK) return 0;
    volatile uint64_t sink = 0;
    for (int i = 0; i < tern_gguf_n_kv(g); i++) {
        const tern_gguf_kv *kv = tern_gguf_kv_at(g, i);
        if (tern_gguf_find_kv(g, kv->key) == NULL) TRAP();
        if (kv->type == TERN_GGUF_STRING) {
            if (kv->len && ((const uint8_t *)kv->str < data || (const uint8_t *)kv->str + kv->len > data + size))
                TRAP();
            if (kv->len) sink += (uint8_t)kv->str[kv->len - 1];
        } else if (kv->type == TERN_GGUF_ARRAY) {
            /* Every element the loader accepted lies inside the input. */
            uint64_t n = kv->count < 4096 ? kv->count : 4096, pos = 0;
            for (uint64_t j = 0; j < n; j++) {
                if (kv->elem == TERN_GGUF_STRING) {
                    const char *s;
                    uint64_t len;
                    tern_gguf_array_str(kv, &pos, &s, &len);
                    if (len && ((const uint8_t *)s < data || (const uint8_t *)s + len > data + size)) TRAP();
                    if (len) sink += (uint8_t)s[len - 1];
                } else if (kv->elem == TERN_GGUF_F32 || kv->elem == TERN_GGUF_F64) {
                    sink += (uint64_t)(tern_gguf_array_float(kv, j) != 0.0);
                } else {
                    sink += (uint64_t)tern_gguf_array_int(kv, j);
                }
            }
        } else {
            int64_t v;
            double f;
            if (tern_gguf_get_int(g, kv->key, &v) == TERN_OK) sink += (uint64_t)v;
            if (tern_gguf_get_float(g, kv->key, &f) == TERN_OK) sink += (uint64_t)(f != 0.0);
        }
    }
    for (int i = 0; i < tern_gguf_n_tensors(g); i++) {
        const tern_gguf_tensor *t = tern_gguf_tensor_at(g, i);
        const uint8_t *p = t->data;
        if (t->nbytes && (p < data || p + t->nbytes > data + size)) TRAP();
        if (t->nbytes) sink += p[0] ^ p[t->nbytes - 1];
        if (tern_gguf_find_tensor(g, t->name) == NULL) TRAP();
    }
    char *tok = NULL, *cfg = NULL;
    if (tern_gguf_text_json(g, &tok, &cfg) == TERN_OK) {
        /* What it writes must be JSON the text layer can read back (as it
         * reads them: tokenizer.json without NUL, the config with). */
        json_t *a = json_loads(tok, 0, NULL), *b = json_loads(cfg, JSON_ALLOW_NUL, NULL);
        if (!a || !b) TRAP();
        json_decref(a);
        json_decref(b);
    }
    free(tok);
    free(cfg);
    tern_gguf_close(g);
    (void)sink;
    return 0;
}
