/* Copies the matmul weights of a bound model into one arena in the panel
 * layout (backend/cpu/panel.h), backed by transparent huge pages where the
 * kernel grants them. Decode then streams every projection as one
 * sequential read per thread. The input embedding table stays in the
 * checkpoint mapping (it is gathered by row, not multiplied). Quantized
 * matrices go to the quantized panels of backend/cpu/qpanel.h (their only
 * layout with vector kernels), also when the float weights stay mapped. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend/cpu/gguf_blocks.h"
#include "backend/cpu/panel.h"
#include "backend/cpu/qpanel.h"
#include "model/model_internal.h"

enum { HUGE_PAGE = 2 << 20, PACK_TASK_PANELS = 64 };

typedef struct {
    tern_weight **w;        /* the weights to pack (borrowed) */
    size_t *off;            /* byte offset of each in the arena */
    int n, cap;
    int quant_only;         /* float weights stay mapped */
} pack_list;

static int is_quant(const tern_weight *w)
{
    return tern_dtype_is_quant(w->dt);
}

static size_t packed_bytes(const tern_weight *w)
{
    if (!is_quant(w)) return tern_cpu_panel_bytes(w->dt, w->rows, w->cols);
    const tern_qmat *q = w->data;
    size_t b = q->form ? (size_t)tern_qp_count(w->rows) * tern_qf_panel_bytes(tern_qform_get((tern_qform)q->form), w->cols)
                       : tern_cpu_qpanel_bytes(tern_dtype_bits(w->dt), q->group, q->sdt, w->rows, w->cols);
    return (b + 63) / 64 * 64;
}

static int panel_count(const tern_weight *w)
{
    return is_quant(w) ? tern_qp_count(w->rows) : tern_panel_count(w->rows);
}

static tern_status list_add(pack_list *l, tern_weight *w)
{
    if (!w->data || w->rows < 1 || w->cols < 1) return TERN_OK;
    if (l->quant_only && !is_quant(w)) return TERN_OK;
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 64;
        tern_weight **nw = realloc(l->w, (size_t)cap * sizeof *nw);
        if (!nw) return tern_error(TERN_E_NOMEM, "out of memory");
        l->w = nw;
        size_t *no = realloc(l->off, (size_t)cap * sizeof *no);
        if (!no) return tern_error(TERN_E_NOMEM, "out of memory");
        l->off = no;
        l->cap = cap;
    }
    l->w[l->n++] = w;
    return TERN_OK;
}

static tern_status list_mlp(pack_list *l, tern_mlp *mlp)
{
    tern_status st;
    if ((st = list_add(l, &mlp->gate)) || (st = list_add(l, &mlp->up))) return st;
    return list_add(l, &mlp->down);
}

static tern_status collect(tern_model *m, pack_list *l)
{
    tern_status st;
    for (int i = 0; i < m->cfg.n_layers; i++) {
        tern_layer *L = &m->layers[i];
        if ((st = list_add(l, &L->wq)) || (st = list_add(l, &L->wk)) || (st = list_add(l, &L->wv)) ||
            (st = list_add(l, &L->wo)))
            return st;
        if (!L->is_moe) {
            if ((st = list_mlp(l, &L->mlp))) return st;
            continue;
        }
        if ((st = list_add(l, &L->router))) return st;
        for (int e = 0; e < m->cfg.n_experts; e++)
            if ((st = list_mlp(l, &L->experts[e]))) return st;
    }
    return list_add(l, &m->lm_head);
}

typedef struct {
    const tern_weight *w;
    char *dst;
    atomic_int bad;         /* GGUF: out of memory */
} pack_job;

/* Panels [p0, p1) of a GGUF-block matrix in its compact form: each row
 * decoded to codes and its block scales as stored, then laid out as a panel. */
