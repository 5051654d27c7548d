/*
 * emu_resolve.c: cuGetProcAddress_v2 and the legacy cuGetProcAddress.
 *
 * The table of (base name, version, ELF name, per-thread flavour) rows is
 * generated from the toolkit's cudaTypedefs.h (gen_proctable.sh). A lookup
 * follows the documented semantics: the newest version not above the one
 * asked for; with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM the per-thread
 * (_ptsz/_ptds) variant where one exists, else the legacy one; an unknown name
 * or an entry the emulator does not implement gives CUDA_SUCCESS, a NULL
 * pointer and CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND; a name whose versions are
 * all newer gives VERSION_NOT_SUFFICIENT; a version newer than the driver's
 * gives CUDA_ERROR_INVALID_VALUE. Works before cuInit, the empty name included.
 *
 * Addresses come from this library's own dynamic symbol table, read once
 * through dl_iterate_phdr, never from dlsym: an interposer that hooks dlsym
 * must not be able to change what the driver itself hands out.
 *
 * Locks: the export table is built once under pthread_once and read-only
 * afterwards.
 */
#include "emu_internal.h"

#include <elf.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>

#include <uthash.h>

typedef struct emu_proc_row {
    const char *base;
    int version;
    const char *elf;
    int per_thread;
} emu_proc_row;

static const emu_proc_row emu_proc_rows[] = {
#define X(base, version, elf, pt) { base, version, elf, pt },
#include "emu_proctable.inc"
#undef X
};

/* ---------------------------------------------------------------- own exports */

typedef struct emu_export { const char *name; void *addr; UT_hash_handle hh; } emu_export;
static emu_export *emu_exports;
static pthread_once_t emu_exports_once = PTHREAD_ONCE_INIT;

/* Number of symbols in a GNU hash table: the highest chain end. */
static size_t emu_gnu_hash_count(const uint32_t *h)
{
    uint32_t nbuckets = h[0], symoffset = h[1], bloom_size = h[2];
    const uint32_t *buckets = h + 4 + bloom_size * (sizeof(ElfW(Addr)) / 4);
    const uint32_t *chain = buckets + nbuckets;
    uint32_t last = 0;
    for (uint32_t i = 0; i < nbuckets; i++)
        if (buckets[i] > last) last = buckets[i];
    if (last < symoffset) return symoffset;
    while (!(chain[last - symoffset] & 1)) last++;
    return last + 1;
}

static int emu_collect(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    const ElfW(Addr) me = (ElfW(Addr))data;
    int mine = 0;
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        ElfW(Addr) lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && me >= lo && me < lo + ph->p_memsz) mine = 1;
        if (ph->p_type == PT_DYNAMIC) dyn = (const ElfW(Dyn) *)(info->dlpi_addr + ph->p_vaddr);
    }
    if (!mine || !dyn) return 0;
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    size_t count = 0;
    for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++) {
        /* glibc has already relocated these entries to absolute addresses. */
        if (d->d_tag == DT_SYMTAB) symtab = (const ElfW(Sym) *)d->d_un.d_ptr;
        else if (d->d_tag == DT_STRTAB) strtab = (const char *)d->d_un.d_ptr;
        else if (d->d_tag == DT_HASH) count = ((const uint32_t *)d->d_un.d_ptr)[1];
        else if (d->d_tag == DT_GNU_HASH && !count) count = emu_gnu_hash_count((const uint32_t *)d->d_un.d_ptr);
    }
    if (!symtab || !strtab) return 1;
    for (size_t i = 0; i < count; i++) {
        const ElfW(Sym) *s = &symtab[i];
        if (ELF64_ST_TYPE(s->st_info) != STT_FUNC || s->st_shndx == SHN_UNDEF) continue;
        if (ELF64_ST_BIND(s->st_info) != STB_GLOBAL) continue;
        const char *name = strtab + s->st_name;
        if (strncmp(name, "cu", 2) != 0) continue;
        emu_export *e = calloc(1, sizeof *e);
        if (!e) abort();
        e->name = name;
        e->addr = (void *)(info->dlpi_addr + s->st_value);
        HASH_ADD_KEYPTR(hh, emu_exports, e->name, strlen(e->name), e);
    }
    return 1;
}

static void emu_exports_build(void) { dl_iterate_phdr(emu_collect, (void *)(uintptr_t)&emu_collect); }

static void *emu_export_addr(const char *elf)
{
    pthread_once(&emu_exports_once, emu_exports_build);
    emu_export *e;
    HASH_FIND_STR(emu_exports, elf, e);
    return e ? e->addr : NULL;
}

/* ---------------------------------------------------------------- lookup */

static CUresult emu_proc_lookup(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                CUdriverProcAddressQueryResult *status)
{
    if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
    if (version > EMU_DRIVER_VERSION) return CUDA_ERROR_INVALID_VALUE;
    if (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
        return CUDA_ERROR_INVALID_VALUE;
    /* A driver is not compiled per-thread, so DEFAULT means LEGACY here. */
    int want_pt = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    const emu_proc_row *plain = NULL, *pt = NULL;
    int known = 0;
    for (size_t i = 0; i < sizeof emu_proc_rows / sizeof emu_proc_rows[0]; i++) {
        const emu_proc_row *r = &emu_proc_rows[i];
        if (strcmp(r->base, symbol) != 0) continue;
        known = 1;
        if (r->version > version) continue;
        const emu_proc_row **best = r->per_thread ? &pt : &plain;
        if (!*best || r->version > (*best)->version) *best = r;
    }
    const emu_proc_row *pick = plain;
    if (want_pt && pt && (!plain || pt->version >= plain->version)) pick = pt;
    *pfn = pick ? emu_export_addr(pick->elf) : NULL;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
    if (!*pfn) st = known && !pick ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (status) *status = st;
    if (emu_cfg.trace_resolve)
        emu_log("runtime: cuGetProcAddress(\"%s\", %d, flags %llu) -> %s", symbol, version,
                (unsigned long long)flags, *pfn ? pick->elf : st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                ? "VERSION_NOT_SUFFICIENT" : "SYMBOL_NOT_FOUND");
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                        CUdriverProcAddressQueryResult *symbolStatus)
{
    EMU_ENTRY();
    return emu_proc_lookup(symbol, pfn, cudaVersion, flags, symbolStatus);
}

EMU_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    EMU_ENTRY();
    return emu_proc_lookup(symbol, pfn, cudaVersion, flags, NULL);
}
