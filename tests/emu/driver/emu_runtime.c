/*
 * emu_runtime.c: cuGetExportTable and the private tables the CUDA runtime
 * (libcudart 13.x, static and shared) asks the driver for.
 *
 * NVIDIA does not document these tables. The protocol facts used here (the
 * UUIDs, which slot does what, the table sizes, the context-local-storage
 * calls, the integrity check's inputs, key and hash) come from two public
 * descriptions:
 *   [Z] ZLUDA, vosen/ZLUDA: dark_api/src/lib.rs (table layouts, the
 *       integrity check) and zluda/src/impl/dark_api.rs, export_table.rs
 *       (what each slot must do);
 *   [F] fake-cuda, 0z5a/fake-cuda (MIT, derived from [Z]):
 *       src/impl/private.cpp (the table sizes the CUDA 13 runtime expects,
 *       the "bootstrap" table).
 * The code is written for this emulator; nothing is copied. Every table,
 * slot and call below was observed being requested or called by the CUDA
 * 13.0 runtime of the toolkit (CUDAEMU_TRACE_RESOLVE=1 logs them); slots
 * the runtime has not been seen to call are "traps": they log the table
 * and slot and return CUDA_ERROR_NOT_SUPPORTED, so a runtime that starts
 * using one fails loudly instead of jumping through a NULL pointer. An
 * unknown UUID is logged with its value and gets CUDA_ERROR_NOT_SUPPORTED.
 *
 * Tables (slot 0 holds the table's size in bytes, except in CLS):
 *   CUDART_INTERFACE  6bd5fb6c-5bf4-e74a-8987-d93912fd9df9, 13 slots [F]:
 *                     [2] primary context of a device, not retained [Z]
 *   TOOLS_TLS         42d85a81-23f6-cb47-8298-f6e78a3aecdc, 4 slots [Z][F]
 *   CALLBACK_HOOKS    a094798c-2e74-2e74-93f2-0800200c0a66, 7 slots [Z]:
 *                     [2], [6] hand out zeroed buffers the runtime keeps
 *                     its tools-callback state in (1024 words, 14 bytes)
 *   CONTEXT_STORAGE   c693336e-1121-df11-a8c3-68f355d89593, 4 slots, no
 *                     size [Z]: [0] put(ctx, key, value, destroy callback),
 *                     [1] delete(ctx, key), [2] get(&value, ctx, key); a NULL
 *                     ctx is the current context; get of a missing key is
 *                     CUDA_ERROR_INVALID_HANDLE [Z]; the callback runs as
 *                     callback(ctx, key, value) when the context is
 *                     destroyed or the primary context reset or released
 *                     for the last time [Z]
 *   CONTEXT_CHECKS    263e8860-7cd2-6143-92f6-bbd5006dfa7e, 4 slots [Z]:
 *                     [2] context check: *flag = 0, *extra = NULL; [3] 0
 *   INTEGRITY_CHECK   d4082055-bde6-704b-8d34-ba123c66e1f2, 3 slots [Z]:
 *                     [1] check(version, unix seconds, u64 out[2])
 *   BOOTSTRAP         f8cff951-2146-8b4e-b9e2-fb469e7c0dd9, 3 slots [F]
 *
 * The integrity check [Z]: for version % 10 == 0 or 1, fixed answers; else
 * HMAC-MD2 (MD2: RFC 1319) keyed with a fixed 16-byte key over a 48-byte
 * record {driver version, version, pid, low 32 bits of pthread_self,
 * CUDART_INTERFACE table address, INTEGRITY_CHECK table address, address of
 * the check function, seconds} followed by, per device, {UUID, PCI domain,
 * bus, device} (28 bytes), all as cuDriverGetVersion, cuDeviceGetUuid_v2
 * and cuDeviceGetAttribute report them. The runtime computes the same hash
 * and refuses to run (cudaErrorSoftwareValidityNotEstablished) if they differ.
 *
 * Locks: cls_lock guards the context-local-storage list. Destroy callbacks
 * run with no lock held (they call back into the driver). The tables and
 * buffers are static; the callback buffers belong to the runtime.
 */
