/* The prompt cache on disk: prefixes written when an engine stops are read
 * back by the next one (outputs equal to cold runs, cached tokens reported);
 * truncated, corrupted, foreign-model and foreign-version files are never
 * used; two engines share one directory; a full disk leaves no file behind. */
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "tern/engine.h"
#include "tern/model.h"

enum { NQ = 3, PLEN = 90, GEN = 6 };

typedef struct {
    int32_t toks[GEN];
    int n, cached, done;
    tern_status st;
} res_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

static int on_token(void *u, const tern_token_event *ev)
{
    res_t *r = u;
    if (r->n < GEN) r->toks[r->n++] = ev->token;
    return 0;
}

static void on_done(void *u, const tern_request_result *res)
{
    res_t *r = u;
    pthread_mutex_lock(&mu);
    r->cached = res->cached_tokens;
    r->st = res->status;
    r->done = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

static int32_t prompts[NQ][PLEN];

static void run(tern_engine *e, res_t *out)
{
    for (int q = 0; q < NQ; q++) {
        memset(&out[q], 0, sizeof out[q]);
        tern_request_opts o;
        tern_request_opts_default(&o);
        o.max_tokens = GEN;
        o.ignore_eos = 1;
        tern_request_cb cb = {on_token, NULL, on_done, &out[q]};
        CHECK(tern_engine_submit(e, prompts[q], PLEN - q, &o, &cb, NULL) == TERN_OK);
        pthread_mutex_lock(&mu);
        while (!out[q].done) pthread_cond_wait(&cv, &mu);
        pthread_mutex_unlock(&mu);
    }
}

static tern_engine *engine(tern_model *m, const char *dir, int cache)
{
    tern_engine_opts o;
    tern_engine_opts_default(&o);
    o.kv_tokens = 2048;
    o.no_prompt_cache = !cache;
    o.prompt_cache_dir = dir;
    tern_engine *e = NULL;
    CHECK(tern_engine_create(m, &o, &e) == TERN_OK);
    return e;
}

static int same(const res_t *a, const res_t *b)
{
    for (int q = 0; q < NQ; q++)
        if (a[q].n != b[q].n || memcmp(a[q].toks, b[q].toks, sizeof a[q].toks) || a[q].st || b[q].st) return 0;
    return 1;
}

static int count_files(const char *dir, const char *suffix)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        size_t l = strlen(e->d_name), s = strlen(suffix);
        if (l >= s && !strcmp(e->d_name + l - s, suffix) && e->d_name[0] != '.') n++;
        if (!strncmp(e->d_name, ".tmp-", 5) && !strcmp(suffix, "tmp")) n++;
    }
    if (d) closedir(d);
    return n;
}

static void clear_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[4200];
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2]))) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    if (d) closedir(d);
}

/* The first .tkv file of dir, read whole. */
static unsigned char *first_file(const char *dir, char *name, size_t *len)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    unsigned char *buf = NULL;
    while (d && (e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 4 || strcmp(e->d_name + l - 4, ".tkv")) continue;
        snprintf(name, 4200, "%s/%s", dir, e->d_name);
        FILE *f = fopen(name, "rb");
        fseek(f, 0, SEEK_END);
        *len = (size_t)ftell(f);
        fseek(f, 0, SEEK_SET);
        buf = malloc(*len);
        if (fread(buf, 1, *len, f) != *len) *len = 0;
        fclose(f);
        break;
    }
    if (d) closedir(d);
    return buf;
}

static void put_file(const char *dir, const unsigned char *b, size_t n)
{
    char p[4200];
    clear_dir(dir);
    snprintf(p, sizeof p, "%s/0000000000000000-0000000000000001.tkv", dir);
    FILE *f = fopen(p, "wb");
    fwrite(b, 1, n, f);
    fclose(f);
}

/* An engine over dir holding one damaged file: it must not take anything
 * from it, and its outputs are the cold ones. */
static void check_rejected(tern_model *m, const char *dir, const res_t *cold, const char *what, long at)
{
    tern_engine *e = engine(m, dir, 1);
    res_t got[NQ];
    run(e, got);
    CHECK_MSG(same(got, cold), "%s at %ld: outputs differ", what, at);
    for (int q = 0; q < NQ; q++) CHECK_MSG(got[q].cached == 0, "%s at %ld: a damaged file was used", what, at);
    tern_engine_stats st;
    tern_engine_get_stats(e, &st);
    CHECK_MSG(st.disk_skipped + st.disk_load_failures >= 1, "%s at %ld: not reported", what, at);
    /* It stops without writing (nothing was cached beyond the cold run's
     * own prefixes, which it writes: clear them for the next case). */
    tern_engine_free(e);
}

