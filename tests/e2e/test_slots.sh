#!/usr/bin/env bash
# tests/e2e/test_slots.sh: stable slots (core/slots.c) on the emulated
# driver's real VMM, through tests/e2e/slots_prog (no interposer):
#   - a kernel writing through a slot changes the buffer at its own address;
#     rebinding redirects writes; SG_SLOTS_BUSY while a launch is in flight,
#     and a waiting bind lets it finish first; 40 back-to-back launches with
#     rebinds; two rotating generations with no VMM call in steady state;
#     everything mapped is unmapped again; all with 0 violations, also with
#     CUDAEMU_KERNEL_DELAY_US=200;
#   - CUDAEMU_DEVICES=2: the slot is read-write for the peer device too;
#   - CUDAEMU_FAIL on cuMemMap, cuMemSetAccess (the library's 1st and 2nd
#     call), cuMemUnmap (1st call) and cuMemAddressReserve: the bind (or
#     create) fails, the slot is left empty, a later bind works and the
#     kernel's writes land in the right buffer, 0 violations; cuMemUnmap
#     failing in destroy: the mapping is unmapped at the context's teardown;
#   - negative control: changing a slot's mapping under a running kernel
#     behind the library's back is counted as a violation (so the 0s above
#     mean something).
. "$(dirname "$0")/../lib.sh"
PROG=$BUILD/tests/e2e/slots_prog
MOD=$BUILD/tests/emu/mod_test.so

# run NAME ARGS...: runs slots_prog under the emulated driver into $TMP/NAME.{out,json}
run() {
    local name=$1; shift
    CUDAEMU_STATS=$TMP/$name.json emu "$PROG" "$@" "$MOD" >"$TMP/$name.out" 2>&1
    echo $? >"$TMP/$name.rc"
}
val() { sed -n "s/^$2=//p" "$TMP/$1.out" | head -1; }
violations() { json_get "$TMP/$1.json" violations; }

for delay in 0 200; do
    n=alias$delay
    CUDAEMU_KERNEL_DELAY_US=$delay run $n alias
    check_eq "alias (delay $delay): exit status" "$(cat "$TMP/$n.rc")" 0
    for k in slot_differs alias_a redirect waited b2b rotation unmapped_after_destroy balanced; do
        check_eq "alias (delay $delay): $k" "$(val $n $k)" 1
    done
    check_eq "alias (delay $delay): binds succeed" "$(val $n bind_a) $(val $n bind_b) $(val $n bind_wait)" "0 0 0"
    check_eq "alias (delay $delay): launch in flight is not idle" "$(val $n idle_in_flight)" 0
    check_eq "alias (delay $delay): rebind without wait is BUSY" "$(val $n busy)" 1
    check_eq "alias (delay $delay): rotation maps each generation once" "$(val $n rotation_first_maps)" 2
    check_eq "alias (delay $delay): rotation steady state: no VMM call, no wait" \
        "$(val $n rotation_steady_vmm)" 0
    check_eq "alias (delay $delay): 0 violations" "$(violations $n)" 0
    grep '^stats:' "$TMP/$n.out" | sed 's/^/# /'
done

CUDAEMU_DEVICES=2 run peer2 peer
check_eq "2 devices: bind" "$(val peer2 bind)" 0
check_eq "2 devices: read-write for the device" "$(val peer2 access_dev0)" 3
check_eq "2 devices: read-write for the peer" "$(val peer2 access_dev1)" 3
run peer1 peer
check_eq "1 device: read-write for the device" "$(val peer1 access_dev0)" 3

# The program's own calls come first: 2 cuMemMap and 2 cuMemSetAccess (its
# buffers), no cuMemUnmap, 2 cuMemAddressReserve.
for f in cuMemMap:3 cuMemMap:4 cuMemSetAccess:3 cuMemSetAccess:4 cuMemUnmap:1; do
    n=fault_${f/:/_}
    CUDAEMU_FAIL=$f:CUDA_ERROR_OUT_OF_MEMORY run "$n" fault
    check_eq "$f fails: exit status" "$(cat "$TMP/$n.rc")" 0
    check_eq "$f fails: a bind failed" "$(val "$n" any_failed)" 1
    check_eq "$f fails: the failed slot was left empty" "$(val "$n" failed_left_empty)" 1
    check_eq "$f fails: a later bind works" "$(val "$n" final)" 0
    check_eq "$f fails: writes land in the bound buffer" "$(val "$n" lands_in_b)" 1
    check_eq "$f fails: nothing left mapped" "$(val "$n" unmapped_after_destroy)" 1
    check_eq "$f fails: 0 violations" "$(violations "$n")" 0
done
n=fault_destroy_unmap                  # the 2nd cuMemUnmap is the destroy's
CUDAEMU_FAIL=cuMemUnmap:2:CUDA_ERROR_OUT_OF_MEMORY run "$n" fault
check_eq "cuMemUnmap fails in destroy: binds and writes unaffected" \
    "$(cat "$TMP/$n.rc") $(val "$n" any_failed) $(val "$n" final) $(val "$n" lands_in_b)" "0 0 0 1"
check_eq "cuMemUnmap fails in destroy: still mapped after destroy" "$(val "$n" unmapped_after_destroy)" 0
check_eq "cuMemUnmap fails in destroy: unmapped at teardown" "$(val "$n" unmapped_after_teardown)" 1
check_eq "cuMemUnmap fails in destroy: 0 violations" "$(violations "$n")" 0
CUDAEMU_FAIL=cuMemAddressReserve:3:CUDA_ERROR_OUT_OF_MEMORY run fault_reserve fault
check_eq "cuMemAddressReserve fails: create fails cleanly" \
    "$(cat "$TMP/fault_reserve.rc") $(val fault_reserve create)" "0 -1"
run fault_none fault
check_eq "no fault: no bind fails" "$(val fault_none any_failed) $(val fault_none lands_in_b)" "0 1"

run broken broken
check_eq "negative control: the kernel ran" "$(val broken wrote)" 1
v=$(violations broken)
check "negative control: remapping under a running kernel is a violation ($v)" [ "${v:-0}" -ge 1 ]

done_testing