#include "emu_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef const void *emu_slot;

/* ------------------------------------------------------------------ traps */

/* Slots the runtime has not been seen to call. */
static CUresult emu_rt_trap(const char *table, int slot)
{
    emu_log("the CUDA runtime called slot %d of the private table %s, which the emulated driver does not "
            "implement: CUDA_ERROR_NOT_SUPPORTED", slot, table);
    return CUDA_ERROR_NOT_SUPPORTED;
}

#define EMU_RT_TRAP(tbl, n) \
    static CUresult emu_rt_trap_##tbl##_##n(void) { return emu_rt_trap(#tbl, n); }
#define TRAP(tbl, n) ((emu_slot)emu_rt_trap_##tbl##_##n)
#define SIZE(nslots) ((emu_slot)(uintptr_t)((nslots) * sizeof(emu_slot)))

static void emu_rt_trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void emu_rt_trace(const char *fmt, ...)
{
    if (!emu_cfg.trace_resolve) return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    emu_log("runtime: %s", buf);
}

/* ------------------------------------------------------------------ CUDART_INTERFACE */

/* [2]: the device's primary context, created if needed, not retained [Z]. */
static CUresult emu_rt_primary_ctx(CUcontext *pctx, CUdevice dev)
{
    CUresult r = emu_ctx_primary(dev, pctx);
    emu_rt_trace("CUDART_INTERFACE[2] primary context of device %d -> %d", dev, (int)r);
    return r;
}

EMU_RT_TRAP(CUDART_INTERFACE, 1)
EMU_RT_TRAP(CUDART_INTERFACE, 3)
EMU_RT_TRAP(CUDART_INTERFACE, 4)
EMU_RT_TRAP(CUDART_INTERFACE, 5)
EMU_RT_TRAP(CUDART_INTERFACE, 6)
EMU_RT_TRAP(CUDART_INTERFACE, 7)
EMU_RT_TRAP(CUDART_INTERFACE, 8)
EMU_RT_TRAP(CUDART_INTERFACE, 9)
EMU_RT_TRAP(CUDART_INTERFACE, 10)
EMU_RT_TRAP(CUDART_INTERFACE, 11)
EMU_RT_TRAP(CUDART_INTERFACE, 12)

static const emu_slot emu_rt_cudart[13] = {
    SIZE(13), TRAP(CUDART_INTERFACE, 1), (emu_slot)emu_rt_primary_ctx, TRAP(CUDART_INTERFACE, 3),
    TRAP(CUDART_INTERFACE, 4), TRAP(CUDART_INTERFACE, 5), TRAP(CUDART_INTERFACE, 6),
    TRAP(CUDART_INTERFACE, 7), TRAP(CUDART_INTERFACE, 8), TRAP(CUDART_INTERFACE, 9),
    TRAP(CUDART_INTERFACE, 10), TRAP(CUDART_INTERFACE, 11), TRAP(CUDART_INTERFACE, 12),
};

/* ------------------------------------------------------------------ TOOLS_TLS, BOOTSTRAP */

EMU_RT_TRAP(TOOLS_TLS, 1)
EMU_RT_TRAP(TOOLS_TLS, 2)
EMU_RT_TRAP(TOOLS_TLS, 3)
static const emu_slot emu_rt_tools_tls[4] = {
    SIZE(4), TRAP(TOOLS_TLS, 1), TRAP(TOOLS_TLS, 2), TRAP(TOOLS_TLS, 3),
};

EMU_RT_TRAP(BOOTSTRAP, 1)
EMU_RT_TRAP(BOOTSTRAP, 2)
static const emu_slot emu_rt_bootstrap[3] = { SIZE(3), TRAP(BOOTSTRAP, 1), TRAP(BOOTSTRAP, 2) };

/* ------------------------------------------------------------------ CALLBACK_HOOKS */

