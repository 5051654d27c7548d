/*
 * interpose/dlsym_entry.c: the exported dlsym and everything it reaches
 * before the library (or a sanitizer runtime) is initialised: the trampoline,
 * the hook-name lookup sg_hook_find() and the bootstrap of the real dlsym.
 *
 * Why a translation unit of its own, built WITHOUT sanitizer instrumentation
 * (interpose.mk clears SANFLAGS for this object only): a sanitizer runtime
 * calls dlsym(RTLD_NEXT, "mmap", ...) while it is still starting up (ASan
 * from AsanInitInternal -> InitializeCommonInterceptors, TSan likewise), and
 * with this library preloaded those calls land here first. Instrumented code
 * at that point touches shadow memory that is not mapped yet (ASan) or
 * thread state that does not exist yet (__tsan_func_entry): the process dies
 * with SIGSEGV before main. A whole uninstrumented TU is more robust than
 * per-function attributes: gcc's no_sanitize("thread") still emits
 * __tsan_func_entry/exit, and nothing here can be inlined into or from an
 * instrumented file by accident. The #error below makes a build that forgets
 * to clear the flags fail instead of crashing at run time.
 *
 * Rules for this file: no calls into other files of the project, and no libc
 * functions a sanitizer intercepts (strcmp, memcpy, ...; dlvsym, write and
 * abort are fine) on the path from dlsym: compare by hand.
 *
 * Globals and their guards:
 *   sg_dlsym_next: the real dlsym; written (atomically, always the same
 *     value) by sg_dlsym_bootstrap(), read by the dlsym trampoline.
 *   sg_hooks (hooks.c): constant, relocated by the dynamic loader before any
 *     code runs; only read here.
 *
 * Why the exported dlsym starts in assembly: glibc's dlsym finds its caller
 * from its own return address, and that decides what RTLD_NEXT (and, for
 * objects loaded with RTLD_LOCAL, RTLD_DEFAULT) means. Calling the real dlsym
 * from C would make every lookup relative to this library instead (HAMi-core
 * needed a tail jump for the same reason). So the trampoline checks the name
 * against the hook table and, for every other name, jumps to the real dlsym
 * with the caller's return address still on the stack: glibc sees exactly
 * the call the program made. Only exact hook names reach sg_dlsym_hooked()
 * (resolve.c, instrumented; no sanitizer runtime looks up a driver name),
 * which gets the caller's return address as an argument.
 */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#error "interpose/dlsym_entry.c must be compiled without -fsanitize (see interpose/interpose.mk)"
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#error "interpose/dlsym_entry.c must be compiled without -fsanitize (see interpose/interpose.mk)"
#endif
#endif

#include "hooks.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

void *(*sg_dlsym_next)(void *, const char *);

#if defined(__x86_64__)
#if defined(__CET__)
#define SG_ENDBR "endbr64\n"
#else
#define SG_ENDBR ""
#endif
/* dlsym(handle, name): rdi, rsi; the caller's return address at (%rsp).
 * The stack is realigned to 16 bytes around each call. */
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, @function\n"
        ".p2align 4\n"
        "dlsym:\n"
        SG_ENDBR
        "    push %rdi\n"
        "    push %rsi\n"
        "    sub $8, %rsp\n"
        "    mov %rsi, %rdi\n"
        "    call sg_hook_find@PLT\n"
        "    add $8, %rsp\n"
        "    pop %rsi\n"
        "    pop %rdi\n"
        "    test %eax, %eax\n"
        "    js 1f\n"
        "    mov %eax, %edx\n"          /* i */
        "    mov (%rsp), %rcx\n"        /* caller */
        "    jmp sg_dlsym_hooked@PLT\n"
        "1:  mov sg_dlsym_next(%rip), %rax\n"
        "    test %rax, %rax\n"
        "    jz 2f\n"
        "    jmp *%rax\n"
        "2:  push %rdi\n"
        "    push %rsi\n"
        "    sub $8, %rsp\n"
        "    call sg_dlsym_bootstrap@PLT\n"
        "    add $8, %rsp\n"
        "    pop %rsi\n"
        "    pop %rdi\n"
        "    jmp *%rax\n"
        ".size dlsym, .-dlsym\n");
#else
#error "the dlsym trampoline (interpose/dlsym_entry.c) is written for x86-64 only"
#endif

/* Finds the real dlsym: the next definition after this library, preferring
 * the current symbol version. Aborts if there is none (nothing can work). */
void *(*sg_dlsym_bootstrap(void))(void *, const char *)
{
    void *(*fn)(void *, const char *) = __atomic_load_n(&sg_dlsym_next, __ATOMIC_ACQUIRE);
    if (fn) return fn;
    void *p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!p) p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    if (!p) {
        static const char msg[] = "stablegraph: error: cannot find the real dlsym\n";
        ssize_t w = write(2, msg, sizeof msg - 1);
        (void)w;
        abort();
    }
    /* A union, not memcpy: memcpy may be intercepted. */
    union { void *obj; void *(*fn)(void *, const char *); } u = { .obj = p };
    fn = u.fn;
    __atomic_store_n(&sg_dlsym_next, fn, __ATOMIC_RELEASE);
    return fn;
}

/* a == b, both NUL-terminated; a hand-written loop, not strcmp (see above). */
static int same_name(const char *a, const char *b)
{
    while (*a && *a == *b) a++, b++;
    return *a == *b;
}

int sg_hook_find(const char *name)
{
    /* Every hooked name starts with "cu": reject everything else at once. */
    if (!name || name[0] != 'c' || name[1] != 'u') return -1;
    for (int i = 0; i < SG_HOOK_COUNT; i++)
        if (same_name(sg_hooks[i].name + 2, name + 2)) return i;
    return -1;
}
