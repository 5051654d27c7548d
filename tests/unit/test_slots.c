/*
 * tests/unit/test_slots.c: core/slots.c against the fake VMM of
 * fake_vmm.h: deterministic slot layout, binding (each handle at slot base
 * + its offset, one access call for the device and its peers), no-op
 * rebinds with no driver call, remapping only after the generation's last
 * launch completed (SG_SLOTS_BUSY without wait, a targeted event wait
 * with it, launches on several streams), ABA safety (same address, other
 * id: remapped), relaxed capture mode around every call, each VMM and
 * event call failing at its 1st and 2nd call (-1, slot empty, maps and
 * unmaps balanced), destroy waiting for idle and returning its range,
 * context teardown freeing reservations, statistics, and binding
 * allocations that core/memory.c placed (own-handle or not).
 */
#include "check.h"
#include "core/contexts.h"
#include "core/memory.h"
#include "core/policy.h"
#include "core/slots.h"
#include "fake_vmm.h"

#include <stdint.h>
#include <string.h>

#define STREAM_A ((CUstream)0xa)
#define STREAM_B ((CUstream)0xb)

/* A 2-handle allocation (ids 1) and two 1-handle ones (ids 2, 3), as
 * explicit handle lists at made-up program addresses. */
static const sg_mem_handle H1[2] = { { 0x901, 0, FV_G, 0 }, { 0x902, 0, FV_G, (long long)FV_G } };
static const sg_mem_handle H2[1] = { { 0x903, 0, FV_G, 0 } };
static const sg_mem_handle H3[1] = { { 0x904, 0, FV_G, 0 } };
#define BIND1 ((sg_slot_bind){ 1, 0x10000000, H1, 2 })
#define BIND2 ((sg_slot_bind){ 2, 0x20000000, H2, 1 })
#define BIND3 ((sg_slot_bind){ 3, 0x30000000, H3, 1 })
#define EMPTY ((sg_slot_bind){ 0, 0, NULL, 0 })

static void setup(void)
{
    sg_slots_reset();
    sg_mem_reset();
    fv_install();
    sg_slots_init();
}

/* Sum of every driver call core/ made (SG_DRIVER_CALL counters). */
static unsigned long driver_calls(void)
{
    unsigned long n = 0;
    for (int i = 0; i < SG_DRIVER_COUNT; i++) n += sg_driver_calls[i];
    return n;
}

/* The handle mapped at va in the fake, or 0. */
static CUmemGenericAllocationHandle mapped_at(CUdeviceptr va)
{
    int i = fv_map_at(va);
    return i < 0 ? 0 : FV.map[i].h;
}

/* A generation of two slots (4 MiB and 2 MiB) on FV_CTX. */
static sg_slot_gen *gen2(void)
{
    size_t sizes[2] = { 3 << 20, 1 << 20 };
    sg_slot_gen *g = NULL;
    CHECK_EQ(sg_slot_gen_create(FV_CTX, 0, sizes, 2, &g), 0);
    return g;
}

/* Queues a fake launch of g touching all of its slots on stream s. */
static int launch(sg_slot_gen *g, CUstream s)
{
    size_t n = sg_slot_gen_count(g);
    fv_touch(sg_slot_addr(g, 0), sg_slot_addr(g, n - 1) + FV_G);
    return sg_slot_gen_launched(g, s, 0);
}

/* After everything is destroyed: every mapping made was unmapped. */
static void check_balanced(void)
{
    CHECK_EQ(FV.live_maps, 0);
    CHECK_EQ(FV.maps_ok, FV.unmaps_ok);
}

/* ------------------------------------------------------------- tests */