/* Zeroed storage the runtime reads and writes its tools-callback state in;
 * sizes as [Z] gives them (element counts; both are over-allocated so that
 * either reading of "size" stays in bounds). */
static uint64_t emu_rt_hooks_words[1024];
static unsigned char emu_rt_hooks_bytes[64];

static void emu_rt_hooks_buffer1(void **ptr, size_t *size)
{
    emu_rt_trace("CALLBACK_HOOKS[2] buffer");
    *ptr = emu_rt_hooks_words;
    *size = 1024;
}

static void emu_rt_hooks_buffer2(void **ptr, size_t *size)
{
    emu_rt_trace("CALLBACK_HOOKS[6] buffer");
    *ptr = emu_rt_hooks_bytes;
    *size = 14;
}

EMU_RT_TRAP(CALLBACK_HOOKS, 1)
EMU_RT_TRAP(CALLBACK_HOOKS, 3)
EMU_RT_TRAP(CALLBACK_HOOKS, 4)
EMU_RT_TRAP(CALLBACK_HOOKS, 5)
static const emu_slot emu_rt_hooks[7] = {
    SIZE(7), TRAP(CALLBACK_HOOKS, 1), (emu_slot)emu_rt_hooks_buffer1, TRAP(CALLBACK_HOOKS, 3),
    TRAP(CALLBACK_HOOKS, 4), TRAP(CALLBACK_HOOKS, 5), (emu_slot)emu_rt_hooks_buffer2,
};

/* ------------------------------------------------------------------ CONTEXT_STORAGE */

typedef void (*emu_cls_dtor)(CUcontext ctx, void *key, void *value);
typedef struct emu_cls {
    CUcontext ctx;
    void *key, *value;
    emu_cls_dtor dtor;
    struct emu_cls *next;
} emu_cls;
static emu_cls *cls_list;                                   /* guarded by cls_lock */
static pthread_mutex_t cls_lock = PTHREAD_MUTEX_INITIALIZER;

static emu_cls **emu_cls_find(CUcontext ctx, void *key)
{
    emu_cls **p = &cls_list;
    while (*p && ((*p)->ctx != ctx || (*p)->key != key)) p = &(*p)->next;
    return p;
}

