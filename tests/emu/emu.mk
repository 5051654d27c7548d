# tests/emu/emu.mk: the emulated CUDA driver and its tests (included by the
# top-level Makefile, which defines CC, BUILD, ALL_CFLAGS, ALL_LDFLAGS,
# CUDA_INC, STUB_LIBCUDA and the generic $(BUILD)/obj/%.o rule).
#
#   tests/emu/driver/*.c       the driver        -> $(BUILD)/emu/libcuda.so.1
#   tests/emu/driver/emu_kernel.h   the module ABI (emulated kernels)
#   tests/emu/test_*.c         its tests         -> $(BUILD)/tests/emu/test_*
#   tests/emu/mod_*.c          test modules      -> $(BUILD)/tests/emu/mod_*.so
#   tests/emu/prog_*.c         programs that shell tests drive

EMU_DIR   := tests/emu/driver
EMU_SRCS  := $(wildcard $(EMU_DIR)/*.c)
EMU_OBJS  := $(EMU_SRCS:%.c=$(BUILD)/obj/%.o)
EMU_LIB   := $(BUILD)/emu/libcuda.so.1
EMU_TESTS := $(patsubst tests/emu/%.c,$(BUILD)/tests/emu/%,$(wildcard tests/emu/test_*.c))
EMU_MODS  := $(patsubst tests/emu/%.c,$(BUILD)/tests/emu/%.so,$(wildcard tests/emu/mod_*.c))
EMU_PROGS := $(patsubst tests/emu/%.c,$(BUILD)/tests/emu/%,$(wildcard tests/emu/prog_*.c))
# What a module of kernels (tests, workloads) is compiled against.
EMU_KERNEL_H      := $(EMU_DIR)/emu_kernel.h
EMU_MODULE_CFLAGS := -I$(EMU_DIR)

# Tables generated from the toolkit's headers, so they match its cuda.h.
$(BUILD)/gen/emu_errors.inc: $(CUDA_INC)/cuda.h
	@mkdir -p $(@D)
	sed -n 's/^ *\(CUDA_SUCCESS\|CUDA_ERROR_[A-Z0-9_]*\) *= *\([0-9][0-9]*\).*/X(\1, \2)/p' $< > $@
$(BUILD)/gen/emu_proctable.inc: $(CUDA_INC)/cudaTypedefs.h $(EMU_DIR)/gen_proctable.sh
	@mkdir -p $(@D)
	$(EMU_DIR)/gen_proctable.sh $(CUDA_INC) > $@
EMU_GEN := $(BUILD)/gen/emu_errors.inc $(BUILD)/gen/emu_proctable.inc
$(EMU_OBJS): $(EMU_GEN)
$(EMU_OBJS): ALL_CFLAGS += -I$(BUILD)/gen

$(EMU_LIB): $(EMU_OBJS) $(EMU_DIR)/emu.map
	@mkdir -p $(@D)
	$(CC) -shared -o $@ $(EMU_OBJS) -Wl,-soname,libcuda.so.1 -Wl,--version-script=$(EMU_DIR)/emu.map \
	    -Wl,-Bsymbolic -Wl,-z,defs $(ALL_LDFLAGS) -ldl -lrt
	ln -sf libcuda.so.1 $(BUILD)/emu/libcuda.so

$(BUILD)/tests/emu/test_%: tests/emu/test_%.c tests/check.h tests/launch_util.h $(wildcard tests/emu/*.h) $(EMU_LIB) $(EMU_MODS)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -Itests -Itests/emu -o $@ $< $(STUB_LIBCUDA) $(ALL_LDFLAGS) -ldl

# Helper programs that shell tests drive (not tests themselves).
$(BUILD)/tests/emu/prog_%: tests/emu/prog_%.c $(EMU_LIB)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -Itests -Itests/emu -o $@ $< $(STUB_LIBCUDA) $(ALL_LDFLAGS) -ldl

$(BUILD)/tests/emu/mod_%.so: tests/emu/mod_%.c $(EMU_KERNEL_H)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(EMU_MODULE_CFLAGS) -shared -o $@ $< $(ALL_LDFLAGS)

all: $(EMU_LIB) $(EMU_TESTS) $(EMU_MODS) $(EMU_PROGS)
