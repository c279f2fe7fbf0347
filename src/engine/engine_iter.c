/* One scheduler iteration: admissions, one forward over every row, sampling,
 * callbacks, exits (engine.h). Runs on the engine thread only. */
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/failpoint.h"
#include "engine/engine_internal.h"
#include "model/forward.h"

enum { ADMIT_RETRIES = 3, FORWARD_RETRIES = 3 };

static void fail_request(tern_request *r, tern_status st, const char *msg)
{
    if (r->fail_st) return;
    r->fail_st = st ? st : TERN_E_INTERNAL;
    snprintf(r->fail_msg, sizeof r->fail_msg, "%s", msg);
    for (int c = 0; c < r->n; c++) r->rows[c].done = 1;
}

/* A longer prefix on disk than in memory: its missing blocks are read into
 * free pool blocks and published to the memory cache (which then holds them).
 * Returns the cached prefix now in memory (k when nothing better loads). */
static int load_from_disk(tern_engine *e, const int32_t *toks, int most, int k)
{
    int entry, m = tern_pdisk_match(e->disk, toks, most, &entry);
    if (m <= k) return k;
    int got = k;
    for (; got < m; got++)
        if (tern_kv_block_alloc(e->kv, &e->pc_blocks[got]) != TERN_OK) break;
    int ok = got == m && tern_pdisk_load(e->disk, entry, k, m, e->pc_blocks + k) == TERN_OK;
    if (ok) tern_pcache_insert(e->pc, toks, m, e->pc_blocks);
    /* The cache holds the blocks now (or nobody: they go back). */
    for (int i = k; i < got; i++) tern_kv_block_release(e->kv, e->pc_blocks[i]);
    return tern_pcache_lookup(e->pc, toks, most, e->pc_blocks);
}

/* Prepares every row of r (admission): all-or-nothing, touches no live row.
 * The longest cached prefix of the prompt (whole blocks, at least one token
 * left to compute) is held in e->pc_blocks[0, *n_cached) for the commit;
 * cached blocks no row uses are reclaimed first when room is short. */
static tern_status prepare_request(tern_engine *e, tern_request *r, tern_kv_prep *preps, int *n_cached)
{
    long P = r->n_prompt, total = P + r->max_tokens;
    int k = 0;
    *n_cached = 0;
    if (e->rows_used + r->n > e->o.max_batch) return TERN_E_BUSY;
    if (e->pc) {
        int most = (int)((P - 1) / TERN_KV_BLOCK_TOKENS);
        k = tern_pcache_lookup(e->pc, r->prompt, most, e->pc_blocks);
        if (e->disk && k < most) k = load_from_disk(e, r->prompt, most, k);
        /* Held across the eviction below, so that it cannot take them. */
        for (int i = 0; i < k; i++) tern_kv_block_hold(e->kv, e->pc_blocks[i]);
    }
    tern_kv_stats ks;
    tern_kv_get_stats(e->kv, &ks);
    long need = r->n * tern_kv_blocks_for(e->kv, total) + (r->n - 1) - k;
    if (need > ks.blocks_free - ks.blocks_reserved && e->pc) {
        tern_pcache_evict(e->pc, need - (ks.blocks_free - ks.blocks_reserved));
        tern_kv_get_stats(e->kv, &ks);
    }
    if (need > ks.blocks_free - ks.blocks_reserved) {
        for (int i = 0; i < k; i++) tern_kv_block_release(e->kv, e->pc_blocks[i]);
        return TERN_E_BUSY;
    }
    int c = 0;
    tern_status st = TERN_OK;
    for (; c < r->n && !st; c++) {
        eng_row *w = &r->rows[c];
        w->hist = tern_fp_malloc(TERN_FAILPOINT_PREPARE, (size_t)total * sizeof *w->hist);
        w->work = tern_fp_malloc(TERN_FAILPOINT_PREPARE, (size_t)e->vocab * sizeof *w->work);
        w->lp = tern_fp_malloc(TERN_FAILPOINT_PREPARE, (size_t)e->vocab * sizeof *w->lp);
        if (!w->hist || !w->work || !w->lp) st = tern_error(TERN_E_NOMEM, "out of memory admitting a request");
        if (!st) st = tern_kv_row_prepare(e->kv, total, c > 0 ? 1 : -k, P + 1, &preps[c]);
        if (st) break;
    }
    if (st) {
        for (int i = 0; i < k; i++) tern_kv_block_release(e->kv, e->pc_blocks[i]);
        for (int i = 0; i < c; i++) tern_kv_row_discard(&preps[i]);
        for (int i = 0; i < r->n; i++) {
            free(r->rows[i].hist);
            free(r->rows[i].work);
            free(r->rows[i].lp);
            r->rows[i].hist = NULL;
            r->rows[i].work = r->rows[i].lp = NULL;
        }
    }
    if (!st) *n_cached = k;
    /* Each choice's drafter state; a row whose open fails (say the draft
     * model's pool is full) just decodes plainly. */
    for (int i = 0; !st && r->spec > 0 && i < r->n; i++) {
        eng_row *w = &r->rows[i];
        w->drafting = e->drafter.vt->open(&e->drafter, total, &w->dstate) == TERN_OK;
    }
    return st;
}

