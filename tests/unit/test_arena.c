/*
 * tests/unit/test_arena.c: the placement algorithm (core/arena.c) on fake
 * VMM operations: first-fit determinism, coalescing, alignment, growth and
 * one granule-sized handle per mapped granule, small blocks sharing one
 * chunk, giving unused chunks back under pressure (trim), counting as free
 * only the mapped chunks no block touches (cuMemGetInfo),
 * own-handle blocks, stream-ordered reuse, new reservations, and every
 * failing operation leaving nothing behind (creates vs releases, maps vs
 * unmaps, reserves vs frees counted by the fake).
 */
#include "check.h"
#include "core/arena.h"

#include <string.h>

#define G ((size_t)2 << 20)
#define RESV_BASE 0x100000000000ULL
#define MAX_EV 128

/* The fake: counts every operation, remembers handle sizes, can fail the
 * Nth call of one operation, and answers event queries from done[]. */
static struct fake {
    int reserves, unreserves, creates, releases, maps, unmaps, accesses;
    int puts;
    size_t handle_size[256];
    CUdeviceptr next_va;
    const char *fail_op;
    int fail_at, calls_of_fail_op;
    int done[MAX_EV];
    size_t room;          /* what ops.room says the device has free (0: unlimited) */
    int room_asks;
    int queries;          /* event_done calls */
} F;

static int failing(const char *op)
{
    if (!F.fail_op || strcmp(op, F.fail_op) != 0) return 0;
    return ++F.calls_of_fail_op == F.fail_at;
}

static CUresult f_reserve(void *u, size_t size, size_t align, CUdeviceptr *base)
{
    (void)u;
    if (failing("reserve")) return CUDA_ERROR_OUT_OF_MEMORY;
    F.next_va = (F.next_va + align - 1) / align * align;
    *base = F.next_va;
    F.next_va += size + align;   /* a gap: segments are not adjacent */
    F.reserves++;
    return CUDA_SUCCESS;
}
static CUresult f_unreserve(void *u, CUdeviceptr b, size_t s) { (void)u; (void)b; (void)s; F.unreserves++; return CUDA_SUCCESS; }
static CUresult f_create(void *u, size_t size, CUmemGenericAllocationHandle *h)
{
    (void)u;
    if (failing("create")) return CUDA_ERROR_OUT_OF_MEMORY;
    CHECK(size % G == 0 && size > 0);
    F.handle_size[F.creates % 256] = size;
    *h = (CUmemGenericAllocationHandle)++F.creates;
    return CUDA_SUCCESS;
}
static CUresult f_release(void *u, CUmemGenericAllocationHandle h) { (void)u; (void)h; F.releases++; return CUDA_SUCCESS; }
static CUresult f_map(void *u, CUdeviceptr va, size_t size, CUmemGenericAllocationHandle h)
{
    (void)u; (void)h;
    if (failing("map")) return CUDA_ERROR_INVALID_VALUE;
    CHECK(va % G == 0 && size % G == 0);
    F.maps++;
    return CUDA_SUCCESS;
}
static CUresult f_access(void *u, CUdeviceptr va, size_t size)
{
    (void)u; (void)va; (void)size;
    if (failing("access")) return CUDA_ERROR_INVALID_VALUE;
    F.accesses++;
    return CUDA_SUCCESS;
}
static CUresult f_unmap(void *u, CUdeviceptr va, size_t size) { (void)u; (void)va; (void)size; F.unmaps++; return CUDA_SUCCESS; }
static int f_event_done(void *u, void *ev) { (void)u; F.queries++; return F.done[(uintptr_t)ev]; }
static void f_event_put(void *u, void *ev) { (void)u; (void)ev; F.puts++; }

static int f_room(void *u, size_t bytes)
{
    (void)u;
    F.room_asks++;
    return !F.room || bytes <= F.room;
}

static const sg_arena_ops fake_ops = { NULL, f_reserve, f_unreserve, f_create, f_release, f_map,
                                       f_access, f_unmap, f_event_done, f_event_put, f_room };

