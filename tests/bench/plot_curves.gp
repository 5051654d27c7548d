# tests/bench/plot_curves.gp: cumulative modeled driver time over steps, for
# `make bench` (gnuplot 5). bench.py calls
#   gnuplot -e 'datafile="..."; outdir="..."; workloads="a b"; modes="none off";
#               rules="every changed"; instms="2 8"; horizon="2000"; subtitle="..."' plot_curves.gp
# datafile (curves.dat) holds blocks in this order: rule x instantiation
# assumption (ms) x workload x (each mode, then twice the no-library curve),
# separated by two blank lines, with columns 1 steps, 2 cumulative ms.
# Writes cumulative_<rule>_<ms>ms.png: one panel per workload, one line per
# mode and a dotted "2 x none" line; log-log axes.

set terminal pngcairo size 1500,950 font ",10" noenhanced
set logscale x 10
set logscale y 10
set grid
set key inside top left maxrows 6 samplen 2 font ",9" opaque
set xlabel "steps"
set xrange [1:horizon + 0]
set ylabel "cumulative modeled driver time (ms)"

nw = words(workloads)
nm = words(modes)
nr = words(rules)
ni = words(instms)
ncols = (nw < 3) ? nw : 3
nrows = (nw + ncols - 1) / ncols
nb = nm + 1   # blocks per workload: the modes, then 2 x none
rname(r) = (word(rules, r) eq "every") ? "every-node" : (word(rules, r) eq "changed") ? "changed-nodes" : word(rules, r)

do for [r=1:nr] {
    do for [i=1:ni] {
        set output sprintf("%s/cumulative_%s_%sms.png", outdir, word(rules, r), word(instms, i))
        set multiplot layout nrows, ncols title "cumulative modeled driver time, " . rname(r) . \
            " rule, " . word(instms, i) . " ms per instantiation\n" . subtitle
        do for [w=1:nw] {
            set title word(workloads, w)
            base = (((r-1) * ni + (i-1)) * nw + (w-1)) * nb
            plot for [m=1:nm] datafile index (base + m-1) using 1:2 with lines lw 2 dt m \
                 title word(modes, m), \
                 datafile index (base + nm) using 1:2 with lines lw 1 dt 3 lc rgb "gray40" title "2 x none"
        }
        unset multiplot
        set output
    }
}
