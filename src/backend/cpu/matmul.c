#include "backend/cpu/matmul.h"

#include <pthread.h>
#include <stdlib.h>

#include "backend/cpu/isa.h"
#include "backend/cpu/matmul_kern.h"
#include "backend/cpu/matmul_q.h"
#include "backend/cpu/panel.h"

/* Dispatch: one table per ISA (filled once), indexed by weight dtype; the
 * work is cut into blocks of rows of x by rows of w, one pool task each.
 * Every kernel computes each y[m,n] by a sequence of operations fixed by the
 * ISA and dtype alone (see matmul_kern.h), so cutting the work differently
 * for other M, N or thread counts never changes a result. */

/* Portable kernel: plain float32 dot product in k order. */
static void portable_block(tern_dtype wdt, const float *x, long ldx, int M, int K,
                           const void *w, int layout, int n0, int n1, float *y, long ldy)
{
    for (int n = n0; n < n1; n++)
        for (int m = 0; m < M; m++) {
            const float *xr = x + m * ldx;
            float acc = 0.0f;
            for (int k = 0; k < K; k++) {
                long i = layout == TERN_WL_ROWS ? (long)n * K + k : tern_panel_offset(K, n, k);
                float b;
                if (wdt == TERN_DT_F32) b = ((const float *)w)[i];
                else if (wdt == TERN_DT_BF16) b = tern_bf16_to_f32(((const uint16_t *)w)[i]);
                else b = tern_f16_to_f32(((const uint16_t *)w)[i]);
                acc += xr[k] * b;
            }
            y[m * ldy + n] = acc;
        }
}

static void portable_f32(const void *x, long ldx, int M, int K, const void *w, int layout,
                         int n0, int n1, float *y, long ldy)
{
    portable_block(TERN_DT_F32, x, ldx, M, K, w, layout, n0, n1, y, ldy);
}

static void portable_f16(const void *x, long ldx, int M, int K, const void *w, int layout,
                         int n0, int n1, float *y, long ldy)
{
    portable_block(TERN_DT_F16, x, ldx, M, K, w, layout, n0, n1, y, ldy);
}

static void portable_bf16(const void *x, long ldx, int M, int K, const void *w, int layout,
                          int n0, int n1, float *y, long ldy)
{
    portable_block(TERN_DT_BF16, x, ldx, M, K, w, layout, n0, n1, y, ldy);
}

/* bf16 rounding kept as float32 values (ISAs without bf16 arithmetic). */
static void portable_round(const float *x, int M, int K, void *outv, long ldo)
{
    float *out = outv;
    for (int m = 0; m < M; m++)
        for (int k = 0; k < K; k++)
            out[(long)m * ldo + k] = tern_bf16_to_f32(tern_f32_to_bf16(x[(long)m * K + k]));
}

static pthread_once_t tables_once = PTHREAD_ONCE_INIT;
static tern_mm_table tables[TERN_CPU_ISA_COUNT];

static void tables_fill(void)
{
    tern_mm_table *p = &tables[TERN_CPU_ISA_SCALAR];
    p->f32act[TERN_DT_F32] = portable_f32;
    p->f32act[TERN_DT_F16] = portable_f16;
    p->f32act[TERN_DT_BF16] = portable_bf16;
    p->bf16act = portable_bf16;
    if (tern_cpu_isa_supported(TERN_CPU_ISA_AVX2)) tern_mm_table_avx2(&tables[TERN_CPU_ISA_AVX2]);
    if (tern_cpu_isa_supported(TERN_CPU_ISA_AVX512)) tern_mm_table_avx512(&tables[TERN_CPU_ISA_AVX512]);
    for (int i = 0; i < TERN_CPU_ISA_COUNT; i++) {
        if (!tables[i].round_act) {
            tables[i].round_act = portable_round;
            tables[i].act_elem_bytes = 4;
            tables[i].act_k_align = 1;
        }
    }
}

typedef struct {
    tern_mm_kernel fn;
    const char *x;          /* activations as the kernel reads them */
    long ldx;               /* elements per row of x */
    int xsz;                /* bytes per element of x */
    int M, K, N;
    const void *w;
    int layout;
    float *y;
    int mb, nb, n_mblk;
} mm_job;

