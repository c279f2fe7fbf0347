/* Prompt cache files (pcache_disk.h). */
#include "engine/pcache_disk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { VERSION = 1, GEOM = 64, FIXED = 104 };
static const char MAGIC[8] = {'T', 'E', 'R', 'N', 'K', 'V', 'C', '\n'};

typedef struct {
    char *path;          /* owned */
    int32_t *toks;       /* owned, n * bt */
    uint64_t *sums;      /* owned, n */
    int n;
    uint32_t header;
    uint64_t size;
    double mtime;
} entry;

struct tern_pdisk {
    char *dir;
    size_t cap;
    uint64_t key;
    tern_kv *kv;
    int bt;
    size_t block_bytes;
    char geom[GEOM];
    entry *e;
    int n, capn;
    unsigned seq;
    void *buf;           /* one block */
    tern_pdisk_stats st;
};

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static const uint64_t FNV0 = 1469598103934665603ull;

static void entry_free(entry *x)
{
    free(x->path);
    free(x->toks);
    free(x->sums);
}

static void warn(const char *path, const char *why)
{
    fprintf(stderr, "WARNING:tern.cache:skipping %s: %s\n", path, why);
}

static uint32_t rd32(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t rd64(const unsigned char *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }
static void wr32(unsigned char *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i)); }
static void wr64(unsigned char *p, uint64_t v) { wr32(p, (uint32_t)v); wr32(p + 4, (uint32_t)(v >> 32)); }