static void pack_gguf(pack_job *j, int p0, int p1)
{
    const tern_weight *w = j->w;
    const tern_qmat *q = w->data;
    const tern_qform_info f = tern_qform_get((tern_qform)q->form);
    int be, bb, K = w->cols, G = K / f.group, S = G / f.sbg;
    tern_dtype_block(q->src, &be, &bb);
    size_t row = (size_t)(K / be) * (size_t)bb, pb = tern_qf_panel_bytes(f, K), R = TERN_QP_ROWS;
    uint8_t *codes = malloc(R * (size_t)K), *sc = malloc(R * (size_t)G), *mn = malloc(R * (size_t)G);
    uint16_t *d = malloc(R * (size_t)S * 2), *dmin = malloc(R * (size_t)S * 2);
    if (!codes || !sc || !mn || !d || !dmin) {
        atomic_store(&j->bad, 2);
    } else {
        for (int p = p0; p < p1; p++) {
            int n0 = p * TERN_QP_ROWS, nr = w->rows - n0 < TERN_QP_ROWS ? w->rows - n0 : TERN_QP_ROWS;
            for (int r = 0; r < nr; r++)
                tern_gguf_compact_row(q->src, (const uint8_t *)q->codes + (size_t)(n0 + r) * row, K,
                                      codes + (size_t)r * K, d + (size_t)r * S, dmin + (size_t)r * S,
                                      sc + (size_t)r * G, mn + (size_t)r * G);
            tern_cpu_qpanel_pack_compact((tern_qform)q->form, codes, d, dmin, sc, mn, nr, K,
                                         j->dst + (size_t)p * pb);
        }
    }
    free(codes);
    free(sc);
    free(mn);
    free(d);
    free(dmin);
}

static uintptr_t page_size(void)
{
    long pg = sysconf(_SC_PAGESIZE);
    return pg > 0 ? (uintptr_t)pg : 4096;
}

static void pack_task(void *arg, int t)
{
    pack_job *j = arg;
    int np = panel_count(j->w);
    int p0 = t * PACK_TASK_PANELS, p1 = p0 + PACK_TASK_PANELS < np ? p0 + PACK_TASK_PANELS : np;
    if (is_quant(j->w) && ((const tern_qmat *)j->w->data)->src != TERN_DT_U32) {
        pack_gguf(j, p0, p1);
        return;
    }
    if (is_quant(j->w)) {
        const tern_qmat *q = j->w->data;
        tern_cpu_qpanel_pack(q->codes, q->scales, q->biases, q->sdt, tern_dtype_bits(j->w->dt), q->group,
                             j->w->rows, j->w->cols, j->dst, p0, p1);
        return;
    }
#ifdef MADV_POPULATE_READ
    /* map the source rows in one call instead of a fault per page */
    size_t row = (size_t)j->w->cols * tern_dtype_size(j->w->dt);
    int r1 = p1 * TERN_PANEL_ROWS < j->w->rows ? p1 * TERN_PANEL_ROWS : j->w->rows;
    uintptr_t a = (uintptr_t)j->w->data + (size_t)p0 * TERN_PANEL_ROWS * row;
    uintptr_t b = (uintptr_t)j->w->data + (size_t)r1 * row;
    a &= ~(page_size() - 1);
    if (b > a) madvise((void *)a, b - a, MADV_POPULATE_READ);
#endif
    tern_cpu_panel_pack(j->w->data, j->w->dt, j->w->rows, j->w->cols, j->dst, p0, p1);
}

/* Bytes of [p, p + len) backed by huge pages, from /proc/self/smaps (0 if unknown). */
static size_t huge_bytes(const void *p, size_t len)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return 0;
    char line[512];
    size_t total = 0;
    int inside = 0;
    unsigned long lo = (unsigned long)p, hi = lo + len;
    while (fgets(line, sizeof line, f)) {
        unsigned long a, b;
        size_t kb;
        if (sscanf(line, "%lx-%lx ", &a, &b) == 2)     /* a mapping's header line */
            inside = a < hi && b > lo;
        else if (inside && sscanf(line, "AnonHugePages: %zu kB", &kb) == 1)
            total += kb << 10;
    }
    fclose(f);
    return total;
}

