// tests/e2e/rt_devices.cu: one process, several GPUs, through the CUDA
// runtime (nvcc, static runtime): what model-parallel code, DataParallel and
// inference servers do (cudaSetDevice, per-device streams and graphs, peer
// copies), run by tests/e2e/test_rt_devices.sh on the emulated driver with
// two devices (CUDAEMU_DEVICES=2), with and without the library. Its C++
// kernels come, by mangled name, from tests/emu/mod_rtdev.c (CUDAEMU_MODULES).
//
// Each mode prints "key=value" lines computed from results copied back to the
// host; they must be the same with and without the library. A value the host
// can predict is printed as the value itself (the test script knows it); the
// program also prints "<mode>_check=ok" only when every value is the one the
// host computed, else "bad <what>..." and "<mode>_check=bad".
//
//   rt_devices devices    kernels on each device after cudaSetDevice, buffers
//                         allocated and freed on both (one freed while the
//                         other device is current), pointer attributes
//   rt_devices peer       cudaDeviceEnablePeerAccess, cudaMemcpyPeer,
//                         cudaMemcpyPeerAsync and cudaMemcpy(Default) between
//                         buffers on each device, re-allocated every step
//   rt_devices graphs     a graph re-captured every step on the device's own
//                         stream, temporaries allocated and freed in the step,
//                         cudaGraphExecUpdate, cudaGraphLaunch; steps
//                         alternate the devices
//   rt_devices pressure [kernel-first|fresh]
//                         (small CUDAEMU_DEVICE_MEMORY, CUDAEMU_FUNC_BYTES)
//                         `late` and `axpy` launched on device 0; most of
//                         device 1 filled with cudaMalloc blocks and freed;
//                         then a big cudaMalloc on device 1 and the first
//                         launches of `late` and `axpy` there, one after the
//                         other (lazy loading takes device memory then); with
//                         kernel-first, the launches come before the
//                         cudaMalloc; with fresh, neither kernel is launched on
//                         device 0 first (the runtime looks them up with
//                         device 1 current)
//   rt_devices reset      work and a graph on both devices, cudaDeviceReset of
//                         device 1 only, then work on device 1 again while
//                         device 0's buffers and graph carry on
//   rt_devices threads    one host thread per device (DataParallel's
//                         parallel_apply), each re-capturing its device's graph
//                         with temporaries and allocating, at the same time
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <thread>

// x[i] = v + i % 7
__global__ void fill(float *x, float v, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = v + i % 7;
}

// y[i] += a * x[i]
__global__ void axpy(float *y, const float *x, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += a * x[i];
}

// x[i] = 2 * x[i] + 1
__global__ void late(float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = 2 * x[i] + 1;
}

#define CK(call)                                                                                 \
    do {                                                                                         \
        cudaError_t e_ = (call);                                                                 \
        if (e_ != cudaSuccess) {                                                                 \
            std::printf("error=%s at line %d: %s\n", cudaGetErrorName(e_), __LINE__, #call);    \
            std::exit(1);                                                                        \
        }                                                                                        \
    } while (0)

static const int N = 1024;
static const int BLK = 256;
static float host[N];
static int bad;

#define EXPECT(cond, ...)                                                                        \
    do {                                                                                         \
        if (!(cond)) {                                                                           \
            if (!bad++) std::printf("bad ");                                                     \
            std::printf(__VA_ARGS__);                                                            \
            std::printf(" ");                                                                    \
        }                                                                                        \
    } while (0)

static void launch_fill(float *x, float v, int n, cudaStream_t s = 0)
{
    fill<<<(n + BLK - 1) / BLK, BLK, 0, s>>>(x, v, n);
}

static void launch_axpy(float *y, const float *x, float a, int n, cudaStream_t s = 0)
{
    axpy<<<(n + BLK - 1) / BLK, BLK, 0, s>>>(y, x, a, n);
}

// the sum of n floats of device memory x (a synchronous copy)
static double sum_of(const float *x, int n)
{
    CK(cudaMemcpy(host, x, n * sizeof(float), cudaMemcpyDeviceToHost));
    double s = 0;
    for (int i = 0; i < n; i++) s += host[i];
    return s;
}

// the sum of v + i % 7 over i < n
static double fill_sum(float v, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++) s += v + i % 7;
    return s;
}

static int device_of(const void *p)
{
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) return -1;
    return a.type == cudaMemoryTypeDevice ? a.device : -2;
}

static void report(const char *mode)
{
    if (bad) std::printf("\n%s=bad\n", mode);
    else std::printf("%s=ok\n", mode);
}