/* Cannot fail: links the prepared rows in; the first takes the cached
 * prefix. */
static void commit_request(tern_engine *e, tern_request *r, tern_kv_prep *preps, int n_cached)
{
    for (int c = 0; c < r->n; c++) {
        eng_row *w = &r->rows[c];
        w->req = r;
        w->choice = c;
        w->kv_row = tern_kv_row_commit(e->kv, &preps[c]);
        memcpy(w->hist, r->prompt, (size_t)r->n_prompt * sizeof *w->hist);
        w->n_hist = r->n_prompt;
        w->sp = r->o.sampling;
        w->sp.seed = r->o.sampling.seed + (uint64_t)c;
        for (int k = 0; k < TERN_SPEC_POSITIONS; k++) w->acc_kept[k] = w->acc_tried[k] = 0;
    }
    r->n_prefill = r->spec > 0 && r->n_prompt >= 2 ? r->n_prompt - 1 : r->n_prompt;
    if (e->pc) tern_pcache_note(e->pc, n_cached);
    if (n_cached) {
        /* Its table holds blocks(P + 1) >= n_cached entries: cannot fail. */
        tern_kv_row_attach(e->kv, r->rows[0].kv_row, e->pc_blocks, n_cached);
        for (int i = 0; i < n_cached; i++) tern_kv_block_release(e->kv, e->pc_blocks[i]);
        r->n_fed = r->cached = n_cached * TERN_KV_BLOCK_TOKENS;
    }
    e->rows_used += r->n;
    r->state = REQ_PREFILL;
    r->t_admit = tern_now();
    e->active[e->n_active++] = r;
}

