/*
 * tests/e2e/bounds_probe.c: a preloaded probe for tests/e2e/test_bounds.sh.
 * When the process exits (a destructor) it writes to $BOUNDS_PROBE_OUT
 *   rss_anon_kb N    resident anonymous memory (/proc/self/status RssAnon)
 *   hwm_kb N         peak resident memory, file pages included (VmHWM)
 *   heap_bytes N     bytes malloc has handed out and not got back (every arena)
 * It allocates nothing through malloc and touches nothing else.
 */
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The number after `key` in /proc/self/status, or -1. */
static long status_kb(const char *text, const char *key)
{
    const char *p = strstr(text, key);
    return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

__attribute__((destructor)) static void bounds_probe_exit(void)
{
    const char *out = getenv("BOUNDS_PROBE_OUT");
    if (!out) return;
    char text[8192], line[256];
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, text, sizeof text - 1) : -1;
    text[n > 0 ? n : 0] = '\0';
    if (fd >= 0) close(fd);
    struct mallinfo2 m = mallinfo2();
    int len = snprintf(line, sizeof line, "rss_anon_kb %ld\nhwm_kb %ld\nheap_bytes %zu\n",
                       status_kb(text, "RssAnon:"), status_kb(text, "VmHWM:"), m.uordblks);
    fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
        ssize_t w = write(fd, line, (size_t)len);
        (void)w;
        close(fd);
    }
}