// ------------------------------------------------------------------ devices
static void mode_devices()
{
    const int steps = 6;
    double sums[2] = { 0, 0 }, expect[2] = { 0, 0 };
    float *keep = 0;   // a device-0 block freed while device 1 is current
    for (int step = 0; step < steps; step++) {
        for (int dev = 0; dev < 2; dev++) {
            CK(cudaSetDevice(dev));
            int n = N - 128 * dev - 16 * step;
            float *a, *b;
            CK(cudaMalloc(&a, n * sizeof(float)));
            CK(cudaMalloc(&b, n * sizeof(float)));
            EXPECT(device_of(a) == dev && device_of(b) == dev, "attr_step%d_dev%d=%d,%d", step, dev,
                   device_of(a), device_of(b));
            launch_fill(a, 100.0f * dev + step, n);
            launch_fill(b, 1.0f, n);
            launch_axpy(b, a, 2.0f, n);
            CK(cudaGetLastError());
            double s = sum_of(b, n);
            double e = fill_sum(1.0f, n) + 2 * fill_sum(100.0f * dev + step, n);
            EXPECT(s == e, "sum_step%d_dev%d=%.0f(want %.0f)", step, dev, s, e);
            sums[dev] += s;
            expect[dev] += e;
            CK(cudaFree(a));
            if (dev == 0) {
                keep = b;   // freed below, with device 1 current
            } else {
                CK(cudaFree(b));
                CK(cudaFree(keep));   // device 0's block, device 1 current
                int cur = -1;
                CK(cudaGetDevice(&cur));
                EXPECT(cur == 1, "current=%d", cur);
            }
        }
    }
    // both devices at once: a block on each, live together, written by each
    float *d[2];
    for (int dev = 0; dev < 2; dev++) {
        CK(cudaSetDevice(dev));
        CK(cudaMalloc(&d[dev], N * sizeof(float)));
        launch_fill(d[dev], 10.0f + dev, N);
    }
    for (int dev = 0; dev < 2; dev++) {
        CK(cudaSetDevice(dev));
        CK(cudaDeviceSynchronize());
    }
    double both0 = sum_of(d[0], N), both1 = sum_of(d[1], N);   // UVA: either device current
    EXPECT(both0 == fill_sum(10.0f, N) && both1 == fill_sum(11.0f, N), "both=%.0f,%.0f", both0, both1);
    for (int dev = 0; dev < 2; dev++) CK(cudaFree(d[dev]));
    int n = -1;
    CK(cudaGetDeviceCount(&n));
    std::printf("devices=%d\n", n);
    std::printf("devices_sum=%.0f,%.0f\n", sums[0], sums[1]);
    std::printf("devices_both=%.0f,%.0f\n", both0, both1);
    report("devices_check");
}

// ------------------------------------------------------------------ peer
static void mode_peer()
{
    int can01 = -1, can10 = -1;
    CK(cudaDeviceCanAccessPeer(&can01, 0, 1));
    CK(cudaDeviceCanAccessPeer(&can10, 1, 0));
    std::printf("peer_can=%d,%d\n", can01, can10);
    CK(cudaSetDevice(0));
    CK(cudaDeviceEnablePeerAccess(1, 0));
    CK(cudaSetDevice(1));
    CK(cudaDeviceEnablePeerAccess(0, 0));
    cudaStream_t s1;
    CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    const int steps = 6;
    double total = 0;
    for (int step = 0; step < steps; step++) {
        int n = N - 32 * step;
        size_t bytes = n * sizeof(float);
        float *a0, *c0, *a1, *b1;
        CK(cudaSetDevice(0));
        CK(cudaMalloc(&a0, bytes));
        CK(cudaMalloc(&c0, bytes));
        launch_fill(a0, (float)step, n);
        CK(cudaSetDevice(1));
        CK(cudaMalloc(&a1, bytes));
        CK(cudaMalloc(&b1, bytes));
        EXPECT(device_of(a0) == 0 && device_of(a1) == 1, "attr_step%d=%d,%d", step, device_of(a0),
               device_of(a1));
        // device 0 -> device 1, synchronous (device 1 current)
        CK(cudaMemcpyPeer(a1, 1, a0, 0, bytes));
        launch_fill(b1, 3.0f, n, s1);
        launch_axpy(b1, a1, 0.5f, n, s1);              // b1 = fill(3) + a0 / 2
        // device 1 -> device 0, on device 1's stream
        CK(cudaMemcpyPeerAsync(c0, 0, b1, 1, bytes, s1));
        CK(cudaStreamSynchronize(s1));
        // device 0 -> device 1 by unified addressing (cudaMemcpyDefault)
        CK(cudaSetDevice(0));
        launch_axpy(c0, a0, 1.0f, n);                   // c0 = fill(3) + 1.5 a0
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(a1, c0, bytes, cudaMemcpyDefault));
        double s = sum_of(a1, n);
        double e = fill_sum(3.0f, n) + 1.5 * fill_sum((float)step, n);
        EXPECT(s == e, "sum_step%d=%.1f(want %.1f)", step, s, e);
        total += s;
        CK(cudaFree(a0));
        CK(cudaFree(c0));
        CK(cudaSetDevice(1));
        CK(cudaFree(a1));
        CK(cudaFree(b1));
    }
    CK(cudaStreamDestroy(s1));
    std::printf("peer_sum=%.1f\n", total);
    report("peer_check");
}