void tern_engine_admit(tern_engine *e)
{
    tern_request *dropped = NULL, **dtail = &dropped;
    pthread_mutex_lock(&e->mu);
    /* Waiting requests whose client went away leave the line now. */
    for (tern_request **pp = &e->wait_head; *pp;) {
        tern_request *r = *pp;
        if (atomic_load(&r->cancel) || (r->cb.should_cancel && r->cb.should_cancel(r->cb.user))) {
            *pp = r->next;
            r->next = NULL;
            *dtail = r;
            dtail = &r->next;
            e->n_waiting--;
            for (int c = 0; c < r->n; c++) r->finish[c] = TERN_FINISH_STOPPED;
        } else {
            pp = &r->next;
        }
    }
    e->wait_tail = NULL;
    for (tern_request *r = e->wait_head; r; r = r->next) e->wait_tail = r;
    /* FIFO: the head waits for room; nothing overtakes it. */
    int retries = 0;
    while (e->wait_head && !e->stopping && e->n_active < e->o.max_batch) {
        tern_request *r = e->wait_head;
        tern_kv_prep preps[r->n];
        int n_cached;
        tern_status st = prepare_request(e, r, preps, &n_cached);
        if (st == TERN_E_BUSY) break;
        if (st) {
            /* Out of memory: try again next time, a few times, then fail it. */
            if (++retries < ADMIT_RETRIES) continue;
            fail_request(r, st, tern_last_error());
        } else {
            commit_request(e, r, preps, n_cached);
            e->stats.admitted++;
        }
        e->wait_head = r->next;
        if (!e->wait_head) e->wait_tail = NULL;
        r->next = NULL;
        e->n_waiting--;
        if (st) {
            *dtail = r;
            dtail = &r->next;
        }
        retries = 0;
    }
    e->stats.waiting = e->n_waiting;
    pthread_mutex_unlock(&e->mu);
    while (dropped) {
        tern_request *next = dropped->next;
        tern_engine_finish_request(e, dropped);
        dropped = next;
    }
}

static int is_eos(const tern_engine *e, const tern_request *r, int32_t t)
{
    for (int i = 0; i < e->n_eos; i++) if (e->eos[i] == t) return 1;
    for (int i = 0; i < r->o.n_extra_eos; i++) if (r->o.extra_eos[i] == t) return 1;
    return 0;
}

/* Publishes the full blocks of a row to the prompt cache: its tokens are
 * the history up to the row's length (what its KV holds). */
static void publish(tern_engine *e, const eng_row *w)
{
    if (!e->pc || w->kv_row < 0 || w->req->fail_st) return;
    int len = tern_kv_offset(e->kv, w->kv_row), n = len / TERN_KV_BLOCK_TOKENS;
    if (len > w->n_hist) n = w->n_hist / TERN_KV_BLOCK_TOKENS;
    if (n > 0) tern_pcache_insert(e->pc, w->hist, n, tern_kv_table(e->kv, w->kv_row));
}

static void end_choice(tern_engine *e, eng_row *w, tern_finish f)
{
    publish(e, w);
    w->done = 1;
    w->req->finish[w->choice] = f;
    /* Its blocks go back to the pool at once. */
    if (w->kv_row >= 0) {
        tern_kv_row_remove(e->kv, w->kv_row);
        e->rows_used--;
        w->kv_row = -1;
    }
}

/* Applies a sampled token to its row: end of sequence, history, callback. */
static void deliver(tern_engine *e, eng_row *w)
{
    tern_request *r = w->req;
    if (w->done) return;
    if (w->sample_st) {
        fail_request(r, w->sample_st, tern_last_error());
        return;
    }
    if (w->choice == 0 && w->step == 0) r->t_first = tern_now();
    int32_t tok = w->tok;
    int step = w->step++;
    if (!r->o.ignore_eos && is_eos(e, r, tok)) {
        end_choice(e, w, TERN_FINISH_EOS);
        return;
    }
    w->hist[w->n_hist++] = tok;
    r->generated[w->choice]++;
    tern_token_event ev = {tok, w->choice, step, w->tok_lp, w->n_top, w->top_ids, w->top_lp};
    if (r->cb.on_token && r->cb.on_token(r->cb.user, &ev)) {
        end_choice(e, w, TERN_FINISH_STOPPED);
        return;
    }
    if (r->generated[w->choice] >= r->max_tokens) {
        end_choice(e, w, TERN_FINISH_LENGTH);
        return;
    }
    w->pending = tok;
}

static void record(tern_engine *e, double secs, int T);

/* Outputs o0 .. o0+n-1 of the iteration are row w's: its logits rows, and
 * on a backend that summarises them, its summaries instead when the row is
 * sampled greedily (those logits rows are then not copied back). */
