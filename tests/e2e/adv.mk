# tests/e2e/adv.mk: builds the adversarial programs of issue 10 and their
# kernel modules (included by the top-level Makefile); the runner is
# tests/e2e/test_correctness.sh.
#   $(BUILD)/tests/e2e/adv_<case>     one program per tests/e2e/adv_<case>.c,
#                                     linked against the toolkit's stub libcuda
#   $(BUILD)/tests/e2e/adv_kernels.so the kernels (tests/e2e/adv_kernels.c)
#   $(BUILD)/tests/e2e/adv_ver1.so, adv_ver2.so
#                                     two versions of one kernel (class 9)
#   $(BUILD)/tests/e2e/rt_devices     round 24's CUDA runtime program (nvcc;
#                                     runner: tests/e2e/test_rt_devices.sh)

ADV_DIR   := $(BUILD)/tests/e2e
ADV_PROGS := $(patsubst tests/e2e/%.c,$(ADV_DIR)/%,\
               $(filter-out tests/e2e/adv_kernels.c,$(wildcard tests/e2e/adv_*.c)))
ADV_MODS  := $(ADV_DIR)/adv_kernels.so $(ADV_DIR)/adv_ver1.so $(ADV_DIR)/adv_ver2.so

$(ADV_PROGS): $(ADV_DIR)/%: tests/e2e/%.c tests/e2e/adv_common.h tests/launch_util.h
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(STUB_LIBCUDA) $(ALL_LDFLAGS)

# adv_recfuzz built for the per-thread default stream includes adv_recfuzz.c
$(ADV_DIR)/adv_recfuzz_ptsz: tests/e2e/adv_recfuzz.c

# adv_interpose reaches the driver only through dlopen and dlsym (round 6):
# not linked with libcuda; its plugin is.
$(ADV_DIR)/adv_interpose: STUB_LIBCUDA := -ldl
$(ADV_DIR)/interpose_plug.so: tests/e2e/interpose_plug.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -shared -o $@ $< -Wl,--no-as-needed $(STUB_LIBCUDA) $(ALL_LDFLAGS) -ldl
all: $(ADV_DIR)/interpose_plug.so

$(ADV_DIR)/adv_kernels.so: tests/e2e/adv_kernels.c $(EMU_KERNEL_H)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(EMU_MODULE_CFLAGS) -shared -o $@ $< $(ALL_LDFLAGS)

$(ADV_DIR)/adv_ver%.so: tests/e2e/adv_kernels.c $(EMU_KERNEL_H)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(EMU_MODULE_CFLAGS) -DADV_VERSION=$* -shared -o $@ $< $(ALL_LDFLAGS)

all: $(ADV_PROGS) $(ADV_MODS)

# Round 24: one process, several devices, through the CUDA runtime
# (tests/e2e/test_rt_devices.sh): a CUDA runtime program built as rt_prog is
# (interpose/interpose.mk: static runtime), when the toolkit has nvcc; its
# kernels come from $(BUILD)/tests/emu/mod_rtdev.so (tests/emu/emu.mk).
ifneq ($(wildcard $(NVCC)),)
$(ADV_DIR)/rt_devices: tests/e2e/rt_devices.cu
	@mkdir -p $(@D)
	$(NVCC) -cudart static -o $@ $<

all: $(ADV_DIR)/rt_devices
endif