// ------------------------------------------------------------------ graphs
// One step on device dev: temporaries from cudaMalloc and cudaMallocAsync,
// re-captured into a graph that adds into out[dev]; the exec is updated (or
// instantiated the first time) and launched; the temporaries freed.
static cudaStreamCaptureMode capture_mode = cudaStreamCaptureModeGlobal;

struct dev_state {
    cudaStream_t s;
    cudaGraphExec_t exec;
    float *out;
    int updates_ok;
    double expect;
};

// dev made current, with a stream of its own and a zeroed output.
static void dev_open(dev_state *st, int dev)
{
    CK(cudaSetDevice(dev));
    CK(cudaStreamCreateWithFlags(&st->s, cudaStreamNonBlocking));
    CK(cudaMalloc(&st->out, N * sizeof(float)));
    CK(cudaMemset(st->out, 0, N * sizeof(float)));
}

static void graph_step(dev_state *st, int dev, int step)
{
    CK(cudaSetDevice(dev));
    float *t1, *t2, *t3;
    CK(cudaMalloc(&t1, N * sizeof(float)));
    CK(cudaMalloc(&t2, N * sizeof(float)));
    CK(cudaMallocAsync(&t3, N * sizeof(float), st->s));
    float v = (float)(step / 4 + 10 * dev);   // a new value every 4 steps: that update changes something
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(st->s, capture_mode));
    launch_fill(t1, v, N, st->s);
    launch_fill(t2, 1.0f, N, st->s);
    launch_axpy(t2, t1, 2.0f, N, st->s);                 // t2 = fill(1) + 2 fill(v)
    CK(cudaMemcpyAsync(t3, t2, N * sizeof(float), cudaMemcpyDeviceToDevice, st->s));
    launch_axpy(st->out, t3, 1.0f, N, st->s);            // out += t3
    CK(cudaStreamEndCapture(st->s, &g));
    if (!st->exec) {
        CK(cudaGraphInstantiate(&st->exec, g, 0));
    } else {
        cudaGraphExecUpdateResultInfo info;
        cudaError_t e = cudaGraphExecUpdate(st->exec, g, &info);
        if (e == cudaSuccess && info.result == cudaGraphExecUpdateSuccess) {
            st->updates_ok++;
        } else {   // the exec kept the old temporaries: made again
            EXPECT(0, "update_step%d=%s,%d", step, cudaGetErrorName(e), (int)info.result);
            (void)cudaGetLastError();
            CK(cudaGraphExecDestroy(st->exec));
            CK(cudaGraphInstantiate(&st->exec, g, 0));
        }
    }
    CK(cudaGraphLaunch(st->exec, st->s));
    CK(cudaFreeAsync(t3, st->s));
    CK(cudaGraphDestroy(g));
    CK(cudaFree(t1));   // synchronizes: the graph is done with t1, t2
    CK(cudaFree(t2));
    st->expect += fill_sum(1.0f, N) + 2 * fill_sum(v, N);
}

// Each device's stream waited for, its output summed and checked, its exec,
// stream and output freed; prints MODE_sum, MODE_updates and MODE_check.
static void finish_graphs(dev_state st[2], const char *mode)
{
    double sums[2];
    for (int dev = 0; dev < 2; dev++) {
        CK(cudaSetDevice(dev));
        CK(cudaStreamSynchronize(st[dev].s));
        sums[dev] = sum_of(st[dev].out, N);
        EXPECT(sums[dev] == st[dev].expect, "sum_dev%d=%.0f(want %.0f)", dev, sums[dev], st[dev].expect);
        EXPECT(device_of(st[dev].out) == dev, "attr_dev%d=%d", dev, device_of(st[dev].out));
        CK(cudaGraphExecDestroy(st[dev].exec));
        CK(cudaStreamDestroy(st[dev].s));
        CK(cudaFree(st[dev].out));
    }
    std::printf("%s_sum=%.0f,%.0f\n", mode, sums[0], sums[1]);
    std::printf("%s_updates=%d,%d\n", mode, st[0].updates_ok, st[1].updates_ok);
    char check[32];
    std::snprintf(check, sizeof check, "%s_check", mode);
    report(check);
}

