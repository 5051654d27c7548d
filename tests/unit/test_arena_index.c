/*
 * tests/unit/test_arena_index.c: the index of core/arena_index.c changes no
 * address. Long seeded random sequences of allocations (ordinary and
 * own-handle, synchronous and stream-ordered), frees (synchronous and
 * stream-ordered, with events completing in stream order), trims, reaps,
 * rekeys and claims run on two arenas at once, one placing through the
 * index and one visiting every free range (sg_arena_set_linear): every
 * answer and every count must be the same. The synchronous sequences are
 * also checked against a model written here: address-ordered first fit
 * over the gaps between live blocks, first where every granule is mapped,
 * then anywhere, then a new reservation; trim unmapping the highest unused
 * granules first.
 *
 * Sizes are mostly a few hundred bytes with a 64 KiB granule, so that a
 * reservation holds hundreds of free ranges (many blocks of the index) with
 * mapped and unmapped ones between them. Every step also checks the rules
 * of the blocks the free ranges are kept in (sg_arena_fr_bad); directed
 * cases fill, split and merge those blocks at their bounds, and place runs
 * of adjacent ranges across them. About 1 s (5 s under address,undefined).
 */
#include "check.h"
#include "core/arena.h"

#include <string.h>

#define BASE0 0x100000000000ULL
#define MAX_EV 65536
#define MAX_LIVE 16384
#define NSTREAMS 3

/* ------------------------------------------------------------ the fakes */

/* One per arena (ops.user): the two get the same addresses and handles. */
typedef struct fake {
    CUdeviceptr next_va;
    long creates, releases, maps, unmaps, puts, waits;
    unsigned long long waited;   /* a hash of the events waited for, in order */
} fake;

static size_t gran, resv;          /* of the run */
static unsigned char done[MAX_EV];   /* event i has completed */
static int refuse_waits;

static CUresult f_reserve(void *u, size_t size, size_t align, CUdeviceptr *base)
{
    fake *f = u;
    f->next_va = (f->next_va + align - 1) / align * align;
    *base = f->next_va;
    f->next_va += size + align;   /* segments are not adjacent */
    return CUDA_SUCCESS;
}
static CUresult f_unreserve(void *u, CUdeviceptr b, size_t s) { (void)u; (void)b; (void)s; return CUDA_SUCCESS; }
static CUresult f_create(void *u, size_t size, CUmemGenericAllocationHandle *h)
{
    fake *f = u;
    (void)size;
    *h = (CUmemGenericAllocationHandle)++f->creates;
    return CUDA_SUCCESS;
}
static CUresult f_release(void *u, CUmemGenericAllocationHandle h) { (void)h; ((fake *)u)->releases++; return CUDA_SUCCESS; }
static CUresult f_map(void *u, CUdeviceptr va, size_t size, CUmemGenericAllocationHandle h)
{
    (void)va; (void)size; (void)h;
    ((fake *)u)->maps++;
    return CUDA_SUCCESS;
}
static CUresult f_access(void *u, CUdeviceptr va, size_t size) { (void)u; (void)va; (void)size; return CUDA_SUCCESS; }
static CUresult f_unmap(void *u, CUdeviceptr va, size_t size) { (void)va; (void)size; ((fake *)u)->unmaps++; return CUDA_SUCCESS; }
static int f_event_done(void *u, void *ev) { (void)u; return done[(uintptr_t)ev]; }
static void f_event_put(void *u, void *ev) { (void)ev; ((fake *)u)->puts++; }

static int f_wait(void *arg, void *ev)
{
    fake *f = arg;
    if (refuse_waits) return -1;
    f->waits++;
    f->waited = f->waited * 1000003u + (uintptr_t)ev;
    return 0;
}

/* ------------------------------------------------------------ the model */

/* Synchronous placement as arena.h describes it, from the live blocks and
 * the mapped granules of each reservation alone. */
typedef struct mseg {
    CUdeviceptr base;
    size_t size;
    unsigned char *mapped;   /* per granule */
} mseg;

typedef struct blk {
    CUdeviceptr addr;
    size_t placed;
} blk;

