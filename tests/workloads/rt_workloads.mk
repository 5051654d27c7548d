# tests/workloads/rt_workloads.mk: the CUDA runtime workloads (rt_*.cu, the
# twins of the driver-API workloads written against cudart), built with nvcc
# when it is present (included by workloads.mk):
#   $(BUILD)/workloads/rt/rt_<name>                  static runtime (nvcc's default)
#   $(BUILD)/workloads/rt/rt_rotating_inputs_shared  the same with -cudart shared
#   $(BUILD)/workloads/rt/rt_recapture_temps_ptds    built with --default-stream per-thread
# Kernels: wl_kernels.cu compiled into each program (sm_80, sm_90 and PTX, as
# wl_kernels.fatbin). On the emulated driver they run from wl_kernels.so:
#   CUDAEMU_MODULES=$(BUILD)/workloads/wl_kernels.so $(BUILD)/workloads/rt/rt_train_loop
# They live in a subdirectory so that tests iterating over $(BUILD)/workloads/*
# (the driver-API workloads, which need no CUDAEMU_MODULES) do not pick them up.

ifneq ($(wildcard $(NVCC)),)
RT_DIR    := $(WL_DIR)/rt
RT_OBJDIR := $(BUILD)/obj/tests/workloads/rt
RT_NAMES  := rt_recapture_temps rt_rotating_inputs rt_fresh_inputs rt_instantiate_loop rt_train_loop
RT_PROGS  := $(addprefix $(RT_DIR)/,$(RT_NAMES)) $(RT_DIR)/rt_rotating_inputs_shared \
             $(RT_DIR)/rt_recapture_temps_ptds
RT_NVCC_FLAGS := -fmad=false -Itests/workloads \
    -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code='[sm_90,compute_90]'
RT_DEPS   := tests/workloads/rt_common.cuh tests/workloads/wl_kernels.cu tests/workloads/wl_math.h \
             tests/workloads/rt_workloads.mk

$(RT_OBJDIR)/%.o: tests/workloads/%.cu $(RT_DEPS)
	@mkdir -p $(@D)
	$(NVCC) $(RT_NVCC_FLAGS) -c -o $@ $<

$(RT_OBJDIR)/ptds/%.o: tests/workloads/%.cu $(RT_DEPS)
	@mkdir -p $(@D)
	$(NVCC) $(RT_NVCC_FLAGS) --default-stream per-thread -c -o $@ $<

$(addprefix $(RT_DIR)/,$(RT_NAMES)): $(RT_DIR)/%: $(RT_OBJDIR)/%.o $(RT_OBJDIR)/rt_common.o
	@mkdir -p $(@D)
	$(NVCC) -cudart static -o $@ $^

$(RT_DIR)/rt_rotating_inputs_shared: $(RT_OBJDIR)/rt_rotating_inputs.o $(RT_OBJDIR)/rt_common.o
	@mkdir -p $(@D)
	$(NVCC) -cudart shared -Xlinker -rpath=$(CUDA_HOME)/lib64 -o $@ $^

$(RT_DIR)/rt_recapture_temps_ptds: $(RT_OBJDIR)/ptds/rt_recapture_temps.o $(RT_OBJDIR)/ptds/rt_common.o
	@mkdir -p $(@D)
	$(NVCC) -cudart static -o $@ $^

all: $(RT_PROGS)
endif