static void mode_graphs()
{
    dev_state st[2];
    std::memset(st, 0, sizeof st);
    for (int dev = 0; dev < 2; dev++) dev_open(&st[dev], dev);
    const int steps = 12;
    for (int step = 0; step < steps; step++) graph_step(&st[step % 2], step % 2, step);
    finish_graphs(st, "graphs");
}

// ------------------------------------------------------------------ pressure
static void mode_pressure(bool kernel_first, bool fresh)
{
    const size_t mib = (size_t)1 << 20;
    float *x0, *x1;
    // `late` and `axpy` on device 0: the runtime looks them up with device 0
    // current (fresh: not; their first use in the process is on device 1)
    CK(cudaSetDevice(0));
    CK(cudaMalloc(&x0, N * sizeof(float)));
    launch_fill(x0, 1.0f, N);
    if (!fresh) {
        late<<<N / BLK, BLK>>>(x0, N);
        launch_axpy(x0, x0, 1.0f, N);
    }
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    double s0 = sum_of(x0, N);
    // device 1: its context, `fill` loaded there
    CK(cudaSetDevice(1));
    CK(cudaMalloc(&x1, N * sizeof(float)));
    launch_fill(x1, 2.0f, N);
    CK(cudaDeviceSynchronize());
    // most of device 1 in 4 MiB blocks, freed
    static void *b[512];
    size_t fr = 0, total = 0;
    CK(cudaMemGetInfo(&fr, &total));
    size_t nb = fr > 8 * mib ? (fr - 8 * mib) / (4 * mib) : 0;
    if (nb > 512) nb = 512;
    for (size_t i = 0; i < nb; i++) CK(cudaMalloc(&b[i], 4 * mib));
    for (size_t i = 0; i < nb; i++) CK(cudaFree(b[i]));
    std::printf("pressure_blocks=%s\n", nb * 4 * mib + 12 * mib >= fr && nb > 0 ? "most" : "few");
    float *big = 0;
    size_t big_bytes = total / 2;
    cudaError_t late_rc = cudaSuccess, axpy_rc = cudaSuccess, big_rc = cudaSuccess;
    for (int round = 0; round < 2; round++) {
        if ((round == 0) == kernel_first) {
            // the first launches of two kernels on device 1, one after the
            // other (each takes CUDAEMU_FUNC_BYTES there)
            late<<<N / BLK, BLK>>>(x1, N);
            late_rc = cudaGetLastError();
            if (late_rc == cudaSuccess) late_rc = cudaDeviceSynchronize();
            launch_axpy(x1, x1, 1.0f, N);
            axpy_rc = cudaGetLastError();
            if (axpy_rc == cudaSuccess) axpy_rc = cudaDeviceSynchronize();
        } else {
            big_rc = cudaMalloc(&big, big_bytes);
            if (big_rc == cudaSuccess) {
                CK(cudaMemset(big, 0, big_bytes));
                launch_fill(big, 4.0f, N);
                CK(cudaDeviceSynchronize());
            }
        }
    }
    std::printf("pressure_late_launch=%s\n", cudaGetErrorName(late_rc));
    std::printf("pressure_axpy_launch=%s\n", cudaGetErrorName(axpy_rc));
    std::printf("pressure_big_malloc=%s\n", cudaGetErrorName(big_rc));
    double s1 = late_rc == cudaSuccess && axpy_rc == cudaSuccess ? sum_of(x1, N) : -1;
    double sb = big_rc == cudaSuccess ? sum_of(big, N) : -1;
    std::printf("pressure_sum=%.0f,%.0f,%.0f\n", s0, s1, sb);
    EXPECT(s0 == (fresh ? fill_sum(1.0f, N) : 2 * (2 * fill_sum(1.0f, N) + N)), "s0=%.0f", s0);
    EXPECT(s1 == 2 * (2 * fill_sum(2.0f, N) + N), "s1=%.0f", s1);
    EXPECT(sb == fill_sum(4.0f, N), "sb=%.0f", sb);
    if (big) CK(cudaFree(big));
    CK(cudaFree(x1));
    CK(cudaSetDevice(0));
    CK(cudaFree(x0));
    report("pressure_check");
}