static struct model {
    CUdeviceptr next_va;
    mseg segs[64];
    size_t nsegs;
    blk live[MAX_LIVE];      /* sorted by address */
    size_t nlive;
} M;

/* The lowest multiple of align x with [x, x + need) inside [lo, hi), or 0. */
static CUdeviceptr m_fit_in(CUdeviceptr lo, CUdeviceptr hi, size_t need, size_t align)
{
    CUdeviceptr x = (lo + align - 1) / align * align;
    return x + need <= hi ? x : 0;
}

/* The lowest x in [lo, hi) (a gap between live blocks of s) where need
 * bytes fit, on mapped granules only if mapped_only; 0 if none. */
static CUdeviceptr m_fit_gap(const mseg *s, CUdeviceptr lo, CUdeviceptr hi, size_t need,
                             size_t align, int mapped_only)
{
    if (!mapped_only) return m_fit_in(lo, hi, need, align);
    CUdeviceptr from = 0, x;   /* from: where the mapped granules began (0: not in them) */
    for (CUdeviceptr g = lo / gran * gran; g < hi; g += gran) {
        CUdeviceptr at = g < lo ? lo : g;
        int m = s->mapped[(g - s->base) / gran];
        if (m && !from) from = at;
        if (!m && from) {
            if ((x = m_fit_in(from, at, need, align))) return x;
            from = 0;
        }
    }
    return from ? m_fit_in(from, hi, need, align) : 0;
}

static CUdeviceptr m_fit_seg(const mseg *s, size_t need, size_t align, int mapped_only)
{
    CUdeviceptr lo = s->base, end = s->base + s->size;
    for (size_t i = 0; i <= M.nlive; i++) {
        CUdeviceptr hi = i < M.nlive ? M.live[i].addr : end;
        if (i < M.nlive && (M.live[i].addr < s->base || M.live[i].addr >= end)) continue;
        CUdeviceptr x = hi > lo ? m_fit_gap(s, lo, hi, need, align, mapped_only) : 0;
        if (x) return x;
        if (i < M.nlive) lo = M.live[i].addr + M.live[i].placed;
    }
    return 0;
}

static const mseg *m_seg_of(CUdeviceptr p)
{
    for (size_t k = 0; k < M.nsegs; k++)
        if (p >= M.segs[k].base && p < M.segs[k].base + M.segs[k].size) return &M.segs[k];
    return NULL;
}

/* Where sg_arena_alloc(size, own) must place a block; the model takes it. */
static CUdeviceptr m_alloc(size_t size, int own, size_t *placed)
{
    size_t align = own ? gran : SG_ARENA_ALIGN;
    size_t need = (size + align - 1) / align * align;
    CUdeviceptr x = 0;
    for (int pass = 1; pass <= 2 && !x; pass++)
        for (size_t k = 0; k < M.nsegs && !x; k++) x = m_fit_seg(&M.segs[k], need, align, pass == 1);
    if (!x) {
        if (M.nsegs == sizeof M.segs / sizeof *M.segs) return 0;
        mseg *s = &M.segs[M.nsegs++];
        s->size = (need + gran - 1) / gran * gran;
        if (s->size < resv) s->size = resv;
        M.next_va = (M.next_va + gran - 1) / gran * gran;
        s->base = x = M.next_va;
        M.next_va += s->size + gran;
        s->mapped = calloc(s->size / gran, 1);
    }
    const mseg *s = m_seg_of(x);
    for (CUdeviceptr g = x / gran * gran; g < x + need; g += gran) s->mapped[(g - s->base) / gran] = 1;
    size_t i = M.nlive++;
    for (; i > 0 && M.live[i - 1].addr > x; i--) M.live[i] = M.live[i - 1];
    M.live[i] = (blk){ x, need };
    *placed = need;
    return x;
}

static void m_free(CUdeviceptr addr)
{
    size_t i = 0;
    while (M.live[i].addr != addr) i++;
    memmove(&M.live[i], &M.live[i + 1], (M.nlive - i - 1) * sizeof *M.live);
    M.nlive--;
}

/* Unmaps the highest granules no live block touches until at_most bytes
 * went (sg_arena_trim); the bytes. */
