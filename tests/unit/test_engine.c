/* The scheduler: every request's tokens are bit-identical to its solo run
 * whatever joins and leaves beside it (greedy and seeded, penalties,
 * logit_bias, logprobs, n > 1), admission refusals, cancellation freeing the
 * row, and allocation failures injected at every admission, growth and
 * workspace allocation leaving every running row's output unchanged. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "tern/engine.h"
#include "tern/model.h"
#include "tern/system.h"

enum { MAXGEN = 48, MAXN = 3, NREQ = 56 };

typedef struct {
    int32_t prompt[96];
    int n_prompt;
    tern_request_opts o;
    int32_t bias_ids[2];
    float bias_vals[2];
    /* results */
    int32_t toks[MAXN][MAXGEN];
    int cached;
    long drafted, accepted;
    float lps[MAXN][MAXGEN];
    int n_toks[MAXN];
    int stop_after;              /* callback stops choice 0 after this many (0 = never) */
    int done;
    tern_status status;
    tern_finish finish[MAXN];
    pthread_mutex_t *mu;
    pthread_cond_t *cv;
} job;

static int on_token(void *user, const tern_token_event *ev)
{
    job *j = user;
    int c = ev->choice, i = j->n_toks[c]++;
    CHECK(ev->step == i);
    if (i < MAXGEN) {
        j->toks[c][i] = ev->token;
        j->lps[c][i] = ev->logprob;
    }
    return j->stop_after && c == 0 && j->n_toks[0] >= j->stop_after;
}

