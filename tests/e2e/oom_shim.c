/*
 * tests/e2e/oom_shim.c: makes the host allocations of libstablegraph.so fail
 * (round 17, tests/e2e/test_host_oom.sh). Preloaded after the library:
 *   LD_PRELOAD="libstablegraph.so liboom_shim.so" LD_BIND_NOW=1 program
 *
 * How: its constructor finds libstablegraph.so (dl_iterate_phdr), walks the
 * library's PLT and GOT relocations and points every slot of malloc, calloc,
 * realloc, reallocarray, strdup, strndup, posix_memalign, aligned_alloc,
 * memalign, mmap and mremap at a wrapper here. Only the library's own calls
 * go through those slots, so only its allocations are counted and failed:
 * the program's, the C library's (inside fopen, pthread_create, ...) and the
 * emulated driver's never are. Nothing is exported, so a sanitizer's malloc
 * (preloaded or linked first) stays everyone's malloc, the library's
 * included: the wrapper calls whatever the slot held (LD_BIND_NOW=1 makes
 * the loader fill every slot before any constructor runs; a slot still
 * pointing into the library's own PLT is refused with a message).
 * Thread-safe (one atomic counter); allocates nothing itself; no dlsym.
 *
 * Environment:
 *   OOM_LIB=NAME      the file name of the library (libstablegraph.so)
 *   OOM_FAIL=N        the Nth allocation of the library fails (1-based)
 *   OOM_FAIL=N+       the Nth and every later one fails
 *   OOM_FAIL=N%K      the Nth and every Kth after it fail (N, N+K, N+2K...):
 *                     K runs, N = 1..K, fail every allocation once
 *   OOM_SEED=S:P      each fails with probability P/1000, a hash of S and
 *                     its number deciding (the same run fails the same ones)
 *   OOM_COUNT=FILE    at exit, append "allocs N failed K patched S pid P\n"
 *                     there (N counted allocations, K failed, S slots
 *                     patched): one line per process that exits normally
 *                     (a wrapper such as timeout(1) writes its own)
 *   OOM_TRACE=1       one stderr line per failure: its number, the function
 *                     and the caller's offset in the library (addr2line -e)
 * An allocation is any call through a patched slot, except realloc to size
 * 0 (a free), mremap that shrinks and an mmap that is not anonymous. A
 * failure returns what the C library returns when out of memory (NULL,
 * MAP_FAILED or ENOMEM) with errno ENOMEM; realloc leaves the block as it was.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__x86_64__)
#define OOM_R_JUMP R_X86_64_JUMP_SLOT
#define OOM_R_GLOB R_X86_64_GLOB_DAT
#elif defined(__aarch64__)
#define OOM_R_JUMP R_AARCH64_JUMP_SLOT
#define OOM_R_GLOB R_AARCH64_GLOB_DAT
#else
#error "oom_shim: only x86-64 and aarch64 relocations are known"
#endif

typedef void *(*malloc_fn)(size_t);
typedef void *(*calloc_fn)(size_t, size_t);
typedef void *(*realloc_fn)(void *, size_t);
typedef void *(*reallocarray_fn)(void *, size_t, size_t);
typedef char *(*strdup_fn)(const char *);
typedef char *(*strndup_fn)(const char *, size_t);
typedef int (*posix_memalign_fn)(void **, size_t, size_t);
typedef void *(*aligned_alloc_fn)(size_t, size_t);
typedef void *(*mmap_fn)(void *, size_t, int, int, int, off_t);
typedef void *(*mremap_fn)(void *, size_t, size_t, int, ...);

/* What each patched slot held: the real functions. */
static malloc_fn real_malloc;
static calloc_fn real_calloc;
static realloc_fn real_realloc;
static reallocarray_fn real_reallocarray;
static strdup_fn real_strdup;
static strndup_fn real_strndup;
static posix_memalign_fn real_posix_memalign;
static aligned_alloc_fn real_aligned_alloc, real_memalign;
static mmap_fn real_mmap;
static mremap_fn real_mremap;

enum { MODE_NONE, MODE_ONE, MODE_FROM, MODE_STRIDE, MODE_SEED };
static int mode, trace;
static unsigned long fail_n, stride, seed, per_mille;
static unsigned long n_allocs, n_failed, n_patched;   /* atomics */
static uintptr_t lib_base;

static void say(const char *fmt, ...)
{
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (len > (int)sizeof line - 1) len = sizeof line - 1;
    ssize_t w = write(2, line, (size_t)len);
    (void)w;
}

