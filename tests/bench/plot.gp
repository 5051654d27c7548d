# tests/bench/plot.gp: the plots of `make bench` (gnuplot 5). bench.py calls
#   gnuplot -e 'datafile="..."; outdir="..."; workloads="a b"; modes="none off"; subtitle="..."' plot.gp
# datafile holds one block per workload x mode (workload-major, blocks separated
# by two blank lines) with columns:
#   1 nodes  2 driver updates/step  3 VMM calls/step  4 wall ratio to no library
#   5 library instructions/launch (callgrind)  6 driver calls/step
# "?" marks a value not measured. One PNG per metric, one panel per workload,
# one line per mode, graph size on a log2 x axis.

set terminal pngcairo size 1500,950 font ",10" noenhanced
set datafile missing "?"
set logscale x 2
set grid
set key inside top center horizontal maxrows 2 samplen 2 font ",9" opaque
set xlabel "graph size (kernel nodes)"
set offsets graph 0.05, graph 0.05, graph 0.35, 0
set yrange [0:*]

nw = words(workloads)
nm = words(modes)
ncols = (nw < 3) ? nw : 3
nrows = (nw + ncols - 1) / ncols

array mcol[4] = [2, 3, 4, 5]
array mfile[4] = ["updates_per_step", "vmm_per_step", "wall_ratio", "lib_instructions_per_launch"]
array mtitle[4] = ["graph updates reaching the driver per steady-state step", \
                   "VMM calls reaching the driver per steady-state step", \
                   "wall time per steady-state step, ratio to no library", \
                   "library instructions per launch (callgrind; no-library run has none)"]
array mfirst[4] = [1, 1, 1, 2]

# Whether column c has any value for modes from m0 on (so an all-missing plot is skipped).
has_data(c, m0) = 0
do for [k=1:4] {
    c = mcol[k]
    any = 0
    do for [w=1:nw] {
        do for [m=mfirst[k]:nm] {
            stats datafile index ((w-1)*nm + m-1) using (column(c)) nooutput
            if (exists("STATS_records") && STATS_records > 0) { any = 1 }
            undefine STATS_*
        }
    }
    if (any) {
        set output sprintf("%s/%s.png", outdir, mfile[k])
        set multiplot layout nrows, ncols title mtitle[k] . "\n" . subtitle
        do for [w=1:nw] {
            set title word(workloads, w)
            plot for [m=mfirst[k]:nm] datafile index ((w-1)*nm + m-1) using 1:(column(c)) \
                 with linespoints lw 2 dt m pt m ps 1.2 title word(modes, m)
        }
        unset multiplot
        set output
    }
}
