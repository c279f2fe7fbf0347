/* libFuzzer target: config.json text read into a model configuration
 * (families, rope variants, MoE fields, EOS lists). */
#include <stddef.h>
#include <stdint.h>

#include "io/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tern_model_config cfg;
    if (tern_config_parse((const char *)data, size, "fuzz/config.json", &cfg) == TERN_OK) {
        /* An accepted config has the shapes the forward pass relies on. */
        if (cfg.n_layers <= 0 || cfg.hidden <= 0 || cfg.n_heads <= 0 || cfg.n_kv_heads <= 0 || cfg.head_dim <= 0 ||
            cfg.vocab <= 0 || !cfg.layer_is_moe || cfg.rope_dim <= 0 || cfg.rope_dim > cfg.head_dim || !cfg.inv_freq)
            __builtin_trap();
        volatile float sink = cfg.inv_freq[cfg.rope_dim / 2 - 1];
        (void)sink;
        tern_config_clear(&cfg);
    }
    return 0;
}
