/* A model's identity for caches that outlive the process: FNV-1a over
 * config.json and, for every weight file (*.safetensors, *.gguf, sorted by
 * name), its name, size and first 64 KiB (the header: every tensor's name,
 * dtype, shape and offsets). Editing the weights in place without changing
 * any of that is not detected; anything a converter or a fine-tune writes is. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tern/model.h"

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static uint64_t hash_file(uint64_t h, const char *path, size_t most)
{
    FILE *f = fopen(path, "rb");
    if (!f) return fnv(h, "?", 1);
    struct stat st;
    if (fstat(fileno(f), &st) == 0) {
        uint64_t size = (uint64_t)st.st_size;
        h = fnv(h, &size, sizeof size);
    }
    char buf[8192];
    size_t n, total = 0;
    while (total < most && (n = fread(buf, 1, sizeof buf < most - total ? sizeof buf : most - total, f)) > 0) {
        h = fnv(h, buf, n);
        total += n;
    }
    fclose(f);
    return h;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int weight_file(const char *name)
{
    size_t n = strlen(name);
    return (n > 12 && !strcmp(name + n - 12, ".safetensors")) || (n > 5 && !strcmp(name + n - 5, ".gguf"));
}

uint64_t tern_model_fingerprint(const tern_model *m)
{
    const char *dir = tern_model_dir(m);
    uint64_t h = 1469598103934665603ull;
    struct stat st;
    char path[4200];
    if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode)) return hash_file(h, dir, 1u << 20);
    snprintf(path, sizeof path, "%s/config.json", dir);
    h = hash_file(h, path, 1u << 20);
    DIR *d = opendir(dir);
    if (!d) return h;
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!weight_file(e->d_name)) continue;
        if (n == cap) {
            char **nn = realloc(names, (cap = cap ? cap * 2 : 16) * sizeof *names);
            if (!nn) break;
            names = nn;
        }
        if (!(names[n] = strdup(e->d_name))) break;
        n++;
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, by_name);
    for (size_t i = 0; i < n; i++) {
        h = fnv(h, names[i], strlen(names[i]) + 1);
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        h = hash_file(h, path, 64u << 10);
        free(names[i]);
    }
    free(names);
    return h;
}