static sg_arena *fresh(size_t resv)
{
    memset(&F, 0, sizeof F);
    F.next_va = RESV_BASE;
    return sg_arena_new(&fake_ops, G, SG_ARENA_ALIGN, resv);
}

static const sg_arena_key SYNC = { 0, 0 }, S1 = { 0x1000, 0 }, S2 = { 0x2000, 0 };

static CUdeviceptr alloc_k(sg_arena *a, size_t n, int own, sg_arena_key k)
{
    CUdeviceptr p = 0;
    size_t placed = 0;
    CUresult rc;
    if (sg_arena_alloc(a, n, own, k, &p, &placed, &rc) != SG_ARENA_OK) return 0;
    return p;
}
static CUdeviceptr alloc(sg_arena *a, size_t n) { return alloc_k(a, n, 0, SYNC); }
static void release(sg_arena *a, CUdeviceptr p, size_t n)
{
    CHECK_EQ(sg_arena_free(a, p, (n + 255) / 256 * 256, SYNC, NULL), 0);
}

/* Everything created is gone again. */
static void check_balanced(void)
{
    CHECK_EQ(F.creates, F.releases);
    CHECK_EQ(F.maps, F.unmaps);
    CHECK_EQ(F.reserves, F.unreserves);
}

/* A step: temporaries of mixed sizes, some freed in between. */
static void step(sg_arena *a, CUdeviceptr out[6])
{
    static const size_t sz[6] = { 4096, 100000, 6400, 3 << 20, 777, 50000 };
    for (int i = 0; i < 3; i++) out[i] = alloc(a, sz[i]);
    release(a, out[1], sz[1]);
    for (int i = 3; i < 6; i++) out[i] = alloc(a, sz[i]);
    for (int i = 0; i < 6; i++)
        if (i != 1) release(a, out[i], sz[i]);
}

TEST(first_fit_is_deterministic)
{
    CUdeviceptr s1[6], s2[6], s3[6];
    sg_arena *a = fresh(64 * G);
    step(a, s1);
    int creates = F.creates;
    step(a, s2);
    CHECK(memcmp(s1, s2, sizeof s1) == 0);   /* same pattern, same addresses */
    CHECK_EQ(F.creates, creates);            /* and no new memory */
    sg_arena_destroy(a, 1);
    check_balanced();
    a = fresh(64 * G);                       /* a new arena lays out the same way */
    step(a, s3);
    CHECK(memcmp(s1, s3, sizeof s1) == 0);
    sg_arena_destroy(a, 1);
}

TEST(alignment_and_sizes)
{
    sg_arena *a = fresh(64 * G);
    CUdeviceptr p = 0;
    size_t placed = 0;
    CUresult rc;
    static const size_t sz[] = { 1, 255, 256, 257, 1000 };
    static const size_t want[] = { 256, 256, 256, 512, 1024 };
    CUdeviceptr prev_end = 0;
    for (int i = 0; i < 5; i++) {
        CHECK_EQ(sg_arena_alloc(a, sz[i], 0, SYNC, &p, &placed, &rc), SG_ARENA_OK);
        CHECK_EQ(p % SG_ARENA_ALIGN, 0);
        CHECK_EQ(placed, want[i]);
        if (prev_end) CHECK_EQ(p, prev_end);  /* packed one after the other */
        prev_end = p + placed;
    }
    sg_arena_destroy(a, 1);
}

/* An arena of a larger block alignment (the device's texture alignment,
 * 512 on real GPUs): every ordinary block starts on it and takes whole
 * multiples of it; alignments below SG_ARENA_ALIGN, above the granularity
 * or not a power of two are refused. */
