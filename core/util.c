/*
 * core/util.c: the out-of-line helpers of util.h. No state.
 */
#include "util.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

int sg_grow_slow(void **buf, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 0;
    size_t ncap = *cap ? *cap : 8;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2) return -1;
        ncap *= 2;
    }
    if (elem && ncap > SIZE_MAX / elem) return -1;
    unsigned char *p = realloc(*buf, ncap * elem);
    if (!p) return -1;
    memset(p + *cap * elem, 0, (ncap - *cap) * elem);
    *buf = p;
    *cap = ncap;
    return 0;
}

#if defined(__SANITIZE_ADDRESS__)
#define SG_BIG_ON 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SG_BIG_ON 0
#endif
#endif
#ifndef SG_BIG_ON
#define SG_BIG_ON 1
#endif

/* Every block starts with a 16-byte header (so the caller's bytes stay
 * 16-byte aligned): the length of its mapping (0 for a block from malloc)
 * and the caller's size. */
typedef struct big_hdr {
    size_t map, bytes;
} big_hdr;
_Static_assert(sizeof(big_hdr) == 16, "the header keeps 16-byte alignment");

static big_hdr *hdr_of(void *p) { return (big_hdr *)p - 1; }

/* A new block of `bytes` holding the first `keep` bytes of p (p may be
 * NULL), which is then freed. NULL if out of memory (p unchanged). */
static void *big_move(void *p, size_t keep, size_t bytes, int map)
{
    big_hdr *h;
    if (map) {
        h = mmap(NULL, sizeof *h + bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (h == MAP_FAILED) return NULL;
    } else if (!(h = malloc(sizeof *h + bytes))) {
        return NULL;
    }
    *h = (big_hdr){ map ? sizeof *h + bytes : 0, bytes };
    if (p) memcpy(h + 1, p, keep < bytes ? keep : bytes);
    sg_big_free(p);
    return h + 1;
}

void *sg_big_realloc(void *p, size_t bytes)
{
    if (bytes > SIZE_MAX / 2) return NULL;
    big_hdr *h = p ? hdr_of(p) : NULL;
    int map = SG_BIG_ON && bytes >= SG_BIG_BYTES;
    if (h && map == (h->map != 0)) {       /* stays where it is: resized in place if it can be */
        if (map) h = mremap(h, h->map, sizeof *h + bytes, MREMAP_MAYMOVE);
        else h = realloc(h, sizeof *h + bytes);
        if (!h || h == MAP_FAILED) return NULL;
        *h = (big_hdr){ map ? sizeof *h + bytes : 0, bytes };
        return h + 1;
    }
    return big_move(p, h ? h->bytes : 0, bytes, map);
}

void sg_big_free(void *p)
{
    if (!p) return;
    big_hdr *h = hdr_of(p);
    if (h->map) munmap(h, h->map);
    else free(h);
}

uint64_t sg_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