static size_t m_trim(size_t at_most)
{
    size_t given = 0;
    for (size_t k = M.nsegs; k-- > 0 && given < at_most;) {
        mseg *s = &M.segs[k];
        unsigned char *used = calloc(s->size / gran, 1);
        for (size_t i = 0; i < M.nlive; i++) {
            const blk *b = &M.live[i];
            if (b->addr < s->base || b->addr >= s->base + s->size) continue;
            for (CUdeviceptr g = b->addr / gran * gran; g < b->addr + b->placed; g += gran)
                used[(g - s->base) / gran] = 1;
        }
        for (size_t g = s->size / gran; g-- > 0 && given < at_most;) {
            if (!s->mapped[g] || used[g]) continue;
            s->mapped[g] = 0;
            given += gran;
        }
        free(used);
    }
    return given;
}

static void m_reset(void)
{
    for (size_t k = 0; k < M.nsegs; k++) free(M.segs[k].mapped);
    memset(&M, 0, sizeof M);
    M.next_va = BASE0;
}

/* ------------------------------------------------------------ the runs */

static const sg_arena_ops ops_tmpl = { NULL, f_reserve, f_unreserve, f_create, f_release, f_map,
                                       f_access, f_unmap, f_event_done, f_event_put, NULL };
static const sg_arena_key SYNC = { 0, 0 };
static const sg_arena_key KEYS[NSTREAMS] = { { 0x1000, 0 }, { 0x2000, 0 }, { 0x1000, 9 } };

static uint64_t rng;
static unsigned rnd(unsigned n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng >> 11) % n;
}

typedef struct run {
    sg_arena *a[2];          /* [0] through the index, [1] every range */
    fake f[2];
    blk live[MAX_LIVE];      /* in the order made */
    size_t nlive;
    uintptr_t queue[NSTREAMS][MAX_EV / 16];   /* each stream's events not complete, oldest first */
    size_t qhead[NSTREAMS], qtail[NSTREAMS];
    uintptr_t nev;
    int model;               /* synchronous only: checked against the model too */
    int bad;                 /* the first step where the arenas disagreed (0: none) */
} run;

/* The first disagreement of a run fails the case and ends the run. */
static void differ(run *r, long step, const char *what, long long x, long long y)
{
    if (r->bad) return;
    r->bad = 1;
    printf("#   step %ld: %s: %lld with the index, %lld without (or in the model)\n", step,
           what, x, y);
    CHECK(0);
}
#define SAME(r, step, what, x, y)                                                    \
    do {                                                                             \
        long long x_ = (long long)(x), y_ = (long long)(y);                          \
        if (x_ != y_) differ(r, step, what, x_, y_);                                 \
    } while (0)

static int hole_sizes;   /* the run's blocks are 1 to 1,024 bytes */

static size_t pick_size(int *own)
{
    unsigned c = rnd(1000);
    if (hole_sizes) {
        *own = 0;
        return 1 + rnd(1024);
    }
    *own = c >= 980;
    if (c < 800) return 1 + rnd(2048);
    if (c < 950) return 1 + rnd(32 << 10);
    if (c < 999) return 1 + rnd(256 << 10);
    return resv + rnd((unsigned)gran);   /* a reservation of its own (1 in 1,000) */
}

static void op_alloc(run *r, long step, int claim)
{
    int own;
    if (r->nlive == MAX_LIVE) return;
    size_t size = pick_size(&own);
    sg_arena_key key = r->model ? SYNC : rnd(3) ? KEYS[rnd(NSTREAMS)] : SYNC;
    if (claim && !key.stream) key = KEYS[0];
    refuse_waits = claim && !rnd(4);
    CUdeviceptr p[2] = { 0, 0 };
    size_t placed[2] = { 0, 0 };
    int f[2];
    for (int k = 0; k < 2; k++) {
        CUresult rc = CUDA_SUCCESS;
        f[k] = claim ? sg_arena_alloc_claiming(r->a[k], size, own, key, f_wait, &r->f[k], &p[k], &placed[k])
                     : sg_arena_alloc(r->a[k], size, own, key, &p[k], &placed[k], &rc);
    }
    SAME(r, step, "result", f[0], f[1]);
    SAME(r, step, "address", p[0], p[1]);
    SAME(r, step, "placed", placed[0], placed[1]);
    if (f[0] != SG_ARENA_OK) return;
    if (r->model) {
        size_t mplaced = 0;
        SAME(r, step, "model address", p[0], m_alloc(size, own, &mplaced));
        SAME(r, step, "model placed", placed[0], mplaced);
    }
    r->live[r->nlive++] = (blk){ p[0], placed[0] };
}

