/*
 * tests/e2e/libnext.c: a second shared library for resolve_paths: looks a
 * name up with dlsym(RTLD_NEXT) from its own position in the link order.
 */
#include <dlfcn.h>

__attribute__((visibility("default"))) void *next_lookup(const char *name)
{
    return dlsym(RTLD_NEXT, name);
}