TEST(texture_alignment)
{
    memset(&F, 0, sizeof F);
    F.next_va = RESV_BASE;
    CHECK(sg_arena_new(&fake_ops, G, 128, 64 * G) == NULL);
    CHECK(sg_arena_new(&fake_ops, G, 768, 64 * G) == NULL);
    CHECK(sg_arena_new(&fake_ops, G, 2 * G, 64 * G) == NULL);
    sg_arena *a = sg_arena_new(&fake_ops, G, 512, 64 * G);
    CHECK(a != NULL);
    CUdeviceptr p = 0, prev_end = 0;
    size_t placed = 0;
    CUresult rc;
    static const size_t sz[] = { 1, 256, 300, 512, 513, 1000 };
    static const size_t want[] = { 512, 512, 512, 512, 1024, 1024 };
    for (int i = 0; i < 6; i++) {
        CHECK_EQ(sg_arena_alloc(a, sz[i], 0, SYNC, &p, &placed, &rc), SG_ARENA_OK);
        CHECK_EQ(p % 512, 0);
        CHECK_EQ(placed, want[i]);
        if (prev_end) CHECK_EQ(p, prev_end);
        prev_end = p + placed;
    }
    sg_arena_destroy(a, 1);
}

TEST(coalescing)
{
    sg_arena *a = fresh(64 * G);
    CUdeviceptr x = alloc(a, 1024), y = alloc(a, 2048), z = alloc(a, 4096);
    CHECK_EQ(y, x + 1024);
    CHECK_EQ(z, y + 2048);
    size_t before = sg_arena_free_ranges(a);   /* the rest of the chunk */
    release(a, x, 1024);
    release(a, z, 4096);                        /* merges with the tail */
    CHECK_EQ(sg_arena_free_ranges(a), before + 1);
    release(a, y, 2048);                        /* x, y, z and the tail: one range */
    CHECK_EQ(sg_arena_free_ranges(a), 2);       /* (and the unmapped rest of the reservation) */
    CHECK_EQ(alloc(a, 7168), x);                /* fits where x, y, z were */
    sg_arena_destroy(a, 1);
}

TEST(growth_handle_sizes)
{
    sg_arena *a = fresh(64 * G);
    CUdeviceptr p = alloc(a, 3 << 20);          /* 3 MiB: two granules, a handle each */
    CHECK(p != 0);
    CHECK_EQ(F.creates, 2);
    CHECK_EQ(F.handle_size[0], G);
    CHECK_EQ(F.handle_size[1], G);
    CHECK_EQ(sg_arena_mapped(a), 2 * G);
    CUdeviceptr q = alloc(a, 1024);             /* in the unused 1 MiB */
    CHECK_EQ(q, p + (3 << 20));
    CHECK_EQ(F.creates, 2);
    /* 2 MiB more: the free tail (1 MiB - 1 KiB) is used, only the rest is new */
    CUdeviceptr r = alloc(a, 2 << 20);
    CHECK_EQ(r, q + 1024);
    CHECK_EQ(F.creates, 3);
    CHECK_EQ(F.handle_size[2], G);
    CHECK_EQ(sg_arena_mapped(a), 3 * G);
    CHECK_EQ(F.maps, 3);
    CHECK_EQ(F.accesses, 3);
    sg_arena_destroy(a, 1);
    check_balanced();
}

TEST(small_blocks_share_one_chunk)
{
    sg_arena *a = fresh(64 * G);
    CUdeviceptr p[100];
    for (int i = 0; i < 100; i++) p[i] = alloc(a, 4096);
    for (int i = 1; i < 100; i++) CHECK_EQ(p[i], p[i - 1] + 4096);
    CHECK_EQ(F.creates, 1);                     /* 400 KiB in one 2 MiB chunk */
    CHECK_EQ(sg_arena_mapped(a), G);
    sg_arena_destroy(a, 1);
}