static CUresult emu_cls_put(CUcontext ctx, void *key, void *value, emu_cls_dtor dtor)
{
    CUresult r = emu_ctx_resolve(&ctx);
    emu_rt_trace("CONTEXT_STORAGE[0] put ctx %p key %p value %p -> %d", (void *)ctx, key, value, (int)r);
    if (r != CUDA_SUCCESS) return r;
    pthread_mutex_lock(&cls_lock);
    emu_cls **p = emu_cls_find(ctx, key);
    if (!*p && (*p = calloc(1, sizeof **p))) {
        (*p)->ctx = ctx;
        (*p)->key = key;
    }
    if (*p) {
        (*p)->value = value;
        (*p)->dtor = dtor;
    }
    int ok = *p != NULL;
    pthread_mutex_unlock(&cls_lock);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* Removes the entry without calling its destroy callback. */
static CUresult emu_cls_delete(CUcontext ctx, void *key)
{
    CUresult r = emu_ctx_resolve(&ctx);
    emu_rt_trace("CONTEXT_STORAGE[1] delete ctx %p key %p -> %d", (void *)ctx, key, (int)r);
    if (r != CUDA_SUCCESS) return r;
    pthread_mutex_lock(&cls_lock);
    emu_cls **p = emu_cls_find(ctx, key), *e = *p;
    if (e) *p = e->next;
    pthread_mutex_unlock(&cls_lock);
    free(e);
    return CUDA_SUCCESS;
}

static CUresult emu_cls_get(void **value, CUcontext ctx, void *key)
{
    if (!value) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = emu_ctx_resolve(&ctx);
    if (r == CUDA_SUCCESS) {
        pthread_mutex_lock(&cls_lock);
        emu_cls *e = *emu_cls_find(ctx, key);
        if (e) *value = e->value;
        else r = CUDA_ERROR_INVALID_HANDLE;
        pthread_mutex_unlock(&cls_lock);
    }
    emu_rt_trace("CONTEXT_STORAGE[2] get ctx %p key %p -> %d", (void *)ctx, key, (int)r);
    return r;
}

void emu_cls_ctx_destroyed(CUcontext ctx)
{
    emu_cls *gone = NULL;
    pthread_mutex_lock(&cls_lock);
    for (emu_cls **p = &cls_list; *p;) {
        emu_cls *e = *p;
        if (e->ctx != ctx) { p = &e->next; continue; }
        *p = e->next;
        e->next = gone;
        gone = e;
    }
    pthread_mutex_unlock(&cls_lock);
    /* Newest first: the list is in put order and `gone` reverses it. */
    while (gone) {
        emu_cls *e = gone;
        gone = e->next;
        emu_rt_trace("CONTEXT_STORAGE destroy callback ctx %p key %p", (void *)ctx, e->key);
        if (e->dtor) e->dtor(ctx, e->key, e->value);
        free(e);
    }
}

static const emu_slot emu_rt_cls[4] = {
    (emu_slot)emu_cls_put, (emu_slot)emu_cls_delete, (emu_slot)emu_cls_get, NULL,
};

/* ------------------------------------------------------------------ CONTEXT_CHECKS */

/* [2]: [Z] only ever saw *flag = 0 and *extra = NULL. */
static CUresult emu_rt_context_check(CUcontext ctx, uint32_t *flag, const void **extra)
{
    emu_rt_trace("CONTEXT_CHECKS[2] ctx %p", (void *)ctx);
    if (flag) *flag = 0;
    if (extra) *extra = NULL;
    return CUDA_SUCCESS;
}

/* [3]: returns 0 [Z]. */
static uint32_t emu_rt_check3(void)
{
    emu_rt_trace("CONTEXT_CHECKS[3]");
    return 0;
}

EMU_RT_TRAP(CONTEXT_CHECKS, 1)
static const emu_slot emu_rt_checks[4] = {
    SIZE(4), TRAP(CONTEXT_CHECKS, 1), (emu_slot)emu_rt_context_check, (emu_slot)emu_rt_check3,
};

/* ------------------------------------------------------------------ INTEGRITY_CHECK */

/* MD2 (RFC 1319): the S table is the RFC's "PI_SUBST". */
static const unsigned char md2_s[256] = {
    41, 46, 67, 201, 162, 216, 124, 1, 61, 54, 84, 161, 236, 240, 6, 19, 98, 167, 5, 243, 192, 199, 115, 140,
    152, 147, 43, 217, 188, 76, 130, 202, 30, 155, 87, 60, 253, 212, 224, 22, 103, 66, 111, 24, 138, 23, 229, 18,
    190, 78, 196, 214, 218, 158, 222, 73, 160, 251, 245, 142, 187, 47, 238, 122, 169, 104, 121, 145, 21, 178, 7, 63,
    148, 194, 16, 137, 11, 34, 95, 33, 128, 127, 93, 154, 90, 144, 50, 39, 53, 62, 204, 231, 191, 247, 151, 3,
    255, 25, 48, 179, 72, 165, 181, 209, 215, 94, 146, 42, 172, 86, 170, 198, 79, 184, 56, 210, 150, 164, 125, 182,
    118, 252, 107, 226, 156, 116, 4, 241, 69, 157, 112, 89, 100, 113, 135, 32, 134, 91, 207, 101, 230, 45, 168, 2,
    27, 96, 37, 173, 174, 176, 185, 246, 28, 70, 97, 105, 52, 64, 126, 15, 85, 71, 163, 35, 221, 81, 175, 58,
    195, 92, 249, 206, 186, 197, 234, 38, 44, 83, 13, 110, 133, 40, 132, 9, 211, 223, 205, 244, 65, 129, 77, 82,
    106, 220, 55, 200, 108, 193, 171, 250, 36, 225, 123, 8, 12, 189, 177, 74, 120, 136, 149, 139, 227, 99, 232, 109,
    233, 203, 213, 254, 59, 0, 29, 57, 242, 239, 183, 14, 102, 88, 208, 228, 166, 119, 114, 248, 235, 117, 75, 10,
    49, 68, 80, 180, 143, 237, 31, 26, 219, 153, 141, 51, 159, 17, 131, 20,
};

typedef struct emu_md2 {
    unsigned char x[48], c[16], block[16];
    unsigned n;                       /* bytes in block */
} emu_md2;

static void emu_md2_block(emu_md2 *m)
{
    for (int j = 0; j < 16; j++) {
        m->x[16 + j] = m->block[j];
        m->x[32 + j] = m->block[j] ^ m->x[j];
    }
    unsigned t = 0;
    for (int j = 0; j < 18; j++) {
        for (int k = 0; k < 48; k++) t = m->x[k] ^= md2_s[t];
        t = (t + (unsigned)j) & 0xff;
    }
    unsigned char l = m->c[15];
    for (int j = 0; j < 16; j++) l = m->c[j] ^= md2_s[m->block[j] ^ l];
}

/* Adds n bytes, each XORed with mask (HMAC's pads). */
static void emu_md2_add(emu_md2 *m, const void *data, size_t n, unsigned char mask)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        m->block[m->n++] = p[i] ^ mask;
        if (m->n == 16) {
            emu_md2_block(m);
            m->n = 0;
        }
    }
}