static void out_slots(tern_engine *e, eng_row *w, int o0, int n)
{
    w->logits = e->logits + (size_t)o0 * e->vocab;
    w->sum = NULL;
    if (!e->summarize) return;
    int greedy = tern_engine_row_greedy_plain(w);
    memset(e->b_need + o0, !greedy, (size_t)n);
    if (greedy) w->sum = e->summ + o0;
}

/* Weight kept by a row's acceptance counts at each verify. */
static const double ACC_DECAY = 0.95;

/* A speculative row's verify window [pending, d1..dn]: position i's logits
 * are those a single step would give, so sampling them in order with the
 * row's own sampler at its own steps gives exactly the plain tokens; the
 * drafts agree up to the first mismatch, which is where the sampled token
 * replaces the draft. The KV keeps the pending token and the agreeing
 * drafts; the rest is rolled back. */
static void verify(tern_engine *e, eng_row *w)
{
    tern_request *r = w->req;
    const float *base = w->logits;
    const tern_logit_summary *sbase = w->sum;
    int n = w->n_draft, kept = 0;
    for (int i = 0; i <= n && !w->done; i++) {
        w->logits = base + (size_t)i * e->vocab;
        w->sum = sbase ? sbase + i : NULL;
        tern_engine_sample_one(e, w);
        int agrees = i < n && !w->sample_st && w->tok == w->draft[i];
        deliver(e, w);
        if (!agrees) break;
        kept++;
    }
    if (!w->done) tern_kv_round_rollback(e->kv, w->kv_row, 1 + kept);
    r->drafted += n;
    r->accepted += kept;
    /* Positions 0..kept were reached; all but a rejected last one kept.
     * (kept / n would understate the chances: a row keeping 80% of its
     * tokens one by one keeps 59% of a 4-token draft.) */
    for (int k = 0; k <= kept && k < n; k++) {
        w->acc_tried[k] = ACC_DECAY * w->acc_tried[k] + 1;
        w->acc_kept[k] = ACC_DECAY * w->acc_kept[k] + (k < kept);
    }
    pthread_mutex_lock(&e->mu);
    for (int i = 0; i < n && i < TERN_SPEC_POSITIONS; i++) {
        e->stats.spec_drafted[i]++;
        e->stats.spec_accepted[i] += i < kept;
    }
    pthread_mutex_unlock(&e->mu);
}

/* Iterations that carry prompt chunks aim at this multiple of a decode-only
 * step (their p99 gap stays under 3x, measured). */
static const double STEP_FACTOR = 1.6;

static int prompt_budget(const tern_engine *e)
{
    int cap = e->o.prefill_interleave;
    if (e->ema_decode_s <= 0 || e->ema_token_s <= 0) return cap < 8 ? cap : 8;
    double room = (STEP_FACTOR - 1) * e->ema_decode_s / e->ema_token_s;
    int b = room < 1 ? 1 : room > cap ? cap : (int)room;
    return b;
}

static void ema(double *v, double x)
{
    *v = *v > 0 ? 0.8 * *v + 0.2 * x : x;
}

/* Adds one iteration (T tokens in secs) to the cost fit. */
static void fit_add(tern_engine *e, double T, double secs)
{
    const double keep = 0.97;
    e->fit_w = keep * e->fit_w + 1;
    e->fit_T = keep * e->fit_T + T;
    e->fit_t = keep * e->fit_t + secs;
    e->fit_TT = keep * e->fit_TT + T * T;
    e->fit_Tt = keep * e->fit_Tt + T * secs;
}

/* t0 and c of the fit; 0 when the recent iterations do not spread over
 * enough sizes to tell them apart. */
static int fit_get(const tern_engine *e, double *t0, double *c)
{
    double w = e->fit_w, var = w * e->fit_TT - e->fit_T * e->fit_T;
    if (w < 4 || var < 0.25 * w * w) return 0;   /* T's spread under 0.5 tokens */
    *c = (w * e->fit_Tt - e->fit_T * e->fit_t) / var;
    *t0 = (e->fit_t - *c * e->fit_T) / w;
    return *c > 0 && *t0 > 0;
}