static void op_free(run *r, long step)
{
    if (!r->nlive) return;
    size_t i = rnd((unsigned)r->nlive);
    blk b = r->live[i];
    r->live[i] = r->live[--r->nlive];
    sg_arena_key key = SYNC;
    void *ev = NULL;
    unsigned s = rnd(NSTREAMS);
    if (!r->model && rnd(2) && r->nev + 1 < MAX_EV && r->qtail[s] < MAX_EV / 16) {
        key = KEYS[s];
        ev = (void *)++r->nev;
        r->queue[s][r->qtail[s]++] = r->nev;
    }
    for (int k = 0; k < 2; k++) SAME(r, step, "free", sg_arena_free(r->a[k], b.addr, b.placed, key, ev), 0);
    if (r->model) m_free(b.addr);
}

/* The oldest events of one stream complete (in stream order). */
static void op_complete(run *r)
{
    unsigned s = rnd(NSTREAMS), n = 1 + rnd(4);
    while (n-- && r->qhead[s] < r->qtail[s]) done[r->queue[s][r->qhead[s]++]] = 1;
}

static void op_other(run *r, long step, unsigned c)
{
    if (c < 3) {
        size_t at_most = rnd(2) ? SIZE_MAX : rnd((unsigned)(4 * gran));
        size_t t0 = sg_arena_trim(r->a[0], at_most), t1 = sg_arena_trim(r->a[1], at_most);
        SAME(r, step, "trim", t0, t1);
        if (r->model) SAME(r, step, "model trim", t0, m_trim(at_most));
    } else if (c < 5) {
        SAME(r, step, "mapped free", sg_arena_mapped_free(r->a[0]), sg_arena_mapped_free(r->a[1]));
    } else if (c < 7) {
        SAME(r, step, "pending", sg_arena_pending(r->a[0]), sg_arena_pending(r->a[1]));
    } else if (!r->model) {
        sg_arena_key key = KEYS[rnd(NSTREAMS)];   /* the stream is gone; a new one gets its handle */
        sg_arena_rekey(r->a[0], key);
        sg_arena_rekey(r->a[1], key);
    }
}

static void compare_counts(run *r, long step)
{
    SAME(r, step, "free ranges", sg_arena_free_ranges(r->a[0]), sg_arena_free_ranges(r->a[1]));
    SAME(r, step, "mapped", sg_arena_mapped(r->a[0]), sg_arena_mapped(r->a[1]));
    SAME(r, step, "segments", sg_arena_segments(r->a[0]), sg_arena_segments(r->a[1]));
    SAME(r, step, "creates", r->f[0].creates, r->f[1].creates);
    SAME(r, step, "unmaps", r->f[0].unmaps, r->f[1].unmaps);
    SAME(r, step, "events put", r->f[0].puts, r->f[1].puts);
    SAME(r, step, "waits", r->f[0].waited, r->f[1].waited);
    SAME(r, step, "stale index blocks", sg_arena_ix_stale(r->a[0]), 0);
    SAME(r, step, "free range rules broken", sg_arena_fr_bad(r->a[0]), 0);
}

/* A run: steps random operations from seed on arenas of granule gran and
 * reservations of resv bytes, the live blocks hovering around target.
 * holes: first 2 x holes blocks of 256 bytes, every other one freed, and
 * then blocks of at most 1 KiB (as tests/stress/scale_prog holes: groups of
 * the index in use). */
typedef struct cfg {
    uint64_t seed;
    long steps;
    size_t target;
    int model;
    size_t gran, resv, holes;
} cfg;