static void emu_md2_end(emu_md2 *m, unsigned char out[16])
{
    unsigned char pad[16], sum[16];
    unsigned k = 16 - m->n;
    memset(pad, (int)k, sizeof pad);
    emu_md2_add(m, pad, k, 0);
    memcpy(sum, m->c, sizeof sum);
    emu_md2_add(m, sum, sizeof sum, 0);
    memcpy(out, m->x, 16);
}

static const emu_slot emu_rt_integrity[3];

static CUresult emu_rt_integrity_check(uint32_t version, uint64_t seconds, uint64_t out[2])
{
    emu_rt_trace("INTEGRITY_CHECK[1] version %u", version);
    if (!out) return CUDA_ERROR_INVALID_VALUE;
    if (version % 10 < 2) {           /* fixed answers [Z] */
        out[0] = version % 10 == 0 ? 0x3341181c03cb675cull : 0x1841181c03cb675cull;
        out[1] = 0x8ed383aa1f4cd1e8ull;
        return CUDA_SUCCESS;
    }
    static const unsigned char key[16] = {
        0x14, 0x6a, 0xdd, 0xae, 0x53, 0xa9, 0xa7, 0x52, 0xaa, 0x08, 0x41, 0x36, 0x0b, 0xf5, 0x5a, 0x9f,
    };
    struct {
        uint32_t driver_version, version, pid, thread;
        const void *cudart_table, *integrity_table, *check_fn;
        uint64_t seconds;
    } rec = {
        EMU_DRIVER_VERSION, version, (uint32_t)getpid(), (uint32_t)(uintptr_t)pthread_self(),
        emu_rt_cudart, emu_rt_integrity, (const void *)emu_rt_integrity_check, seconds,
    };
    _Static_assert(sizeof rec == 48, "integrity record layout");
    emu_md2 m = { 0 };
    emu_md2_add(&m, key, sizeof key, 0x36);
    emu_md2_add(&m, &rec, sizeof rec, 0);
    for (int d = 0; d < emu_device_count(); d++) {
        struct { CUuuid uuid; int32_t domain, bus, device; } dev;
        _Static_assert(sizeof dev == 28, "integrity device layout");
        emu_device_uuid(d, &dev.uuid);
        dev.domain = emu_device_attribute(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, d);
        dev.bus = emu_device_attribute(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, d);
        dev.device = emu_device_attribute(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, d);
        emu_md2_add(&m, &dev, sizeof dev, 0);
    }
    unsigned char inner[16], outer[16];
    emu_md2_end(&m, inner);
    memset(&m, 0, sizeof m);
    emu_md2_add(&m, key, sizeof key, 0x5c);
    emu_md2_add(&m, inner, sizeof inner, 0);
    emu_md2_end(&m, outer);
    memcpy(out, outer, sizeof outer);
    return CUDA_SUCCESS;
}

