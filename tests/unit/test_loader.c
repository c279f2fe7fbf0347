/* Malformed checkpoints and configs give a clear error naming the file and
 * the problem, never a crash. Each case writes a small model directory. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "io/safetensors.h"
#include "tern/model.h"

static char root[256];

static void write_file(const char *dir, const char *name, const void *data, size_t n)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (!f) return;
    fwrite(data, 1, n, f);
    fclose(f);
}

/* A safetensors file from a JSON header and a data section of n bytes. */
static void write_st(const char *dir, const char *header, size_t data_bytes, long len_override)
{
    size_t hl = strlen(header);
    size_t total = 8 + hl + data_bytes;
    uint8_t *buf = calloc(1, total);
    uint64_t L = len_override >= 0 ? (uint64_t)len_override : hl;
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)(L >> (8 * i));
    memcpy(buf + 8, header, hl);
    write_file(dir, "model.safetensors", buf, total);
    free(buf);
}

static const char *CONFIG =
    "{\"model_type\":\"llama\",\"hidden_size\":4,\"num_hidden_layers\":1,\"num_attention_heads\":2,"
    "\"num_key_value_heads\":1,\"intermediate_size\":8,\"vocab_size\":8,\"head_dim\":2,"
    "\"rms_norm_eps\":1e-6,\"tie_word_embeddings\":true}";

static char *case_dir(const char *name)
{
    static char d[512];
    snprintf(d, sizeof d, "%s/%s", root, name);
    mkdir(d, 0755);
    return d;
}

/* Expects load to fail with code and a message containing both needles. */
static void expect_fail(const char *dir, tern_status code, const char *needle1, const char *needle2)
{
    tern_model *m = NULL;
    tern_model_opts o = {.n_threads = 1, .precision = TERN_PRECISION_F32};
    tern_status st = tern_model_load(dir, &o, &m);
    CHECK_MSG(st == code, "%s: status %d (want %d): %s", dir, st, code, tern_last_error());
    CHECK_MSG(strstr(tern_last_error(), needle1), "%s: message '%s' lacks '%s'", dir, tern_last_error(), needle1);
    if (needle2)
        CHECK_MSG(strstr(tern_last_error(), needle2), "%s: message '%s' lacks '%s'", dir, tern_last_error(), needle2);
    CHECK(m == NULL);
    tern_model_free(m);
}

/* Every tensor of the tiny llama config, f32, laid out back to back. */
static void full_header(char *h, size_t cap, const char *emb_dtype, int emb_end_extra)
{
    struct { const char *n; int r, c; } t[] = {
        {"model.embed_tokens.weight", 8, 4}, {"model.norm.weight", 1, 4},
        {"model.layers.0.input_layernorm.weight", 1, 4}, {"model.layers.0.post_attention_layernorm.weight", 1, 4},
        {"model.layers.0.self_attn.q_proj.weight", 4, 4}, {"model.layers.0.self_attn.k_proj.weight", 2, 4},
        {"model.layers.0.self_attn.v_proj.weight", 2, 4}, {"model.layers.0.self_attn.o_proj.weight", 4, 4},
        {"model.layers.0.mlp.gate_proj.weight", 8, 4}, {"model.layers.0.mlp.up_proj.weight", 8, 4},
        {"model.layers.0.mlp.down_proj.weight", 4, 8},
    };
    size_t off = 0, len = 0;
    len += snprintf(h + len, cap - len, "{");
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        size_t bytes = (size_t)t[i].r * t[i].c * 4;
        const char *dt = i == 0 ? emb_dtype : "F32";
        size_t end = off + bytes + (i == 0 ? emb_end_extra : 0);
        if (t[i].r == 1)
            len += snprintf(h + len, cap - len, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%d],\"data_offsets\":[%zu,%zu]}",
                            i ? "," : "", t[i].n, dt, t[i].c, off, end);
        else
            len += snprintf(h + len, cap - len, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%d,%d],\"data_offsets\":[%zu,%zu]}",
                            i ? "," : "", t[i].n, dt, t[i].r, t[i].c, off, end);
        off += bytes;
    }
    snprintf(h + len, cap - len, "}");
}