TEST(own_handle_blocks)
{
    sg_arena *a = fresh(64 * G);
    CUdeviceptr small = alloc(a, 4096);
    CUdeviceptr p = 0;
    size_t placed = 0;
    CUresult rc;
    CHECK_EQ(sg_arena_alloc(a, 3 << 20, 1, SYNC, &p, &placed, &rc), SG_ARENA_OK);
    CHECK_EQ(p % G, 0);
    CHECK_EQ(placed, 2 * G);
    CHECK_EQ(p, small + G - 0);                 /* next granule after the shared chunk */
    sg_arena_chunk ch[4];
    CHECK_EQ(sg_arena_chunks(a, p, placed, ch, 4), 2);
    CHECK_EQ(ch[0].va, p);
    CHECK_EQ(ch[0].size, G);
    CHECK_EQ(ch[1].va, p + G);
    /* Small blocks keep filling the shared chunk, never the own one. */
    CUdeviceptr s2 = alloc(a, 8192);
    CHECK_EQ(s2, small + 4096);
    /* Freed, its chunk serves the next own block of that size: no new handle. */
    int creates = F.creates;
    CHECK_EQ(sg_arena_free(a, p, placed, SYNC, NULL), 0);
    CUdeviceptr p2 = 0;
    CHECK_EQ(sg_arena_alloc(a, 4 << 20, 1, SYNC, &p2, &placed, &rc), SG_ARENA_OK);
    CHECK_EQ(p2, p);
    CHECK_EQ(F.creates, creates);
    /* A bigger own block reuses the freed granules and maps one more. */
    CHECK_EQ(sg_arena_free(a, p2, placed, SYNC, NULL), 0);
    CUdeviceptr p3 = 0;
    CHECK_EQ(sg_arena_alloc(a, 5 << 20, 1, SYNC, &p3, &placed, &rc), SG_ARENA_OK);
    CHECK_EQ(p3, p);
    CHECK_EQ(F.creates, creates + 1);
    CHECK_EQ(sg_arena_chunks(a, p3, placed, ch, 4), 3);
    CHECK_EQ(ch[2].va, p3 + 2 * G);
    sg_arena_destroy(a, 1);
    check_balanced();
}

TEST(stream_ordered_reuse)
{
    sg_arena *a = fresh(64 * G);
    CUdeviceptr keep = alloc(a, 256);
    CUdeviceptr x = alloc_k(a, 8192, 0, S1);
    CHECK_EQ(sg_arena_free(a, x, 8192, S1, (void *)1), 0);   /* event 1, not done */
    /* The same stream reuses at once; */
    CUdeviceptr y = alloc_k(a, 8192, 0, S1);
    CHECK_EQ(y, x);
    CHECK_EQ(sg_arena_free(a, y, 8192, S1, (void *)2), 0);
    /* another stream and synchronous allocations do not, until it completes. */
    CUdeviceptr z = alloc_k(a, 8192, 0, S2);
    CHECK(z != x && z != 0);
    CUdeviceptr w = alloc(a, 4096);
    CHECK(w != x && w != 0);
    CHECK_EQ(F.puts, 1);                        /* event 1 done with (its range reused), 2 kept */
    F.done[2] = 1;
    CUdeviceptr v = alloc(a, 4096);
    CHECK_EQ(v, x);
    CHECK_EQ(F.puts, 2);
    /* Same-stream pending ranges next to available memory count as one. */
    CHECK_EQ(sg_arena_free(a, v, 4096, SYNC, NULL), 0);
    CHECK_EQ(sg_arena_free(a, z, 8192, S1, (void *)3), 0);
    (void)keep;
    sg_arena_destroy(a, 1);
    CHECK_EQ(F.puts, 3);                        /* destroy puts the pending event */
    check_balanced();
}

/* Frees pending on many streams: an allocation asks each stream's oldest
 * pending event only (its later ones complete after it), so 20 streams with
 * 5 pending frees each cost 20 queries, not one per free (the walk asked 16
 * streams' oldest and every pend of the others: 36). */
TEST(pending_asked_once_per_stream)
{
    sg_arena *a = fresh(64 * G);
    enum { STREAMS = 20, PER = 5 };
    CUdeviceptr p[STREAMS][PER];
    for (int k = 0; k < STREAMS; k++)
        for (int i = 0; i < PER; i++) {
            sg_arena_key key = { 0x1000 * (uintptr_t)(k + 1), 0 };
            p[k][i] = alloc_k(a, 256, 0, key);
            (void)alloc(a, 256);                /* kept: the pending ranges stay apart */
        }
    for (int k = 0; k < STREAMS; k++)
        for (int i = 0; i < PER; i++) {
            sg_arena_key key = { 0x1000 * (uintptr_t)(k + 1), 0 };
            CHECK_EQ(sg_arena_free(a, p[k][i], 256, key, (void *)(uintptr_t)(1 + k * PER + i)), 0);
        }
    F.queries = 0;
    (void)alloc(a, 256);
    CHECK_EQ(F.queries, STREAMS);
    /* stream 0's first two complete: its chain moves on to the third */
    F.done[1] = F.done[2] = 1;
    F.queries = 0;
    (void)alloc(a, 256);
    CHECK_EQ(F.queries, STREAMS + 2);
    F.queries = 0;
    (void)alloc(a, 256);
    CHECK_EQ(F.queries, STREAMS);
    sg_arena_destroy(a, 1);
}