EMU_RT_TRAP(INTEGRITY_CHECK, 2)
static const emu_slot emu_rt_integrity[3] = {
    SIZE(3), (emu_slot)emu_rt_integrity_check, TRAP(INTEGRITY_CHECK, 2),
};

/* ------------------------------------------------------------------ cuGetExportTable */

static const struct emu_rt_table {
    unsigned char uuid[16];
    const char *name;
    const emu_slot *table;
} emu_rt_tables[] = {
    { { 0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a, 0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d, 0xf9 },
      "CUDART_INTERFACE", emu_rt_cudart },
    { { 0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47, 0x82, 0x98, 0xf6, 0xe7, 0x8a, 0x3a, 0xec, 0xdc },
      "TOOLS_TLS", emu_rt_tools_tls },
    { { 0xa0, 0x94, 0x79, 0x8c, 0x2e, 0x74, 0x2e, 0x74, 0x93, 0xf2, 0x08, 0x00, 0x20, 0x0c, 0x0a, 0x66 },
      "CALLBACK_HOOKS", emu_rt_hooks },
    { { 0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11, 0xa8, 0xc3, 0x68, 0xf3, 0x55, 0xd8, 0x95, 0x93 },
      "CONTEXT_STORAGE", emu_rt_cls },
    { { 0x26, 0x3e, 0x88, 0x60, 0x7c, 0xd2, 0x61, 0x43, 0x92, 0xf6, 0xbb, 0xd5, 0x00, 0x6d, 0xfa, 0x7e },
      "CONTEXT_CHECKS", emu_rt_checks },
    { { 0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b, 0x8d, 0x34, 0xba, 0x12, 0x3c, 0x66, 0xe1, 0xf2 },
      "INTEGRITY_CHECK", emu_rt_integrity },
    { { 0xf8, 0xcf, 0xf9, 0x51, 0x21, 0x46, 0x8b, 0x4e, 0xb9, 0xe2, 0xfb, 0x46, 0x9e, 0x7c, 0x0d, 0xd9 },
      "BOOTSTRAP", emu_rt_bootstrap },
};

/* "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" from the 16 bytes in order. */
static void emu_rt_uuid_str(const CUuuid *id, char out[37])
{
    int at = 0;
    for (int i = 0; i < 16; i++) {
        at += snprintf(out + at, (size_t)(37 - at), "%02x", (unsigned char)id->bytes[i]);
        if (i == 3 || i == 5 || i == 7 || i == 9) out[at++] = '-';
    }
    out[at] = 0;
}

EMU_EXPORT CUresult cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)
{
    EMU_ENTRY();
    if (!ppExportTable || !pExportTableId) return CUDA_ERROR_INVALID_VALUE;
    char id[37];
    emu_rt_uuid_str(pExportTableId, id);
    for (size_t i = 0; i < sizeof emu_rt_tables / sizeof emu_rt_tables[0]; i++) {
        if (memcmp(emu_rt_tables[i].uuid, pExportTableId->bytes, 16) != 0) continue;
        emu_rt_trace("cuGetExportTable(%s) -> %s", id, emu_rt_tables[i].name);
        *ppExportTable = emu_rt_tables[i].table;
        return CUDA_SUCCESS;
    }
    emu_log("cuGetExportTable: unknown private table %s: not emulated, CUDA_ERROR_NOT_SUPPORTED", id);
    *ppExportTable = NULL;
    return CUDA_ERROR_NOT_SUPPORTED;
}