int main(void)
{
    snprintf(root, sizeof root, "/tmp/tern-loader-%d", (int)getpid());
    mkdir(root, 0755);
    char h[8192];
    const size_t data = 4 * (32 + 4 + 4 + 4 + 16 + 8 + 8 + 16 + 32 + 32 + 32);

    char *d = case_dir("ok");
    write_file(d, "config.json", CONFIG, strlen(CONFIG));
    full_header(h, sizeof h, "F32", 0);
    write_st(d, h, data, -1);
    tern_model *m = NULL;
    tern_model_opts o = {.n_threads = 1, .precision = TERN_PRECISION_F32};
    CHECK_MSG(tern_model_load(d, &o, &m) == TERN_OK, "%s", tern_last_error());
    tern_model_free(m);

    d = case_dir("truncated");
    write_file(d, "config.json", CONFIG, strlen(CONFIG));
    write_file(d, "model.safetensors", "\x10\x00\x00", 3);
    expect_fail(d, TERN_E_FORMAT, "model.safetensors", "too short");

    d = case_dir("hdrlen");
    write_file(d, "config.json", CONFIG, strlen(CONFIG));
    write_st(d, h, data, 1 << 30);
    expect_fail(d, TERN_E_FORMAT, "model.safetensors", "beyond the end");

    d = case_dir("badjson");
    write_file(d, "config.json", CONFIG, strlen(CONFIG));
    write_st(d, "{\"a\": [1,", 0, -1);
    expect_fail(d, TERN_E_FORMAT, "model.safetensors", "not valid JSON");

    d = case_dir("outofrange");
    write_file(d, "config.json", CONFIG, strlen(CONFIG));
    write_st(d, h, data - 64, -1);
    expect_fail(d, TERN_E_FORMAT, "beyond the data section", NULL);

    d = case_dir("overlap");
    write_file(d, "config.json", CONFIG, strlen(CONFIG));
    write_st(d, "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}", 32, -1);
    expect_fail(d, TERN_E_FORMAT, "overlap", "model.safetensors");

    d = case_dir("sizemismatch");
    write_file(d, "config.json", CONFIG, strlen(CONFIG));
    full_header(h, sizeof h, "F32", 4);
    write_st(d, h, data + 4, -1);
    expect_fail(d, TERN_E_FORMAT, "model.embed_tokens.weight", "needs 128 bytes");

    d = case_dir("dtype");
    write_file(d, "config.json", CONFIG, strlen(CONFIG));
    full_header(h, sizeof h, "Q9", 0);
    write_st(d, h, data, -1);
    expect_fail(d, TERN_E_UNSUPPORTED, "dtype 'Q9'", NULL);

    d = case_dir("shape");
    const char *cfg_big = "{\"model_type\":\"llama\",\"hidden_size\":4,\"num_hidden_layers\":1,\"num_attention_heads\":2,"
                          "\"num_key_value_heads\":1,\"intermediate_size\":8,\"vocab_size\":16,\"head_dim\":2}";
    write_file(d, "config.json", cfg_big, strlen(cfg_big));
    full_header(h, sizeof h, "F32", 0);
    write_st(d, h, data, -1);
    expect_fail(d, TERN_E_FORMAT, "model.embed_tokens.weight", "[16,4]");

    d = case_dir("missing");
    write_file(d, "config.json", CONFIG, strlen(CONFIG));
    write_st(d, "{\"model.embed_tokens.weight\":{\"dtype\":\"F32\",\"shape\":[8,4],\"data_offsets\":[0,128]}}", 128, -1);
    expect_fail(d, TERN_E_FORMAT, "missing tensor", "model.norm.weight");

    d = case_dir("modeltype");
    const char *cfg_mt = "{\"model_type\":\"mamba9\",\"hidden_size\":4}";
    write_file(d, "config.json", cfg_mt, strlen(cfg_mt));
    expect_fail(d, TERN_E_UNSUPPORTED, "model_type 'mamba9'", "config.json");

    d = case_dir("rope");
    const char *cfg_rope = "{\"model_type\":\"llama\",\"hidden_size\":4,\"num_hidden_layers\":1,\"num_attention_heads\":2,"
                           "\"intermediate_size\":8,\"vocab_size\":8,\"rope_scaling\":{\"rope_type\":\"longrope\",\"factor\":2}}";
    write_file(d, "config.json", cfg_rope, strlen(cfg_rope));
    expect_fail(d, TERN_E_UNSUPPORTED, "rope type 'longrope'", NULL);

    /* Numbers outside int range are refused, not converted (found by the config fuzz target). */
    d = case_dir("rope_omp");
    const char *cfg_omp = "{\"model_type\":\"llama\",\"hidden_size\":4,\"num_hidden_layers\":1,\"num_attention_heads\":2,"
                          "\"intermediate_size\":8,\"vocab_size\":8,\"rope_scaling\":{\"type\":\"llama3\","
                          "\"original_max_position_embeddings\":222222222222249}}";
    write_file(d, "config.json", cfg_omp, strlen(cfg_omp));
    expect_fail(d, TERN_E_FORMAT, "original_max_position_embeddings", "positive integer");
    /* A huge head_dim is refused before rope tables are built for it (a fuzz-target timeout). */
    d = case_dir("head_dim");
    const char *cfg_hd = "{\"model_type\":\"qwen3\",\"hidden_size\":64,\"num_hidden_layers\":1,\"num_attention_heads\":2,"
                         "\"intermediate_size\":8,\"vocab_size\":8,\"head_dim\":255050564}";
    write_file(d, "config.json", cfg_hd, strlen(cfg_hd));
    expect_fail(d, TERN_E_RANGE, "implausibly large", "head_dim 255050564");
    d = case_dir("rope_prf");
    const char *cfg_prf = "{\"model_type\":\"llama\",\"hidden_size\":4,\"num_hidden_layers\":1,\"num_attention_heads\":2,"
                          "\"intermediate_size\":8,\"vocab_size\":8,\"partial_rotary_factor\":1e300}";
    write_file(d, "config.json", cfg_prf, strlen(cfg_prf));
    expect_fail(d, TERN_E_FORMAT, "partial_rotary_factor", "(0, 1]");

    d = case_dir("noconfig");
    expect_fail(d, TERN_E_IO, "no config.json", NULL);

    d = case_dir("badconfig");
    write_file(d, "config.json", "{\"model_type\": ", 15);
    expect_fail(d, TERN_E_FORMAT, "config.json", "not valid JSON");

    d = case_dir("fieldtype");
    const char *cfg_ft = "{\"model_type\":\"llama\",\"hidden_size\":\"big\"}";
    write_file(d, "config.json", cfg_ft, strlen(cfg_ft));
    expect_fail(d, TERN_E_FORMAT, "hidden_size", "integer");

    d = case_dir("index");
    write_file(d, "config.json", CONFIG, strlen(CONFIG));
    const char *idx = "{\"weight_map\":{\"model.norm.weight\":\"model-00001-of-00002.safetensors\"}}";
    write_file(d, "model.safetensors.index.json", idx, strlen(idx));
    expect_fail(d, TERN_E_IO, "model-00001-of-00002.safetensors", "cannot open");

    /* Hugging Face cache layout: models--org--name/snapshots/<rev> + refs/main. */
    char hf[512], snap[600], refs[600];
    snprintf(hf, sizeof hf, "%s/models--tern--tiny", root);
    snprintf(snap, sizeof snap, "%s/snapshots", hf);
    snprintf(refs, sizeof refs, "%s/refs", hf);
    mkdir(hf, 0755); mkdir(snap, 0755); mkdir(refs, 0755);
    snprintf(snap, sizeof snap, "%s/snapshots/0123456789abcdef0123456789abcdef01234567", hf);
    mkdir(snap, 0755);
    write_file(snap, "config.json", CONFIG, strlen(CONFIG));
    full_header(h, sizeof h, "F32", 0);
    char cwd[512];
    snprintf(cwd, sizeof cwd, "%s", snap);
    write_st(cwd, h, data, -1);
    write_file(refs, "main", "0123456789abcdef0123456789abcdef01234567\n", 41);
    m = NULL;
    CHECK_MSG(tern_model_load(hf, &o, &m) == TERN_OK, "%s", tern_last_error());
    if (m) CHECK(strstr(tern_model_dir(m), "snapshots/0123456789abcdef") != NULL);
    tern_model_free(m);

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", root);
    return check_summary("loader");
}