TEST(new_reservation_when_full)
{
    sg_arena *a = fresh(4 * G);
    CUdeviceptr p = alloc(a, 3 * G);
    CUdeviceptr q = alloc(a, 3 * G);            /* does not fit: second reservation */
    CHECK(p && q);
    CHECK_EQ(sg_arena_segments(a), 2);
    CHECK(sg_arena_contains(a, p) && sg_arena_contains(a, q));
    CHECK(!sg_arena_contains(a, RESV_BASE - 1));
    CUdeviceptr big = alloc(a, 10 * G);         /* larger than a reservation */
    CHECK(big != 0);
    CHECK_EQ(sg_arena_segments(a), 3);
    CHECK_EQ(alloc(a, G / 2), p + 3 * G);       /* growth goes back to the first with room */
    CHECK_EQ(sg_arena_segments(a), 3);
    sg_arena_destroy(a, 1);
    check_balanced();
}

/* Each operation failing in the first allocation (at its first call or in
 * the middle of its growth) or in the second: the allocation reports which,
 * nothing is left behind, and the arena still works. */
TEST(failures_leave_nothing)
{
    static const char *ops[] = { "reserve", "create", "map", "access" };
    static const sg_arena_fail want[] = { SG_ARENA_FAIL_RESERVE, SG_ARENA_FAIL_CREATE,
                                          SG_ARENA_FAIL_MAP, SG_ARENA_FAIL_SET_ACCESS };
    /* 3 granules per allocation: calls 1-3 are the first's, 4-6 the second's
     * (one reservation each: 4 G per reservation) */
    static const int at_of[2][3] = { { 1, 2, 0 }, { 1, 2, 4 } };
    for (int i = 0; i < 4; i++) {
        for (int k = 0; k < 3; k++) {
            int at = at_of[i != 0][k];
            if (!at) continue;
            int second = i == 0 ? at == 2 : at == 4;
            sg_arena *a = fresh(4 * G);
            F.fail_op = ops[i];
            F.fail_at = at;
            CUdeviceptr p = 0, q = 0;
            size_t placed;
            CUresult rc1 = CUDA_SUCCESS, rc2 = CUDA_SUCCESS;
            sg_arena_fail f1 = sg_arena_alloc(a, 3 * G, 0, SYNC, &p, &placed, &rc1);
            sg_arena_fail f2 = sg_arena_alloc(a, 3 * G, 0, SYNC, &q, &placed, &rc2);
            CHECK_EQ(second ? f2 : f1, want[i]);
            CHECK((second ? rc2 : rc1) != CUDA_SUCCESS);
            CHECK_EQ(second ? f1 : f2, SG_ARENA_OK);
            /* live: one block's chunks and reservation; nothing half-made */
            CHECK_EQ(F.creates - F.releases, 3);
            CHECK_EQ(F.maps - F.unmaps, 3);
            CHECK_EQ(F.reserves - F.unreserves, 1);
            CHECK_EQ(sg_arena_mapped(a), 3 * G);
            CHECK_EQ(sg_arena_segments(a), 1);
            sg_arena_destroy(a, 1);
            check_balanced();
        }
    }
}

TEST(destroy_releases_everything)
{
    sg_arena *a = fresh(8 * G);
    for (int i = 0; i < 10; i++) alloc(a, (size_t)(i + 1) * 700000);
    CHECK(F.creates > 1);
    CHECK(F.reserves >= 2);
    sg_arena_destroy(a, 1);
    check_balanced();
    CHECK_EQ(F.maps, F.creates);
}

