/* The KV block pool: reservations, prepare / commit / discard, forks that
 * share blocks with copy on write, the round API, and failure injection in
 * preparation and growth leaving every row exactly as it was. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kv/kv.h"
#include "tern/engine.h"

enum { L = 2, H = 2, HD = 4, BT = 4, W = H * HD };

/* Writes n tokens of row at its current length through the layout, as the
 * forward pass does: values encode (tag, position, layer, element). */
static int put(tern_kv *kv, int row, int n, int tag)
{
    int pos = tern_kv_offset(kv, row);
    if (tern_kv_grow(kv, &row, &n, 1) != TERN_OK) return -1;
    float k[64 * W], v[64 * W];
    for (int l = 0; l < L; l++) {
        for (int t = 0; t < n; t++)
            for (int i = 0; i < W; i++) {
                k[t * W + i] = (float)(tag * 100000 + (pos + t) * 100 + l * 10 + i);
                v[t * W + i] = -k[t * W + i];
            }
        tern_kv_layer *kl = tern_kv_layer_at(kv, l);
        kl->vt->write(kl, tern_kv_table(kv, row), pos, n, k, v);
    }
    tern_kv_advance(kv, row, n);
    return 0;
}

/* The tag that wrote position pos of row (reads every layer and element). */
static int tag_at(tern_kv *kv, int row, int pos)
{
    int tag = -1;
    for (int l = 0; l < L; l++) {
        tern_kv_layer *kl = tern_kv_layer_at(kv, l);
        tern_kv_view vw;
        kl->vt->view(kl, tern_kv_table(kv, row), tern_kv_offset(kv, row), &vw);
        for (int h = 0; h < H; h++)
            for (int d = 0; d < HD; d++) {
                long at = vw.table[pos / BT] * vw.block_stride + h * vw.head_stride + (long)(pos % BT) * HD + d;
                float want_rest = (float)(pos * 100 + l * 10 + h * HD + d);
                float got = vw.k[at];
                int t = (int)((got - want_rest) / 100000.0f + 0.5f);
                if (got != (float)(t * 100000) + want_rest || vw.v[at] != -got) return -2;
                if (tag >= 0 && t != tag) return -3;
                tag = t;
            }
    }
    return tag;
}

static void test_reserve_and_fork(void)
{
    tern_kv_shape s = {L, H, HD, 4, 64, BT, 20};
    tern_kv *kv;
    CHECK(tern_kv_create(&s, &kv) == TERN_OK);
    tern_kv_stats st;
    int a, b;
    CHECK(tern_kv_row_add(kv, 30, &a) == TERN_OK);   /* 8 blocks */
    tern_kv_get_stats(kv, &st);
    CHECK(st.blocks_reserved == 8 && st.blocks_free == 20);
    /* 13 more blocks cannot be promised: 20 - 8 = 12 left. */
    tern_kv_prep p;
    CHECK(tern_kv_row_prepare(kv, 52, 0, 0, &p) == TERN_E_RANGE);
    CHECK(tern_kv_row_prepare(kv, 48, 0, 0, &p) == TERN_OK);
    tern_kv_row_discard(&p);
    tern_kv_get_stats(kv, &st);
    CHECK(st.blocks_reserved == 8 && st.rows_used == 1);

    CHECK(put(kv, a, 6, 1) == 0);                     /* blocks: 1 full + 1 partial */
    tern_kv_get_stats(kv, &st);
    CHECK(st.blocks_free == 18 && st.blocks_reserved == 6);
    /* Growing past the reservation is refused and changes nothing. */
    int big = 27;   /* 33 tokens: 9 blocks, one past the 8 reserved */
    CHECK(tern_kv_grow(kv, &a, &big, 1) == TERN_E_RANGE);
    CHECK(tern_kv_offset(kv, a) == 6);

    /* Fork: b shares a's two blocks; the partial one is copied on write. */
    CHECK(tern_kv_row_prepare(kv, 20, 1, 7, &p) == TERN_OK);
    b = tern_kv_row_commit(kv, &p);
    CHECK(tern_kv_row_adopt(kv, b, a) == TERN_OK);
    CHECK(tern_kv_offset(kv, b) == 6);
    const int *ta = tern_kv_table(kv, a), *tb = tern_kv_table(kv, b);
    CHECK(ta[0] == tb[0] && ta[1] == tb[1]);
    CHECK(tern_kv_block_refs(kv, ta[0]) == 2 && tern_kv_block_refs(kv, ta[1]) == 2);
    CHECK(put(kv, b, 3, 2) == 0);                     /* b copies block 1, then writes 6..8 */
    ta = tern_kv_table(kv, a);
    tb = tern_kv_table(kv, b);
    CHECK(ta[0] == tb[0] && ta[1] != tb[1]);
    CHECK(tern_kv_block_refs(kv, ta[1]) == 1 && tern_kv_block_refs(kv, tb[1]) == 1);
    CHECK(put(kv, a, 2, 3) == 0);                     /* a writes in place now */
    for (int i = 0; i < 6; i++) CHECK(tag_at(kv, a, i) == 1 && tag_at(kv, b, i) == 1);
    CHECK(tag_at(kv, a, 6) == 3 && tag_at(kv, a, 7) == 3);
    CHECK(tag_at(kv, b, 6) == 2 && tag_at(kv, b, 8) == 2);

    /* Rounds: rollback keeps a prefix of the round's tokens, row-wise too. */
    CHECK(tern_kv_round_begin(kv, a) == TERN_OK);
    CHECK(tern_kv_round_begin(kv, a) == TERN_E_STATE);
    CHECK(put(kv, a, 5, 4) == 0);
    CHECK(tern_kv_round_rollback(kv, a, 2) == TERN_OK);
    CHECK(tern_kv_offset(kv, a) == 10);
    CHECK(put(kv, a, 3, 5) == 0);
    CHECK(tag_at(kv, a, 9) == 4 && tag_at(kv, a, 10) == 5 && tag_at(kv, a, 7) == 3);
    int rows[2] = {a, b}, keep[2] = {1, 0};
    CHECK(tern_kv_round_begin_rows(kv, rows, 2) == TERN_OK);
    CHECK(put(kv, a, 2, 6) == 0 && put(kv, b, 2, 6) == 0);
    int badkeep[2] = {3, 0};
    CHECK(tern_kv_round_end_rows(kv, rows, badkeep, 2) == TERN_E_RANGE);
    CHECK(tern_kv_round_end_rows(kv, rows, keep, 2) == TERN_OK);
    CHECK(tern_kv_offset(kv, a) == 14 && tern_kv_offset(kv, b) == 9);
    CHECK(tern_kv_round_commit(kv, a) == TERN_E_STATE);

    /* Leaving returns every block and the rest of the reservation. */
    tern_kv_row_remove(kv, a);
    tern_kv_row_remove(kv, b);
    tern_kv_get_stats(kv, &st);
    CHECK(st.blocks_free == 20 && st.blocks_reserved == 0 && st.rows_used == 0);
    tern_kv_free(kv);
}

