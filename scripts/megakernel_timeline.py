#!/usr/bin/env python3
"""One layer of a recorded megakernel step (megakernel_bench with MEGAKERNEL_BENCH_TRACE=DIR).

Usage: megakernel_timeline.py TRACE.csv [layer] [bucket_us] [sm,sm,...]

Times are microseconds from when the layer's input was ready (its QKV tasks' first wait ends);
the layer ends when the next layer's input is ready. Prints every layer's span by kind (sliding
or full attention: one layer is not the step) and, as medians over the sliding MoE layers, when
the routing chain delivers the first expert item (and how long the first claim ranks) and how
long the SMs idle at a layer's end;
then, for the chosen layer, per opcode and
per item queue: count, first start, first ready, last end, mean wait and mean run; the hops
between SMs on the layer's chains (a producer's last end to its consumer's first ready); then how
busy the SMs were over the layer (time inside a task or an item after its wait), how items
spread over the SMs, the busiest and idlest SMs, and, every bucket_us (default 2.5), how many
SMs were running and what. Last, what each of the given SMs ran from the layer's start to the
next layer's (default: the two whose work of the layer that ended before the next layer's input
ended last, which is where a layer's end comes from): every task and item with its start, ready
and end.
"""
import collections
import csv
import sys


def main():
    path = sys.argv[1]
    layer = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    bucket = float(sys.argv[3]) if len(sys.argv) > 3 else 2.5
    chosen = [int(sm) for sm in sys.argv[4].split(",")] if len(sys.argv) > 4 else []
    tasks, items = [], []
    with open(path) as f:
        for row in csv.DictReader(f):
            for key in ("start", "ready", "end"):
                row[key] = float(row[key])
            row["layer"] = int(row["layer"])
            row["sm"] = int(row["sm"])
            (tasks if row["what"] == "task" else items).append(row)
    # A layer starts when its input is ready: the first wait of its QKV tasks that ends (after
    # the previous join, or with the fused norm after the previous O-proj and FFN).
    def input_ready(l):
        qkv = [t["ready"] for t in tasks if t["opcode"] == "qkv" and t["layer"] == l]
        if not qkv:
            sys.exit(f"no QKV task of layer {l} in {path}")
        return min(qkv)

    origin = input_ready(layer)
    layer_end = input_ready(layer + 1)
    span = layer_end - origin
    print(f"layer {layer}: {span:.1f} us from its input to the next layer's")

    # One layer is not the step: every layer's span, by kind (full-attention layers claim their
    # attention, sliding ones run static splits), so a change is judged on all of them.
    layers = sorted({t["layer"] for t in tasks if t["opcode"] == "qkv"})
    full = {t["layer"] for t in tasks if t["opcode"] == "attention_claim"}
    spans = collections.defaultdict(list)
    for l in layers[1:-1]:  # layer 0 is dense; the last has no next QKV
        spans["full" if l in full else "sliding"].append(input_ready(l + 1) - input_ready(l))
    for kind, values in sorted(spans.items()):
        values.sort()
        print(f"  {kind} layers: median {values[len(values) // 2]:.1f} us, "
              f"{values[0]:.1f}-{values[-1]:.1f} over {len(values)}, sum {sum(values):.0f} us")

    print_chain_medians(tasks, items, layers, full, input_ready)

    groups = collections.OrderedDict()
    for t in sorted(tasks, key=lambda t: t["start"]):
        if t["layer"] == layer:
            groups.setdefault(("task", t["opcode"]), []).append(t)
    for i in sorted(items, key=lambda t: t["start"]):
        if i["layer"] == layer:
            groups.setdefault(("item", i["opcode"]), []).append(i)
    print("| what | name | n | first start | first ready | last end | mean wait | mean run |")
    print("|---|---|---|---|---|---|---|---|")
    for (what, name), rows in groups.items():
        n = len(rows)
        print(f"| {what} | {name} | {n} | {min(r['start'] for r in rows) - origin:.1f} | "
              f"{min(r['ready'] for r in rows) - origin:.1f} | "
              f"{max(r['end'] for r in rows) - origin:.1f} | "
              f"{sum(r['ready'] - r['start'] for r in rows) / n:.2f} | "
              f"{sum(r['end'] - r['ready'] for r in rows) / n:.2f} |")

    # Hand-offs between SMs on the layer's chains: the producers' last end to the consumer's
    # first ready (what a signal costs: the fence, the add, the consumer's poll).
    def edge(what, name, key, pick):
        values = [r[key] for (w, n), rows in groups.items() if (w, n) == (what, name) for r in rows]
        return pick(values) - origin if values else None

    # Batch 1 has no finalize (expert items by pick): its claims wait for the top-k.
    routing = "moe_finalize" if ("task", "moe_finalize") in groups else "topk"
    hops = [(f"router -> {routing}", edge("task", "router", "end", max),
             edge("task", routing, "ready", min)),
            (f"{routing} -> first gate/up item", edge("task", routing, "end", max),
             edge("item", "expert_gate_up", "ready", min)),
            ("O-proj and MoE combine -> next layer's input",
             max(edge("task", "oproj", "end", max) or 0.0,
                 edge("task", "moe_combine", "end", max) or 0.0), span)]
    shown = [(name, b - a) for name, a, b in hops if a is not None and b is not None]
    if shown:
        print("\nhops: " + ", ".join(f"{name} {gap:.1f} us" for name, gap in shown))

    # Busy time per SM inside [origin, layer_end]: tasks that are not claim loops, and items.
    claim_ops = {"attention_claim", "expert_gate_up_claim", "expert_down_claim"}
    busy = collections.defaultdict(float)
    waiting = collections.defaultdict(float)
    sms = sorted({t["sm"] for t in tasks})

    def clip(a, b):
        return max(0.0, min(b, layer_end) - max(a, origin))

    for t in tasks:
        if t["opcode"] in claim_ops:
            continue
        busy[t["sm"]] += clip(t["ready"], t["end"])
        waiting[t["sm"]] += clip(t["start"], t["ready"])
    for i in items:
        busy[i["sm"]] += clip(i["ready"], i["end"])
        waiting[i["sm"]] += clip(i["start"], i["ready"])
    total_busy = sum(busy.values())
    print(f"\nSMs busy {100 * total_busy / (len(sms) * span):.1f} % of the layer "
          f"(waiting {100 * sum(waiting.values()) / (len(sms) * span):.1f} %)")
    per_kind = collections.Counter()
    for i in items:
        if i["layer"] == layer:
            per_kind[(i["opcode"], i["sm"])] += 1
    for kind in ("expert_gate_up", "expert_down", "attention"):
        counts = collections.Counter(per_kind[(kind, sm)] for sm in sms)
        if sum(k * v for k, v in counts.items()):
            print(f"{kind} items per SM: " +
                  ", ".join(f"{k}: {v} SMs" for k, v in sorted(counts.items())))
    print("\nbusiest and idlest SMs (busy us / waiting us):")
    order = sorted(sms, key=lambda sm: busy[sm])
    for sm in order[:4] + order[-4:]:
        print(f"  SM {sm}: busy {busy[sm]:.1f}, waiting {waiting[sm]:.1f}")

    # SMs running something (a task past its wait, or an item), per time bucket of the layer.
    running = [(t["ready"] - origin, t["end"] - origin, t["opcode"]) for t in tasks
               if t["opcode"] not in claim_ops]
    running += [(i["ready"] - origin, i["end"] - origin, i["opcode"]) for i in items]
    print(f"\nSMs running, every {bucket} us (the three largest shares):")
    t = 0.0
    while t < span:
        share = collections.Counter()
        for a, b, name in running:
            overlap = min(b, t + bucket) - max(a, t)
            if overlap > 0:
                share[name] += overlap / bucket
        top = " ".join(f"{name} {n:.0f}" for name, n in share.most_common(3))
        print(f"  {t:6.1f} {sum(share.values()):6.1f}  {top}")
        t += bucket

    if not chosen:
        last_end = collections.defaultdict(float)
        for r in tasks + items:
            if r["layer"] == layer and r["opcode"] not in claim_ops and r["end"] <= layer_end:
                last_end[r["sm"]] = max(last_end[r["sm"]], r["end"])
        chosen = sorted(last_end, key=lambda sm: -last_end[sm])[:2]
    for sm in chosen:
        print(f"\nSM {sm} (us: start, ready, end):")
        for r in sorted((r for r in tasks + items if r["sm"] == sm and r["end"] >= origin and
                         r["start"] <= layer_end), key=lambda r: r["start"]):
            print(f"  {r['what']:4} {r['opcode']:22} layer {r['layer']:2} "
                  f"{r['start'] - origin:6.1f} {r['ready'] - origin:6.1f} {r['end'] - origin:6.1f}")