/* The holes of a cfg: both arenas (and the model) the same way. */
static void make_holes(run *r, size_t holes)
{
    for (size_t i = 0; i < 2 * holes && !r->bad; i++) {
        CUdeviceptr p[2];
        size_t placed, mplaced = 0;
        CUresult rc;
        for (int k = 0; k < 2; k++) SAME(r, 0, "hole", sg_arena_alloc(r->a[k], 256, 0, SYNC, &p[k], &placed, &rc), 0);
        SAME(r, 0, "hole address", p[0], p[1]);
        if (r->model) SAME(r, 0, "model hole", p[0], m_alloc(256, 0, &mplaced));
        r->live[r->nlive++] = (blk){ p[0], placed };
    }
    size_t kept = 0;
    for (size_t i = 0; i < r->nlive && !r->bad; i++) {   /* the odd ones go, the even ones stay */
        blk b = r->live[i];
        if (i % 2 == 0) {
            r->live[kept++] = b;
            continue;
        }
        for (int k = 0; k < 2; k++) SAME(r, 0, "hole free", sg_arena_free(r->a[k], b.addr, b.placed, SYNC, NULL), 0);
        if (r->model) m_free(b.addr);
    }
    r->nlive = kept;
}

static void random_run(cfg c0)
{
    static run r;
    memset(&r, 0, sizeof r);
    memset(done, 0, sizeof done);
    m_reset();
    rng = c0.seed;
    gran = c0.gran;
    resv = c0.resv;
    hole_sizes = c0.holes > 0;
    size_t target = c0.target;
    int model = c0.model;
    long steps = c0.steps;
    r.model = model;
    for (int k = 0; k < 2; k++) {
        sg_arena_ops o = ops_tmpl;
        r.f[k].next_va = BASE0;
        o.user = &r.f[k];
        r.a[k] = sg_arena_new(&o, gran, SG_ARENA_ALIGN, resv);
    }
    sg_arena_set_linear(r.a[1], 1);
    make_holes(&r, c0.holes);
    for (long step = 1; step <= steps && !r.bad; step++) {
        unsigned c = rnd(100);
        unsigned grow = r.nlive < target ? 60 : 40;   /* alloc below target, free above */
        if (c < grow) op_alloc(&r, step, 0);
        else if (c < 88) op_free(&r, step);
        else if (c < 93) op_complete(&r);
        else if (c < 96 && !model) op_alloc(&r, step, 1);
        else op_other(&r, step, rnd(9));
        compare_counts(&r, step);
    }
    for (int k = 0; k < 2; k++) sg_arena_destroy(r.a[k], 1);
    CHECK_EQ(r.f[0].creates, r.f[0].releases);
    CHECK_EQ(r.f[0].puts, r.f[1].puts);
    m_reset();
}

/* Synchronous blocks only: the index, every range and the model agree. */
TEST(index_matches_model_synchronous)
{
    random_run((cfg){ 0x9e3779b97f4a7c15ull, 20000, 3000, 1, 64 << 10, 64 << 20, 0 });
    random_run((cfg){ 12345, 8000, 300, 1, 64 << 10, 64 << 20, 0 });
    random_run((cfg){ 4242, 20000, 1000, 1, 4 << 10, 8 << 20, 0 });   /* holes across granules, trimmed */
    random_run((cfg){ 99, 3000, 9000, 1, 64 << 10, 64 << 20, 4500 });
}

/* Stream-ordered frees, events completing, claims, rekeys: the index and
 * every range agree. */
TEST(index_matches_linear_scan_stream_ordered)
{
    random_run((cfg){ 0xdeadbeefcafef00dull, 25000, 3000, 0, 64 << 10, 64 << 20, 0 });
    random_run((cfg){ 777, 15000, 200, 0, 64 << 10, 64 << 20, 0 });
    random_run((cfg){ 31337, 20000, 1000, 0, 4 << 10, 8 << 20, 0 });
    random_run((cfg){ 5150, 4000, 9000, 0, 64 << 10, 64 << 20, 4500 });
}

/* An arena of its own (64 KiB granules, 64 MiB reservations) on f. */
static sg_arena *one_arena(fake *f)
{
    memset(done, 0, sizeof done);
    gran = 64 << 10;
    resv = 64 << 20;
    *f = (fake){ .next_va = BASE0 };
    sg_arena_ops o = ops_tmpl;
    o.user = f;
    return sg_arena_new(&o, gran, SG_ARENA_ALIGN, resv);
}