/* Every allocation of prepare and of growth, failed in turn: the failing
 * call reports TERN_E_NOMEM and every row keeps its length and contents. */
static void test_failures(void)
{
    tern_kv_shape s = {L, H, HD, 3, 256, BT, 200};
    tern_kv *kv;
    CHECK(tern_kv_create(&s, &kv) == TERN_OK);
    int a;
    CHECK(tern_kv_row_add(kv, 40, &a) == TERN_OK);
    CHECK(put(kv, a, 9, 1) == 0);
    tern_kv_stats before, after;
    for (int n = 1; n <= 2; n++) {
        tern_kv_get_stats(kv, &before);
        tern_failpoint_arm(TERN_FAILPOINT_PREPARE, n);
        tern_kv_prep p;
        tern_status st = tern_kv_row_prepare(kv, 100, 0, 0, &p);
        if (st == TERN_OK) tern_kv_row_discard(&p);
        else CHECK(st == TERN_E_NOMEM);
        tern_kv_get_stats(kv, &after);
        CHECK(!memcmp(&before, &after, sizeof before));
    }
    tern_failpoint_arm(TERN_FAILPOINT_PREPARE, 0);
    /* Growth: the table starts at one block and doubles; fail each realloc
     * of a grow over several rows, which must leave all of them unchanged. */
    int b, c;
    CHECK(tern_kv_row_add(kv, 200, &b) == TERN_OK);
    CHECK(tern_kv_row_add(kv, 200, &c) == TERN_OK);
    CHECK(put(kv, b, 3, 2) == 0 && put(kv, c, 1, 3) == 0);
    int rows[3] = {a, b, c}, ns[3] = {30, 70, 50};
    tern_failpoint_arm(TERN_FAILPOINT_GROW, 0);
    for (long n = 1;; n++) {
        int lens[3] = {tern_kv_offset(kv, a), tern_kv_offset(kv, b), tern_kv_offset(kv, c)};
        tern_kv_get_stats(kv, &before);
        tern_failpoint_arm(TERN_FAILPOINT_GROW, n);
        tern_status st = tern_kv_grow(kv, rows, ns, 3);
        long made = tern_failpoint_count(TERN_FAILPOINT_GROW);
        tern_failpoint_arm(TERN_FAILPOINT_GROW, 0);
        if (st == TERN_OK) {
            CHECK(n > made);     /* every allocation was tried as the failing one */
            CHECK(n >= 3);
            break;
        }
        CHECK(st == TERN_E_NOMEM);
        tern_kv_get_stats(kv, &after);
        CHECK(!memcmp(&before, &after, sizeof before));
        CHECK(tern_kv_offset(kv, a) == lens[0] && tern_kv_offset(kv, b) == lens[1] && tern_kv_offset(kv, c) == lens[2]);
        for (int i = 0; i < 9; i++) CHECK(tag_at(kv, a, i) == 1);
        if (n > 10) { CHECK(0); break; }
    }
    tern_kv_free(kv);
}

int main(void)
{
    test_reserve_and_fork();
    test_failures();
    return check_summary("test_kv");
}
