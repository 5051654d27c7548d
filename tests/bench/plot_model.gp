# tests/bench/plot_model.gp: modeled driver time per steady-state step against
# graph size, for `make bench` (gnuplot 5). bench.py calls
#   gnuplot -e 'datafile="..."; outdir="..."; workloads="a b"; modes="none off"; subtitle="..."' plot_model.gp
# datafile (model.dat) holds one block per workload x mode (workload-major,
# blocks separated by two blank lines) with columns:
#   1 nodes; us per step under the every-node rule 2 low 3 mid 4 high query
#   cost; under the changed-nodes rule 5 low 6 mid 7 high.
# Writes modeled_per_step_every.png and modeled_per_step_changed.png: one
# panel per workload, one line per mode (no library included) at the middle
# query cost, bars from the low to the high one; log-log axes.

set terminal pngcairo size 1500,950 font ",10" noenhanced
set logscale x 2
set logscale y 10
set grid
set key inside bottom right maxrows 5 samplen 2 font ",9" opaque
set xlabel "graph size (kernel nodes)"
set ylabel "us per step"
set offsets graph 0.05, graph 0.05, 0, 0

nw = words(workloads)
nm = words(modes)
ncols = (nw < 3) ? nw : 3
nrows = (nw + ncols - 1) / ncols
array rname[2] = ["every", "changed"]
array rtitle[2] = ["every-node rule (an update costs every node of its graph)", \
                   "changed-nodes rule (an update costs the nodes it changed)"]

do for [r=1:2] {
    c = 3 * r    # the middle value's column
    set output sprintf("%s/modeled_per_step_%s.png", outdir, rname[r])
    set multiplot layout nrows, ncols title "modeled driver time per steady-state step, " . \
        rtitle[r] . "\n" . subtitle
    do for [w=1:nw] {
        set title word(workloads, w)
        plot for [m=1:nm] datafile index ((w-1)*nm + m-1) using 1:(column(c)):(column(c-1)):(column(c+1)) \
             with yerrorlines lw 2 dt m pt m ps 1.0 title word(modes, m)
    }
    unset multiplot
    set output
}
