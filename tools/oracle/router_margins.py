#!/usr/bin/env python3
"""Where does bf16 flip a routing decision? For a golden fixture model, compares the top-k
expert sets of HF in float32 with HF in bfloat16 at every position and MoE layer, and prints
the smallest gaps between the k-th and (k+1)-th router logit (float32).

usage: python3 tools/oracle/router_margins.py tests/fixtures/golden/north
(rebuilds the fixture's model from make_golden.py's seed; only the north fixture for now)
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
import make_golden  # noqa: E402


@torch.no_grad()
def router_logits(model, ids):
    out = model(input_ids=torch.tensor([ids]), output_router_logits=True)
    return [r.float() for r in out.router_logits]


def main():
    fixture = sys.argv[1]
    golden = json.load(open(os.path.join(fixture, "golden.json")))
    ids = golden["prompt_ids"] + golden["greedy_ids"]
    model = make_golden.build_model(make_golden.NORTH, 1234, torch.bfloat16)
    k = model.config.num_experts_per_tok
    fp32 = router_logits(model, ids)
    bf16 = router_logits(model.to(torch.bfloat16), ids)
    for layer, (a, b) in enumerate(zip(fp32, bf16)):
        top = a.topk(k + 1, dim=-1).values
        gap = top[:, k - 1] - top[:, k]
        set_a = a.topk(k, dim=-1).indices.sort(dim=-1).values
        set_b = b.topk(k, dim=-1).indices.sort(dim=-1).values
        flips = (set_a != set_b).any(dim=-1).nonzero().flatten().tolist()
        order = gap.argsort()[:3].tolist()
        print(f"moe layer {layer}: smallest k/k+1 gaps "
              + ", ".join(f"pos {p}: {gap[p]:.2e}" for p in order)
              + f"; bf16 top-{k} differs at positions {flips}")


if __name__ == "__main__":
    main()