/* Reads and checks one file's header; 0 and x filled, or -1 (warned). */
static int read_header(tern_pdisk *d, const char *path, entry *x)
{
    memset(x, 0, sizeof *x);
    FILE *f = fopen(path, "rb");
    if (!f) { warn(path, strerror(errno)); return -1; }
    unsigned char fx[FIXED];
    struct stat st;
    int rc = -1;
    unsigned char *h = NULL;
    const char *why = "truncated header";
    if (fstat(fileno(f), &st) || fread(fx, 1, FIXED, f) != FIXED) goto out;
    why = "not a tern prompt-cache file";
    if (memcmp(fx, MAGIC, 8)) goto out;
    why = "another format version";
    if (rd32(fx + 8) != VERSION) goto out;
    why = "another model, tokenizer or chat template";
    if (rd64(fx + 16) != d->key) goto out;
    uint32_t hb = rd32(fx + 12), bt = rd32(fx + 24), n = rd32(fx + 28);
    uint64_t bb = rd64(fx + 32);
    why = "another KV layout";
    if (bt != (uint32_t)d->bt || bb != d->block_bytes || memcmp(fx + 40, d->geom, GEOM)) goto out;
    why = "bad block count";
    if (n == 0 || n > (1u << 20) || hb != FIXED + 4ull * n * bt + 8ull * n + 8) goto out;
    why = "wrong file length (truncated or extended)";
    if ((uint64_t)st.st_size != hb + (uint64_t)n * bb) goto out;
    h = malloc(hb);
    why = "out of memory";
    if (!h) goto out;
    memcpy(h, fx, FIXED);
    why = "truncated header";
    if (fread(h + FIXED, 1, hb - FIXED, f) != hb - FIXED) goto out;
    why = "header checksum mismatch";
    if (fnv(FNV0, h, hb - 8) != rd64(h + hb - 8)) goto out;
    why = "out of memory";
    x->toks = malloc(4ull * n * bt);
    x->sums = malloc(8ull * n);
    x->path = strdup(path);
    if (!x->toks || !x->sums || !x->path) goto out;
    for (uint32_t i = 0; i < n * bt; i++) x->toks[i] = (int32_t)rd32(h + FIXED + 4ull * i);
    for (uint32_t i = 0; i < n; i++) x->sums[i] = rd64(h + FIXED + 4ull * n * bt + 8ull * i);
    x->n = (int)n;
    x->header = hb;
    x->size = (uint64_t)st.st_size;
    x->mtime = (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec * 1e-9;
    rc = 0;
out:
    if (rc) {
        warn(path, why);
        entry_free(x);
        memset(x, 0, sizeof *x);
        d->st.skipped++;
    }
    free(h);
    fclose(f);
    return rc;
}

static int add_entry(tern_pdisk *d, entry *x)
{
    if (d->n == d->capn) {
        int nc = d->capn ? d->capn * 2 : 16;
        entry *ne = realloc(d->e, (size_t)nc * sizeof *ne);
        if (!ne) return -1;
        d->e = ne;
        d->capn = nc;
    }
    d->e[d->n++] = *x;
    d->st.files++;
    d->st.bytes += x->size;
    return 0;
}

static void drop_entry(tern_pdisk *d, int i, int unlink_file)
{
    if (unlink_file) unlink(d->e[i].path);
    d->st.files--;
    d->st.bytes -= d->e[i].size;
    entry_free(&d->e[i]);
    d->e[i] = d->e[--d->n];
}

static int is_entry_name(const char *s)
{
    size_t n = strlen(s);
    return n > 4 && !strcmp(s + n - 4, ".tkv") && s[0] != '.';
}

tern_status tern_pdisk_open(const char *dir, size_t cap_bytes, uint64_t key, tern_kv *kv, tern_pdisk **out)
{
    *out = NULL;
    if (mkdir(dir, 0755) && errno != EEXIST)
        return tern_error(TERN_E_IO, "prompt cache: cannot create %s: %s", dir, strerror(errno));
    tern_pdisk *d = calloc(1, sizeof *d);
    if (!d) return tern_error(TERN_E_NOMEM, "prompt cache: out of memory");
    tern_kv_stats ks;
    tern_kv_get_stats(kv, &ks);
    d->dir = strdup(dir);
    d->cap = cap_bytes;
    d->key = key;
    d->kv = kv;
    d->bt = ks.block_tokens;
    d->block_bytes = tern_kv_block_bytes(kv);
    tern_kv_geometry(kv, d->geom, sizeof d->geom);
    d->buf = malloc(d->block_bytes);
    if (!d->dir || !d->buf) {
        tern_pdisk_close(d);
        return tern_error(TERN_E_NOMEM, "prompt cache: out of memory");
    }
    DIR *dd = opendir(dir);
    if (!dd) {
        tern_pdisk_close(d);
        return tern_error(TERN_E_IO, "prompt cache: cannot read %s: %s", dir, strerror(errno));
    }
    struct dirent *de;
    char path[4200];
    while ((de = readdir(dd))) {
        if (!is_entry_name(de->d_name)) continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        entry x;
        if (read_header(d, path, &x) == 0 && add_entry(d, &x)) entry_free(&x);
    }
    closedir(dd);
    *out = d;
    return TERN_OK;
}

void tern_pdisk_close(tern_pdisk *d)
{
    if (!d) return;
    for (int i = 0; i < d->n; i++) entry_free(&d->e[i]);
    free(d->e);
    free(d->dir);
    free(d->buf);
    free(d);
}

static int common_blocks(const tern_pdisk *d, const entry *x, const int32_t *toks, int max_blocks)
{
    int k = 0;
    while (k < x->n && k < max_blocks &&
           !memcmp(x->toks + (long)k * d->bt, toks + (long)k * d->bt, (size_t)d->bt * sizeof *toks))
        k++;
    return k;
}

int tern_pdisk_match(tern_pdisk *d, const int32_t *toks, int max_blocks, int *best)
{
    int most = 0;
    *best = -1;
    for (int i = 0; i < d->n; i++) {
        int k = common_blocks(d, &d->e[i], toks, max_blocks);
        if (k > most) {
            most = k;
            *best = i;
        }
    }
    return most;
}

/* Oldest files go until the directory is under its cap. */
static void enforce_cap(tern_pdisk *d)
{
    while (d->st.bytes > d->cap && d->n > 0) {
        int old = 0;
        for (int i = 1; i < d->n; i++)
            if (d->e[i].mtime < d->e[old].mtime) old = i;
        drop_entry(d, old, 1);
    }
}

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

tern_status tern_pdisk_store(tern_pdisk *d, const int32_t *toks, int n, const int *blocks)
{
    if (n <= 0) return TERN_OK;
    uint64_t th = fnv(FNV0, toks, 4ull * n * d->bt);
    char path[4200], tmp[4300];
    snprintf(path, sizeof path, "%s/%016llx-%016llx.tkv", d->dir, (unsigned long long)d->key, (unsigned long long)th);
    for (int i = 0; i < d->n; i++)
        if (!strcmp(d->e[i].path, path)) return TERN_OK;
    if (access(path, F_OK) == 0) return TERN_OK;   /* another server wrote it */
    uint32_t hb = FIXED + 4u * (uint32_t)n * (uint32_t)d->bt + 8u * (uint32_t)n + 8u;
    unsigned char *h = calloc(1, hb);
    if (!h) return tern_error(TERN_E_NOMEM, "prompt cache: out of memory");
    memcpy(h, MAGIC, 8);
    wr32(h + 8, VERSION);
    wr32(h + 12, hb);
    wr64(h + 16, d->key);
    wr32(h + 24, (uint32_t)d->bt);
    wr32(h + 28, (uint32_t)n);
    wr64(h + 32, d->block_bytes);
    memcpy(h + 40, d->geom, GEOM);
    for (long i = 0; i < (long)n * d->bt; i++) wr32(h + FIXED + 4 * i, (uint32_t)toks[i]);
    for (int b = 0; b < n; b++) {
        tern_kv_block_save(d->kv, blocks[b], d->buf);
        wr64(h + FIXED + 4ull * n * d->bt + 8ull * b, fnv(FNV0, d->buf, d->block_bytes));
    }
    wr64(h + hb - 8, fnv(FNV0, h, hb - 8));
    snprintf(tmp, sizeof tmp, "%s/.tmp-%d-%u", d->dir, (int)getpid(), d->seq++);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
    int bad = fd < 0 || write_all(fd, h, hb);
    for (int b = 0; b < n && !bad; b++) {
        tern_kv_block_save(d->kv, blocks[b], d->buf);
        bad = write_all(fd, d->buf, d->block_bytes);
    }
    if (!bad) bad = fsync(fd) != 0;
    if (fd >= 0 && close(fd)) bad = 1;
    if (!bad) bad = rename(tmp, path) != 0;
    free(h);
    if (bad) {
        int err = errno;
        unlink(tmp);
        d->st.write_failures++;
        return tern_error(TERN_E_IO, "prompt cache: cannot write %s: %s", path, strerror(err));
    }
    d->st.writes++;
    entry x;
    if (read_header(d, path, &x) == 0 && add_entry(d, &x)) entry_free(&x);
    enforce_cap(d);
    return TERN_OK;
}

tern_status tern_pdisk_load(tern_pdisk *d, int i, int from, int to, const int *dst)
{
    if (i < 0 || i >= d->n || from < 0 || to > d->e[i].n) return tern_error(TERN_E_INVALID, "prompt cache: bad load");
    entry *x = &d->e[i];
    FILE *f = fopen(x->path, "rb");
    tern_status st = TERN_OK;
    if (!f) st = tern_error(TERN_E_IO, "prompt cache: %s vanished", x->path);
    else if (fseeko(f, (off_t)(x->header + (uint64_t)from * d->block_bytes), SEEK_SET))
        st = tern_error(TERN_E_IO, "prompt cache: cannot seek %s", x->path);
    for (int b = from; !st && b < to; b++) {
        if (fread(d->buf, 1, d->block_bytes, f) != d->block_bytes)
            st = tern_error(TERN_E_IO, "prompt cache: %s is short at block %d", x->path, b);
        else if (fnv(FNV0, d->buf, d->block_bytes) != x->sums[b])
            st = tern_error(TERN_E_FORMAT, "prompt cache: %s: block %d fails its checksum", x->path, b);
        else
            tern_kv_block_load(d->kv, dst[b - from], d->buf);
    }
    if (f) fclose(f);
    if (st) {
        warn(x->path, tern_last_error());
        d->st.load_failures++;
        drop_entry(d, i, 0);
        return st;
    }
    d->st.loads++;
    return TERN_OK;
}

void tern_pdisk_get_stats(const tern_pdisk *d, tern_pdisk_stats *out) { *out = d->st; }
