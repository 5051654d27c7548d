/*
 * core/driver.c: the driver table, its names and its call counters
 * (driver.h). The leaf of core/: it calls nothing.
 *
 * Thread safety: sg_drv is written once by sg_driver_set() before any
 * concurrent use (interpose/ resolves the driver under a pthread_once before
 * a hook reaches core/), then only read; the counters are atomics.
 */
#include "driver.h"

sg_driver sg_drv;
int sg_sticky_seen;
#define SG_DRIVER_NAME_(name, ret, params) #name,
const char *const sg_driver_names[SG_DRIVER_COUNT] = { SG_DRIVER_LIST(SG_DRIVER_NAME_) };
unsigned long sg_driver_calls[SG_DRIVER_COUNT];

void sg_driver_set(const sg_driver *drv) { sg_drv = *drv; }