typedef struct {
    eng_row *w;
    double p;       /* chance the k-th draft token of w is kept */
} draft_slot;

static int more_likely(const void *a, const void *b)
{
    double x = ((const draft_slot *)a)->p, y = ((const draft_slot *)b)->p;
    return x > y ? -1 : x < y;
}

/* How deep each decoding row drafts this iteration. With the measured cost
 * model of an iteration, t(T) = t0 + c T over T tokens (fit_get; before it
 * can tell, the decode-only and per-token averages), and a row's k-th
 * draft token kept with chance rate^k, a token is worth verifying when it
 * raises the expected tokens per second: p > c (N + A) / (t0 + c (N + D))
 * for the N rows, A expected accepted and D drafted so far, most likely
 * first. So a batch that is bandwidth-bound (c small) drafts deep and one
 * that is compute-bound drafts little or nothing. Until the costs are
 * measured, spec_budget tokens are shared evenly. */
static void plan_drafts(tern_engine *e, int decoding)
{
    int n_slots = 0, n_fixed = 0, cap = decoding * (TERN_SPEC_POSITIONS - 1);
    draft_slot *slots = cap > 0 ? malloc((size_t)cap * sizeof *slots) : NULL;
    for (int i = 0; i < e->n_active; i++) {
        tern_request *r = e->active[i];
        if (r->state != REQ_DECODE) continue;
        for (int c = 0; c < r->n; c++) {
            eng_row *w = &r->rows[c];
            w->depth = 0;
            if (w->done || r->spec <= 0 || !w->drafting) continue;
            int room = r->max_tokens - r->generated[c] - 1, most = r->spec < room ? r->spec : room;
            if (e->o.spec_fixed) {
                /* Every row to its full depth, within the budget. */
                int left = e->o.spec_budget - n_fixed;
                w->depth = most < left ? (most > 0 ? most : 0) : left;
                n_fixed += w->depth;
                continue;
            }
            /* Each position's chance is shrunk towards the one before it
             * (one pseudo-verify at that chance; position 1 towards 1), so
             * a position rarely reached is judged by its neighbours. */
            double p = 1.0, q = 1.0;
            for (int k = 1; k <= most && slots && n_slots < cap; k++) {
                q = (w->acc_kept[k - 1] + q) / (w->acc_tried[k - 1] + 1);
                p *= q > 0.05 ? q : 0.05;
                slots[n_slots++] = (draft_slot){w, p};
            }
        }
    }
    if (!n_slots) {
        free(slots);
        return;
    }
    qsort(slots, (size_t)n_slots, sizeof *slots, more_likely);
    double cst, t0;
    int measured = fit_get(e, &t0, &cst);
    if (!measured) {
        cst = e->ema_token_s;
        t0 = e->ema_decode_s - cst * e->ema_decode_rows;
        measured = cst > 0 && e->ema_decode_s > 0;
        if (t0 < cst) t0 = cst;
    }
    /* A drafter with a cost of its own (a draft model: one step per draft
     * depth, all rows together) adds it when a token deepens the deepest
     * draft: an iteration costs t0 + c (N + D) + ds * max depth. A row whose
     * next token is not worth that price drafts no deeper; the others may
     * still fill the depth already paid for. */
    double ds = e->drafter.step_seconds;
    double A = 0;
    int D = 0, maxd = 0, n_closed = 0;
    eng_row *closed[decoding > 0 ? decoding : 1];
    for (int i = 0; i < n_slots && D < e->o.spec_budget; i++) {
        eng_row *w = slots[i].w;
        int shut = 0;
        for (int k = 0; k < n_closed; k++) shut |= closed[k] == w;
        if (shut) continue;
        int deeper = w->depth + 1 > maxd;
        double extra = deeper ? ds : 0, t = t0 + cst * (decoding + D) + ds * maxd;
        if (measured && slots[i].p * t <= (cst + extra) * (decoding + A)) {
            if (!deeper || ds <= 0) break;   /* nothing cheaper follows */
            if (n_closed < decoding) closed[n_closed++] = w;
            continue;
        }
        if (!measured && D >= e->o.spec_budget / (decoding > 0 ? decoding : 1) * decoding) break;
        w->depth++;
        if (w->depth > maxd) maxd = w->depth;
        A += slots[i].p;
        D++;
    }
    free(slots);
}

