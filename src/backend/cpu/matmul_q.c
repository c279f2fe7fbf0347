#include "backend/cpu/matmul_q.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/isa.h"
#include "backend/cpu/qpanel.h"

/* Dispatch: the activations are prepared once per group size, then the
 * outputs are cut into blocks of x rows by whole panels of w rows, one pool
 * task each. Every kernel computes each y[m, n] by the chain of
 * matmul_q.h, so the cut never changes a result. */

/* Scales and biases may sit at any byte offset (mlx-lm does not align its
 * tensors), so they are read with memcpy. */
static float scale_at(const void *p, tern_dtype dt, size_t i)
{
    if (dt == TERN_DT_F32) {
        float f;
        memcpy(&f, (const uint8_t *)p + 4 * i, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, (const uint8_t *)p + 2 * i, 2);
    return dt == TERN_DT_F16 ? tern_f16_to_f32(h) : tern_bf16_to_f32(h);
}

/* ---- activations ---- */

size_t tern_qact_bytes(tern_act_mode mode, int M, int K, int group)
{
    size_t G = (size_t)(K / group), m = (size_t)M;
    size_t b = m * G * sizeof(float);                       /* sx */
    if (mode == TERN_ACT_BF16) b += m * G * sizeof(float) + m * (size_t)K;   /* dx, xq */
    return b;
}

void tern_qact_group(tern_act_mode mode, const float *xg, int group, float *sx, float *dx, int8_t *q)
{
    double p[8] = {0};
    float amax = 0.0f;
    for (int i = 0; i < group; i++) {
        p[i & 7] += xg[i];
        float v = fabsf(xg[i]);
        if (v > amax) amax = v;
    }
    *sx = (float)(((p[0] + p[4]) + (p[2] + p[6])) + ((p[1] + p[5]) + (p[3] + p[7])));
    if (mode != TERN_ACT_BF16) return;
    if (!(amax > 0.0f) || !isfinite(amax)) {
        *dx = isfinite(amax) ? 0.0f : NAN;
        memset(q, 0, (size_t)group);
        return;
    }
    float id = 127.0f / amax;
    *dx = amax / 127.0f;
    for (int i = 0; i < group; i++) {
        float v = xg[i] * id;
        /* NaN (and anything out of range) clamps like cvtps: to -127 */
        long r = v == v ? lrintf(v) : -128;
        q[i] = (int8_t)(r > 127 ? 127 : r < -127 ? -127 : r);
    }
}

static void prep_portable(tern_act_mode mode, const float *x, int M, int K, int group, float *sx,
                          float *dx, int8_t *xq)
{
    int G = K / group;
    for (int m = 0; m < M; m++)
        for (int g = 0; g < G; g++)
            tern_qact_group(mode, x + (size_t)m * K + (size_t)g * group, group, sx + (size_t)m * G + g,
                            dx + (size_t)m * G + g, xq + (size_t)m * K + (size_t)g * group);
}

void tern_qact_prepare(tern_act_mode mode, const float *x, int M, int K, int group, void *scratch,
                       tern_qact_fn prep, tern_qact *a)
{
    int G = K / group;
    float *sx = scratch, *dx = sx + (size_t)M * G;
    int8_t *xq = (int8_t *)(dx + (size_t)M * G);
    *a = (tern_qact){(int)mode, K, group, G, x, NULL, NULL, sx};
    (prep ? prep : prep_portable)(mode, x, M, K, group, sx, dx, xq);
    if (mode == TERN_ACT_BF16) {
        a->xq = xq;
        a->dx = dx;
    }
}

/* ---- scalar kernels: the chain of matmul_q.h, element by element ---- */

/* Where the codes, scales and biases of weight row n live. */
typedef struct {
    int panels, bits, group;
    tern_dtype sdt;
    const uint8_t *codes;       /* rows: row n; panels: panel of n */
    const void *scales, *biases;/* rows: row n's; panels: unused */
    int j;                      /* panels: row within the panel */
    size_t rec;                 /* panels: bytes per group record (of codes, compact forms) */
    int form;                   /* panels: tern_qform */
    tern_qform_info f;          /* compact forms */
    const uint8_t *panel;       /* compact forms: the panel of n */
    int G;
} wrow;

static wrow wrow_at(const tern_mm_out *o, int K, int n)
{
    const tern_qmat *q = o->w;
    int bits = tern_dtype_bits(o->wdt), G = K / q->group;
    wrow r = {o->layout != TERN_WL_ROWS, bits, q->group, q->sdt, NULL, NULL, NULL, 0, 0, 0, {0}, NULL, G};
    if (r.panels && q->form != TERN_QF_AFFINE) {
        r.form = q->form;
        r.f = tern_qform_get((tern_qform)q->form);
        r.panel = (const uint8_t *)q->codes + (size_t)(n / TERN_QP_ROWS) * tern_qf_panel_bytes(r.f, K);
        r.j = n % TERN_QP_ROWS;
    } else if (r.panels) {
        r.rec = tern_qp_record_bytes(bits, q->group, q->sdt);
        r.codes = (const uint8_t *)q->codes + (size_t)(n / TERN_QP_ROWS) * (size_t)G * r.rec;
        r.j = n % TERN_QP_ROWS;
    } else {
        size_t ss = tern_dtype_size(q->sdt);
        r.codes = (const uint8_t *)q->codes + (size_t)n * (size_t)K * (size_t)bits / 8;
        r.scales = (const uint8_t *)q->scales + (size_t)n * (size_t)G * ss;
        r.biases = (const uint8_t *)q->biases + (size_t)n * (size_t)G * ss;
    }
    return r;
}

static unsigned code(const wrow *r, int k)
{
    if (!r->panels) {
        if (r->bits == 8) return r->codes[k];
        return (r->codes[k >> 1] >> ((k & 1) * 4)) & 15u;
    }
    int g = k / r->group, kk = k % r->group, per = 32 / r->bits;
    const uint8_t *gc = r->codes + (size_t)g * r->rec, *ch;
    if (r->form) tern_qf_locate(r->f, r->panel, r->G, g, &gc, &ch);
    const uint8_t *u = gc + (size_t)(kk / per) * TERN_QP_UNIT + 4 * r->j;
    int i = kk % per;
    if (r->bits == 8) return u[i];
    unsigned c = (u[i & 3] >> ((i >> 2) * 4)) & 15u;
    if (r->form && r->f.hb) {
        /* the high unit follows the low ones: element 4t + i at bits hb*t of byte i */
        const uint8_t *h = gc + (size_t)(r->group / per) * TERN_QP_UNIT + 4 * r->j;
        unsigned hv = (h[kk & 3] >> (r->f.hb * (kk >> 2))) & ((1u << r->f.hb) - 1u);
        c |= hv << 4;
    }
    return c;
}

static float f16_at(const uint8_t *p, size_t i)
{
    uint16_t h;
    memcpy(&h, p + 2 * i, 2);
    return tern_f16_to_f32(h);
}

static void sb(const wrow *r, int g, float *s, float *b)
{
    if (!r->panels) {
        *s = scale_at(r->scales, r->sdt, (size_t)g);
        *b = scale_at(r->biases, r->sdt, (size_t)g);
        return;
    }
    if (r->form) {
        const tern_qform_info f = r->f;
        const uint8_t *gc, *ch;
        tern_qf_locate(f, r->panel, r->G, g, &gc, &ch);
        const uint8_t *sg = ch + (f.sub == 2 ? 64 : 32) + (size_t)(g % f.sbg) * TERN_QP_ROWS * (size_t)f.sub;
        float d = f16_at(ch, (size_t)r->j);
        if (f.sub == 0) *s = d;
        else if (f.sub == 1) *s = d * (float)(int8_t)sg[r->j];
        else *s = d * (float)sg[r->j];
        if (f.sub == 2) *b = -(f16_at(ch + 32, (size_t)r->j) * (float)sg[TERN_QP_ROWS + r->j]);
        else *b = (float)f.bias_k * *s;
        return;
    }
    const uint8_t *rec = r->codes + (size_t)g * r->rec + tern_qp_codes_bytes(r->bits, r->group);
    *s = scale_at(rec, r->sdt, (size_t)r->j);
    *b = scale_at(rec, r->sdt, (size_t)TERN_QP_ROWS + (size_t)r->j);
}

void tern_qmm_scalar(const tern_qact *a, int m0, int m1, const tern_mm_out *o, int n0, int n1)
{
    const int K = a->K, G = a->G, gs = a->group;
    for (int n = n0; n < n1; n++) {
        wrow r = wrow_at(o, K, n);
        for (int m = m0; m < m1; m++) {
            float acc = 0.0f;
            for (int g = 0; g < G; g++) {
                float s, b;
                sb(&r, g, &s, &b);
                int k0 = g * gs;
                if (a->mode == TERN_ACT_BF16) {
                    const int8_t *xq = a->xq + (size_t)m * K;
                    int32_t isum = 0;
                    for (int k = k0; k < k0 + gs; k++) isum += (int32_t)code(&r, k) * xq[k];
                    acc = fmaf((float)isum, s * a->dx[(size_t)m * G + g], acc);
                } else {
                    const float *x = a->xf + (size_t)m * K;
                    float aq = 0.0f;
                    for (int k = k0; k < k0 + gs; k++) aq = fmaf((float)code(&r, k), x[k], aq);
                    acc = fmaf(aq, s, acc);
                }
                acc = fmaf(b, a->sx[(size_t)m * G + g], acc);
            }
            o->y[(size_t)m * o->n + n] = acc;
        }
    }
}

/* ---- dispatch ---- */

static pthread_once_t qtables_once = PTHREAD_ONCE_INIT;
static tern_qmm_table qtables[TERN_CPU_ISA_COUNT];

static void qtables_fill(void)
{
    if (tern_cpu_isa_supported(TERN_CPU_ISA_AVX2)) tern_qmm_table_avx2(&qtables[TERN_CPU_ISA_AVX2]);
    if (tern_cpu_isa_supported(TERN_CPU_ISA_AVX512)) {
        tern_qmm_table *t = &qtables[TERN_CPU_ISA_AVX512];
        tern_qmm_table_avx512(t);
        for (int m = 0; m < 2; m++)
            for (int b = 0; b < TERN_QK_COUNT; b++)
                if (!t->panels[m][b]) t->panels[m][b] = qtables[TERN_CPU_ISA_AVX2].panels[m][b];
        if (!t->prep) t->prep = qtables[TERN_CPU_ISA_AVX2].prep;
    }
}

tern_status tern_cpu_matmul_q_check(const tern_mm_out *o, int K)
{
    int bits = tern_dtype_bits(o->wdt);
    if (!tern_dtype_is_quant(o->wdt) || (bits != 4 && bits != 8))
        return tern_error(TERN_E_UNSUPPORTED, "matmul: weight format %s not supported",
                          tern_dtype_name(o->wdt));
    const tern_qmat *q = o->w;
    if (!q || !q->codes) return tern_error(TERN_E_INVALID, "matmul: quantized weights without codes");
    if (q->group != 16 && q->group != 32 && q->group != 64 && q->group != 128)
        return tern_error(TERN_E_UNSUPPORTED, "matmul: quantization group size %d not supported "
                          "(16, 32, 64, 128)", q->group);
    if (K % q->group)
        return tern_error(TERN_E_INVALID, "matmul: K=%d is not a multiple of the group size %d", K,
                          q->group);
    if (q->sdt != TERN_DT_F32 && q->sdt != TERN_DT_F16 && q->sdt != TERN_DT_BF16)
        return tern_error(TERN_E_UNSUPPORTED, "matmul: scales of dtype %s not supported",
                          tern_dtype_name(q->sdt));
    if (o->layout == TERN_WL_ROWS && (!q->scales || !q->biases))
        return tern_error(TERN_E_INVALID, "matmul: quantized weights without scales or biases");
    if (o->layout == TERN_WL_ROWS && q->src != TERN_DT_U32)
        return tern_error(TERN_E_UNSUPPORTED, "matmul: %s weights are computed from their panel copy only",
                          tern_dtype_name(q->src));
    if (o->layout != TERN_WL_ROWS && o->layout != TERN_WL_PANELS && o->layout != TERN_WL_PANELS_HUGE)
        return tern_error(TERN_E_INVALID, "matmul: unknown weight layout %d", (int)o->layout);
    if (q->form < 0 || q->form >= TERN_QF_COUNT)
        return tern_error(TERN_E_INVALID, "matmul: unknown panel form %d", q->form);
    if (q->form != TERN_QF_AFFINE) {
        tern_qform_info f = tern_qform_get((tern_qform)q->form);
        if (o->layout == TERN_WL_ROWS)
            return tern_error(TERN_E_INVALID, "matmul: a compact panel form needs the panel layout");
        if (f.bits != bits || f.group != q->group || K % (f.group * f.sbg))
            return tern_error(TERN_E_INVALID, "matmul: panel form %d does not match %d-bit codes, group %d, "
                              "K=%d", q->form, bits, q->group, K);
    }
    return TERN_OK;
}

typedef struct {
    tern_qmm_kernel fn;
    const tern_qact *a;
    const tern_mm_out *o;
    int M, N, mb, nb, n_mblk;
} qjob;

typedef struct {
    qjob jobs[TERN_MM_MAX_OUTS];
    int first_task[TERN_MM_MAX_OUTS + 1];
} qmulti;

static void qtask(void *arg, int t)
{
    const qmulti *q = arg;
    int i = 0;
    while (t >= q->first_task[i + 1]) i++;
    const qjob *j = &q->jobs[i];
    t -= q->first_task[i];
    int m0 = (t % j->n_mblk) * j->mb, n0 = (t / j->n_mblk) * j->nb;
    int m1 = m0 + j->mb < j->M ? m0 + j->mb : j->M;
    int n1 = n0 + j->nb < j->N ? n0 + j->nb : j->N;
    j->fn(j->a, m0, m1, j->o, n0, n1);
}

/* Few rows (decode, small batches, M <= 16): all rows in one pass over each
 * panel, N cut into slices of whole panels, several per thread. Many rows:
 * blocks of 64 x rows by panels worth about 256 KB, which stay in L2 while
 * the block's row tiles reuse them. */
enum { QMM_SMALL_M = 16, QMM_MBLOCK = 64, QMM_BLOCK_BYTES = 256 << 10 };

static void qplan(qjob *j, int K, int threads)
{
    int np = tern_qp_count(j->N);
    const tern_qmat *q = j->o->w;
    size_t pb = q->form ? tern_qf_panel_bytes(tern_qform_get((tern_qform)q->form), K)
                        : tern_qp_panel_bytes(tern_dtype_bits(j->o->wdt), q->group, q->sdt, K);
    int per;
    if (j->M <= QMM_SMALL_M) {
        j->mb = j->M;
        per = (np + threads * 4 - 1) / (threads * 4);
    } else {
        j->mb = QMM_MBLOCK;
        per = (int)(QMM_BLOCK_BYTES / (pb ? pb : 1));
    }
    if (per < 1) per = 1;
    j->nb = per * TERN_QP_ROWS;
    j->n_mblk = (j->M + j->mb - 1) / j->mb;
}

enum { QMM_STACK_SCRATCH = 16384, QMM_MAX_GROUPS = 4 };

tern_status tern_cpu_matmul_q(tern_pool *pool, tern_act_mode mode, const float *x, int M, int K,
                              const tern_mm_out *outs, int n_outs)
{
    if (n_outs < 1 || n_outs > TERN_MM_MAX_OUTS)
        return tern_error(TERN_E_RANGE, "matmul: %d outputs, expected 1..%d", n_outs, TERN_MM_MAX_OUTS);
    if (M < 0 || K <= 0) return tern_error(TERN_E_INVALID, "matmul: bad shape M=%d K=%d", M, K);
    for (int i = 0; i < n_outs; i++) {
        if (outs[i].n <= 0)
            return tern_error(TERN_E_INVALID, "matmul: bad shape M=%d K=%d N=%d", M, K, outs[i].n);
        tern_status st = tern_cpu_matmul_q_check(&outs[i], K);
        if (st) return st;
    }
    if (M == 0) return TERN_OK;
    pthread_once(&qtables_once, qtables_fill);
    const tern_qmm_table *tab = &qtables[tern_cpu_isa_active()];

    /* one preparation per distinct group size */
    int groups[QMM_MAX_GROUPS], n_groups = 0;
    size_t off[QMM_MAX_GROUPS], total = 0;
    for (int i = 0; i < n_outs; i++) {
        int gs = ((const tern_qmat *)outs[i].w)->group, g = 0;
        while (g < n_groups && groups[g] != gs) g++;
        if (g == n_groups) {
            groups[n_groups] = gs;
            off[n_groups] = total;
            total += (tern_qact_bytes(mode, M, K, gs) + 63) / 64 * 64;
            n_groups++;
        }
    }
    _Alignas(64) char stack_scratch[QMM_STACK_SCRATCH];
    char *scratch = stack_scratch, *heap = NULL;
    if (total > sizeof stack_scratch) {
        scratch = heap = aligned_alloc(64, total);
        if (!heap) return tern_error(TERN_E_NOMEM, "matmul: no memory for %zu bytes of activations", total);
    }
    tern_qact acts[QMM_MAX_GROUPS];
    for (int g = 0; g < n_groups; g++)
        tern_qact_prepare(mode, x, M, K, groups[g], scratch + off[g], tab->prep, &acts[g]);

    qmulti q;
    q.first_task[0] = 0;
    for (int i = 0; i < n_outs; i++) {
        qjob *j = &q.jobs[i];
        int g = 0;
        while (groups[g] != ((const tern_qmat *)outs[i].w)->group) g++;
        int form = ((const tern_qmat *)outs[i].w)->form, fast = mode == TERN_ACT_BF16;
        int ki = form ? 1 + form : tern_dtype_bits(outs[i].wdt) == 8;
        *j = (qjob){tern_qmm_scalar, &acts[g], &outs[i], M, outs[i].n, 0, 0, 0};
        if (outs[i].layout != TERN_WL_ROWS && tab->panels[fast][ki]) j->fn = tab->panels[fast][ki];
        qplan(j, K, tern_pool_threads(pool));
        q.first_task[i + 1] = q.first_task[i] + j->n_mblk * ((j->N + j->nb - 1) / j->nb);
    }
    tern_pool_run(pool, qtask, &q, q.first_task[n_outs]);
    free(heap);
    return TERN_OK;
}