// ------------------------------------------------------------------ reset
static void mode_reset()
{
    dev_state st[2];
    std::memset(st, 0, sizeof st);
    for (int dev = 0; dev < 2; dev++) dev_open(&st[dev], dev);
    for (int step = 0; step < 4; step++) graph_step(&st[step % 2], step % 2, step);
    // device 1 reset: its stream, exec and buffers go with its primary context
    CK(cudaSetDevice(1));
    CK(cudaDeviceSynchronize());
    double before1 = sum_of(st[1].out, N);
    EXPECT(before1 == st[1].expect, "before_reset=%.0f", before1);
    CK(cudaDeviceReset());
    std::memset(&st[1], 0, sizeof st[1]);
    // device 1 again, from scratch, while device 0 carries on; the reset
    // gave back all of device 1's memory
    CK(cudaSetDevice(1));
    size_t fr = 0, total = 0;
    CK(cudaMemGetInfo(&fr, &total));
    std::printf("reset_free=%s\n", fr == total ? "all" : "less");
    dev_open(&st[1], 1);
    EXPECT(device_of(st[1].out) == 1, "attr_after=%d", device_of(st[1].out));
    for (int step = 4; step < 10; step++) graph_step(&st[step % 2], step % 2, step);
    // plain work on device 1 after the reset
    float *p;
    CK(cudaSetDevice(1));
    CK(cudaMalloc(&p, N * sizeof(float)));
    launch_fill(p, 5.0f, N);
    launch_axpy(p, st[1].out, 1.0f, N);
    CK(cudaDeviceSynchronize());
    double sp = sum_of(p, N);
    double sums[2];
    for (int dev = 0; dev < 2; dev++) {
        CK(cudaSetDevice(dev));
        CK(cudaStreamSynchronize(st[dev].s));
        sums[dev] = sum_of(st[dev].out, N);
        EXPECT(sums[dev] == st[dev].expect, "sum_dev%d=%.0f(want %.0f)", dev, sums[dev], st[dev].expect);
    }
    EXPECT(sp == fill_sum(5.0f, N) + sums[1], "plain=%.0f", sp);
    std::printf("reset_before=%.0f\n", before1);
    std::printf("reset_sum=%.0f,%.0f,%.0f\n", sums[0], sums[1], sp);
    std::printf("reset_updates=%d,%d\n", st[0].updates_ok, st[1].updates_ok);
    CK(cudaFree(p));
    for (int dev = 0; dev < 2; dev++) {
        CK(cudaSetDevice(dev));
        CK(cudaGraphExecDestroy(st[dev].exec));
        CK(cudaStreamDestroy(st[dev].s));
        CK(cudaFree(st[dev].out));
    }
    report("reset_check");
}

// ------------------------------------------------------------------ threads
static void thread_work(dev_state *st, int dev, int steps)
{
    dev_open(st, dev);
    for (int step = 0; step < steps; step++) {
        float *extra;
        CK(cudaMalloc(&extra, (N + 64 * step) * sizeof(float)));   // a block of another size each step
        graph_step(st, dev, 2 * step + dev);
        launch_fill(extra, 1.0f, N, st->s);
        launch_axpy(st->out, extra, 1.0f, N, st->s);
        st->expect += fill_sum(1.0f, N);
        CK(cudaStreamSynchronize(st->s));
        CK(cudaFree(extra));
    }
    CK(cudaStreamSynchronize(st->s));
}

static void mode_threads()
{
    dev_state st[2];
    std::memset(st, 0, sizeof st);
    const int steps = 8;
    capture_mode = cudaStreamCaptureModeThreadLocal;   // the other thread allocates meanwhile
    std::thread t0(thread_work, &st[0], 0, steps), t1(thread_work, &st[1], 1, steps);
    t0.join();
    t1.join();
    finish_graphs(st, "threads");
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    int n = -1;
    CK(cudaGetDeviceCount(&n));
    if (n < 2) {
        std::printf("error=%d devices, 2 needed (CUDAEMU_DEVICES=2)\n", n);
        return 1;
    }
    if (!std::strcmp(mode, "devices")) mode_devices();
    else if (!std::strcmp(mode, "peer")) mode_peer();
    else if (!std::strcmp(mode, "graphs")) mode_graphs();
    else if (!std::strcmp(mode, "pressure"))
        mode_pressure(argc > 2 && !std::strcmp(argv[2], "kernel-first"), argc > 2 && !std::strcmp(argv[2], "fresh"));
    else if (!std::strcmp(mode, "reset")) mode_reset();
    else if (!std::strcmp(mode, "threads")) mode_threads();
    else {
        std::printf("usage: rt_devices devices|peer|graphs|pressure [kernel-first|fresh]|reset|threads\n");
        return 2;
    }
    return 0;
}
