# tests/workloads/workloads.mk: builds the workload programs and their kernel
# modules into $(BUILD)/workloads/ (included by the top-level Makefile).
#   $(BUILD)/workloads/<name>              one program per workload, linked
#                                          against the toolkit's stub libcuda
#   $(BUILD)/workloads/wl_kernels.so       the kernels as an emulated module
#   $(BUILD)/workloads/wl_kernels.fatbin   the same kernels in CUDA C, when
#                                          nvcc is present (sm_80, sm_90, PTX)

WL_NAMES  := recapture_temps rotating_inputs fresh_inputs slices scalar_changes topology_changes \
             train_loop
WL_DIR    := $(BUILD)/workloads
WL_OBJDIR := $(BUILD)/obj/tests/workloads
WL_PROGS  := $(addprefix $(WL_DIR)/,$(WL_NAMES))
WL_MODULE := $(WL_DIR)/wl_kernels.so
WL_FATBIN := $(WL_DIR)/wl_kernels.fatbin
WL_NVCC_FLAGS := -fatbin -fmad=false \
    -gencode arch=compute_80,code=sm_80 \
    -gencode arch=compute_90,code='[sm_90,compute_90]'

$(WL_PROGS): $(WL_DIR)/%: $(WL_OBJDIR)/%.o $(WL_OBJDIR)/wl_common.o
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(STUB_LIBCUDA) $(ALL_LDFLAGS)

$(WL_MODULE): tests/workloads/wl_kernels.c tests/workloads/wl_math.h $(EMU_KERNEL_H)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(EMU_MODULE_CFLAGS) -shared -o $@ $< $(ALL_LDFLAGS)

all: $(WL_PROGS) $(WL_MODULE)

ifneq ($(wildcard $(NVCC)),)
$(WL_FATBIN): tests/workloads/wl_kernels.cu tests/workloads/wl_math.h
	@mkdir -p $(@D)
	$(NVCC) $(WL_NVCC_FLAGS) -o $@ $<

all: $(WL_FATBIN)
else
.PHONY: wl-fatbin-note
wl-fatbin-note:
	@echo "note: $(NVCC) not found: $(WL_FATBIN) (the workloads' kernels for real GPUs) not built"

all: wl-fatbin-note
endif

# The same workloads on the CUDA runtime (nvcc only).
include tests/workloads/rt_workloads.mk
