/*
 * core/driver.h: the table of real driver functions that core/ may call.
 *
 * core/ never looks symbols up: interpose/ fills this table with the real
 * libcuda functions (by the ELF names below) before the first hook reaches
 * core/; unit tests fill it with fakes. A NULL entry means "not available":
 * callers must check it and do without.
 *
 * Every call core/ makes goes through SG_DRIVER_CALL, which counts it in
 * sg_driver_calls[] so the report can say exactly which driver calls the
 * library added to the program's own (the e2e tests subtract them when they
 * compare the emulated driver's call counts).
 *
 * Thread safety: the table is written once before use and then only read;
 * the counters are atomics.
 */
#ifndef SG_DRIVER_H
#define SG_DRIVER_H

#include <cuda.h>

/* X(ELF name, return type, parameter types) */
#define SG_DRIVER_LIST(X)                                                     \
    X(cuGraphGetNodes, CUresult, (CUgraph, CUgraphNode *, size_t *))

#define SG_DRIVER_FIELD_(name, ret, params) ret (*name) params;
typedef struct sg_driver {
    SG_DRIVER_LIST(SG_DRIVER_FIELD_)
} sg_driver;

#define SG_DRIVER_ID_(name, ret, params) SG_DRV_##name,
enum { SG_DRIVER_LIST(SG_DRIVER_ID_) SG_DRIVER_COUNT };

/* The table core/ uses (zero-filled until sg_core_init()). */
extern sg_driver sg_drv;
/* ELF names, indexed by SG_DRV_*. */
extern const char *const sg_driver_names[SG_DRIVER_COUNT];
/* Calls core/ made, indexed by SG_DRV_*. */
extern unsigned long sg_driver_calls[SG_DRIVER_COUNT];

#define SG_DRIVER_CALL(name, ...)                                             \
    (__atomic_fetch_add(&sg_driver_calls[SG_DRV_##name], 1, __ATOMIC_RELAXED), \
     sg_drv.name(__VA_ARGS__))

#endif /* SG_DRIVER_H */