/* splitmix64: the seeded decision for allocation n. */
static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Counts one allocation; 1 if it must fail (errno is then ENOMEM). */
static int fail_now(const char *what, void *caller)
{
    unsigned long n = __atomic_add_fetch(&n_allocs, 1, __ATOMIC_RELAXED);
    int f = (mode == MODE_ONE && n == fail_n) || (mode == MODE_FROM && n >= fail_n) ||
            (mode == MODE_STRIDE && n >= fail_n && (n - fail_n) % stride == 0) ||
            (mode == MODE_SEED && mix(seed * 0x100000001b3ull ^ n) % 1000 < per_mille);
    if (!f) return 0;
    __atomic_add_fetch(&n_failed, 1, __ATOMIC_RELAXED);
    if (trace) say("oom_shim: failing allocation %lu (%s from +0x%lx)\n", n, what,
                   (unsigned long)((uintptr_t)caller - lib_base));
    errno = ENOMEM;
    return 1;
}
#define FAIL(what) fail_now(what, __builtin_return_address(0))

static void *oom_malloc(size_t n) { return FAIL("malloc") ? NULL : real_malloc(n); }
static void *oom_calloc(size_t n, size_t m) { return FAIL("calloc") ? NULL : real_calloc(n, m); }
static void *oom_realloc(void *p, size_t n)
{
    return n && FAIL("realloc") ? NULL : real_realloc(p, n);
}
static void *oom_reallocarray(void *p, size_t n, size_t m)
{
    return n && m && FAIL("reallocarray") ? NULL : real_reallocarray(p, n, m);
}
static char *oom_strdup(const char *s) { return FAIL("strdup") ? NULL : real_strdup(s); }
static char *oom_strndup(const char *s, size_t n) { return FAIL("strndup") ? NULL : real_strndup(s, n); }
static int oom_posix_memalign(void **p, size_t a, size_t n)
{
    return FAIL("posix_memalign") ? ENOMEM : real_posix_memalign(p, a, n);
}
static void *oom_aligned_alloc(size_t a, size_t n)
{
    return FAIL("aligned_alloc") ? NULL : real_aligned_alloc(a, n);
}
static void *oom_memalign(size_t a, size_t n) { return FAIL("memalign") ? NULL : real_memalign(a, n); }
static void *oom_mmap(void *a, size_t n, int prot, int flags, int fd, off_t off)
{
    return (flags & MAP_ANONYMOUS) && FAIL("mmap") ? MAP_FAILED : real_mmap(a, n, prot, flags, fd, off);
}
static void *oom_mremap(void *p, size_t old, size_t n, int flags, ...)
{
    void *to = NULL;
    if (flags & MREMAP_FIXED) {
        va_list ap;
        va_start(ap, flags);
        to = va_arg(ap, void *);
        va_end(ap);
    }
    if (n > old && FAIL("mremap")) return MAP_FAILED;
    return real_mremap(p, old, n, flags, to);
}

/* One patchable name: its wrapper and where its real function goes. */
typedef struct hook {
    const char *name;
    void *wrapper;
    void **real;
} hook;
#define HOOK(n) { #n, (void *)oom_##n, (void **)&real_##n }
static const hook hooks[] = {
    HOOK(malloc), HOOK(calloc), HOOK(realloc), HOOK(reallocarray), HOOK(strdup), HOOK(strndup),
    HOOK(posix_memalign), HOOK(aligned_alloc), HOOK(memalign), HOOK(mmap), HOOK(mremap),
};

typedef struct found {
    const char *want;
    int done;
} found;

/* d_ptr of a loaded object's dynamic section: glibc relocates it in place,
 * other loaders may not. */
static uintptr_t dyn_addr(uintptr_t base, uintptr_t v) { return v < base ? v + base : v; }

/* Points the slot at `off` of the library at its wrapper. */
static void patch_slot(const struct dl_phdr_info *info, ElfW(Addr) off, const char *name)
{
    void **slot = (void **)(info->dlpi_addr + off);
    for (size_t i = 0; i < sizeof hooks / sizeof hooks[0]; i++) {
        if (strcmp(name, hooks[i].name) != 0) continue;
        void *cur = *slot;
        if (cur == hooks[i].wrapper) return;
        uintptr_t lo = ~(uintptr_t)0, hi = 0;
        for (int k = 0; k < info->dlpi_phnum; k++) {
            const ElfW(Phdr) *ph = &info->dlpi_phdr[k];
            if (ph->p_type != PT_LOAD) continue;
            if (info->dlpi_addr + ph->p_vaddr < lo) lo = info->dlpi_addr + ph->p_vaddr;
            if (info->dlpi_addr + ph->p_vaddr + ph->p_memsz > hi) hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
        }
        if ((uintptr_t)cur >= lo && (uintptr_t)cur < hi) {
            say("oom_shim: %s of %s is not bound yet: run with LD_BIND_NOW=1\n", name, info->dlpi_name);
            _exit(97);
        }
        uintptr_t page = (uintptr_t)slot & ~(uintptr_t)(sysconf(_SC_PAGESIZE) - 1);
        if (mprotect((void *)page, (uintptr_t)(slot + 1) - page, PROT_READ | PROT_WRITE) != 0) {
            say("oom_shim: mprotect of the GOT failed (%d)\n", errno);
            _exit(97);
        }
        if (*hooks[i].real && *hooks[i].real != cur) {
            say("oom_shim: two slots of %s hold different functions\n", name);
            _exit(97);
        }
        *hooks[i].real = cur;
        *slot = hooks[i].wrapper;
        n_patched++;
        return;
    }
}

