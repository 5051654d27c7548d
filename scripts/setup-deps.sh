#!/usr/bin/env bash
# scripts/setup-deps.sh: makes sure the Debian packages the build and tests
# need are present. As root it installs what is missing; otherwise it prints
# the exact command to run and exits 1.
#
# Needed: gcc, make (the build), uthash-dev (core tables), valgrind (make
# bench: instruction counts), gnuplot-nox (make bench: plots; any gnuplot
# will do), python3 (test scripts and the benchmark read JSON). The CUDA toolkit itself (cuda.h)
# is not a Debian package here: set CUDA_HOME if it is not /usr/local/cuda.
set -u
need=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
for p in uthash-dev valgrind python3 make gcc; do have_pkg "$p" || need+=("$p"); done
command -v gnuplot >/dev/null 2>&1 || need+=(gnuplot-nox)
cuda_home=${CUDA_HOME:-/usr/local/cuda}
if [ ! -f "$cuda_home/include/cuda.h" ]; then
    echo "stablegraph: cuda.h not found in $cuda_home/include: install the CUDA toolkit or set CUDA_HOME" >&2
    exit 1
fi
[ "${#need[@]}" -eq 0 ] && { echo "stablegraph: all dependencies present"; exit 0; }
if [ "$(id -u)" -eq 0 ]; then
    echo "stablegraph: installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null || {
        echo "stablegraph: apt-get install failed; run: apt-get update && apt-get install -y ${need[*]}" >&2
        exit 1
    }
else
    echo "stablegraph: missing packages: ${need[*]}" >&2
    echo "run: sudo apt-get update && sudo apt-get install -y ${need[*]}" >&2
    exit 1
fi