TEST(layout_and_bind)
{
    setup();
    sg_slot_gen *g = gen2();
    CHECK(g != NULL);
    if (!g) return;
    CUdeviceptr a0 = sg_slot_addr(g, 0), a1 = sg_slot_addr(g, 1);
    CHECK_EQ(sg_slot_gen_count(g), 2);
    CHECK_EQ(a0 % FV_G, 0);
    CHECK_EQ(a1, a0 + 2 * FV_G);              /* 3 MiB rounds up to 4 MiB */
    CHECK_EQ(FV.reserves, 1);
    CHECK_EQ(FV.maps_ok, 0);                  /* slots start empty */
    sg_slot_bind want[2] = { BIND1, BIND2 };
    CHECK(!sg_slot_gen_matches(g, want));
    CHECK_EQ(sg_slot_gen_bind(g, want, 0), 0);
    CHECK(sg_slot_gen_matches(g, want));
    CHECK_EQ(mapped_at(a0), 0x901);           /* each handle at base + its offset */
    CHECK_EQ(mapped_at(a0 + FV_G), 0x902);
    CHECK_EQ(mapped_at(a1), 0x903);
    CHECK_EQ(FV.maps_ok, 3);
    CHECK_EQ(FV.access_calls, 2);             /* one per slot, over its whole extent */
    for (int i = 0; i < FV.live_maps; i++) CHECK(FV.map[i].access);
    CHECK_EQ(FV.ndesc, 1);
    CHECK_EQ(FV.desc[0].location.id, 0);
    CHECK_EQ(FV.desc[0].flags, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    sg_slot_stats st = sg_slots_stats();
    CHECK_EQ(st.maps, 3);
    CHECK_EQ(st.set_access, 2);
    CHECK_EQ(st.unmaps, 0);
    CHECK_EQ(st.binds, 2);
    CHECK_EQ(st.binds_reused, 0);
    CHECK_EQ(FV.not_relaxed, 0);
    CHECK_EQ(FV.mode, CU_STREAM_CAPTURE_MODE_GLOBAL);   /* the program's mode is back */
    sg_slot_gen_destroy(g);
    check_balanced();
    CHECK_EQ(FV.reserves, 1);                 /* the reservation stays for the context */
}

TEST(rebind_same_is_free)
{
    setup();
    sg_slot_gen *g = gen2();
    sg_slot_bind want[2] = { BIND1, BIND2 };
    CHECK_EQ(sg_slot_gen_bind(g, want, 0), 0);
    CHECK_EQ(launch(g, STREAM_A), 0);          /* busy: does not matter, nothing changes */
    unsigned long before = driver_calls();
    for (int i = 0; i < 10; i++) CHECK_EQ(sg_slot_gen_bind(g, want, 0), 0);
    CHECK(sg_slot_gen_matches(g, want));
    CHECK_EQ(driver_calls(), before);          /* steady state: no driver call at all */
    sg_slot_stats st = sg_slots_stats();
    CHECK_EQ(st.binds, 22);
    CHECK_EQ(st.binds_reused, 20);
    CHECK_EQ(st.maps, 3);
    fv_complete_all();
    sg_slot_gen_destroy(g);
    check_balanced();
}

TEST(remap_only_after_launch_completed)
{
    setup();
    sg_slot_gen *g = gen2();
    sg_slot_bind a[2] = { BIND1, BIND2 }, b[2] = { BIND1, BIND3 };
    CHECK_EQ(sg_slot_gen_bind(g, a, 0), 0);
    CHECK(sg_slot_gen_idle(g));                /* never launched: idle, no query */
    CHECK_EQ(FV.queries, 0);
    CHECK_EQ(launch(g, STREAM_A), 0);
    CHECK_EQ(FV.records, 1);
    CHECK(!sg_slot_gen_idle(g));
    int maps = FV.map_calls, unmaps = FV.unmap_calls;
    CHECK_EQ(sg_slot_gen_bind(g, b, 0), SG_SLOTS_BUSY);
    CHECK_EQ(FV.map_calls, maps);              /* nothing changed */
    CHECK_EQ(FV.unmap_calls, unmaps);
    CHECK(sg_slot_gen_matches(g, a));
    CHECK_EQ(FV.ev_syncs, 0);                  /* and nobody waited */
    fv_complete_all();                         /* the GPU finishes */
    CHECK(sg_slot_gen_idle(g));
    int q = FV.queries;
    CHECK(sg_slot_gen_idle(g));                /* known idle: no more queries */
    CHECK_EQ(FV.queries, q);
    CHECK_EQ(sg_slot_gen_bind(g, b, 0), 0);
    CHECK(sg_slot_gen_matches(g, b));
    CHECK_EQ(mapped_at(sg_slot_addr(g, 1)), 0x904);
    CHECK_EQ(FV.unmap_calls, unmaps + 1);      /* slot 1 only; slot 0 kept its mapping */
    CHECK_EQ(FV.violations, 0);
    sg_slot_gen_destroy(g);
    check_balanced();
}

TEST(bind_waits_for_launch)
{
    setup();
    sg_slot_gen *g = gen2();
    sg_slot_bind a[2] = { BIND1, BIND2 }, b[2] = { BIND1, BIND3 };
    CHECK_EQ(sg_slot_gen_bind(g, a, 1), 0);
    CHECK_EQ(launch(g, STREAM_A), 0);
    CHECK_EQ(sg_slot_gen_bind(g, b, 1), 0);
    CHECK_EQ(FV.ev_syncs, 1);                  /* a targeted event wait ... */
    CHECK_EQ(FV.ctx_syncs, 0);                 /* ... never a context synchronization */
    CHECK_EQ(FV.violations, 0);                /* nothing unmapped under the launch */
    CHECK(sg_slot_gen_matches(g, b));
    CHECK_EQ(sg_slots_stats().waits, 1);
    /* back-to-back: launch, rebind, launch, rebind */
    for (int i = 0; i < 6; i++) {
        CHECK_EQ(launch(g, STREAM_A), 0);
        CHECK_EQ(sg_slot_gen_bind(g, i % 2 ? b : a, 1), 0);
    }
    CHECK_EQ(FV.violations, 0);
    CHECK_EQ(FV.ev_syncs, 7);
    sg_slot_gen_destroy(g);
    check_balanced();
}

TEST(several_streams_all_waited_for)
{
    setup();
    sg_slot_gen *g = gen2();
    sg_slot_bind a[2] = { BIND1, BIND2 }, b[2] = { BIND1, BIND3 };
    CHECK_EQ(sg_slot_gen_bind(g, a, 1), 0);
    CHECK_EQ(launch(g, STREAM_A), 0);
    CHECK_EQ(launch(g, STREAM_B), 0);
    CHECK_EQ(FV.ev_creates, 2);                /* one event per stream */
    fv_complete((CUevent)(uintptr_t)2);        /* stream B's launch finished, A's not */
    CHECK(!sg_slot_gen_idle(g));
    CHECK_EQ(sg_slot_gen_bind(g, b, 0), SG_SLOTS_BUSY);
    CHECK_EQ(sg_slot_gen_bind(g, b, 1), 0);
    CHECK_EQ(FV.violations, 0);
    CHECK_EQ(FV.ev_syncs, 1);                  /* only A's event needed a wait */
    CHECK_EQ(launch(g, STREAM_A), 0);          /* entries are reused: no new event */
    CHECK_EQ(FV.ev_creates, 2);
    fv_complete_all();
    sg_slot_gen_destroy(g);
    CHECK_EQ(FV.ev_destroys, 2);
    check_balanced();
}

TEST(aba_same_address_other_id_remaps)
{
    setup();
    size_t size = FV_G;
    sg_slot_gen *g = NULL;
    CHECK_EQ(sg_slot_gen_create(FV_CTX, 0, &size, 1, &g), 0);
    /* the same program address and even the same handle, but another
     * allocation (freed, then the address handed out again) */
    sg_slot_bind x = { 7, 0x40000000, H2, 1 }, y = { 8, 0x40000000, H2, 1 };
    CHECK_EQ(sg_slot_gen_bind(g, &x, 0), 0);
    CHECK_EQ(sg_slot_gen_bind(g, &x, 0), 0);
    CHECK_EQ(FV.maps_ok, 1);
    CHECK(!sg_slot_gen_matches(g, &y));
    CHECK_EQ(sg_slot_gen_bind(g, &y, 0), 0);
    CHECK_EQ(FV.unmaps_ok, 1);                 /* remapped, not taken for the same */
    CHECK_EQ(FV.maps_ok, 2);
    CHECK_EQ(FV.access_calls, 2);
    sg_slot_bind none = EMPTY;
    CHECK_EQ(sg_slot_gen_bind(g, &none, 0), 0);   /* id 0: the slot shows nothing */
    CHECK_EQ(FV.live_maps, 0);
    CHECK(sg_slot_gen_matches(g, &none));
    sg_slot_gen_destroy(g);
    check_balanced();
}

TEST(peers_get_access)
{
    setup();
    FV.ndev = 4;
    FV.peer[1] = 1;                            /* device 1 can reach device 0; 2, 3 cannot */
    FV.peer[3] = 1;
    sg_slot_gen *g = gen2();
    sg_slot_bind a[2] = { BIND1, BIND2 };
    CHECK_EQ(sg_slot_gen_bind(g, a, 0), 0);
    CHECK_EQ(FV.ndesc, 3);
    CHECK_EQ(FV.desc[0].location.id, 0);
    CHECK_EQ(FV.desc[1].location.id, 1);
    CHECK_EQ(FV.desc[2].location.id, 3);
    for (size_t i = 0; i < FV.ndesc; i++) {
        CHECK_EQ(FV.desc[i].flags, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
        CHECK_EQ(FV.desc[i].location.type, CU_MEM_LOCATION_TYPE_DEVICE);
    }
    sg_slot_gen_destroy(g);
    check_balanced();
}

TEST(relaxed_mode_around_every_call)
{
    setup();
    sg_slot_gen *g = gen2();
    sg_slot_bind a[2] = { BIND1, BIND2 }, b[2] = { BIND3, BIND2 };
    CHECK_EQ(sg_slot_gen_bind(g, a, 0), 0);
    CHECK_EQ(launch(g, STREAM_A), 0);
    CHECK(!sg_slot_gen_idle(g));
    CHECK_EQ(sg_slot_gen_bind(g, b, 1), 0);
    CHECK_EQ(launch(g, STREAM_A), 0);
    sg_slot_gen_destroy(g);
    sg_slot_gen *g2 = gen2();
    sg_ctx_teardown(FV_CTX);
    sg_slot_gen_destroy(g2);
    CHECK(FV.maps_ok > 0 && FV.records > 0 && FV.queries > 0 && FV.ev_syncs > 0);
    CHECK_EQ(FV.not_relaxed, 0);               /* every VMM / event call relaxed */
    CHECK_EQ(FV.mode, CU_STREAM_CAPTURE_MODE_GLOBAL);
}

/* Binds a then b (b changes both slots), with `name` failing at its nth
 * call counted from just before binding b: b gives -1 and leaves the failed
 * slots empty; a later bind succeeds; everything is balanced at the end. */
static void fault_case(const char *name, int nth)
{
    setup();
    sg_slot_gen *g = gen2();
    sg_slot_bind a[2] = { BIND1, BIND2 }, b[2] = { BIND3, BIND1 };
    b[1].nhandles = 1;                         /* BIND1's first handle only, fits slot 1 */
    CHECK_EQ(sg_slot_gen_bind(g, a, 0), 0);
    fv_fail(name, nth, 0);
    CHECK_EQ(sg_slot_gen_bind(g, b, 0), -1);
    CHECK(!sg_slot_gen_matches(g, b));
    for (size_t i = 0; i < 2; i++) {           /* each slot: what was asked, or nothing */
        CUdeviceptr s = sg_slot_addr(g, i);
        int shows_b = mapped_at(s) == b[i].handles[0].handle;
        int empty = mapped_at(s) == 0 && (i == 1 || mapped_at(s + FV_G) == 0);
        CHECK(shows_b || empty || strcmp(name, "cuMemUnmap") == 0);
    }
    if (strcmp(name, "cuMemUnmap") != 0) {
        /* maps and unmaps made for the failed bind are balanced: only what
         * the slots show now is mapped */
        int shown = 0;
        for (size_t i = 0; i < 2; i++) shown += mapped_at(sg_slot_addr(g, i)) != 0;
        CHECK_EQ(FV.live_maps, shown);
    }
    fv_fail(NULL, 0, 0);
    CHECK_EQ(sg_slot_gen_bind(g, b, 0), 0);    /* retried: works (stuck pieces unmapped) */
    CHECK(sg_slot_gen_matches(g, b));
    CHECK_EQ(FV.live_maps, 2);
    CHECK_EQ(FV.violations, 0);
    sg_slot_gen_destroy(g);
    check_balanced();
    CHECK_EQ(FV.not_relaxed, 0);
}

TEST(vmm_failures_leave_slots_empty)
{
    const char *names[] = { "cuMemMap", "cuMemSetAccess", "cuMemUnmap" };
    for (int n = 0; n < 3; n++)
        for (int nth = 1; nth <= 2; nth++) {
            printf("# %s failing at call %d\n", names[n], nth);
            fault_case(names[n], nth);
        }
}

TEST(map_failure_on_second_handle_unmaps_first)
{
    setup();
    size_t size = 2 * FV_G;
    sg_slot_gen *g = NULL;
    CHECK_EQ(sg_slot_gen_create(FV_CTX, 0, &size, 1, &g), 0);
    sg_slot_bind a = BIND1;
    fv_fail("cuMemMap", 2, 0);
    CHECK_EQ(sg_slot_gen_bind(g, &a, 0), -1);
    CHECK_EQ(FV.maps_ok, 1);
    CHECK_EQ(FV.unmaps_ok, 1);                 /* the first handle's mapping went again */
    CHECK_EQ(FV.live_maps, 0);
    CHECK(!sg_slot_gen_matches(g, &a));
    fv_fail("cuMemMap", 1, 1);                 /* every call fails */
    CHECK_EQ(sg_slot_gen_bind(g, &a, 0), -1);
    CHECK_EQ(FV.live_maps, 0);
    fv_fail(NULL, 0, 0);
    CHECK_EQ(sg_slot_gen_bind(g, &a, 0), 0);
    sg_slot_gen_destroy(g);
    check_balanced();
}

TEST(reserve_and_event_failures)
{
    setup();
    sg_slot_gen *g = NULL;
    size_t size = FV_G;
    fv_fail("cuMemAddressReserve", 1, 0);
    CHECK_EQ(sg_slot_gen_create(FV_CTX, 0, &size, 1, &g), -1);
    CHECK(g == NULL);
    CHECK_EQ(FV.reserves, 0);
    fv_fail(NULL, 0, 0);
    CHECK_EQ(sg_slot_gen_create(FV_CTX, 0, &size, 1, &g), 0);
    sg_slot_bind a = BIND2, b = BIND3;
    CHECK_EQ(sg_slot_gen_bind(g, &a, 0), 0);

    /* the event cannot be created: unknown timeline, waiting = context sync */
    fv_fail("cuEventCreate", 1, 0);
    CHECK_EQ(launch(g, STREAM_A), -1);
    CHECK(!sg_slot_gen_idle(g));
    CHECK_EQ(sg_slot_gen_bind(g, &b, 0), SG_SLOTS_BUSY);
    CHECK_EQ(sg_slot_gen_bind(g, &b, 1), 0);
    CHECK_EQ(FV.ctx_syncs, 1);
    CHECK_EQ(FV.violations, 0);

    /* the record fails on stream A (after a good one): busy until a later
     * record on A succeeds */
    fv_fail("cuEventRecord", 2, 0);
    CHECK_EQ(launch(g, STREAM_A), 0);
    CHECK_EQ(launch(g, STREAM_A), -1);
    fv_complete_all();
    CHECK(!sg_slot_gen_idle(g));
    CHECK(!sg_slot_gen_idle(g));               /* the completed event does not cover it */
    CHECK_EQ(launch(g, STREAM_A), 0);          /* a later record on the same stream */
    fv_complete_all();
    CHECK(sg_slot_gen_idle(g));

    /* the record fails, then the wait falls back to a context sync */
    fv_fail("cuEventRecord", 1, 0);
    CHECK_EQ(launch(g, STREAM_A), -1);
    CHECK_EQ(sg_slot_gen_bind(g, &a, 1), 0);
    CHECK_EQ(FV.ctx_syncs, 2);

    /* an event wait that fails falls back to a context sync; if that fails
     * too, bind fails and changes nothing */
    CHECK_EQ(launch(g, STREAM_A), 0);
    fv_fail("cuEventSynchronize", 1, 1);
    CHECK_EQ(sg_slot_gen_bind(g, &b, 1), 0);
    CHECK_EQ(FV.ctx_syncs, 3);
    CHECK_EQ(launch(g, STREAM_A), 0);
    FV.ctx_sync_rc = CUDA_ERROR_UNKNOWN;
    int maps = FV.map_calls;
    CHECK_EQ(sg_slot_gen_bind(g, &a, 1), -1);
    CHECK_EQ(FV.map_calls, maps);
    CHECK(sg_slot_gen_matches(g, &b));
    CHECK_EQ(FV.violations, 0);
    fv_fail(NULL, 0, 0);
    FV.ctx_sync_rc = CUDA_SUCCESS;
    sg_slot_gen_destroy(g);
    CHECK_EQ(FV.violations, 0);
    check_balanced();
}

TEST(unfit_handles_fail)
{
    setup();
    size_t size = FV_G;
    sg_slot_gen *g = NULL;
    CHECK_EQ(sg_slot_gen_create(FV_CTX, 0, &size, 1, &g), 0);
    sg_slot_bind big = BIND1;                  /* 4 MiB of handles, a 2 MiB slot */
    sg_slot_bind a = BIND2;
    CHECK_EQ(sg_slot_gen_bind(g, &a, 0), 0);
    CHECK_EQ(sg_slot_gen_bind(g, &big, 0), -1);
    CHECK_EQ(FV.live_maps, 0);                 /* the slot is left empty */
    sg_mem_handle gap[2] = { { 0x905, 0, FV_G, 0 }, { 0x906, 0, FV_G, 3 * (long long)FV_G } };
    sg_mem_handle neg[1] = { { 0x905, 0, FV_G, -4096 } };
    sg_mem_handle odd[1] = { { 0x905, 0, FV_G / 2, 0 } };
    sg_slot_bind bad[3] = { { 9, 0x1000, gap, 2 }, { 9, 0x1000, neg, 1 }, { 9, 0x1000, odd, 1 } };
    size = 8 * FV_G;
    sg_slot_gen *g2 = NULL;
    CHECK_EQ(sg_slot_gen_create(FV_CTX, 0, &size, 1, &g2), 0);
    for (int i = 0; i < 3; i++) CHECK_EQ(sg_slot_gen_bind(g2, &bad[i], 0), -1);
    CHECK_EQ(FV.map_calls, 1);                 /* refused before any driver call */
    CHECK_EQ(FV.access_calls, 1);
    sg_slot_gen_destroy(g);
    sg_slot_gen_destroy(g2);
    check_balanced();
}

TEST(destroy_waits_and_returns_range)
{
    setup();
    sg_slot_gen *g = gen2();
    CUdeviceptr base = sg_slot_addr(g, 0);
    sg_slot_bind a[2] = { BIND1, BIND2 };
    CHECK_EQ(sg_slot_gen_bind(g, a, 0), 0);
    CHECK_EQ(launch(g, STREAM_A), 0);
    sg_slot_gen_destroy(g);
    CHECK_EQ(FV.ev_syncs, 1);                  /* waited before unmapping */
    CHECK_EQ(FV.violations, 0);
    CHECK_EQ(FV.ev_destroys, 1);
    check_balanced();
    sg_slot_gen *g2 = gen2();                  /* the range was given back: same address */
    CHECK_EQ(sg_slot_addr(g2, 0), base);
    sg_slot_gen *g3 = gen2();                  /* a live one is not shared */
    CHECK_EQ(sg_slot_addr(g3, 0), base + 3 * FV_G);
    sg_slot_gen_destroy(g2);
    sg_slot_gen_destroy(g3);
    CHECK_EQ(FV.reserves, 1);
}

TEST(reservations_grow_and_teardown_frees_them)
{
    setup();
    sg_slots_set_reservation_size(8 * FV_G);
    size_t sizes[2] = { 3 * FV_G, 3 * FV_G };
    sg_slot_gen *g1 = NULL, *g2 = NULL, *g3 = NULL;
    CHECK_EQ(sg_slot_gen_create(FV_CTX, 0, sizes, 1, &g1), 0);
    CHECK_EQ(sg_slot_gen_create(FV_CTX, 0, sizes, 2, &g2), 0);   /* 6 granules: no room left */
    CHECK_EQ(FV.reserves, 2);
    size_t huge = 20 * FV_G;
    CHECK_EQ(sg_slot_gen_create(FV_CTX, 0, &huge, 1, &g3), 0);   /* a reservation of its own */
    CHECK_EQ(FV.reserves, 3);
    sg_slot_bind a = BIND2;
    CHECK_EQ(sg_slot_gen_bind(g1, &a, 0), 0);
    CHECK_EQ(launch(g1, STREAM_A), 0);
    fv_complete_all();                         /* the driver synchronized the context */
    int syncs = FV.ev_syncs + FV.ctx_syncs, queries = FV.queries, evd = FV.ev_destroys;
    sg_ctx_teardown(FV_CTX);
    CHECK_EQ(FV.addr_frees, 3);
    CHECK_EQ(FV.live_maps, 0);
    CHECK_EQ(FV.ev_syncs + FV.ctx_syncs, syncs);   /* no event call on a gone context */
    CHECK_EQ(FV.queries, queries);
    CHECK_EQ(FV.ev_destroys, evd);
    CHECK_EQ(FV.violations, 0);
    /* the caller's pointers stay valid, dead */
    CHECK_EQ(sg_slot_gen_bind(g1, &a, 1), -1);
    CHECK_EQ(sg_slot_gen_launched(g1, STREAM_A, 0), -1);
    CHECK(sg_slot_gen_idle(g1));
    CHECK(!sg_slot_gen_matches(g1, &a));
    unsigned long before = driver_calls();
    sg_slot_gen_destroy(g1);
    sg_slot_gen_destroy(g2);
    sg_slot_gen_destroy(g3);
    CHECK_EQ(driver_calls(), before);
    /* a new generation on the same context handle starts afresh */
    sg_slot_gen *g4 = NULL;
    CHECK_EQ(sg_slot_gen_create(FV_CTX, 0, sizes, 1, &g4), 0);
    CHECK_EQ(FV.reserves, 4);
    sg_slot_gen_destroy(g4);
    sg_ctx_teardown(FV_CTX);
    CHECK_EQ(FV.addr_frees, 4);
}

TEST(rotation_steady_state_no_vmm)
{
    /* two generations, one per buffer set, used alternately: after the
     * first binds no VMM call and no wait at all */
    setup();
    sg_slot_gen *ga = gen2(), *gb = gen2();
    sg_slot_bind a[2] = { BIND1, BIND2 }, b[2] = { BIND1, BIND3 };
    for (int step = 0; step < 10; step++) {
        sg_slot_gen *g = step % 2 ? gb : ga;
        CHECK_EQ(sg_slot_gen_bind(g, step % 2 ? b : a, 0), 0);
        CHECK_EQ(launch(g, STREAM_A), 0);
        if (step == 1) {
            sg_slot_stats st = sg_slots_stats();
            CHECK_EQ(st.maps, 6);
        }
    }
    sg_slot_stats st = sg_slots_stats();
    CHECK_EQ(st.maps, 6);
    CHECK_EQ(st.unmaps, 0);
    CHECK_EQ(st.set_access, 4);
    CHECK_EQ(st.waits, 0);
    CHECK_EQ(st.binds_reused, 16);
    CHECK(st.map_ns > 0);                      /* timed */
    fv_complete_all();
    sg_slot_gen_destroy(ga);
    sg_slot_gen_destroy(gb);
    check_balanced();
}

/* --------------------------------------------------- through core/memory.c */

static CUresult fwd(const void *args) { (void)args; return CUDA_ERROR_NOT_SUPPORTED; }

static CUresult mem_alloc(CUdeviceptr *p, size_t n)
{
    sg_call c = { .kind = SG_CALL_ALLOC, .u.alloc = { .out = p, .bytes = n }, .forward = fwd };
    c.args = &c;
    return sg_mem_call(&c);
}

static CUresult mem_free(CUdeviceptr p)
{
    sg_call c = { .kind = SG_CALL_FREE, .u.free = { .ptr = p }, .forward = fwd };
    c.args = &c;
    return sg_mem_call(&c);
}

TEST(binds_allocations_memory_placed)
{
    setup();
    sg_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.policy = SG_POLICY_SKIP_PROFILED;
    cfg.place_max_bytes = SIZE_MAX;
    sg_caps caps = sg_policy_caps(&cfg);
    caps.own_handles_min = 1 << 20;
    sg_mem_init(&caps);
    CUdeviceptr big, small;
    CHECK_CU(mem_alloc(&big, 3 << 20), CUDA_SUCCESS);
    CHECK_CU(mem_alloc(&small, 1000), CUDA_SUCCESS);
    sg_alloc_info ib, is;
    CHECK(sg_mem_find(big, &ib) && ib.own_handles);
    CHECK(sg_mem_find(small, &is) && !is.own_handles);
    sg_mem_handle h[4];
    CHECK_EQ(sg_mem_block_handles(big, h, 4), 2);          /* a handle per granule */
    size_t sizes[2] = { 3 << 20, 1000 };
    sg_slot_gen *g = NULL;
    CHECK_EQ(sg_slot_gen_create(FV_CTX, 0, sizes, 2, &g), 0);
    int maps0 = FV.maps_ok;
    sg_slot_bind want[2] = { { ib.id, big, NULL, 0 }, EMPTY };
    CHECK_EQ(sg_slot_gen_bind(g, want, 0), 0);
    CHECK_EQ(FV.maps_ok, maps0 + 2);                        /* one per handle */
    CHECK_EQ(mapped_at(sg_slot_addr(g, 0)), h[0].handle);   /* the block's own handles, aliased */
    CHECK_EQ(mapped_at(sg_slot_addr(g, 0) + FV_G), h[1].handle);
    CHECK_EQ(mapped_at(big), h[0].handle);                  /* still mapped where it was */
    sg_slot_bind stale[2] = { { ib.id + 100, big, NULL, 0 }, EMPTY };
    CHECK_EQ(sg_slot_gen_bind(g, stale, 0), -1);            /* not the live allocation's id */
    CHECK_EQ(mapped_at(sg_slot_addr(g, 0)), 0);
    sg_slot_bind shared[2] = { EMPTY, { is.id, small, NULL, 0 } };
    CHECK_EQ(sg_slot_gen_bind(g, shared, 0), -1);           /* not own-handle */
    CHECK_EQ(mapped_at(sg_slot_addr(g, 1)), 0);
    /* free and allocate again: same address, new id -> remapped */
    CHECK_EQ(sg_slot_gen_bind(g, want, 0), 0);
    CHECK_CU(mem_free(big), CUDA_SUCCESS);
    CUdeviceptr again;
    CHECK_CU(mem_alloc(&again, 3 << 20), CUDA_SUCCESS);
    sg_alloc_info ia;
    CHECK(sg_mem_find(again, &ia));
    CHECK_EQ(again, big);
    CHECK(ia.id != ib.id);
    sg_slot_bind want2[2] = { { ia.id, again, NULL, 0 }, EMPTY };
    CHECK(!sg_slot_gen_matches(g, want2));
    int unmaps = FV.unmaps_ok;
    CHECK_EQ(sg_slot_gen_bind(g, want2, 0), 0);
    CHECK_EQ(FV.unmaps_ok, unmaps + 2);
    sg_slot_gen_destroy(g);
    sg_mem_reset();
    check_balanced();
    CHECK_EQ(FV.creates, FV.releases);
}

int main(void)
{
    RUN(layout_and_bind);
    RUN(rebind_same_is_free);
    RUN(remap_only_after_launch_completed);
    RUN(bind_waits_for_launch);
    RUN(several_streams_all_waited_for);
    RUN(aba_same_address_other_id_remaps);
    RUN(peers_get_access);
    RUN(relaxed_mode_around_every_call);
    RUN(vmm_failures_leave_slots_empty);
    RUN(map_failure_on_second_handle_unmaps_first);
    RUN(reserve_and_event_failures);
    RUN(unfit_handles_fail);
    RUN(destroy_waits_and_returns_range);
    RUN(reservations_grow_and_teardown_frees_them);
    RUN(rotation_steady_state_no_vmm);
    RUN(binds_allocations_memory_placed);
    sg_slots_reset();
    sg_mem_reset();
    return check_done();
}
