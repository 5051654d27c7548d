/*
 * tests/unit/test_blocked.c: the blocked sorted array (core/blocked.c), on
 * its own: random insertions, removals, in-place compactions and searches
 * against a plain sorted array (every element in order, every search the
 * model's, the structural self-check clean after each step); blocks split
 * when full and merge at half, exactly at those bounds, with the user told
 * of each change (notes); the two failure rules: an insertion whose memory
 * is refused leaves the container as it was, and one reserved beforehand
 * needs no memory at all. The container's malloc and realloc (below)
 * refuse while `refuse` is set.
 */
#include "check.h"
#include "core/blocked.h"

#include <stdint.h>
#include <string.h>

/* The core objects' malloc and realloc come here (linked with
 * -Wl,--wrap=malloc,--wrap=realloc: tests/unit/unit.mk), the test's and the
 * C library's own do not; a sanitizer's allocator stays behind them. */
void *__real_malloc(size_t n);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_realloc(void *p, size_t n);
static int refuse;       /* the next allocations fail */
static int refused;      /* allocations refused so far */

void *__wrap_malloc(size_t n)
{
    if (refuse) {
        refused++;
        return NULL;
    }
    return __real_malloc(n);
}

void *__wrap_realloc(void *p, size_t n)
{
    if (refuse) {
        refused++;
        return NULL;
    }
    return __real_realloc(p, n);
}

typedef struct el {
    uint64_t key;
    uint32_t tag;
} el;

static uint64_t el_key(const void *e) { return ((const el *)e)->key; }

/* the notes, counted; a block's header holds the number of changes seen */
static size_t notes[3];
static void count_note(sg_blocked *c, int what, size_t b)
{
    notes[what]++;
    CHECK(b < c->nbk + (what == SG_BLK_REMOVED));
    size_t *seen = what == SG_BLK_REMOVED ? NULL : sg_blocked_head(c, b);
    if (seen) *seen = what == SG_BLK_ADDED ? 1 : *seen + 1;
}

static const sg_blocked_kind small = { .esize = sizeof(el), .cap = 8, .key = el_key };
static const sg_blocked_kind noted = {
    .esize = sizeof(el), .cap = 8, .hsize = sizeof(size_t), .key = el_key, .note = count_note,
};
static const sg_blocked_kind wide = { .esize = sizeof(el), .cap = 256, .key = el_key };

static uint64_t rng = 88172645463325252ULL;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* The model: a plain sorted array. */
#define MAXN 4096
static el model[MAXN];
static size_t nmodel;

static size_t model_upper(uint64_t x)
{
    size_t i = 0;
    while (i < nmodel && model[i].key <= x) i++;
    return i;
}

/* c holds exactly the model, in order; 0 structural faults. */
static int same_as_model(const sg_blocked *c)
{
    int ok = sg_blocked_count(c) == nmodel && sg_blocked_bad(c) == 0;
    size_t i = 0;
    for (sg_bpos p = { 0, 0 }; ok && !sg_blocked_is_end(c, p); p = sg_blocked_next(c, p), i++) {
        const el *e = sg_blocked_at(c, p);
        ok = i < nmodel && e->key == model[i].key && e->tag == model[i].tag;
    }
    return ok && i == nmodel;
}

/* The index of the element at p, counting from the start. */
static size_t index_of(const sg_blocked *c, sg_bpos p)
{
    size_t i = p.o;
    for (size_t b = 0; b < p.b; b++) i += c->bk[b]->n;
    return i;
}

static void random_ops(const sg_blocked_kind *k, int steps, uint64_t keys)
{
    sg_blocked c;
    sg_blocked_init(&c, k);
    nmodel = 0;
    int bad = 0;
    for (int s = 0; s < steps && !bad; s++) {
        unsigned op = rnd() % 16;
        if (op < 8 && nmodel < MAXN) {   /* insert a key not there */
            el e = { 1 + rnd() % keys, (uint32_t)s };
            sg_bpos p = sg_blocked_upper(&c, e.key);
            size_t i = model_upper(e.key);
            if (i && model[i - 1].key == e.key) continue;
            CHECK_EQ(index_of(&c, p), i);
            if (op < 4) {
                CHECK_EQ(sg_blocked_insert(&c, p, &e), 0);
            } else {
                CHECK_EQ(sg_blocked_reserve(&c, 2), 0);
                sg_blocked_insert_reserved(&c, p, &e);
            }
            memmove(&model[i + 1], &model[i], (nmodel - i) * sizeof *model);
            model[i] = e;
            nmodel++;
        } else if (op < 14 && nmodel) {   /* erase one, found by its key */
            size_t i = rnd() % nmodel;
            sg_bpos p = sg_blocked_upper_by(&c, model[i].key - 1, el_key, sizeof(el));
            CHECK_EQ(((el *)sg_blocked_at(&c, p))->key, model[i].key);
            sg_blocked_erase(&c, p);
            memmove(&model[i], &model[i + 1], (nmodel - i - 1) * sizeof *model);
            nmodel--;
        } else if (op == 14) {   /* in place: drop the odd tags */
            for (size_t b = 0; b < c.nbk; b++) {
                size_t n, out = 0;
                el *e = sg_blocked_block(&c, b, &n);
                for (size_t j = 0; j < n; j++)
                    if (!(e[j].tag & 1)) e[out++] = e[j];
                sg_blocked_set_count(&c, b, out);
            }
            sg_blocked_drop_empty(&c);
            size_t out = 0;
            for (size_t j = 0; j < nmodel; j++)
                if (!(model[j].tag & 1)) model[out++] = model[j];
            nmodel = out;
        } else {   /* searches */
            for (int t = 0; t < 8; t++) {
                uint64_t x = rnd() % (keys + 2);
                CHECK_EQ(index_of(&c, sg_blocked_upper(&c, x)), model_upper(x));
            }
        }
        if (!same_as_model(&c)) {
            bad = 1;
            printf("#   step %d (op %u): container and model differ\n", s, op);
        }
    }
    CHECK(!bad);
    sg_blocked_free(&c);
    CHECK_EQ(sg_blocked_count(&c), 0);
}