static void mm_task(void *arg, int t)
{
    const mm_job *j = arg;
    int m0 = (t % j->n_mblk) * j->mb, n0 = (t / j->n_mblk) * j->nb;
    int m1 = m0 + j->mb < j->M ? m0 + j->mb : j->M;
    int n1 = n0 + j->nb < j->N ? n0 + j->nb : j->N;
    j->fn(j->x + (size_t)m0 * (size_t)j->ldx * (size_t)j->xsz, j->ldx, m1 - m0, j->K, j->w,
          j->layout, n0, n1, j->y + (size_t)m0 * (size_t)j->N, j->N);
}

/* Rounding the activations of a large batch is cut into row blocks across
 * the pool; it is elementwise, so the cut changes nothing. */
typedef struct {
    const tern_mm_table *tab;
    const float *x;
    int M, K, rows;
    char *out;
    long ld;
} round_job;

enum { ROUND_ROWS = 32, ROUND_PARALLEL_MIN = 1 << 18 };

static void round_task(void *arg, int t)
{
    const round_job *r = arg;
    int m0 = t * r->rows, m1 = m0 + r->rows < r->M ? m0 + r->rows : r->M;
    r->tab->round_act(r->x + (size_t)m0 * (size_t)r->K, m1 - m0, r->K,
                      r->out + (size_t)m0 * (size_t)r->ld * (size_t)r->tab->act_elem_bytes, r->ld);
}

static int round_up(int v, int a)
{
    return (v + a - 1) / a * a;
}

/* Few rows (decode, small batches): the product is bound by streaming w, so
 * all rows share one pass and N is cut into contiguous slices, several per
 * thread so a busy core does not hold up the rest. Many rows (prefill):
 * blocks of x rows by w rows that stay resident in L2 while register tiles
 * reuse every loaded weight across several rows. */
enum { MM_SMALL_M = 16, MM_MBLOCK = 48, MM_NALIGN = 24 };
_Static_assert((int)MM_NALIGN % (int)TERN_PANEL_ROWS == 0, "blocks start at panel boundaries");

static void mm_plan(mm_job *j, size_t wsz, int threads)
{
    size_t row = (size_t)j->K * wsz;
    if (j->M <= MM_SMALL_M) {
        j->mb = j->M;
        int per_thread = (j->N + threads * 4 - 1) / (threads * 4);
        int cap = (int)((512u << 10) / row);
        j->nb = per_thread < cap ? per_thread : cap;
    } else {
        j->mb = MM_MBLOCK;
        j->nb = (int)((192u << 10) / row);
    }
    if (j->nb < MM_NALIGN) j->nb = MM_NALIGN;
    j->nb = round_up(j->nb, MM_NALIGN);
    j->n_mblk = (j->M + j->mb - 1) / j->mb;
}

void tern_cpu_matmul_f32_rows(const float *x, int M, int K, const float *w, int N, float *y, long ldy)
{
    pthread_once(&tables_once, tables_fill);
    tables[tern_cpu_isa_active()].f32act[TERN_DT_F32](x, K, M, K, w, TERN_WL_ROWS, 0, N, y, ldy);
}

/* Several outputs share one pool run: tasks of output i are numbered from
 * first_task[i]. */
typedef struct {
    mm_job jobs[TERN_MM_MAX_OUTS];
    int first_task[TERN_MM_MAX_OUTS + 1];
    int n;
} mm_multi;

static void multi_task(void *arg, int t)
{
    const mm_multi *mj = arg;
    int i = 0;
    while (t >= mj->first_task[i + 1]) i++;
    mm_task((void *)&mj->jobs[i], t - mj->first_task[i]);
}

/* Activations of one decode row fit here; larger batches go to the heap. */
enum { MM_STACK_SCRATCH = 8192 };

