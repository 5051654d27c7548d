#!/usr/bin/env bash
# test_resolve.sh: every ELF name in the emulator's generated cuGetProcAddress
# table is a real export of the toolkit's stub libcuda.so (so the naming
# convention gen_proctable.sh relies on holds for this toolkit).
. "$(dirname "$0")/../lib.sh"
table=$BUILD/gen/emu_proctable.inc
stub=$(ls "${CUDA_HOME:-/usr/local/cuda}"/lib64/stubs/libcuda.so 2>/dev/null | head -1)
check "generated table exists" test -s "$table"
n=$(wc -l <"$table")
check "table has hundreds of rows ($n)" test "$n" -gt 400
nm -D --defined-only "$stub" | awk '{print $3}' | sort -u >"$TMP/stub"
awk -F'"' '{print $4}' "$table" | sort -u >"$TMP/gen"
missing=$(comm -23 "$TMP/gen" "$TMP/stub")
check_eq "every generated name is a stub export" "$missing" ""
check "cuMemAlloc 3020 is cuMemAlloc_v2" grep -q 'X("cuMemAlloc", 3020, "cuMemAlloc_v2", 0)' "$table"
check "cuMemcpyHtoD per-thread is _v2_ptds" grep -q 'X("cuMemcpyHtoD", 7000, "cuMemcpyHtoD_v2_ptds", 1)' "$table"
done_testing