def print_chain_medians(tasks, items, layers, full, input_ready):
    """The start of a MoE layer's routing chain and the idle time at its end, as medians over the
    sliding MoE layers (one layer is a snapshot): when the routers end, the first gate/up claim's
    wait ends and the first gate/up item starts, how long that claim ranks (its wait to the first
    item on its SM), when the QKV tasks end, and how long the SMs
    wait, after their last task of a layer, for the next layer's input."""
    claim_ops = {"attention_claim", "expert_gate_up_claim", "expert_down_claim"}
    by_layer = collections.defaultdict(list)
    for r in tasks + items:
        by_layer[r["layer"]].append(r)
    chain = collections.defaultdict(list)
    for l in layers[1:-1]:
        rows = by_layer[l]
        routers = [r["end"] for r in rows if r["opcode"] == "router"]
        claims = [r for r in rows if r["what"] == "task" and r["opcode"] == "expert_gate_up_claim"]
        up_items = [r for r in rows if r["what"] == "item" and r["opcode"] == "expert_gate_up"]
        if l in full or not routers or not claims or not up_items:
            continue
        origin, end = input_ready(l), input_ready(l + 1)
        first_claim = min(claims, key=lambda r: r["ready"])
        chain["routers end"].append(max(routers) - origin)
        chain["first gate/up claim ready"].append(first_claim["ready"] - origin)
        chain["first gate/up item starts"].append(min(r["start"] for r in up_items) - origin)
        # The ranking: from the first claim's wait to the first item on the same SM.
        own = [r["start"] for r in up_items if r["sm"] == first_claim["sm"]]
        if own:
            chain["first claim's ranking (us from its wait to its SM's first item)"].append(
                min(own) - first_claim["ready"])
        chain["QKV tasks end"].append(max(r["end"] for r in rows if r["opcode"] == "qkv") - origin)
        last = collections.defaultdict(float)
        for r in rows:
            if r["what"] == "task" and r["opcode"] not in claim_ops | {"join"}:
                last[r["sm"]] = max(last[r["sm"]], r["end"])
        chain["SM-us idle from each SM's last task to the next layer"].append(
            sum(max(0.0, end - t) for t in last.values()))
    if not chain:
        return
    n = len(chain["routers end"])
    print(f"  medians over {n} sliding MoE layers (us from each layer's input):")
    for name, values in chain.items():
        values.sort()
        print(f"    {name}: {values[len(values) // 2]:.1f}")


if __name__ == "__main__":
    main()