/* Many small holes below the top, as tests/stress/scale_prog holes makes:
 * a block larger than every hole goes above them, and a freed hole is
 * found again at once. */
TEST(holes_are_skipped_and_found)
{
    fake f;
    sg_arena *a = one_arena(&f);
    enum { N = 5000 };
    static CUdeviceptr b[2 * N];
    size_t placed;
    CUresult rc;
    for (int i = 0; i < 2 * N; i++) CHECK_EQ(sg_arena_alloc(a, 256, 0, SYNC, &b[i], &placed, &rc), SG_ARENA_OK);
    for (int i = 1; i < 2 * N; i += 2) CHECK_EQ(sg_arena_free(a, b[i], 256, SYNC, NULL), 0);
    CUdeviceptr p;
    CHECK_EQ(sg_arena_alloc(a, 1024, 0, SYNC, &p, &placed, &rc), SG_ARENA_OK);
    CHECK_EQ(p, b[2 * N - 1]);                  /* the last hole runs into the free top */
    CHECK_EQ(sg_arena_free(a, p, 1024, SYNC, NULL), 0);
    CHECK_EQ(sg_arena_free(a, b[3334], 256, SYNC, NULL), 0);   /* with its holes: 768 bytes */
    CHECK_EQ(sg_arena_alloc(a, 768, 0, SYNC, &p, &placed, &rc), SG_ARENA_OK);
    CHECK_EQ(p, b[3333]);
    CHECK_EQ(sg_arena_alloc(a, 200, 0, SYNC, &p, &placed, &rc), SG_ARENA_OK);
    CHECK_EQ(p, b[1]);                          /* the first hole */
    sg_arena_destroy(a, 1);
}

/* A trim that unmaps a free range of exactly one granule between two live
 * blocks changes only that range's mapped state (no split, no merge): the
 * index must see it. */
TEST(trim_of_a_lone_granule_reaches_the_index)
{
    fake f;
    sg_arena *a = one_arena(&f);
    CUdeviceptr x[3], p;
    size_t placed;
    CUresult rc;
    for (int i = 0; i < 3; i++) CHECK_EQ(sg_arena_alloc(a, gran, 1, SYNC, &x[i], &placed, &rc), SG_ARENA_OK);
    CHECK_EQ(sg_arena_free(a, x[1], gran, SYNC, NULL), 0);
    CHECK_EQ(sg_arena_alloc(a, 2 * gran, 0, SYNC, &p, &placed, &rc), SG_ARENA_OK);
    CHECK_EQ(p, x[2] + gran);
    /* a claim that fits nowhere changes nothing: its scan builds the figures */
    CHECK_EQ(sg_arena_alloc_claiming(a, 2 * gran, 0, KEYS[0], f_wait, &f, &p, &placed), SG_ARENA_FAIL_NOMEM);
    CHECK_EQ(sg_arena_trim(a, gran), gran);     /* the highest unused: x[1]'s, alone between x[0] and x[2] */
    CHECK_EQ(sg_arena_mapped(a), 4 * gran);
    CHECK_EQ(sg_arena_ix_stale(a), 0);
    CHECK_EQ(sg_arena_alloc(a, gran, 1, SYNC, &p, &placed, &rc), SG_ARENA_OK);       /* mapped again, in place */
    CHECK_EQ(p, x[1]);
    CHECK_EQ(sg_arena_ix_stale(a), 0);
    sg_arena_destroy(a, 1);
}

/* Blocks of 256 bytes x[0..n) between two live guards, in a fresh arena;
 * the guards are g[0] below and g[1] above. */
static void row(sg_arena *a, CUdeviceptr *x, int n, CUdeviceptr g[2])
{
    size_t placed;
    CUresult rc;
    CHECK_EQ(sg_arena_alloc(a, 256, 0, SYNC, &g[0], &placed, &rc), SG_ARENA_OK);
    for (int i = 0; i < n; i++) CHECK_EQ(sg_arena_alloc(a, 256, 0, SYNC, &x[i], &placed, &rc), SG_ARENA_OK);
    CHECK_EQ(sg_arena_alloc(a, 256, 0, SYNC, &g[1], &placed, &rc), SG_ARENA_OK);
    CHECK_EQ(x[0], g[0] + 256);
    CHECK_EQ(g[1], x[n - 1] + 256);
}

