/*
 * tests/e2e/life_prog.c: process life-cycle scenarios for
 * test_lifecycle.sh. Usage: life_prog SCENARIO MODULE (MODULE: the emulated
 * mod_test.so). Every driver result and a checksum of the work are printed,
 * so a run with the library can be compared with one without it.
 *
 *   basic          one context, a captured graph launched 5 times
 *   fork           after using CUDA: a child that never touches CUDA and
 *                  exits with 3 through exit() (atexit handlers run), a
 *                  child that execs "life_prog basic", one that execs
 *                  /bin/true; the parent goes on using CUDA
 *   fork_first     fork before any CUDA call; parent and child both use it
 *   exit_thread    launches pile up (run with CUDAEMU_KERNEL_DELAY_US) while
 *                  the main thread waits in cuStreamSynchronize, and a
 *                  worker thread calls exit(5)
 *   ctx_destroy    a created context is destroyed while its graph, exec and
 *                  buffer still exist; the exec is launched, then they are
 *                  destroyed; then new work in a new context
 *   primary_reset  cuDevicePrimaryCtxReset with a live buffer, graph and
 *                  exec; the stale exec is launched and destroyed, the
 *                  buffer freed; then new work in the primary context again
 *   closefds       before any CUDA call (a driver in use holds descriptors
 *                  of its own), closes every descriptor above stderr
 *                  (close_range, as a daemon does at start), opens the file
 *                  named by LIFE_DATA (which gets the lowest number, the one
 *                  the library's log file had), writes one line into it and
 *                  then uses CUDA: nothing else may reach that file
 *   chdir          uses CUDA, then changes into the folder LIFE_DIR names
 *                  and removes it before exit
 */
#include "life_common.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *module;
static CUdevice dev;

static void init_driver(void)
{
    life_drv_linked();
    if (LIFE_R(life.cuInit(0)) || LIFE_R(life.cuDeviceGet(&dev, 0))) exit(1);
}

static void basic_work(const char *label, int kernels, int launches)
{
    life_work w;
    if (life_setup(&w, module, 256) || life_graph(&w, kernels)) exit(1);
    life_launch(&w, launches);
    life_checksum(&w, label);
    life_teardown(&w);
}

static int primary_on(CUcontext *ctx)
{
    return LIFE_R(life.cuDevicePrimaryCtxRetain(ctx, dev)) || LIFE_R(life.cuCtxSetCurrent(*ctx));
}

static void wait_child(pid_t pid, const char *what)
{
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid) { printf("%s: no child\n", what); return; }
    if (WIFEXITED(st)) printf("%s: child exit status %d\n", what, WEXITSTATUS(st));
    else printf("%s: child killed by signal %d\n", what, WTERMSIG(st));
}

static void scenario_fork(const char *self)
{
    CUcontext ctx;
    if (primary_on(&ctx)) exit(1);
    basic_work("before fork", 4, 3);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        unsigned x = 1;
        for (int i = 0; i < 1000; i++) x = x * 1664525u + 1013904223u;
        printf("child without CUDA: %08x\n", x);
        exit(3);
    }
    wait_child(pid, "no-CUDA child");
    pid = fork();
    if (pid == 0) {
        execl(self, self, "basic", module, (char *)NULL);
        _exit(126);
    }
    wait_child(pid, "exec CUDA child");
    pid = fork();
    if (pid == 0) {
        execl("/bin/true", "true", (char *)NULL);
        _exit(126);
    }
    wait_child(pid, "exec true child");
    basic_work("after fork", 4, 3);
    LIFE_R(life.cuDevicePrimaryCtxRelease(dev));
}

static void scenario_fork_first(void)
{
    CUcontext ctx;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        init_driver();
        if (primary_on(&ctx)) _exit(1);
        basic_work("child", 3, 2);
        exit(0);
    }
    wait_child(pid, "CUDA child");
    init_driver();
    if (primary_on(&ctx)) exit(1);
    basic_work("parent", 5, 2);
}