TEST(random_operations_match_a_sorted_array)
{
    random_ops(&small, 20000, 300);     /* many splits and merges, near-full and near-empty */
    random_ops(&noted, 20000, 2000);
    random_ops(&wide, 20000, 100000);
}

static void put(sg_blocked *c, uint64_t key)
{
    el e = { key, 0 };
    CHECK_EQ(sg_blocked_insert(c, sg_blocked_upper(c, key), &e), 0);
}

static void take(sg_blocked *c, uint64_t key)
{
    sg_bpos p = sg_blocked_upper(c, key - 1);
    CHECK_EQ(((el *)sg_blocked_at(c, p))->key, key);
    sg_blocked_erase(c, p);
}

/* cap 8: 8 fit in one block, the 9th splits it 4 + 5 (the upper half of
 * the full block moves); removals merge two neighbours once they fit in 4,
 * and an emptied block goes. The notes say so. */
TEST(blocks_split_when_full_and_merge_at_half)
{
    sg_blocked c;
    sg_blocked_init(&c, &noted);
    memset(notes, 0, sizeof notes);
    for (uint64_t k = 1; k <= 8; k++) put(&c, 10 * k);
    CHECK_EQ(c.nbk, 1);
    CHECK_EQ(notes[SG_BLK_ADDED], 1);
    CHECK_EQ(notes[SG_BLK_CHANGED], 8);
    put(&c, 45);                                   /* into the full block: split at 4 */
    CHECK_EQ(c.nbk, 2);
    CHECK_EQ(c.bk[0]->n, 5);                       /* 10 .. 40 and 45 after them */
    CHECK_EQ(c.bk[1]->n, 4);                       /* 50 .. 80, the upper half */
    CHECK_EQ(((el *)sg_blocked_at(&c, (sg_bpos){ 0, 4 }))->key, 45);
    CHECK_EQ(((el *)sg_blocked_at(&c, (sg_bpos){ 1, 0 }))->key, 50);
    CHECK_EQ(notes[SG_BLK_ADDED], 2);
    put(&c, 5);                                    /* block 0 has room: no split */
    CHECK_EQ(c.nbk, 2);
    CHECK_EQ(c.bk[0]->n, 6);
    CHECK_EQ(sg_blocked_bad(&c), 0);
    /* 6 + 4: no merge until both fit in 4 */
    take(&c, 45);
    take(&c, 50);
    CHECK_EQ(c.nbk, 2);                            /* 5 + 3 */
    take(&c, 5);
    CHECK_EQ(c.nbk, 2);                            /* 4 + 3 */
    take(&c, 10);                                  /* 3 + 3 <= 4? no: 6 > 4 */
    CHECK_EQ(c.nbk, 2);
    take(&c, 20);                                  /* 2 + 3 > 4 */
    CHECK_EQ(c.nbk, 2);
    take(&c, 80);                                  /* 2 + 2 = 4: block 1 merges into block 0 */
    CHECK_EQ(c.nbk, 1);
    CHECK_EQ(c.bk[0]->n, 4);
    CHECK_EQ(notes[SG_BLK_REMOVED], 1);
    CHECK_EQ(sg_blocked_bad(&c), 0);
    uint64_t want[] = { 30, 40, 60, 70 };
    for (size_t i = 0; i < 4; i++) CHECK_EQ(((el *)sg_blocked_at(&c, (sg_bpos){ 0, i }))->key, want[i]);
    for (size_t i = 0; i < 4; i++) take(&c, want[i]);   /* emptied: the block goes */
    CHECK_EQ(c.nbk, 0);
    CHECK_EQ(notes[SG_BLK_REMOVED], 2);
    CHECK_EQ(sg_blocked_count(&c), 0);
    CHECK(sg_blocked_is_end(&c, sg_blocked_upper(&c, 0)));
    /* appending at the end of a full last block splits it too */
    for (uint64_t k = 1; k <= 17; k++) put(&c, k);
    CHECK_EQ(c.nbk, 4);                            /* the 9th, 13th and 17th split */
    CHECK_EQ(c.bk[0]->n, 4);
    CHECK_EQ(c.bk[1]->n, 4);
    CHECK_EQ(c.bk[2]->n, 4);
    CHECK_EQ(c.bk[3]->n, 5);
    CHECK_EQ(sg_blocked_bad(&c), 0);
    sg_blocked_free(&c);
}