/* Holes filled from the lowest up and given back, at the counts that fill a
 * block of free ranges exactly, split one, and split it again: every
 * address is the first fit, and the blocks keep their rules (full blocks
 * split, emptied ones go, nearly empty neighbours merge). */
TEST(blocks_split_and_merge_at_their_bounds)
{
    enum { K = SG_ARENA_FR_BLOCK };
    static const int counts[] = { K - 1, K, K + 1, 2 * K, 2 * K + 1, 5 * K + 3 };
    for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
        int n = counts[c];
        fake f;
        sg_arena *a = one_arena(&f);
        static CUdeviceptr x[2 * 5 * K + 8];
        CUdeviceptr g[2], p;
        size_t placed;
        CUresult rc;
        row(a, x, 2 * n, g);
        for (int i = 1; i < 2 * n; i += 2) CHECK_EQ(sg_arena_free(a, x[i], 256, SYNC, NULL), 0);
        CHECK_EQ(sg_arena_free_ranges(a), (size_t)n + 2);   /* the holes, the free top: mapped and not */
        CHECK_EQ(sg_arena_fr_bad(a), 0);
        for (int i = 1; i < 2 * n; i += 2) {   /* the lowest hole each time */
            CHECK_EQ(sg_arena_alloc(a, 256, 0, SYNC, &p, &placed, &rc), SG_ARENA_OK);
            CHECK_EQ(p, x[i]);
            CHECK_EQ(sg_arena_fr_bad(a), 0);
            CHECK_EQ(sg_arena_ix_stale(a), 0);
        }
        CHECK_EQ(sg_arena_free_ranges(a), 2);
        for (int i = 2 * n - 1; i > 0; i -= 2) {   /* holes again, from the top down */
            CHECK_EQ(sg_arena_free(a, x[i], 256, SYNC, NULL), 0);
            CHECK_EQ(sg_arena_fr_bad(a), 0);
        }
        CHECK_EQ(sg_arena_free_ranges(a), (size_t)n + 2);
        for (int i = 0; i < 2 * n; i += 2) {   /* the rest: each merges two holes with it */
            CHECK_EQ(sg_arena_free(a, x[i], 256, SYNC, NULL), 0);
            CHECK_EQ(sg_arena_fr_bad(a), 0);
            CHECK_EQ(sg_arena_alloc(a, 512, 0, SYNC, &p, &placed, &rc), SG_ARENA_OK);
            CHECK_EQ(p, x[0]);                  /* the run from x[0] on, whatever blocks it spans */
            CHECK_EQ(sg_arena_free(a, p, 512, SYNC, NULL), 0);
            CHECK_EQ(sg_arena_ix_stale(a), 0);
        }
        CHECK_EQ(sg_arena_free_ranges(a), 3);   /* x[0..2n), and the top */
        sg_arena_destroy(a, 1);
    }
}

/* row(), then x[i] freed for everyone (i even) or pending for key, with
 * event i + 1 (i odd): adjacent free ranges none of which merge. */
static void striped(sg_arena *a, CUdeviceptr *x, int n, sg_arena_key key, CUdeviceptr g[2])
{
    row(a, x, n, g);
    for (int i = 0; i < n; i++)
        CHECK_EQ(sg_arena_free(a, x[i], 256, i % 2 ? key : SYNC, i % 2 ? (void *)(uintptr_t)(i + 1) : NULL), 0);
    CHECK_EQ(sg_arena_free_ranges(a), (size_t)n + 2);   /* none merged; the top: mapped and not */
    CHECK_EQ(sg_arena_fr_bad(a), 0);
}

/* Adjacent free ranges that cannot merge (pending for stream KEYS[0], and
 * available, in turn) make one cluster across several blocks: the index
 * must count it whole, the scan must take a run across the blocks, and once
 * the events complete the ranges merge across the blocks' bounds. */
