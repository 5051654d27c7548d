#!/usr/bin/env bash
# gen_proctable.sh CUDA_INCLUDE_DIR: prints the emulator's cuGetProcAddress
# table, one row per versioned driver entry, derived from the toolkit's
# cudaTypedefs.h (PFN_<base>_v<version>[_ptsz|_ptds]).
#
# The ELF name of a version is not in the header: the driver's convention is
# that the versions of one base name, in increasing order, are exported as
# <base>, <base>_v2, <base>_v3, ... and the per-thread flavour appends
# _ptsz/_ptds to that name. tests/emu/test_resolve.c checks every generated name
# against the toolkit's stub libcuda.so, so a break in that convention fails a
# test instead of resolving to a wrong function.
#
# Row: X("base", version, "elf name", per_thread)
set -eu
inc=$1
sed -n 's/.*(CUDAAPI \*PFN_\(cu[A-Za-z0-9_]*\)_v\([0-9][0-9]*\)\(_pt[sd][zs]\)\{0,1\})(.*/\1 \2 \3/p' "$inc/cudaTypedefs.h" |
sort -u | awk '
# Ranks count the versions without a per-thread suffix; a per-thread version
# takes the name of the newest plain version at or below it, plus its suffix
# (cuMemcpyHtoD_v7000_ptds is cuMemcpyHtoD_v2_ptds: _v2 came with 3020).
{ rows[NR] = $0; if ($3 == "" && !(($1, $2) in seen)) { seen[$1, $2] = 1; vers[$1] = vers[$1] " " $2 } }
END {
    for (b in vers) {
        n = split(vers[b], a, " ");
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
        cnt[b] = n;
        for (i = 1; i <= n; i++) { v[b, i] = a[i] + 0 }
    }
    for (r in rows) {
        split(rows[r], f, " "); base = f[1]; ver = f[2] + 0; pt = f[3];
        k = 0;
        for (i = 1; i <= cnt[base]; i++) if (v[base, i] <= ver) k = i;
        if (k == 0) k = 1;
        name = (k == 1) ? base : base "_v" k;
        printf "X(\"%s\", %d, \"%s%s\", %d)\n", base, ver, name, pt, pt == "" ? 0 : 1
    }
}' | sort