static void *exiter(void *arg)
{
    (void)arg;
    struct timespec ts = { 0, 20 * 1000 * 1000 };
    nanosleep(&ts, NULL);
    printf("worker: exit(5)\n");
    fflush(stdout);
    exit(5);
}

static void scenario_exit_thread(void)
{
    CUcontext ctx;
    life_work w;
    pthread_t t;
    if (primary_on(&ctx) || life_setup(&w, module, 64) || life_graph(&w, 8)) exit(1);
    life_launch(&w, 20);
    pthread_create(&t, NULL, exiter, NULL);
    life.cuStreamSynchronize(w.stream);
    /* Only reached if the work finished before the worker's exit. */
    pthread_join(t, NULL);
}

static void scenario_ctx_destroy(void)
{
    CUcontext ctx;
    life_work w;
    if (LIFE_R(life.cuCtxCreate(&ctx, NULL, 0, dev)) || life_setup(&w, module, 128) ||
        life_graph(&w, 4))
        exit(1);
    life_launch(&w, 2);
    life_checksum(&w, "created context");
    LIFE_R(life.cuCtxDestroy(ctx));
    life_launch(&w, 1);
    life_teardown(&w);
    if (LIFE_R(life.cuCtxCreate(&ctx, NULL, 0, dev))) exit(1);
    basic_work("new context", 3, 2);
    LIFE_R(life.cuCtxDestroy(ctx));
}

static void scenario_primary_reset(void)
{
    CUcontext ctx;
    life_work w;
    if (primary_on(&ctx) || life_setup(&w, module, 128) || life_graph(&w, 4)) exit(1);
    life_launch(&w, 2);
    life_checksum(&w, "before reset");
    LIFE_R(life.cuDevicePrimaryCtxReset(dev));
    life_launch(&w, 1);
    life_teardown(&w);
    if (primary_on(&ctx)) exit(1);
    basic_work("after reset", 4, 2);
    LIFE_R(life.cuDevicePrimaryCtxRelease(dev));
}

static void scenario_closefds(void)
{
    const char *data = getenv("LIFE_DATA");
    CUcontext ctx;
    if (!data) exit(2);
    fflush(stdout);
    close_range(3, ~0U, 0);
    int fd = open(data, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, "program data\n", 13) != 13) exit(1);
    init_driver();
    if (primary_on(&ctx)) exit(1);
    basic_work("closefds", 4, 3);
    LIFE_R(life.cuDevicePrimaryCtxRelease(dev));
    /* fd stays open to the end, as a program's output file would */
}

static void scenario_chdir(void)
{
    const char *dir = getenv("LIFE_DIR");
    CUcontext ctx;
    if (!dir || primary_on(&ctx)) exit(1);
    basic_work("chdir", 3, 2);
    LIFE_R(life.cuDevicePrimaryCtxRelease(dev));
    if (chdir(dir) != 0 || rmdir(dir) != 0) exit(1);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: life_prog SCENARIO MODULE\n");
        return 2;
    }
    const char *s = argv[1];
    module = argv[2];
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (strcmp(s, "fork_first") == 0) {
        scenario_fork_first();
        return 0;
    }
    if (strcmp(s, "closefds") == 0) {     /* before the driver is in use */
        scenario_closefds();
        return 0;
    }
    init_driver();
    if (strcmp(s, "basic") == 0) {
        CUcontext ctx;
        if (primary_on(&ctx)) return 1;
        basic_work("basic", 5, 5);
    } else if (strcmp(s, "fork") == 0) {
        scenario_fork(argv[0]);
    } else if (strcmp(s, "exit_thread") == 0) {
        scenario_exit_thread();
    } else if (strcmp(s, "ctx_destroy") == 0) {
        scenario_ctx_destroy();
    } else if (strcmp(s, "primary_reset") == 0) {
        scenario_primary_reset();
    } else if (strcmp(s, "chdir") == 0) {
        scenario_chdir();
    } else {
        fprintf(stderr, "life_prog: unknown scenario %s\n", s);
        return 2;
    }
    return 0;
}