/* Under pressure every chunk no block uses is given back, and nothing else;
 * addresses stay reserved, so the same pattern finds the same addresses. */
TEST(trim_gives_back_unused_chunks)
{
    sg_arena *a = fresh(64 * G);
    CUdeviceptr x = alloc(a, 3 * G);           /* granules 0-2 */
    CUdeviceptr y = alloc(a, 4096);            /* granule 3 */
    CHECK(y != 0);
    CUdeviceptr z = alloc_k(a, G, 0, S1);      /* granules 3-4 (from y's tail on) */
    CHECK_EQ(F.creates, 5);
    release(a, x, 3 * G);
    CHECK_EQ(sg_arena_free(a, z, G, S1, (void *)5), 0);     /* pending, event 5 */
    CHECK_EQ(sg_arena_mapped_free(a), 3 * G);  /* x's granules: 3 holds y, 4 z (pending) */
    CHECK_EQ(sg_arena_trim(a, SIZE_MAX), 3 * G);         /* x's granules; not y's (live) nor z's (pending) */
    CHECK_EQ(F.releases, 3);
    CHECK_EQ(F.unmaps, 3);
    CHECK_EQ(sg_arena_mapped(a), 2 * G);
    F.done[5] = 1;
    CHECK_EQ(sg_arena_trim(a, SIZE_MAX), G);             /* z's completed: granule 4 goes, 3 stays (y) */
    CHECK_EQ(sg_arena_mapped(a), G);
    CUdeviceptr x2 = alloc(a, 3 * G);          /* the same place, new chunks */
    CHECK_EQ(x2, x);
    CHECK_EQ(F.creates, 8);
    CHECK_EQ(sg_arena_trim(a, SIZE_MAX), 0);
    sg_arena_destroy(a, 1);
    check_balanced();
}

/* A trim with a budget (keeping the device's headroom: mem_arena.c) gives
 * back the highest unused chunks first, chunk by chunk until the budget is
 * met: the lowest, which first fit reuses, stay mapped. */
TEST(trim_with_a_budget_gives_back_the_highest_first)
{
    sg_arena *a = fresh(64 * G);
    CUdeviceptr x = alloc(a, 4 * G);           /* granules 0-3 */
    CHECK_EQ(F.creates, 4);
    release(a, x, 4 * G);
    CHECK_EQ(sg_arena_trim(a, G / 2), G);      /* one chunk: granule 3 */
    CHECK_EQ(sg_arena_mapped(a), 3 * G);
    CHECK_EQ(sg_arena_trim(a, G + 1), 2 * G);  /* granules 2 and 1 */
    CHECK_EQ(sg_arena_mapped(a), G);
    CHECK_EQ(alloc(a, G), x);                  /* granule 0, still mapped: no new chunk */
    CHECK_EQ(F.creates, 4);
    CHECK_EQ(sg_arena_trim(a, 0), 0);
    sg_arena_destroy(a, 1);
    check_balanced();
}

/* Sizes that keep changing fit in what was freed (issue 10, class 18). */
/* Mapped memory counts as free (cuMemGetInfo adds it to the driver's figure)
 * only in chunks no block touches: the hole a freed block leaves in a chunk
 * that still holds a live block serves no larger block and trim cannot give
 * it back. */
