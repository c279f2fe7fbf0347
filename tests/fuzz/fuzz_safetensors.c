/* libFuzzer target: a safetensors file image (8-byte header length, JSON
 * header, tensor data) read by the checkpoint loader. */
#include <stddef.h>
#include <stdint.h>

#include "io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tern_tensor_set *s = NULL;
    if (tern_tensors_open_memory(data, size, "fuzz.safetensors", &s) == TERN_OK) {
        /* Every tensor the loader accepts must lie inside the input. */
        for (int i = 0; i < tern_tensors_count(s); i++) {
            const tern_tensor *t = tern_tensors_at(s, i);
            const uint8_t *p = t->data;
            if (t->nbytes && (p < data || p + t->nbytes > data + size)) __builtin_trap();
            if (t->nbytes) {
                volatile uint8_t sink = p[0] ^ p[t->nbytes - 1];
                (void)sink;
            }
            if (tern_tensors_find(s, t->name) == NULL) __builtin_trap();
        }
        tern_tensors_close(s);
    }
    return 0;
}