static void on_done(void *user, const tern_request_result *res)
{
    job *j = user;
    pthread_mutex_lock(j->mu);
    j->status = res->status;
    j->cached = res->cached_tokens;
    j->drafted = res->drafted;
    j->accepted = res->accepted;
    for (int c = 0; c < res->n; c++) j->finish[c] = res->finish[c];
    j->done = 1;
    pthread_cond_broadcast(j->cv);
    pthread_mutex_unlock(j->mu);
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

static void reset(job *j)
{
    memset(j->toks, 0, sizeof j->toks);
    memset(j->n_toks, 0, sizeof j->n_toks);
    j->done = 0;
    j->status = TERN_OK;
    j->mu = &mu;
    j->cv = &cv;
}

static tern_status submit(tern_engine *e, job *j)
{
    reset(j);
    tern_request_cb cb = {on_token, NULL, on_done, j};
    return tern_engine_submit(e, j->prompt, j->n_prompt, &j->o, &cb, NULL);
}

static void wait_all(job *js, int n)
{
    pthread_mutex_lock(&mu);
    for (int i = 0; i < n; i++)
        while (!js[i].done) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
}

/* A mix of request kinds, drawn from seed s. */
static void make_job(job *j, int i, int vocab, unsigned *s)
{
    memset(j, 0, sizeof *j);
    j->n_prompt = 3 + (int)(rand_r(s) % 80);
    for (int t = 0; t < j->n_prompt; t++) j->prompt[t] = (int32_t)(rand_r(s) % (unsigned)vocab);
    tern_request_opts_default(&j->o);
    j->o.max_tokens = 4 + (int)(rand_r(s) % (MAXGEN - 4));
    j->o.ignore_eos = i % 3 != 0;
    tern_sampling_params *p = &j->o.sampling;
    switch (i % 4) {
    case 0: break;                                  /* greedy */
    case 1:                                         /* seeded sampling */
        p->temperature = 0.9f;
        p->top_p = 0.9f;
        p->top_k = 40;
        p->seed = 1000 + (uint64_t)i;
        break;
    case 2:                                         /* penalties + bias, greedy */
        p->repetition_penalty = 1.3f;
        p->repetition_context_size = 8;
        p->presence_penalty = 0.5f;
        p->frequency_penalty = 0.3f;
        j->bias_ids[0] = 5;
        j->bias_vals[0] = 3.0f;
        j->bias_ids[1] = 7;
        j->bias_vals[1] = -100.0f;
        p->bias_ids = j->bias_ids;
        p->bias_values = j->bias_vals;
        p->n_bias = 2;
        j->o.top_logprobs = 3;
        break;
    case 3:                                         /* min_p sampling, n = 2 */
        p->temperature = 1.2f;
        p->min_p = 0.05f;
        p->seed = 77 + (uint64_t)i;
        j->o.n = 2;
        j->o.want_logprob = 1;
        break;
    }
}

static int no_cache, draft_kind, spec_fixed;
static tern_model *draft_model;

static tern_engine *engine(tern_model *m, int max_batch, int interleave)
{
    tern_engine_opts o;
    tern_engine_opts_default(&o);
    o.no_prompt_cache = no_cache;
    o.draft_kind = draft_kind;
    o.draft_model = draft_model;
    o.spec_fixed = spec_fixed;
    o.max_batch = max_batch;
    o.prefill_step = 64;
    o.prefill_interleave = interleave;
    o.kv_tokens = 8192;
    tern_engine *e = NULL;
    CHECK(tern_engine_create(m, &o, &e) == TERN_OK);
    return e;
}

static int same(const job *a, const job *b, int n)
{
    for (int c = 0; c < n; c++) {
        if (a->n_toks[c] != b->n_toks[c]) return 0;
        if (memcmp(a->toks[c], b->toks[c], (size_t)a->n_toks[c] * sizeof(int32_t))) return 0;
        if (memcmp(a->lps[c], b->lps[c], (size_t)a->n_toks[c] * sizeof(float))) return 0;
        if (a->finish[c] != b->finish[c]) return 0;
    }
    return 1;
}

static job solo[NREQ], got[NREQ];

static void stress(tern_model *m)
{
    int V = tern_model_vocab_size(m);
    unsigned s = 12345;
    for (int i = 0; i < NREQ; i++) make_job(&solo[i], i, V, &s);
    /* Solo references, strict serial. */
    tern_engine *e1 = engine(m, MAXN, 64);   /* one request at a time; room for its choices */
    for (int i = 0; i < NREQ; i++) {
        tern_status st = submit(e1, &solo[i]);
        CHECK_MSG(st == TERN_OK, "request %d: %s", i, tern_last_error());
        if (st) continue;
        wait_all(&solo[i], 1);
        CHECK(solo[i].status == TERN_OK);
    }
    tern_engine_free(e1);
    /* The same requests arriving at random times into a batch of 8, with
     * small prompt slices so joins overlap running rows at many offsets. */
    tern_engine *e = engine(m, 8, 5);
    memcpy(got, solo, sizeof got);
    unsigned r = 99;
    for (int i = 0; i < NREQ; i++) {
        CHECK(submit(e, &got[i]) == TERN_OK);
        usleep((useconds_t)(rand_r(&r) % 1500));
    }
    wait_all(got, NREQ);
    int bad = 0;
    for (int i = 0; i < NREQ; i++) {
        CHECK(got[i].status == TERN_OK);
        if (!same(&got[i], &solo[i], got[i].o.n)) bad++;
        CHECK_MSG(same(&got[i], &solo[i], got[i].o.n), "request %d differs batched vs solo", i);
    }
    CHECK(bad == 0);
    /* n = 2 choices: distinct seeds, the second equals a solo run seeded +1. */
    job a = solo[3], b = solo[3];
    b.o.n = 1;
    b.o.sampling.seed += 1;
    CHECK(submit(e, &a) == TERN_OK && submit(e, &b) == TERN_OK);
    wait_all(&a, 1);
    wait_all(&b, 1);
    CHECK(a.n_toks[1] == b.n_toks[0] && !memcmp(a.toks[1], b.toks[0], (size_t)b.n_toks[0] * sizeof(int32_t)));
    tern_engine_stats st;
    tern_engine_get_stats(e, &st);
    CHECK(st.running_rows == 0 && st.blocks_used == st.cache_blocks && st.blocks_reserved == 0);
    CHECK(st.iterations > 0 && st.admitted >= NREQ);
    /* Speculation (n-gram drafts verified in the batch) changes nothing
     * either: alone, then among the others arriving at random. */
    draft_kind = TERN_DRAFT_NGRAM;
    spec_fixed = 1;   /* draft every iteration, whatever the measured costs say */
    tern_engine *es = engine(m, MAXN, 64);
    for (int i = 0; i < NREQ; i++) {
        job one = solo[i];
        CHECK(submit(es, &one) == TERN_OK);
        wait_all(&one, 1);
        CHECK_MSG(same(&one, &solo[i], one.o.n), "request %d differs with speculation, alone", i);
    }
    tern_engine_free(es);
    es = engine(m, 8, 5);
    memcpy(got, solo, sizeof got);
    for (int i = 0; i < NREQ; i++) {
        CHECK(submit(es, &got[i]) == TERN_OK);
        usleep((useconds_t)(rand_r(&r) % 1500));
    }
    wait_all(got, NREQ);
    long drafted = 0, accepted = 0;
    for (int i = 0; i < NREQ; i++) {
        CHECK_MSG(same(&got[i], &solo[i], got[i].o.n), "request %d differs with speculation, batched", i);
        drafted += got[i].drafted;
        accepted += got[i].accepted;
    }
    CHECK_MSG(drafted > 100 && accepted > 10, "speculation barely ran: %ld drafted, %ld accepted", drafted, accepted);
    tern_engine_stats ss;
    tern_engine_get_stats(es, &ss);
    CHECK(ss.spec_drafted[0] > 0 && ss.spec_accepted[0] <= ss.spec_drafted[0]);
    CHECK(ss.blocks_used == ss.cache_blocks && ss.blocks_reserved == 0);
    tern_engine_free(es);
    draft_kind = TERN_DRAFT_NONE;
    spec_fixed = 0;
    CHECK_MSG(st.peak_rows >= 4, "the requests barely overlapped (peak %d rows)", st.peak_rows);
    tern_engine_free(e);
}

/* Runs js[0, n) alone one after another (batch = 0) or arriving at random
 * times into a batch of 8, and checks each against ref. */
static void run_against(tern_model *m, job *js, const job *ref, int n, int batch, const char *what, long *drafted,
                        long *accepted, int self)
{
    tern_engine *e = engine(m, batch ? 8 : MAXN, batch ? 5 : 64);
    unsigned r = 7;
    for (int i = 0; i < n; i++) {
        js[i] = ref[i];
        CHECK(submit(e, &js[i]) == TERN_OK);
        if (!batch) wait_all(&js[i], 1);
        else usleep((useconds_t)(rand_r(&r) % 1500));
    }
    wait_all(js, n);
    for (int i = 0; i < n; i++) {
        CHECK_MSG(js[i].status == TERN_OK && same(&js[i], &ref[i], ref[i].o.n), "%s: request %d differs", what, i);
        *drafted += js[i].drafted;
        *accepted += js[i].accepted;
        /* A model drafting for itself proposes its own greedy tokens: a
         * greedy request without processors keeps every one. */
        if (self && i % 4 == 0)
            CHECK_MSG(js[i].accepted == js[i].drafted, "%s: request %d kept %ld of its own %ld greedy drafts", what,
                      i, js[i].accepted, js[i].drafted);
    }
    tern_engine_stats st;
    tern_engine_get_stats(e, &st);
    CHECK(st.running_rows == 0 && st.blocks_used == st.cache_blocks && st.blocks_reserved == 0);
    tern_engine_free(e);
}

enum { NSPEC = 12 };
static job spec_ref[NSPEC], spec_got[NSPEC];

/* Lossless with a draft model, for a target and two drafts: itself (every
 * greedy draft agrees: long accepted runs, the re-feed rule) and another
 * model of the same vocabulary (mostly rejected: rollbacks). Speculative
 * output equals plain output, greedy and seeded, alone and in a batch with
 * random joins, for every request kind of the mix (n > 1 included). */
static void spec_pair(const char *target, const char *other, int n_jobs)
{
    tern_exec *x;
    CHECK(tern_exec_create(2, &x) == TERN_OK);
    tern_model_opts mo = {.precision = TERN_PRECISION_BF16, .weights = TERN_WEIGHTS_PANELS, .exec = x};
    tern_model *m = NULL, *self = NULL, *oth = NULL;
    if (tern_model_load(target, &mo, &m) || tern_model_load(target, &mo, &self) || tern_model_load(other, &mo, &oth)) {
        CHECK_MSG(0, "%s: %s", target, tern_last_error());
        goto out;
    }
    int V = tern_model_vocab_size(m);
    unsigned s = 4242;
    for (int i = 0; i < n_jobs; i++) make_job(&spec_ref[i], i, V, &s);
    draft_kind = TERN_DRAFT_NONE;
    draft_model = NULL;
    long d0 = 0, a0 = 0;
    /* The plain references, one at a time. */
    {
        tern_engine *e = engine(m, MAXN, 64);
        for (int i = 0; i < n_jobs; i++) {
            CHECK(submit(e, &spec_ref[i]) == TERN_OK);
            wait_all(&spec_ref[i], 1);
            CHECK(spec_ref[i].status == TERN_OK);
        }
        tern_engine_free(e);
    }
    tern_model *drafts[2] = {self, oth};
    /* Fixed depth: how much the cost model would draft depends on timing;
     * here every row drafts every iteration. */
    spec_fixed = 1;
    for (int k = 0; k < 2; k++) {
        draft_kind = TERN_DRAFT_MODEL;
        draft_model = drafts[k];
        long dr = 0, ac = 0;
        char what[4200];
        snprintf(what, sizeof what, "%s drafted by %s, alone", target, k ? other : "itself");
        run_against(m, spec_got, spec_ref, n_jobs, 0, what, &dr, &ac, k == 0);
        snprintf(what, sizeof what, "%s drafted by %s, batched", target, k ? other : "itself");
        run_against(m, spec_got, spec_ref, n_jobs, 1, what, &dr, &ac, k == 0);
        CHECK_MSG(dr > 10 && (k || ac > 0), "%s: the draft model barely drafted (%ld, %ld kept)", target, dr, ac);
        d0 += dr;
        a0 += ac;
    }
    spec_fixed = 0;
    /* Adaptive depth (the planner's per-position acceptance and cost fit
     * choose each row's depth, which varies from iteration to iteration):
     * still the plain tokens, with the mostly rejected draft, in a batch. */
    {
        draft_kind = TERN_DRAFT_MODEL;
        draft_model = oth;
        long dr = 0, ac = 0;
        char what[4200];
        snprintf(what, sizeof what, "%s drafted by %s, adaptive depth, batched", target, other);
        run_against(m, spec_got, spec_ref, n_jobs, 1, what, &dr, &ac, 0);
        CHECK_MSG(dr > 0, "%s: adaptive depth never drafted", target);
    }
    /* Tail split over a cached prompt: 65 tokens, the second run finds its
     * first 64 (two whole blocks) cached, so its prefill has nothing left
     * to feed and the last prompt token heads the first verify. */
    job t65[2];
    memset(&t65[0], 0, sizeof t65[0]);
    t65[0].n_prompt = 65;
    for (int t = 0; t < 65; t++) t65[0].prompt[t] = (int32_t)((t * 7 + 3) % V);
    tern_request_opts_default(&t65[0].o);
    t65[0].o.max_tokens = 20;
    t65[0].o.ignore_eos = 1;
    t65[1] = t65[0];
    job plain65 = t65[0];
    draft_kind = TERN_DRAFT_NONE;
    draft_model = NULL;
    no_cache = 1;
    tern_engine *ep = engine(m, 2, 64);
    CHECK(submit(ep, &plain65) == TERN_OK);
    wait_all(&plain65, 1);
    tern_engine_free(ep);
    no_cache = 0;
    draft_kind = TERN_DRAFT_MODEL;
    draft_model = self;
    tern_engine *ec = engine(m, 2, 64);
    for (int k = 0; k < 2; k++) {
        CHECK(submit(ec, &t65[k]) == TERN_OK);
        wait_all(&t65[k], 1);
        CHECK_MSG(same(&t65[k], &plain65, 1), "%s: tail split run %d (cached %d) differs", target, k, t65[k].cached);
    }
    CHECK_MSG(t65[1].cached == 64, "%s: the second run found %d tokens cached", target, t65[1].cached);
    tern_engine_free(ec);
    draft_kind = TERN_DRAFT_NONE;
    draft_model = NULL;
out:
    tern_model_free(oth);
    tern_model_free(self);
    tern_model_free(m);
    tern_exec_free(x);
}

/* A draft model must run on the target's execution context, and its
 * vocabulary must fit the target's. */
static void spec_refusals(const char *dir)
{
    tern_model_opts mo = {.n_threads = 1, .precision = TERN_PRECISION_BF16};
    tern_model *a = NULL, *b = NULL;
    if (tern_model_load(dir, &mo, &a) || tern_model_load(dir, &mo, &b)) {
        CHECK_MSG(0, "%s", tern_last_error());
    } else {
        tern_engine_opts o;
        tern_engine_opts_default(&o);
        o.kv_tokens = 1024;
        o.draft_kind = TERN_DRAFT_MODEL;
        tern_engine *e = NULL;
        CHECK(tern_engine_create(a, &o, &e) == TERN_E_INVALID && !e);
        o.draft_model = b;
        CHECK(tern_engine_create(a, &o, &e) == TERN_E_INVALID && !e);
        CHECK(strstr(tern_last_error(), "execution context") != NULL);
    }
    tern_model_free(a);
    tern_model_free(b);
}

static void admission(tern_model *m)
{
    tern_engine_opts o;
    tern_engine_opts_default(&o);
    o.max_batch = 2;
    o.kv_tokens = 256;          /* 8 blocks */
    o.queue_size = 2;
    tern_engine *e;
    CHECK(tern_engine_create(m, &o, &e) == TERN_OK);
    job j;
    memset(&j, 0, sizeof j);
    tern_request_opts_default(&j.o);
    j.n_prompt = 90;
    for (int i = 0; i < 90; i++) j.prompt[i] = (int32_t)(i % 50);
    /* A prompt beyond the pool is refused at submit. */
    int32_t big[400];
    for (int i = 0; i < 400; i++) big[i] = 1;
    reset(&j);
    tern_request_cb cb = {on_token, NULL, on_done, &j};
    CHECK(tern_engine_submit(e, big, 300, &j.o, &cb, NULL) == TERN_E_RANGE);
    CHECK(tern_engine_submit(e, big, 20, &j.o, &cb, NULL) == TERN_OK);
    wait_all(&j, 1);
    /* n beyond max_batch is refused. */
    j.o.n = 3;
    CHECK(tern_engine_submit(e, j.prompt, 10, &j.o, &cb, NULL) == TERN_E_RANGE);
    /* max_tokens is clamped to the pool's room: finish reason length. */
    job c;
    memset(&c, 0, sizeof c);
    tern_request_opts_default(&c.o);
    c.o.max_tokens = 10000;
    c.o.ignore_eos = 1;
    c.n_prompt = 200;
    for (int i = 0; i < 200; i++) c.prompt[i % 96] = 3;
    int32_t p200[200];
    for (int i = 0; i < 200; i++) p200[i] = (int32_t)(i % 40);
    reset(&c);
    tern_request_cb cc = {on_token, NULL, on_done, &c};
    CHECK(tern_engine_submit(e, p200, 200, &c.o, &cc, NULL) == TERN_OK);
    wait_all(&c, 1);
    CHECK(c.status == TERN_OK && c.finish[0] == TERN_FINISH_LENGTH && c.n_toks[0] == 56);
    /* A full waiting line answers busy: fill the pool with a long request
     * (held by its callback), then two waiting ones, then the refused one. */
    job hold;
    memset(&hold, 0, sizeof hold);
    tern_request_opts_default(&hold.o);
    hold.o.max_tokens = 150;
    hold.o.ignore_eos = 1;
    hold.n_prompt = 100;
    for (int i = 0; i < 100; i++) hold.prompt[i % 96] = 4;
    CHECK(submit(e, &hold) == TERN_OK);   /* 100 + 150 tokens: the whole pool */
    job w[3];
    tern_status sts[3];
    for (int i = 0; i < 3; i++) {
        memset(&w[i], 0, sizeof w[i]);
        tern_request_opts_default(&w[i].o);
        w[i].o.max_tokens = 4;
        w[i].n_prompt = 10;
        sts[i] = submit(e, &w[i]);
    }
    int busy = 0, ok = 0;
    for (int i = 0; i < 3; i++) {
        busy += sts[i] == TERN_E_BUSY;
        ok += sts[i] == TERN_OK;
    }
    CHECK(busy >= 1);
    wait_all(&hold, 1);
    for (int i = 0; i < 3; i++)
        if (sts[i] == TERN_OK) wait_all(&w[i], 1);
    CHECK(ok >= 1);
    tern_engine_free(e);
}

/* A cancelled request leaves within an iteration and frees its blocks. */
static void cancel(tern_model *m)
{
    tern_engine *e = engine(m, 4, 64);
    job j;
    memset(&j, 0, sizeof j);
    tern_request_opts_default(&j.o);
    j.o.max_tokens = 100000;
    j.o.ignore_eos = 1;
    j.n_prompt = 10;
    reset(&j);
    tern_request_cb cb = {on_token, NULL, on_done, &j};
    tern_request *h;
    CHECK(tern_engine_submit(e, j.prompt, j.n_prompt, &j.o, &cb, &h) == TERN_OK);
    while (1) {
        pthread_mutex_lock(&mu);
        int n = j.n_toks[0];
        pthread_mutex_unlock(&mu);
        if (n >= 3) break;
        usleep(1000);
    }
    tern_request_cancel(h);
    wait_all(&j, 1);
    CHECK(j.finish[0] == TERN_FINISH_STOPPED);
    tern_engine_stats st;
    tern_engine_get_stats(e, &st);
    CHECK(st.running_rows == 0 && st.blocks_used == st.cache_blocks);
    tern_request_release(h);
    /* The callback stopping a choice ends it too. */
    j.stop_after = 5;
    CHECK(submit(e, &j) == TERN_OK);
    wait_all(&j, 1);
    CHECK(j.n_toks[0] == 5 && j.finish[0] == TERN_FINISH_STOPPED);
    tern_engine_free(e);
}

/* Failure injection: three requests (two running, one joining); the n-th
 * allocation at each site fails once, for every n the scenario makes. */
static void failures(tern_model *m)
{
    int V = tern_model_vocab_size(m);
    unsigned s = 4242;
    job ref[3], run[3];
    for (int i = 0; i < 3; i++) {
        make_job(&ref[i], i, V, &s);
        ref[i].o.max_tokens = 40;   /* past a block boundary: the tables grow */
        ref[i].o.n = 1;
        ref[i].o.top_logprobs = 0;
    }
    tern_engine *e = engine(m, 4, 8);
    for (int i = 0; i < 3; i++) CHECK(submit(e, &ref[i]) == TERN_OK);
    wait_all(ref, 3);
    tern_failpoint_site sites[3] = {TERN_FAILPOINT_PREPARE, TERN_FAILPOINT_GROW, TERN_FAILPOINT_WORKSPACE};
    for (int si = 0; si < 3; si++) {
        tern_failpoint_arm(sites[si], 0);
        memcpy(run, ref, sizeof run);
        for (int i = 0; i < 3; i++) CHECK(submit(e, &run[i]) == TERN_OK);
        wait_all(run, 3);
        long total = tern_failpoint_count(sites[si]);
        CHECK(si == 2 ? total > 10 : total >= 1);
        int bad = 0;
        long step = total > 150 ? total / 150 : 1;
        for (long n = 1; n <= total + 2; n += step) {
            memcpy(run, ref, sizeof run);
            tern_failpoint_arm(sites[si], n);
            for (int i = 0; i < 3; i++) CHECK(submit(e, &run[i]) == TERN_OK);
            wait_all(run, 3);
            for (int i = 0; i < 3; i++)
                if (run[i].status != TERN_OK || !same(&run[i], &ref[i], 1)) bad++;
        }
        tern_failpoint_arm(sites[si], 0);
        CHECK_MSG(bad == 0, "site %d: %d runs differ", si, bad);
    }
    tern_engine_stats st;
    tern_engine_get_stats(e, &st);
    CHECK(st.failures > 0 && st.blocks_used == st.cache_blocks && st.blocks_reserved == 0);
    tern_engine_free(e);
}

/* Prompt cache: 32 requests over 8 long shared prefixes, in random order and
 * concurrently, each equal to its cold run (no cache) bit for bit, with the
 * prefixes actually taken from the cache. */
static void prompt_cache(tern_model *m)
{
    enum { NP = 8, NQ = 32 };
    int V = tern_model_vocab_size(m);
    unsigned s = 777;
    int32_t pre[NP][80];
    static job cold[NQ], warm[NQ];
    for (int p = 0; p < NP; p++)
        for (int i = 0; i < 80; i++) pre[p][i] = (int32_t)(rand_r(&s) % (unsigned)V);
    for (int q = 0; q < NQ; q++) {
        job *j = &cold[q];
        memset(j, 0, sizeof *j);
        tern_request_opts_default(&j->o);
        int p = (int)(rand_r(&s) % NP), suffix = 1 + (int)(rand_r(&s) % 12);
        memcpy(j->prompt, pre[p], sizeof pre[p]);
        for (int i = 0; i < suffix; i++) j->prompt[80 + i] = (int32_t)(rand_r(&s) % (unsigned)V);
        j->n_prompt = 80 + suffix;
        j->o.max_tokens = 8 + q % 9;
        j->o.ignore_eos = 1;
        if (q % 2) {
            j->o.sampling.temperature = 0.7f;
            j->o.sampling.seed = (uint64_t)q;
        }
    }
    no_cache = 1;
    tern_engine *e0 = engine(m, 4, 64);
    no_cache = 0;
    for (int q = 0; q < NQ; q++) {
        CHECK(submit(e0, &cold[q]) == TERN_OK);
        wait_all(&cold[q], 1);
    }
    tern_engine_free(e0);
    tern_engine *e = engine(m, 8, 16);
    memcpy(warm, cold, sizeof warm);
    unsigned r = 5;
    for (int q = 0; q < NQ; q++) {
        CHECK(submit(e, &warm[q]) == TERN_OK);
        usleep((useconds_t)(rand_r(&r) % 800));
    }
    wait_all(warm, NQ);
    int hits = 0;
    for (int q = 0; q < NQ; q++) {
        CHECK_MSG(same(&warm[q], &cold[q], 1), "request %d differs with the prompt cache", q);
        CHECK(warm[q].cached % 32 == 0 && warm[q].cached < warm[q].n_prompt);
        hits += warm[q].cached > 0;
    }
    /* The same requests again, one at a time: every one hits now. */
    for (int q = 0; q < NQ; q++) {
        job again = cold[q];
        CHECK(submit(e, &again) == TERN_OK);
        wait_all(&again, 1);
        CHECK(same(&again, &cold[q], 1));
        CHECK(again.cached >= 64);
    }
    tern_engine_stats st;
    tern_engine_get_stats(e, &st);
    CHECK_MSG(hits >= NQ / 4, "only %d of %d requests hit", hits, NQ);
    CHECK(st.cache_hits > 0 && st.cache_tokens > 0 && st.blocks_used == st.cache_blocks);
    tern_engine_free(e);
    /* A byte cap of 3 blocks is held. */
    tern_engine_opts o;
    tern_engine_opts_default(&o);
    o.kv_tokens = 4096;
    o.prompt_cache_bytes = 3 * 32 * tern_engine_kv_bytes_per_token(m);
    CHECK(tern_engine_create(m, &o, &e) == TERN_OK);
    for (int q = 0; q < 8; q++) {
        job again = cold[q];
        CHECK(submit(e, &again) == TERN_OK);
        wait_all(&again, 1);
        CHECK(same(&again, &cold[q], 1));
        tern_engine_get_stats(e, &st);
        CHECK(st.cache_blocks <= 3);
    }
    CHECK(st.cache_evictions > 0);
    tern_engine_free(e);
}

int main(void)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/fixtures/models/qwen3", check_shared_dir());
    tern_model_opts mo = {.n_threads = 2, .precision = TERN_PRECISION_BF16, .weights = TERN_WEIGHTS_PANELS};
    tern_model *m;
    if (tern_model_load(dir, &mo, &m) != TERN_OK) {
        CHECK_MSG(0, "%s", tern_last_error());
        return check_summary("test_engine");
    }
    double t0 = tern_now();
    stress(m);
    double t1 = tern_now();
    admission(m);
    cancel(m);
    double t2 = tern_now();
    failures(m);
    /* Again with a draft model (itself, on its execution context): failures
     * in the draft rows' admission, growth and forwards cost speculation,
     * never a token. */
    {
        tern_model_opts dmo = {.precision = TERN_PRECISION_BF16, .weights = TERN_WEIGHTS_PANELS,
                               .exec = tern_model_exec(m)};
        tern_model *dm = NULL;
        CHECK(tern_model_load(dir, &dmo, &dm) == TERN_OK);
        draft_kind = TERN_DRAFT_MODEL;
        draft_model = dm;
        if (dm) failures(m);
        draft_kind = TERN_DRAFT_NONE;
        draft_model = NULL;
        tern_model_free(dm);
    }
    double t3 = tern_now();
    prompt_cache(m);
    double t4 = tern_now();
    tern_model_free(m);
    /* Every fixture model, and the trained demo pair. */
    static const char *const fixtures[] = {"llama_f32", "llama_headdim32_eoslist", "llama_rope_linear",
                                           "llama_rope_llama3", "qwen2", "qwen2_sharded", "qwen3_f16",
                                           "qwen3_moe_sparse2", "qwen3_rope_yarn", "qwen3_tied"};
    int nf = (int)(sizeof fixtures / sizeof *fixtures);
    for (int i = 0; i < nf; i++) {
        char t[4096], o[4096];
        snprintf(t, sizeof t, "tests/fixtures/models/%s", fixtures[i]);
        snprintf(o, sizeof o, "tests/fixtures/models/%s", fixtures[(i + 1) % nf]);
        spec_pair(t, o, 4);
    }
    static const char *const shared_fx[] = {"llama", "qwen3", "qwen3_moe"};
    for (int i = 0; i < 3; i++) {
        char t[4096], o[4096];
        snprintf(t, sizeof t, "%s/fixtures/models/%s", check_shared_dir(), shared_fx[i]);
        snprintf(o, sizeof o, "%s/fixtures/models/%s", check_shared_dir(), shared_fx[(i + 1) % 3]);
        spec_pair(t, o, 4);
    }
    char demo[4096], draft[4096];
    snprintf(demo, sizeof demo, "%s/models/tern-demo-code-42m", check_shared_dir());
    snprintf(draft, sizeof draft, "%s/models/tern-demo-code-draft-4m", check_shared_dir());
    spec_pair(demo, draft, 8);
    spec_refusals(dir);
    fprintf(stderr, "times: stress %.1fs, admission+cancel %.1fs, failures %.1fs, prompt cache %.1fs, draft models %.1fs\n",
            t1 - t0, t2 - t1, t3 - t2, t4 - t3, tern_now() - t4);
    return check_summary("test_engine");
}