/* Gives the checkpoint pages of [a, a + len) back (the mapping stays
 * valid; a later read faults them in again from the page cache). */
static void drop_range(const void *p, size_t len)
{
    uintptr_t pg = page_size();
    uintptr_t a = (uintptr_t)p, b = a + len;
    uintptr_t lo = (a + pg - 1) / pg * pg, hi = b / pg * pg;
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

static void drop_source(const tern_weight *w)
{
    if (!is_quant(w)) {
        drop_range(w->data, (size_t)w->rows * (size_t)w->cols * tern_dtype_size(w->dt));
        return;
    }
    const tern_qmat *q = w->data;
    if (q->src != TERN_DT_U32) {
        drop_range(q->codes, tern_weight_bytes(w));
        return;
    }
    size_t sb = (size_t)w->rows * (size_t)(w->cols / q->group) * tern_dtype_size(q->sdt);
    drop_range(q->codes, (size_t)w->rows * (size_t)w->cols * (size_t)tern_dtype_bits(w->dt) / 8);
    drop_range(q->scales, sb);
    drop_range(q->biases, sb);
}

/* MemAvailable from /proc/meminfo in bytes (0 if unknown). */
static size_t mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    size_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %zu kB", &kb) == 1) break;
    fclose(f);
    return kb << 10;
}

tern_status tern_model_pack_weights(tern_model *m, int quant_only)
{
    pack_list l = {0};
    l.quant_only = quant_only;
    tern_status st = collect(m, &l);
    size_t total = 0;
    for (int i = 0; !st && i < l.n; i++) {
        l.off[i] = total;
        total += packed_bytes(l.w[i]);
    }
    if (st || total == 0) goto out;
    size_t size = (total + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    /* A copy that would not fit beside what the system has free would push the
     * machine into swapping or the OOM killer: the weights stay mapped then. */
    size_t avail = mem_available();
    if (avail && size > avail / 10 * 9) goto out;
    /* over-allocate by one huge page so the arena can start on a 2 MB boundary */
    char *raw = mmap(NULL, size + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) goto out;    /* no room for a copy: the weights stay mapped */
    char *arena = (char *)(((uintptr_t)raw + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE);
    if (arena > raw) munmap(raw, (size_t)(arena - raw));
    if (arena + size < raw + size + HUGE_PAGE)
        munmap(arena + size, (size_t)(raw + size + HUGE_PAGE - (arena + size)));
    madvise(arena, size, MADV_HUGEPAGE);
    for (int i = 0; i < l.n; i++) {
        pack_job j = {l.w[i], arena + l.off[i], 0};
        tern_pool_run(m->exec->pool, pack_task, &j, (panel_count(l.w[i]) + PACK_TASK_PANELS - 1) / PACK_TASK_PANELS);
        if (atomic_load(&j.bad)) {
            munmap(arena, size);
            st = tern_error(TERN_E_NOMEM, "out of memory packing weights");
            goto out;
        }
    }
    /* huge pages for at least half the arena: the hardware prefetcher carries decode */
    tern_wlayout layout = huge_bytes(arena, size) * 2 >= size ? TERN_WL_PANELS_HUGE : TERN_WL_PANELS;
    for (int i = 0; i < l.n; i++) {
        if (!(m->head_is_embed && l.w[i] == &m->lm_head)) drop_source(l.w[i]);
        if (is_quant(l.w[i])) {
            /* the descriptor is the model's own (tern_model_new_qmat) */
            tern_qmat *q = (tern_qmat *)l.w[i]->data;
            q->codes = arena + l.off[i];
            q->scales = q->biases = NULL;
        } else {
            l.w[i]->data = arena + l.off[i];
        }
        l.w[i]->layout = layout;
    }
    m->arena = arena;
    m->arena_floats = !quant_only;
    m->arena_bytes = size;
out:
    free(l.w);
    free(l.off);
    return st;
}