tern_status tern_cpu_matmul_multi(tern_pool *pool, tern_act_mode mode, const float *x, int M,
                                  int K, const tern_mm_out *outs, int n_outs)
{
    if (n_outs < 1 || n_outs > TERN_MM_MAX_OUTS)
        return tern_error(TERN_E_RANGE, "matmul: %d outputs, expected 1..%d", n_outs,
                          TERN_MM_MAX_OUTS);
    if (M < 0 || K <= 0)
        return tern_error(TERN_E_INVALID, "matmul: bad shape M=%d K=%d", M, K);
    /* Quantized outputs go to matmul_q.c; a mix runs as two passes (each y
     * is the same either way). */
    int n_quant = 0;
    for (int i = 0; i < n_outs; i++) n_quant += tern_dtype_is_quant(outs[i].wdt);
    if (n_quant == n_outs) return tern_cpu_matmul_q(pool, mode, x, M, K, outs, n_outs);
    if (n_quant) {
        tern_mm_out fl[TERN_MM_MAX_OUTS], qu[TERN_MM_MAX_OUTS];
        int nf = 0, nq = 0;
        for (int i = 0; i < n_outs; i++) {
            if (tern_dtype_is_quant(outs[i].wdt)) qu[nq++] = outs[i];
            else fl[nf++] = outs[i];
        }
        for (int i = 0; i < nq; i++) {
            tern_status st = tern_cpu_matmul_q_check(&qu[i], K);
            if (st) return st;
        }
        tern_status st = tern_cpu_matmul_multi(pool, mode, x, M, K, fl, nf);
        return st ? st : tern_cpu_matmul_q(pool, mode, x, M, K, qu, nq);
    }
    int need_round = 0;
    for (int i = 0; i < n_outs; i++) {
        if (outs[i].n <= 0)
            return tern_error(TERN_E_INVALID, "matmul: bad shape M=%d K=%d N=%d", M, K, outs[i].n);
        tern_dtype wdt = outs[i].wdt;
        if (wdt != TERN_DT_F32 && wdt != TERN_DT_F16 && wdt != TERN_DT_BF16)
            return tern_error(TERN_E_UNSUPPORTED, "matmul: weight dtype %s not supported",
                              tern_dtype_name(wdt));
        if (outs[i].layout != TERN_WL_ROWS && outs[i].layout != TERN_WL_PANELS &&
            outs[i].layout != TERN_WL_PANELS_HUGE)
            return tern_error(TERN_E_INVALID, "matmul: unknown weight layout %d", (int)outs[i].layout);
        if (mode == TERN_ACT_BF16 && wdt == TERN_DT_BF16) need_round = 1;
    }
    if (M == 0) return TERN_OK;
    pthread_once(&tables_once, tables_fill);
    const tern_mm_table *tab = &tables[tern_cpu_isa_active()];

    _Alignas(64) char stack_scratch[MM_STACK_SCRATCH];
    void *scratch = NULL, *heap = NULL;
    long ld = round_up(K, tab->act_k_align);
    if (need_round) {
        size_t bytes = (size_t)M * (size_t)ld * (size_t)tab->act_elem_bytes;
        if (bytes <= sizeof stack_scratch) {
            scratch = stack_scratch;
        } else {
            scratch = heap = aligned_alloc(64, (bytes + 63) / 64 * 64);
            if (!heap)
                return tern_error(TERN_E_NOMEM, "matmul: no memory for %zu bytes of activations",
                                  bytes);
        }
        round_job r = {tab, x, M, K, ROUND_ROWS, scratch, ld};
        if ((long)M * K >= ROUND_PARALLEL_MIN)
            tern_pool_run(pool, round_task, &r, (M + ROUND_ROWS - 1) / ROUND_ROWS);
        else
            tab->round_act(x, M, K, scratch, ld);
    }
    mm_multi mj;
    mj.n = n_outs;
    mj.first_task[0] = 0;
    for (int i = 0; i < n_outs; i++) {
        mm_job *j = &mj.jobs[i];
        *j = (mm_job){0};
        j->M = M;
        j->K = K;
        j->N = outs[i].n;
        j->w = outs[i].w;
        j->layout = (int)outs[i].layout;
        j->y = outs[i].y;
        if (mode == TERN_ACT_BF16 && outs[i].wdt == TERN_DT_BF16) {
            j->fn = tab->bf16act;
            j->x = scratch;
            j->ldx = ld;
            j->xsz = tab->act_elem_bytes;
        } else {
            j->fn = tab->f32act[outs[i].wdt];
            j->x = (const char *)x;
            j->ldx = K;
            j->xsz = 4;
        }
        mm_plan(j, tern_dtype_size(outs[i].wdt), tern_pool_threads(pool));
        mj.first_task[i + 1] = mj.first_task[i] + j->n_mblk * ((j->N + j->nb - 1) / j->nb);
    }
    tern_pool_run(pool, multi_task, &mj, mj.first_task[n_outs]);
    free(heap);
    return TERN_OK;
}

tern_status tern_cpu_matmul(tern_pool *pool, tern_act_mode mode, const float *x, int M, int K,
                            const void *w, tern_dtype wdt, int N, float *y)
{
    tern_mm_out out = {w, wdt, N, y, TERN_WL_ROWS};
    return tern_cpu_matmul_multi(pool, mode, x, M, K, &out, 1);
}
