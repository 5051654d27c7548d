/*
 * emu_weak.c: TEMPORARY weak placeholders for the emulator's internal
 * functions, so the library links while its parts are written. Each real
 * definition overrides its placeholder. This file is deleted once every part
 * is in; a placeholder that is reached aborts loudly.
 */
#include "emu_internal.h"
#include <stdio.h>
#include <stdlib.h>

#define EMU_MISSING(name) do { fprintf(stderr, "cudaemu: internal %s not implemented yet\n", name); abort(); } while (0)
#define W __attribute__((weak))

W int emu_mem_find(CUdeviceptr p, emu_range *out) { (void)p; (void)out; return 0; }
W int emu_mem_accessible(CUdeviceptr p, size_t n, int dev) { (void)p; (void)n; (void)dev; return 1; }
W void emu_mem_copy(void *d, const void *s, size_t n) { (void)d; (void)s; (void)n; EMU_MISSING("emu_mem_copy"); }
W void emu_mem_free_async_complete(CUdeviceptr p) { (void)p; EMU_MISSING("emu_mem_free_async_complete"); }
W CUresult emu_mem_alloc_device(CUdeviceptr *o, size_t b, int d, const char *c) { (void)o; (void)b; (void)d; (void)c; EMU_MISSING("emu_mem_alloc_device"); }
W CUresult emu_stream_get(CUstream h, int pt, emu_stream **o) { (void)h; (void)pt; (void)o; EMU_MISSING("emu_stream_get"); }
W CUcontext emu_stream_ctx(emu_stream *s) { (void)s; EMU_MISSING("emu_stream_ctx"); }
W CUresult emu_stream_enqueue(emu_stream *s, emu_work *w) { (void)s; (void)w; EMU_MISSING("emu_stream_enqueue"); }
W void emu_stream_wait_idle(emu_stream *s) { (void)s; EMU_MISSING("emu_stream_wait_idle"); }
W void emu_streams_sync_all(CUcontext c) { (void)c; }
W struct emu_capture *emu_stream_capture(emu_stream *s) { (void)s; return NULL; }
W void emu_stream_set_capture(emu_stream *s, struct emu_capture *c) { (void)s; (void)c; EMU_MISSING("emu_stream_set_capture"); }
W emu_work *emu_work_new(size_t sz, const char *w, void (*r)(emu_work *, emu_stream *)) { (void)sz; (void)w; (void)r; EMU_MISSING("emu_work_new"); }
W void emu_work_touch_ptr(emu_work *w, CUdeviceptr p) { (void)w; (void)p; }
W void emu_work_touch_range(emu_work *w, CUdeviceptr p, size_t n) { (void)w; (void)p; (void)n; }
W void emu_work_touch_words(emu_work *w, const void *b, size_t n) { (void)w; (void)b; (void)n; }
W int emu_inflight_check(const char *c, CUdeviceptr b, size_t s) { (void)c; (void)b; (void)s; return 0; }
W CUresult emu_args_pack(CUfunction f, void **k, void **e, emu_args **o) { (void)f; (void)k; (void)e; (void)o; EMU_MISSING("emu_args_pack"); }
W emu_args *emu_args_clone(const emu_args *a) { (void)a; EMU_MISSING("emu_args_clone"); }
W void emu_kernel_run(const emu_args *a, const emu_launch *l, int d, const char *c) { (void)a; (void)l; (void)d; (void)c; EMU_MISSING("emu_kernel_run"); }
W const char *emu_func_name(CUfunction f) { (void)f; return "?"; }
W CUresult emu_capture_check_unsafe(const char *c) { (void)c; return CUDA_SUCCESS; }
W CUresult emu_capture_add(emu_stream *s, const emu_capture_op *op) { (void)s; (void)op; EMU_MISSING("emu_capture_add"); }
W CUresult emu_capture_event_record(emu_stream *s, CUevent e) { (void)s; (void)e; EMU_MISSING("emu_capture_event_record"); }
W int emu_capture_event_wait(emu_stream *s, CUevent e, CUresult *r) { (void)s; (void)e; (void)r; return 0; }
W void emu_streams_ctx_destroyed(CUcontext c) { (void)c; }
W CUresult emu_memcpy3d_check(const CUDA_MEMCPY3D *p) { (void)p; EMU_MISSING("emu_memcpy3d_check"); }
W void emu_memcpy3d_exec(const CUDA_MEMCPY3D *p) { (void)p; EMU_MISSING("emu_memcpy3d_exec"); }
W void emu_memcpy3d_touch(emu_work *w, const CUDA_MEMCPY3D *p) { (void)w; (void)p; }
W CUresult emu_memset_check(const CUDA_MEMSET_NODE_PARAMS *p) { (void)p; EMU_MISSING("emu_memset_check"); }
W void emu_memset_exec(const CUDA_MEMSET_NODE_PARAMS *p) { (void)p; EMU_MISSING("emu_memset_exec"); }
W void emu_memset_touch(emu_work *w, const CUDA_MEMSET_NODE_PARAMS *p) { (void)w; (void)p; }