/* Requests whose choices all ended leave; cancelled ones end here too. The
 * gauges are updated before on_done runs, so a caller woken by it sees the
 * blocks already back in the pool. */
static void retire(tern_engine *e)
{
    int k = 0, n_done = 0;
    tern_request *done[e->n_active > 0 ? e->n_active : 1];
    for (int i = 0; i < e->n_active; i++) {
        tern_request *r = e->active[i];
        int cancel = !r->fail_st && (atomic_load(&r->cancel) || (r->cb.should_cancel && r->cb.should_cancel(r->cb.user)));
        int live = 0;
        for (int c = 0; c < r->n; c++) {
            if (cancel && !r->rows[c].done) end_choice(e, &r->rows[c], TERN_FINISH_STOPPED);
            live += !r->rows[c].done;
        }
        if (live) {
            e->active[k++] = r;
        } else {
            tern_request_free_rows(e, r);
            done[n_done++] = r;
        }
    }
    e->n_active = k;
    if (!n_done) return;
    record(e, 0, 0);
    for (int i = 0; i < n_done; i++) tern_engine_finish_request(e, done[i]);
}

/* Updates the gauges, and with T > 0 records one iteration. */
static void record(tern_engine *e, double secs, int T)
{
    tern_kv_stats ks;
    tern_kv_get_stats(e->kv, &ks);
    pthread_mutex_lock(&e->mu);
    tern_engine_stats *s = &e->stats;
    if (T > 0) {
        s->iterations++;
        s->tokens += (uint64_t)T;
        s->last_iteration_tokens = T;
        s->iter_seconds_sum += secs;
        int b = 0;
        while (secs > tern_engine_hist_bounds[b]) b++;
        s->iter_hist[b]++;
    }
    if (e->pc) {
        tern_pcache_stats ps;
        tern_pcache_get_stats(e->pc, &ps);
        s->cache_hits = ps.hits;
        s->cache_misses = ps.misses;
        s->cache_tokens = ps.cached_tokens;
        s->cache_evictions = ps.evictions;
        s->cache_blocks = ps.blocks;
    }
    if (e->disk) {
        tern_pdisk_stats ds;
        tern_pdisk_get_stats(e->disk, &ds);
        s->disk_bytes = ds.bytes;
        s->disk_writes = ds.writes;
        s->disk_loads = ds.loads;
        s->disk_load_failures = ds.load_failures;
        s->disk_skipped = ds.skipped;
        s->disk_files = ds.files;
    }
    s->running_rows = e->rows_used;
    s->running_requests = e->n_active;
    if (e->rows_used > s->peak_rows) s->peak_rows = e->rows_used;
    s->blocks_free = ks.blocks_free;
    s->blocks_used = ks.blocks_total - ks.blocks_free;
    s->blocks_reserved = ks.blocks_reserved;
    pthread_mutex_unlock(&e->mu);
}