TEST(mapped_free_counts_whole_chunks)
{
    sg_arena *a = fresh(64 * G);
    CUdeviceptr b[8];
    for (int i = 0; i < 8; i++) b[i] = alloc(a, G / 2);   /* two per chunk: granules 0-3 */
    for (int i = 1; i < 8; i++) CHECK_EQ(b[i], b[0] + (size_t)i * (G / 2));
    CUdeviceptr w = alloc(a, 2 * G);                      /* granules 4-5 */
    CHECK_EQ(w, b[0] + 4 * G);
    CHECK_EQ(F.creates, 6);
    CHECK_EQ(sg_arena_mapped_free(a), 0);
    for (int i = 1; i < 8; i += 2) release(a, b[i], G / 2);
    CHECK_EQ(sg_arena_mapped_free(a), 0);                 /* four holes, each beside a live block */
    release(a, w, 2 * G);
    CHECK_EQ(sg_arena_mapped_free(a), 2 * G);             /* w's chunks, wholly free */
    CUdeviceptr c = alloc(a, G / 2);                      /* a hole still serves its own size */
    CHECK_EQ(c, b[1]);
    CHECK_EQ(sg_arena_mapped_free(a), 2 * G);
    release(a, c, G / 2);
    release(a, b[0], G / 2);
    CHECK_EQ(sg_arena_mapped_free(a), 3 * G);             /* granule 0 is wholly free now */
    for (int i = 2; i < 8; i += 2) release(a, b[i], G / 2);
    CHECK_EQ(sg_arena_mapped_free(a), 6 * G);             /* everything mapped */
    CHECK_EQ(sg_arena_mapped_free(a), sg_arena_mapped(a));
    CHECK_EQ(sg_arena_trim(a, SIZE_MAX), 6 * G);                    /* what was counted, trim gives back */
    CHECK_EQ(sg_arena_mapped_free(a), 0);
    CHECK_EQ(sg_arena_mapped(a), 0);
    CHECK_EQ(F.creates, 6);
    sg_arena_destroy(a, 1);
    check_balanced();
}

TEST(shrinking_sizes_reuse_memory)
{
    sg_arena *a = fresh(64 * G);
    size_t sz = 40 * G;
    CUdeviceptr p = alloc(a, sz);
    for (int i = 0; i < 10; i++) {
        release(a, p, sz);
        sz -= 2 * G;
        p = alloc(a, sz);
        CHECK(p != 0);
    }
    CHECK_EQ(sg_arena_mapped(a), 40 * G);      /* never more than the first */
    sg_arena_destroy(a, 1);
}

/* A destroyed stream's pending ranges: only their event frees them. */
TEST(rekey_detaches_a_stream)
{
    sg_arena *a = fresh(64 * G);
    CUdeviceptr keep = alloc(a, 256);
    CUdeviceptr x = alloc_k(a, 8192, 0, S1);
    CHECK_EQ(sg_arena_free(a, x, 8192, S1, (void *)7), 0);
    sg_arena_rekey(a, S1);
    CUdeviceptr y = alloc_k(a, 8192, 0, S1);
    CHECK(y != x);
    F.done[7] = 1;
    CHECK_EQ(alloc_k(a, 8192, 0, S2), x);
    (void)keep;
    sg_arena_destroy(a, 1);
}

/* A block that needs more than one new granule asks ops.room first: one
 * the device cannot hold fails at once, creating nothing; one granule, or
 * granules already mapped, are not asked about. */
