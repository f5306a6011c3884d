#!/usr/bin/env python3
"""HBM traffic over one megakernel launch, from an Nsight Compute report with the PM sampling
section (scripts/megakernel_hbm_timeline.sh makes one).

Usage: megakernel_hbm_timeline.py REPORT.ncu-rep [window_start_us] [window_us]

Prints DRAM throughput (% of peak) over the launch: its mean, how much of the time it spends in
each band, the mean of every 20 us, and every sample of one window (default: 110 us from the
middle of the launch, about two batch-1 layers), where the troughs of a layer show. Needs
Nsight Compute's Python module (ncu_report, in its extras/python folder).
"""
import glob
import sys

sys.path[:0] = glob.glob("/opt/nvidia/nsight-compute/*/extras/python") + glob.glob(
    "/usr/local/cuda*/nsight-compute*/extras/python")
import ncu_report  # noqa: E402  (found through the paths above)

DRAM = "FBSP.TriageCompute.dramc__throughput.avg.pct_of_peak_sustained_elapsed"
ACTIVE = "TPC.TriageCompute.sm__cycles_active.avg"


def series(action, name):
    metric = action.metric_by_name(name)
    if metric is None:
        sys.exit(f"the report has no {name}: was it taken with --section PmSampling?")
    ids = metric.correlation_ids()
    times = [ids.as_uint64(i) for i in range(ids.num_instances())]
    return times, [metric.as_double(i) for i in range(metric.num_instances())]


def main():
    action = ncu_report.load_report(sys.argv[1]).range_by_idx(0).action_by_idx(0)
    times, dram = series(action, DRAM)
    _, active = series(action, ACTIVE)
    # The launch: the samples where the SMs were active (the buffer also holds idle ones).
    inside = [i for i in range(len(times)) if active[i] > 0 and times[i] > 0]
    if not inside:
        sys.exit("no sample with active SMs")
    first, last = inside[0], inside[-1]
    t0 = times[first]
    us = [(times[i] - t0) / 1000.0 for i in range(first, last + 1)]
    values = dram[first:last + 1]
    span = us[-1]
    print(f"{action.name()}: {len(values)} samples over {span:.1f} us "
          f"(one every {span / max(1, len(values) - 1):.2f} us)")
    print(f"DRAM throughput, % of peak: mean {sum(values) / len(values):.1f}")
    for low, high in ((0, 25), (25, 50), (50, 75), (75, 90), (90, 101)):
        share = sum(low <= v < high for v in values) / len(values)
        print(f"  {low:3d}-{min(high, 100):3d} %: {100 * share:5.1f} % of the time")
    print("mean of every 20 us:")
    row = []
    for start in range(0, int(span) + 1, 20):
        window = [v for t, v in zip(us, values) if start <= t < start + 20]
        if window:
            row.append(f"{start}:{sum(window) / len(window):.0f}")
    print("  " + " ".join(row))
    begin = float(sys.argv[2]) if len(sys.argv) > 2 else span / 2
    length = float(sys.argv[3]) if len(sys.argv) > 3 else 110.0
    print(f"every sample from {begin:.0f} to {begin + length:.0f} us (us:%):")
    print("  " + " ".join(f"{t:.0f}:{v:.0f}" for t, v in zip(us, values)
                          if begin <= t < begin + length))


if __name__ == "__main__":
    main()
