#!/usr/bin/env bash
# test_knobs.sh: the emulated driver's CUDAEMU_* knobs: statistics file, fault
# injection, device count, VMM switch, and clear errors for bad values.
. "$(dirname "$0")/../lib.sh"
probe=$BUILD/tests/emu/prog_probe

out=$(CUDAEMU_STATS=$TMP/s.json emu "$probe" 5)
check_eq "probe runs" "$(echo "$out" | grep -c '=CUDA_SUCCESS')" 6
check_eq "stats count cuDriverGetVersion" "$(json_get "$TMP/s.json" calls.cuDriverGetVersion)" 5
check_eq "stats count cuInit" "$(json_get "$TMP/s.json" calls.cuInit)" 1
check_eq "stats count violations" "$(json_get "$TMP/s.json" violations)" 0
check_eq "stats has no temp file left" "$(ls "$TMP" | grep -c tmp)" 0

out=$(CUDAEMU_FAIL=cuDriverGetVersion:3:CUDA_ERROR_UNKNOWN emu "$probe" 5)
check_eq "fail: the 3rd call fails" "$(echo "$out" | grep call3=)" "call3=CUDA_ERROR_UNKNOWN"
check_eq "fail: only the 3rd" "$(echo "$out" | grep -c 'call.=CUDA_SUCCESS')" 4
out=$(CUDAEMU_FAIL=cuDriverGetVersion:2+:CUDA_ERROR_OUT_OF_MEMORY,cuInit:1:CUDA_ERROR_NOT_SUPPORTED emu "$probe" 3)
check_eq "fail: N+ fails from the Nth on" "$(echo "$out" | grep -c 'call.=CUDA_ERROR_OUT_OF_MEMORY')" 2
check_eq "fail: several rules" "$(echo "$out" | grep init=)" "init=CUDA_ERROR_NOT_SUPPORTED"

check_eq "CUDAEMU_DEVICES=2" "$(CUDAEMU_DEVICES=2 emu "$probe" 0 | grep count=)" "count=2"
check_eq "CUDAEMU_DEVICES=0: no device" "$(CUDAEMU_DEVICES=0 emu "$probe" 0 | grep init=)" "init=CUDA_ERROR_NO_DEVICE"
check_eq "CUDAEMU_NO_VMM=1" "$(CUDAEMU_NO_VMM=1 emu "$probe" 0 | grep vmm=)" "vmm=0"
check_eq "VMM by default" "$(emu "$probe" 0 | grep vmm=)" "vmm=1"

check_eq "CUDAEMU_DEVICE_MEMORY=256M" "$(CUDAEMU_DEVICE_MEMORY=256M emu "$probe" 0 | grep mem=)" "mem=268435456"
check_eq "CUDAEMU_DEVICE_MEMORY=256M: 1 MiB allocated" "$(CUDAEMU_DEVICE_MEMORY=256M emu "$probe" 0 | grep free=)" \
    "free=$((255 << 20))"
check_eq "CUDAEMU_DEVICE_MEMORY=2g" "$(CUDAEMU_DEVICE_MEMORY=2g emu "$probe" 0 | grep mem=)" "mem=$((2 << 30))"
check_eq "CUDAEMU_DEVICE_MEMORY=1048576" "$(CUDAEMU_DEVICE_MEMORY=1048576 emu "$probe" 0 | grep mem=)" "mem=1048576"
check_eq "default device memory 16 GiB" "$(emu "$probe" 0 | grep mem=)" "mem=$((16 << 30))"
check_eq "CUDAEMU_CTX_BYTES=16M: the primary context takes 16 MiB" \
    "$(CUDAEMU_DEVICE_MEMORY=256M CUDAEMU_CTX_BYTES=16M emu "$probe" 0 | grep free=)" "free=$((239 << 20))"
check_eq "CUDAEMU_MODULE_BYTES, CUDAEMU_EXEC_BYTES, CUDAEMU_FUNC_BYTES: no module, no graph, nothing taken" \
    "$(CUDAEMU_DEVICE_MEMORY=256M CUDAEMU_MODULE_BYTES=1G CUDAEMU_EXEC_BYTES=1G CUDAEMU_FUNC_BYTES=1G \
       emu "$probe" 0 | grep free=)" \
    "free=$((255 << 20))"

for bad in CUDAEMU_GRANULARITY=3000 CUDAEMU_GRANULARITY=abc CUDAEMU_KERNEL_DELAY_US=-1 CUDAEMU_DEVICES=9 \
           CUDAEMU_DEVICE_MEMORY=256X CUDAEMU_DEVICE_MEMORY=512K CUDAEMU_DEVICE_MEMORY=65T CUDAEMU_DEVICE_MEMORY=M \
           CUDAEMU_NO_VMM=2 CUDAEMU_FAIL=cuInit CUDAEMU_FAIL=cuInit:0:CUDA_ERROR_UNKNOWN \
           CUDAEMU_FAIL=cuInit:1:NOT_AN_ERROR CUDAEMU_STATS= CUDAEMU_MODULE_BYTES=-1 \
           CUDAEMU_CTX_BYTES=1X CUDAEMU_EXEC_BYTES=65T CUDAEMU_FUNC_BYTES=x CUDAEMU_DESTROY_DELAY_US=x; do
    var=${bad%%=*}
    err=$(env "$bad" LD_LIBRARY_PATH="$EMU_LIB" "$probe" 0 2>&1 >/dev/null); rc=$?
    check_eq "bad $bad exits 2" "$rc" 2
    check "bad $bad names the variable" grep -q "cudaemu: bad value for $var" <<<"$err"
done
done_testing