TEST(room_is_asked_before_growing)
{
    sg_arena *a = fresh(64 * G);
    CUdeviceptr p, q;
    size_t placed;
    CUresult rc;
    F.room = 2 * G;
    CHECK_EQ(sg_arena_alloc(a, 3 * G, 0, SYNC, &p, &placed, &rc), SG_ARENA_FAIL_CREATE);
    CHECK_CU(rc, CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ(F.creates, 0);
    CHECK_EQ(F.room_asks, 1);
    CHECK_EQ(sg_arena_alloc(a, G / 2, 0, SYNC, &p, &placed, &rc), SG_ARENA_OK);   /* one granule */
    CHECK_EQ(F.room_asks, 1);
    CHECK_EQ(sg_arena_alloc(a, 2 * G, 0, SYNC, &q, &placed, &rc), SG_ARENA_OK);  /* fits: asked */
    CHECK_EQ(F.room_asks, 2);
    CHECK_EQ(F.creates, 3);
    CHECK_EQ(sg_arena_free(a, q, placed, SYNC, NULL), 0);
    F.room = 1;                                       /* full now: the mapped granules serve */
    CHECK_EQ(sg_arena_alloc(a, 2 * G, 0, SYNC, &q, &placed, &rc), SG_ARENA_OK);
    CHECK_EQ(F.creates, 3);
    sg_arena_destroy(a, 1);
}

/* Under memory pressure a stream-ordered allocation may take ranges other
 * streams freed and have not reached, waiting for each one's event
 * (sg_arena_alloc_claiming); never a range still in use, never an unmapped
 * one; a refused wait changes nothing. */
static int waits[8], nwaits, refuse_wait;
static int f_wait(void *arg, void *ev)
{
    (void)arg;
    if (refuse_wait) return -1;
    if (nwaits < 8) waits[nwaits] = (int)(uintptr_t)ev;
    nwaits++;
    return 0;
}

TEST(claims_wait_for_other_streams)
{
    sg_arena *a = fresh(64 * G);
    CUdeviceptr p, q, x, y;
    size_t placed;
    CUresult rc;
    x = alloc_k(a, G, 0, S1);                   /* one granule, freed on S1 (event 5) */
    y = alloc_k(a, G, 0, S2);                   /* the next one, kept by S2 */
    CHECK(x && y);
    CHECK_EQ(sg_arena_free(a, x, G, S1, (void *)5), 0);
    F.fail_op = "create";                       /* the device is full */
    F.fail_at = 1;
    CHECK_EQ(sg_arena_alloc(a, G, 0, S2, &p, &placed, &rc), SG_ARENA_FAIL_CREATE);
    CHECK_CU(rc, CUDA_ERROR_OUT_OF_MEMORY);
    /* a synchronous allocation has no stream to wait: refused */
    CHECK_EQ(sg_arena_alloc_claiming(a, G, 0, SYNC, f_wait, NULL, &p, &placed), SG_ARENA_FAIL_NOMEM);
    /* more than the pending range holds: refused, nothing waited */
    CHECK_EQ(sg_arena_alloc_claiming(a, 2 * G, 0, S2, f_wait, NULL, &p, &placed),
             SG_ARENA_FAIL_NOMEM);
    CHECK_EQ(nwaits, 0);
    /* a refused wait: nothing taken */
    refuse_wait = 1;
    CHECK_EQ(sg_arena_alloc_claiming(a, G / 2, 0, S2, f_wait, NULL, &p, &placed), SG_ARENA_FAIL_NOMEM);
    refuse_wait = 0;
    CHECK_EQ(sg_arena_alloc_claiming(a, G / 2, 0, S2, f_wait, NULL, &p, &placed), SG_ARENA_OK);
    CHECK_EQ(p, x);
    CHECK_EQ(nwaits, 1);
    CHECK_EQ(waits[0], 5);
    /* the rest of S1's range: claimed again (S1's own allocations need no wait) */
    CHECK_EQ(sg_arena_alloc_claiming(a, G / 2, 0, S1, f_wait, NULL, &q, &placed), SG_ARENA_OK);
    CHECK_EQ(q, x + G / 2);
    CHECK_EQ(nwaits, 1);
    CHECK_EQ(F.puts, 1);                        /* event 5: no range holds it any more */
    CHECK_EQ(F.creates, 2);                     /* nothing was mapped for the claims */
    sg_arena_destroy(a, 1);
    check_balanced();
}

int main(void)
{
    RUN(first_fit_is_deterministic);
    RUN(alignment_and_sizes);
    RUN(texture_alignment);
    RUN(coalescing);
    RUN(growth_handle_sizes);
    RUN(small_blocks_share_one_chunk);
    RUN(own_handle_blocks);
    RUN(stream_ordered_reuse);
    RUN(pending_asked_once_per_stream);
    RUN(new_reservation_when_full);
    RUN(failures_leave_nothing);
    RUN(destroy_releases_everything);
    RUN(trim_gives_back_unused_chunks);
    RUN(trim_with_a_budget_gives_back_the_highest_first);
    RUN(mapped_free_counts_whole_chunks);
    RUN(shrinking_sizes_reuse_memory);
    RUN(rekey_detaches_a_stream);
    RUN(room_is_asked_before_growing);
    RUN(claims_wait_for_other_streams);
    return check_done();
}