static void patch_relocs(const struct dl_phdr_info *info, const ElfW(Rela) *r, size_t bytes,
                         const ElfW(Sym) *sym, const char *str)
{
    for (size_t i = 0; r && i < bytes / sizeof *r; i++) {
        unsigned long t = ELF64_R_TYPE(r[i].r_info);
        if (t != OOM_R_JUMP && t != OOM_R_GLOB) continue;
        patch_slot(info, r[i].r_offset, str + sym[ELF64_R_SYM(r[i].r_info)].st_name);
    }
}

static int visit(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    found *f = arg;
    const char *slash = strrchr(info->dlpi_name, '/');
    if (strcmp(slash ? slash + 1 : info->dlpi_name, f->want) != 0) return 0;
    const ElfW(Dyn) *dyn = NULL;
    for (int k = 0; k < info->dlpi_phnum; k++)
        if (info->dlpi_phdr[k].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[k].p_vaddr);
    if (!dyn) return 0;
    uintptr_t b = info->dlpi_addr, symtab = 0, strtab = 0, jmprel = 0, rela = 0;
    size_t pltsz = 0, relasz = 0;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        switch (dyn->d_tag) {
        case DT_SYMTAB: symtab = dyn_addr(b, dyn->d_un.d_ptr); break;
        case DT_STRTAB: strtab = dyn_addr(b, dyn->d_un.d_ptr); break;
        case DT_JMPREL: jmprel = dyn_addr(b, dyn->d_un.d_ptr); break;
        case DT_RELA: rela = dyn_addr(b, dyn->d_un.d_ptr); break;
        case DT_PLTRELSZ: pltsz = dyn->d_un.d_val; break;
        case DT_RELASZ: relasz = dyn->d_un.d_val; break;
        }
    }
    if (!symtab || !strtab) return 0;
    lib_base = b;
    patch_relocs(info, (const ElfW(Rela) *)jmprel, pltsz, (const ElfW(Sym) *)symtab, (const char *)strtab);
    patch_relocs(info, (const ElfW(Rela) *)rela, relasz, (const ElfW(Sym) *)symtab, (const char *)strtab);
    f->done = 1;
    return 1;
}

/* Parses OOM_FAIL / OOM_SEED; a malformed value stops the process (a test
 * that meant to inject failures must not pass by injecting none). */
static void read_mode(void)
{
    const char *v = getenv("OOM_FAIL"), *s = getenv("OOM_SEED");
    char *end;
    if (v && *v) {
        fail_n = strtoul(v, &end, 10);
        mode = MODE_ONE;
        if (*end == '+') {
            mode = MODE_FROM;
            end++;
        } else if (*end == '%') {
            mode = MODE_STRIDE;
            stride = strtoul(end + 1, &end, 10);
            if (stride == 0) fail_n = 0;   /* refused below */
        }
        if (*end || fail_n == 0) {
            say("oom_shim: OOM_FAIL must be N, N+ or N%%K (N, K >= 1), not '%s'\n", v);
            _exit(98);
        }
    } else if (s && *s) {
        seed = strtoul(s, &end, 10);
        if (*end != ':' || (per_mille = strtoul(end + 1, &end, 10), *end) || per_mille > 1000) {
            say("oom_shim: OOM_SEED must be S:P (P per mille, 0..1000), not '%s'\n", s);
            _exit(98);
        }
        mode = MODE_SEED;
    }
    trace = getenv("OOM_TRACE") && *getenv("OOM_TRACE") == '1';
}

__attribute__((constructor)) static void oom_shim_start(void)
{
    read_mode();
    const char *lib = getenv("OOM_LIB");
    found f = { lib && *lib ? lib : "libstablegraph.so", 0 };
    dl_iterate_phdr(visit, &f);
    if (!f.done) say("oom_shim: %s is not loaded: nothing patched\n", f.want);
}

__attribute__((destructor)) static void oom_shim_exit(void)
{
    const char *out = getenv("OOM_COUNT");
    if (!out || !*out) return;
    char line[128];
    int len = snprintf(line, sizeof line, "allocs %lu failed %lu patched %lu pid %ld\n",
                       __atomic_load_n(&n_allocs, __ATOMIC_RELAXED),
                       __atomic_load_n(&n_failed, __ATOMIC_RELAXED), n_patched, (long)getpid());
    int fd = open(out, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return;
    ssize_t w = write(fd, line, (size_t)len);
    (void)w;
    close(fd);
}