/* The self-check sees a block over its capacity, keys out of order and a
 * wrong count. */
TEST(self_check_sees_broken_rules)
{
    sg_blocked c;
    sg_blocked_init(&c, &small);
    for (uint64_t k = 1; k <= 12; k++) put(&c, k);
    CHECK_EQ(sg_blocked_bad(&c), 0);
    el *e = sg_blocked_at(&c, (sg_bpos){ 1, 0 });
    uint64_t was = e->key;
    e->key = 1;                                    /* below the block before's */
    CHECK(sg_blocked_bad(&c) > 0);
    e->key = was;
    c.n++;
    CHECK(sg_blocked_bad(&c) > 0);
    c.n--;
    CHECK_EQ(sg_blocked_bad(&c), 0);
    sg_blocked_free(&c);
}

/* An insertion that needs a block it cannot get is refused, the container
 * as it was: the first one, and the split of a full block. With two
 * reserved beforehand, two insertions that split need no memory. */
TEST(refused_memory_leaves_the_container_unchanged)
{
    sg_blocked c;
    sg_blocked_init(&c, &small);
    el e = { 7, 1 };
    refuse = 1;
    int r = sg_blocked_insert(&c, sg_blocked_upper(&c, 7), &e);
    refuse = 0;
    CHECK_EQ(r, -1);
    CHECK_EQ(sg_blocked_count(&c), 0);
    CHECK_EQ(c.nbk, 0);
    CHECK_EQ(sg_blocked_bad(&c), 0);

    nmodel = 0;
    for (uint64_t k = 1; k <= 8; k++) {
        put(&c, 10 * k);
        model[nmodel++] = (el){ 10 * k, 0 };
    }
    CHECK_EQ(c.nbk, 1);
    int before = refused;
    e = (el){ 35, 1 };
    refuse = 1;
    r = sg_blocked_insert(&c, sg_blocked_upper(&c, 35), &e);   /* needs a split */
    refuse = 0;
    CHECK_EQ(r, -1);
    CHECK(refused > before);
    CHECK(same_as_model(&c));
    CHECK_EQ(c.nbk, 1);
    refuse = 1;
    CHECK_EQ(sg_blocked_reserve(&c, 1), -1);
    refuse = 0;
    CHECK(same_as_model(&c));

    /* room in the block: no memory needed */
    take(&c, 80);
    nmodel--;
    refuse = 1;
    r = sg_blocked_insert(&c, sg_blocked_upper(&c, 35), &e);
    refuse = 0;
    CHECK_EQ(r, 0);
    CHECK_EQ(sg_blocked_count(&c), 8);
    CHECK_EQ(sg_blocked_bad(&c), 0);

    /* reserved: two splits with every allocation refused */
    CHECK_EQ(sg_blocked_reserve(&c, 2), 0);
    before = refused;
    refuse = 1;
    e = (el){ 36, 2 };
    sg_blocked_insert_reserved(&c, sg_blocked_upper(&c, 36), &e);   /* block full: split */
    for (uint64_t k = 81; k <= 84; k++) {                            /* fills the upper block */
        e = (el){ k, 3 };
        sg_blocked_insert_reserved(&c, sg_blocked_upper(&c, k), &e);
    }
    e = (el){ 85, 4 };
    sg_blocked_insert_reserved(&c, sg_blocked_upper(&c, 85), &e);   /* splits again */
    refuse = 0;
    CHECK_EQ(refused, before);                     /* nothing asked for */
    CHECK_EQ(c.nbk, 3);
    CHECK_EQ(sg_blocked_count(&c), 14);
    CHECK_EQ(sg_blocked_bad(&c), 0);
    sg_blocked_free(&c);
}

int main(void)
{
    RUN(random_operations_match_a_sorted_array);
    RUN(blocks_split_when_full_and_merge_at_half);
    RUN(self_check_sees_broken_rules);
    RUN(refused_memory_leaves_the_container_unchanged);
    return check_done();
}
