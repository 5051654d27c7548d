# tests/gpu/gpu.mk: builds the real-GPU kit's CUDA programs with nvcc, when
# the toolkit has nvcc (otherwise it prints a note and builds nothing).
#
#   $(BUILD)/gpu/rt_graphs    tests/gpu/rt_graphs.cu: CUDA runtime (static
#                             cudart) graph capture + cudaGraphExecUpdate
#   $(BUILD)/gpu/rt_graphs_kernels.so  its kernels for the emulated driver
#                             (CUDAEMU_MODULES; tests/gpu/rt_graphs_kernels.c)
#   $(BUILD)/gpu/step_timer   tests/gpu/step_timer.cu: the recapture_temps and
#                             rotating_inputs loops (driver API, the
#                             workloads' own wl_common.c) timed with CUDA
#                             events; loads wl_kernels.{fatbin,so} from
#                             $(BUILD)/gpu/, links to $(BUILD)/workloads/
#   $(BUILD)/gpu/calibrate    tests/gpu/calibrate.c: the per-call costs of the
#                             bench's cost table, measured on the driver it
#                             runs on (C, built with $(CC) whether or not nvcc
#                             exists: it also runs on the emulated driver)
#   $(BUILD)/gpu/facts        tests/gpu/facts.c: the driver's answers to the
#                             questions the emulator answers with readings
#                             (C, built with $(CC), no kernels; it also runs
#                             on the emulated driver)
#
# Included by the top-level Makefile (-include tests/gpu/gpu.mk), or used on
# its own, e.g. on a machine without uthash-dev where build/ was carried
# over: make -f tests/gpu/gpu.mk gpu-kit BUILD=build
# It works whether it is read before or after the top-level Makefile's
# variables: everything it needs has a ?= default here, and the first target
# it names is `all`, so it never changes the default goal.

CUDA_HOME ?= /usr/local/cuda
BUILD     ?= build
NVCC      ?= $(CUDA_HOME)/bin/nvcc
CC        ?= cc

GPU_DIR   := $(BUILD)/gpu
GPU_STUBS  = $(firstword $(wildcard $(CUDA_HOME)/lib64/stubs $(CUDA_HOME)/targets/*/lib/stubs))
# Same targets as the workloads' fatbin (sm_80, sm_90, PTX for newer GPUs);
# no fused multiply-add, so results can be compared with the emulated C code.
GPU_NVCC_FLAGS := -O2 -fmad=false -Xcompiler -ffp-contract=off,-Wall \
    -gencode arch=compute_80,code=sm_80 \
    -gencode arch=compute_90,code='[sm_90,compute_90]'
GPU_PROGS := $(GPU_DIR)/rt_graphs $(GPU_DIR)/step_timer
CC ?= gcc

.PHONY: all gpu-kit gpu-kit-note
all:

# The calibration program: plain C against the toolkit's stub libcuda (no
# nvcc needed), beside links to the workloads' kernel modules.
$(GPU_DIR)/calibrate: tests/gpu/calibrate.c tests/workloads/wl_common.c tests/workloads/wl_common.h \
        tests/workloads/wl_math.h
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O2 -Wall -Wextra -Werror -D_GNU_SOURCE -I$(CUDA_HOME)/include -Itests/workloads -o $@ \
	    tests/gpu/calibrate.c tests/workloads/wl_common.c -L$(GPU_STUBS) -lcuda -Wl,-rpath-link,$(GPU_STUBS)
	ln -sf ../workloads/wl_kernels.fatbin $(GPU_DIR)/wl_kernels.fatbin
	ln -sf ../workloads/wl_kernels.so $(GPU_DIR)/wl_kernels.so

# The facts probe: plain C, driver API only (no kernels, no nvcc).
$(GPU_DIR)/facts: tests/gpu/facts.c
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O2 -Wall -Wextra -Werror -D_GNU_SOURCE -I$(CUDA_HOME)/include -o $@ \
	    tests/gpu/facts.c -L$(GPU_STUBS) -lcuda -Wl,-rpath-link,$(GPU_STUBS)

gpu-kit: $(GPU_DIR)/calibrate $(GPU_DIR)/facts

ifneq ($(wildcard $(NVCC)),)
$(GPU_DIR)/rt_graphs: tests/gpu/rt_graphs.cu
	@mkdir -p $(@D)
	$(NVCC) $(GPU_NVCC_FLAGS) -cudart static -o $@ $<

# Host code only (driver API): wl_common.c is compiled by nvcc's host
# compiler as C, exactly the file the workloads use.
$(GPU_DIR)/step_timer: tests/gpu/step_timer.cu tests/workloads/wl_common.c \
        tests/workloads/wl_common.h tests/workloads/wl_math.h
	@mkdir -p $(@D)
	$(NVCC) -O2 -Xcompiler -ffp-contract=off,-Wall -cudart static -Itests/workloads -o $@ \
	    tests/gpu/step_timer.cu tests/workloads/wl_common.c -L$(GPU_STUBS) -lcuda
	ln -sf ../workloads/wl_kernels.fatbin $(GPU_DIR)/wl_kernels.fatbin
	ln -sf ../workloads/wl_kernels.so $(GPU_DIR)/wl_kernels.so

# rt_graphs' kernels for the emulated driver (CUDAEMU_MODULES), by mangled name.
$(GPU_DIR)/rt_graphs_kernels.so: tests/gpu/rt_graphs_kernels.c $(EMU_KERNEL_H) tests/workloads/wl_math.h
	@mkdir -p $(@D)
	$(CC) -O2 -Wall -Wextra -Werror -fPIC -shared $(EMU_MODULE_CFLAGS) -Itests/workloads -o $@ $<

gpu-kit: $(GPU_PROGS) $(GPU_DIR)/rt_graphs_kernels.so
else
gpu-kit-note:
	@echo "note: $(NVCC) not found: the real-GPU kit's programs ($(GPU_PROGS)) not built"

gpu-kit: gpu-kit-note
endif

# Not in a sanitizer build: the kit's programs are not instrumented and its
# test (tests/gpu/test_gpu_kit.sh) is normal-build-only (its nvcc programs
# cost the sanitizer stage of the CI about 6 s of CPU for nothing).
ifeq ($(SAN),)
all: gpu-kit
endif
