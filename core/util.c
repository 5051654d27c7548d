/*
 * core/util.c: the out-of-line helpers of util.h. No state.
 */
#include "util.h"

#include <stdlib.h>
#include <string.h>
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

uint64_t sg_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