TEST(a_cluster_spans_blocks)
{
    enum { N = 5 * SG_ARENA_FR_BLOCK + 7 };
    fake f;
    sg_arena *a = one_arena(&f);
    static CUdeviceptr x[N];
    CUdeviceptr g[2], p, q;
    size_t placed;
    CUresult rc;
    striped(a, x, N, KEYS[0], g);
    /* others see lone ranges of 256 bytes: 512 goes above g[1] */
    CHECK_EQ(sg_arena_alloc(a, 512, 0, SYNC, &p, &placed, &rc), SG_ARENA_OK);
    CHECK_EQ(p, g[1] + 256);
    CHECK_EQ(sg_arena_ix_stale(a), 0);
    /* the freeing stream: the whole run, from the lowest range */
    CHECK_EQ(sg_arena_alloc(a, (size_t)N * 256, 0, KEYS[0], &q, &placed, &rc), SG_ARENA_OK);
    CHECK_EQ(q, x[0]);
    CHECK_EQ(sg_arena_fr_bad(a), 0);
    CHECK_EQ(sg_arena_free(a, q, (size_t)N * 256, KEYS[0], (void *)(uintptr_t)(N + 10)), 0);
    CHECK_EQ(sg_arena_free_ranges(a), 3);   /* x's, pending; the top above p (2) */
    /* the same cluster, its pending parts now of one later free, and
     * everything in between available: one more time across the blocks */
    CHECK_EQ(sg_arena_alloc(a, (size_t)(N - 2) * 256, 0, KEYS[0], &q, &placed, &rc), SG_ARENA_OK);
    CHECK_EQ(q, x[0]);
    CHECK_EQ(sg_arena_free(a, q, (size_t)(N - 2) * 256, SYNC, NULL), 0);
    CHECK_EQ(sg_arena_fr_bad(a), 0);
    CHECK_EQ(sg_arena_free_ranges(a), 4);   /* x[0..N-2) available, the rest pending, the top */
    done[N + 10] = 1;                       /* the event completes: all merges */
    CHECK_EQ(sg_arena_pending(a), 0);
    CHECK_EQ(sg_arena_free_ranges(a), 3);
    CHECK_EQ(sg_arena_fr_bad(a), 0);
    CHECK_EQ(sg_arena_alloc(a, (size_t)N * 256, 0, SYNC, &q, &placed, &rc), SG_ARENA_OK);
    CHECK_EQ(q, x[0]);
    CHECK_EQ(sg_arena_ix_stale(a), 0);
    sg_arena_destroy(a, 1);
}

/* The same cluster, its pending ranges completing in the middle of it: the
 * reap merges across every block bound at once. */
TEST(completed_frees_merge_across_blocks)
{
    enum { N = 4 * SG_ARENA_FR_BLOCK + 1 };
    fake f;
    sg_arena *a = one_arena(&f);
    static CUdeviceptr x[N];
    CUdeviceptr g[2], q;
    size_t placed;
    CUresult rc;
    striped(a, x, N, KEYS[1], g);
    for (int i = 1; i < N / 2; i += 2) done[i + 1] = 1;   /* the lower half's events */
    CHECK_EQ(sg_arena_pending(a), (size_t)(N / 2 - N / 4));
    CHECK_EQ(sg_arena_fr_bad(a), 0);
    CHECK_EQ(sg_arena_free_ranges(a), (size_t)1 + (N - N / 2 - 1) + 2);   /* x[0..N/2], x[N/2+1..N), the top */
    CHECK_EQ(sg_arena_alloc(a, (size_t)(N / 2) * 256, 0, SYNC, &q, &placed, &rc), SG_ARENA_OK);
    CHECK_EQ(q, x[0]);
    CHECK_EQ(sg_arena_ix_stale(a), 0);
    sg_arena_destroy(a, 1);
}

int main(void)
{
    RUN(index_matches_model_synchronous);
    RUN(index_matches_linear_scan_stream_ordered);
    RUN(holes_are_skipped_and_found);
    RUN(trim_of_a_lone_granule_reaches_the_index);
    RUN(blocks_split_and_merge_at_their_bounds);
    RUN(a_cluster_spans_blocks);
    RUN(completed_frees_merge_across_blocks);
    return check_done();
}