int tern_engine_iterate(tern_engine *e)
{
    retire(e);
    if (!e->n_active) {
        record(e, 0, 0);
        return 0;
    }
    int nb = 0, T = 0, n_out = 0, decoding = 0;
    for (int i = 0; i < e->n_active; i++) {
        tern_request *r = e->active[i];
        if (r->state != REQ_DECODE) continue;
        for (int c = 0; c < r->n; c++) decoding += !r->rows[c].done;
    }
    plan_drafts(e, decoding);
    e->n_spec = 0;
    e->n_s = 0;
    /* Drafts first: every row that speculates this iteration, batched when
     * the drafter can (a draft model: one forward per depth). */
    int n_jobs = 0;
    for (int i = 0; i < e->n_active; i++) {
        tern_request *r = e->active[i];
        if (r->state != REQ_DECODE) continue;
        for (int c = 0; c < r->n; c++) {
            eng_row *w = &r->rows[c];
            w->n_draft = 0;
            w->job = -1;
            if (w->done || w->depth <= 0 || !w->drafting) continue;
            w->job = n_jobs;
            e->jobs[n_jobs++] = (tern_draft_job){w->dstate, w->hist, w->n_hist, w->depth, w->draft, 0, &w->sp, w->step};
        }
    }
    if (n_jobs && e->drafter.vt->draft_rows) {
        e->drafter.vt->draft_rows(&e->drafter, e->jobs, n_jobs);
    } else {
        for (int j = 0; j < n_jobs; j++) {
            tern_draft_job *J = &e->jobs[j];
            J->n_out = e->drafter.vt->draft(&e->drafter, J->state, J->hist, J->n_hist, J->max, J->out);
        }
    }
    for (int i = 0; i < e->n_active; i++) {
        tern_request *r = e->active[i];
        if (r->state != REQ_DECODE) continue;
        for (int c = 0; c < r->n; c++) {
            eng_row *w = &r->rows[c];
            if (w->done) continue;
            if (w->job >= 0) {
                const tern_draft_job *J = &e->jobs[w->job];
                int nd = J->n_out < 0 ? 0 : J->n_out > w->depth ? w->depth : J->n_out;
                /* A proposal the target cannot take ends the draft there. */
                for (int t = 0; t < nd; t++)
                    if (w->draft[t] < 0 || w->draft[t] >= e->vocab) nd = t;
                w->n_draft = nd;
            }
            e->b_rows[nb] = w->kv_row;
            e->b_ntok[nb++] = 1 + w->n_draft;
            e->b_tokens[T] = w->pending;
            memcpy(e->b_tokens + T + 1, w->draft, (size_t)w->n_draft * sizeof *w->draft);
            memset(e->b_want + T, 1, (size_t)(1 + w->n_draft));
            T += 1 + w->n_draft;
            out_slots(e, w, n_out, 1 + w->n_draft);
            n_out += 1 + w->n_draft;
            if (w->n_draft) e->spec_rows[e->n_spec++] = w;
            else e->s_rows[e->n_s++] = w;
            r->target_calls++;
        }
    }
    int spec_rows_kv[e->n_spec > 0 ? e->n_spec : 1];
    for (int i = 0; i < e->n_spec; i++) spec_rows_kv[i] = e->spec_rows[i]->kv_row;
    if (e->n_spec) tern_kv_round_begin_rows(e->kv, spec_rows_kv, e->n_spec);
    /* Joiners' prompt chunks, oldest first, within the token budget: the
     * whole prefill step when nothing decodes, else a slice small enough to
     * keep the running streams' step time near twice a decode-only step
     * (from the measured costs; at most prefill_interleave). How a prompt is
     * cut never changes its values (chunk invariance), only its latency. */
    int budget = decoding ? prompt_budget(e) : e->o.prefill_step;
    for (int i = 0; i < e->n_active && budget > 0; i++) {
        tern_request *r = e->active[i];
        if (r->state != REQ_PREFILL) continue;
        int chunk = r->n_prefill - r->n_fed < budget ? r->n_prefill - r->n_fed : budget;
        r->chunk = chunk;
        r->in_iter = 1;
        budget -= chunk;
        r->target_calls++;
        if (!chunk) continue;   /* tail split over a prompt cached whole but its last token */
        e->b_rows[nb] = r->rows[0].kv_row;
        e->b_ntok[nb++] = chunk;
        memcpy(e->b_tokens + T, r->prompt + r->n_fed, (size_t)chunk * sizeof *e->b_tokens);
        memset(e->b_want + T, 0, (size_t)chunk);
        T += chunk;
        if (r->n_fed + chunk == r->n_prompt) {
            e->b_want[T - 1] = 1;
            out_slots(e, &r->rows[0], n_out++, 1);
            e->s_rows[e->n_s++] = &r->rows[0];
        }
    }
    tern_batch b = {nb, e->b_rows, e->b_ntok, e->b_tokens, e->b_want};
    double t0 = tern_now();
    tern_status st = e->summarize ? tern_forward_ex(e->m, e->kv, &b, e->logits, NULL, e->b_need, e->summ)
                                  : tern_forward(e->m, e->kv, &b, e->logits, NULL);
    if (st) {
        /* Nothing changed (the forward's contract): try again; if it keeps
         * failing, the joiners fail first, then the running rows. */
        for (int i = 0; i < e->n_active; i++) e->active[i]->chunk = e->active[i]->in_iter = 0;
        if (e->n_spec) {
            int zero[e->n_spec];
            memset(zero, 0, sizeof zero);
            tern_kv_round_end_rows(e->kv, spec_rows_kv, zero, e->n_spec);
        }
        pthread_mutex_lock(&e->mu);
        e->stats.failures++;
        pthread_mutex_unlock(&e->mu);
        if (++e->fail_streak < FORWARD_RETRIES) return 1;
        e->fail_streak = 0;
        int joiners = 0;
        for (int i = 0; i < e->n_active; i++) joiners += e->active[i]->state == REQ_PREFILL;
        for (int i = 0; i < e->n_active; i++)
            if (!joiners || e->active[i]->state == REQ_PREFILL) fail_request(e->active[i], st, tern_last_error());
        return 1;
    }
    e->fail_streak = 0;
    /* Joiners whose prompt is complete start decoding; their other choices
     * fork from the prompt's blocks and sample from the same logits. */
    for (int i = 0; i < e->n_active; i++) {
        tern_request *r = e->active[i];
        if (r->state != REQ_PREFILL || !r->in_iter) continue;
        r->n_fed += r->chunk;
        r->chunk = r->in_iter = 0;
        if (r->n_fed < r->n_prefill) continue;
        r->state = REQ_DECODE;
        /* Running requests publish their prompt: others with the same
         * prefix share these blocks from now on. */
        publish(e, &r->rows[0]);
        int tail = r->n_prefill < r->n_prompt;
        for (int c = 1; c < r->n; c++) {
            tern_status fs = tern_kv_row_adopt(e->kv, r->rows[c].kv_row, r->rows[0].kv_row);
            if (fs) {
                fail_request(r, fs, tern_last_error());
                break;
            }
            r->rows[c].logits = r->rows[0].logits;
            r->rows[c].sum = r->rows[0].sum;
            if (!tail) e->s_rows[e->n_s++] = &r->rows[c];
        }
        /* Tail split: the last prompt token is every choice's pending token,
         * and the first verify window samples from it. */
        for (int c = 0; tail && c < r->n; c++) r->rows[c].pending = r->prompt[r->n_prompt - 1];
    }
    tern_engine_sample_rows(e);
    for (int i = 0; i < e->n_s; i++) deliver(e, e->s_rows[i]);
    for (int i = 0; i < e->n_spec; i++) verify(e, e->spec_rows[i]);
    double secs = tern_now() - t0;
    if (decoding && T == decoding) {
        ema(&e->ema_decode_s, secs);
        ema(&e->ema_decode_rows, decoding);
    }
    else if (decoding && e->ema_decode_s > 0 && secs > e->ema_decode_s)
        ema(&e->ema_token_s, (secs - e->ema_decode_s) / (T - decoding));
    if (decoding) fit_add(e, T, secs);
    record(e, secs, T);
    return 1;
}