int main(void)
{
    char dir[4096], dir2[4096], model[4096], other[4096];
    snprintf(model, sizeof model, "%s/fixtures/models/qwen3", check_shared_dir());
    snprintf(other, sizeof other, "%s/fixtures/models/llama", check_shared_dir());
    snprintf(dir, sizeof dir, "/tmp/tern-pcache-%d", (int)getpid());
    snprintf(dir2, sizeof dir2, "/tmp/tern-pcache2-%d", (int)getpid());
    mkdir(dir, 0755);
    mkdir(dir2, 0755);
    tern_model_opts mo = {.n_threads = 2, .precision = TERN_PRECISION_BF16, .weights = TERN_WEIGHTS_PANELS};
    tern_model *m, *m2;
    if (tern_model_load(model, &mo, &m) || tern_model_load(other, &mo, &m2)) {
        CHECK_MSG(0, "%s", tern_last_error());
        return check_summary("test_pcache_disk");
    }
    unsigned s = 31;
    for (int q = 0; q < NQ; q++)
        for (int i = 0; i < PLEN; i++) prompts[q][i] = (int32_t)(rand_r(&s) % 500);

    res_t cold[NQ], got[NQ];
    tern_engine *e = engine(m, NULL, 0);
    run(e, cold);
    tern_engine_free(e);

    /* Written at stop, read back after a "restart". */
    e = engine(m, dir, 1);
    run(e, got);
    CHECK(same(got, cold));
    tern_engine_free(e);
    CHECK(count_files(dir, ".tkv") >= 1);
    CHECK(count_files(dir, "tmp") == 0);
    e = engine(m, dir, 1);
    run(e, got);
    CHECK(same(got, cold));
    for (int q = 0; q < NQ; q++) CHECK_MSG(got[q].cached >= 64, "request %d took %d cached tokens", q, got[q].cached);
    tern_engine_stats st;
    tern_engine_get_stats(e, &st);
    CHECK(st.disk_loads >= 1 && st.disk_skipped == 0);
    tern_engine_free(e);

    /* Faults on a copy of one file in a directory of its own. */
    char name[4200];
    size_t len = 0;
    unsigned char *file = first_file(dir, name, &len);
    CHECK(file && len > 200);
    if (file) {
        unsigned n = file[28] | file[29] << 8, bt = file[24], hb = file[12] | file[13] << 8 | file[14] << 16;
        size_t bb = (len - hb) / n;
        long cuts[] = {0, 7, 8, 12, 16, 24, 28, 32, 40, 103, 104, 104 + 4 * n * bt, 104 + 4 * n * bt + 8 * n,
                       (long)hb - 1, (long)hb, (long)(hb + bb), (long)len - 1};
        for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
            put_file(dir2, file, (size_t)cuts[i]);
            check_rejected(m, dir2, cold, "truncation", cuts[i]);
        }
        long flips[] = {0, 8, 12, 16, 24, 32, 40, 104, (long)hb - 8, (long)hb - 1, (long)hb, (long)(hb + bb / 2),
                        (long)len - 1};
        for (size_t i = 0; i < sizeof flips / sizeof *flips; i++) {
            unsigned char *c = malloc(len);
            memcpy(c, file, len);
            c[flips[i]] ^= 0x40;
            put_file(dir2, c, len);
            check_rejected(m, dir2, cold, "flipped byte", flips[i]);
            free(c);
        }
        /* Another format version. */
        unsigned char *c = malloc(len);
        memcpy(c, file, len);
        c[8] = 2;
        put_file(dir2, c, len);
        check_rejected(m, dir2, cold, "version", 2);
        free(c);
        free(file);
    }

    /* Another model's files: never taken. */
    clear_dir(dir2);
    e = engine(m2, dir2, 1);
    run(e, got);
    tern_engine_free(e);
    CHECK(count_files(dir2, ".tkv") >= 1);
    check_rejected(m, dir2, cold, "another model", 0);

    /* Two engines on one directory at once, then a third reads it all. */
    clear_dir(dir2);
    tern_engine *a = engine(m, dir2, 1), *b = engine(m, dir2, 1);
    run(a, got);
    run(b, got);
    tern_engine_free(a);
    tern_engine_free(b);
    e = engine(m, dir2, 1);
    run(e, got);
    CHECK(same(got, cold));
    tern_engine_get_stats(e, &st);
    CHECK(st.disk_skipped == 0 && st.disk_load_failures == 0 && got[0].cached > 0);
    tern_engine_free(e);

    /* A full disk: writes fail, no partial file is left, serving goes on. */
    clear_dir(dir2);
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 300;
    setrlimit(RLIMIT_FSIZE, &lim);
    e = engine(m, dir2, 1);
    run(e, got);
    CHECK(same(got, cold));
    tern_engine_free(e);
    setrlimit(RLIMIT_FSIZE, &old);
    CHECK(count_files(dir2, ".tkv") == 0 && count_files(dir2, "tmp") == 0);

    clear_dir(dir);
    clear_dir(dir2);
    rmdir(dir);
    rmdir(dir2);
    tern_model_free(m);
    tern_model_free(m2);
    return check_summary("test_pcache_disk");
}
