#!/usr/bin/env python3
"""Golden fixtures from HF transformers' Cohere2MoeForCausalLM (the oracle), run on the GPU machine.

For each config below: build a small random model, save it as a checkpoint (config.json +
safetensors), then record float32 logits (eager attention) for a fixed prompt and 16 greedy
decode steps through HF's KV cache. The CPU reference must reproduce them (tests/backends/cpu).

usage: python3 tools/oracle/make_golden.py --out tests/fixtures/golden
Output per model: DIR/<name>/{config.json, model.safetensors or shards, golden.json}
golden.json:
  prompt_ids      [T]           the prompt
  prompt_logits   [T][V]        logits at every prompt position (scaled by logit_scale)
  greedy_ids      [16]          greedy_ids[0] = argmax(prompt_logits[T-1]),
                                greedy_ids[i+1] = argmax(decode_logits[i])
  decode_logits   [16][V]       logits after feeding greedy_ids[i] at position T + i
  min_top2_margin float         smallest gap between the best and second logit (ties guard)
routing.json (HF's routing over prompt_ids + greedy_ids, one uncached float32 pass):
  moe_layers      [L]           layer index of each MoE layer
  expert_ids      [L][T+16][k]  the experts HF selected, best first
  router_logits   [L][T+16][E]  float32 router logits
--routing-only rebuilds each model from its seed, checks that it reproduces the stored
golden.json (same prompt, logits within 1e-5 relative) and writes only routing.json.
"""
import argparse
import json
import os

import torch
from safetensors.torch import save_file
from transformers import Cohere2MoeConfig, Cohere2MoeForCausalLM

from routing_record import RoutingRecorder, kth_gaps

VOCAB = 512
PROMPT_LEN = 40  # longer than the sliding window (16) so prefill crosses it
DECODE_STEPS = 16

COMMON = {
    "architectures": ["Cohere2MoeForCausalLM"],
    "model_type": "cohere2_moe",
    "vocab_size": VOCAB,
    "hidden_size": 64,
    "head_dim": 16,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "max_position_embeddings": 4096,
    "rope_theta": 50000.0,
    "sliding_window": 16,
    "hidden_act": "silu",
    "attention_bias": False,
    "use_qk_norm": False,
    "use_parallel_block": True,
    "bos_token_id": 2,
    "eos_token_id": [VOCAB - 1],
    "pad_token_id": 0,
    "initializer_range": 0.15,  # large enough that layers, not the tied embedding, pick tokens
}

# North Mini Code semantics: dense layer 0 with forced RoPE, 3:1 sliding/full (full = NoPE),
# sigmoid top-k without renormalisation, RMSNorm, tied head with logit_scale. Saved with the
# released per-expert tensor names and a hand-written config (first_k_dense_replace form).
NORTH = dict(COMMON, **{
    "num_hidden_layers": 6,
    "first_k_dense_replace": 1,
    "prefix_dense_intermediate_size": 96,
    "prefix_dense_sliding_window_pattern": 1,
    "sliding_window_pattern": 4,
    "intermediate_size": 32,
    "num_experts": 8,
    "num_experts_per_tok": 2,
    "num_shared_experts": 0,
    "expert_selection_fn": "sigmoid",
    "norm_topk_prob": False,
    "rms_norm_eps": 1e-6,
    "layer_norm_eps": 1e-5,
    "logit_scale": 0.5,
    "tie_word_embeddings": True,
})

# The other branches of the class: LayerNorm, softmax router, one shared expert averaged, two
# dense prefix layers with prefix pattern 2 (so no forced RoPE). Saved with fused expert
# tensors and transformers' own config form, in two shards.
LAYERNORM_SOFTMAX_SHARED = dict(COMMON, **{
    "num_hidden_layers": 6,
    "first_k_dense_replace": 2,
    "prefix_dense_intermediate_size": 80,
    "prefix_dense_sliding_window_pattern": 2,
    "sliding_window_pattern": 4,
    "intermediate_size": 24,
    "num_experts": 6,
    "num_experts_per_tok": 3,
    "num_shared_experts": 1,
    "shared_expert_combination_strategy": "average",
    "expert_selection_fn": "softmax",
    "norm_topk_prob": True,
    "rms_norm_eps": None,
    "layer_norm_eps": 1e-5,
    "logit_scale": 0.25,
    "tie_word_embeddings": True,
})

# Renormalised sigmoid with two shared experts summed, untied head, float32 weights.
SIGMOID_RENORM_SUM = dict(COMMON, **{
    "num_hidden_layers": 5,
    "first_k_dense_replace": 1,
    "prefix_dense_intermediate_size": 64,
    "prefix_dense_sliding_window_pattern": 1,
    "sliding_window_pattern": 2,
    "intermediate_size": 16,
    "num_experts": 8,
    "num_experts_per_tok": 3,
    "num_shared_experts": 2,
    "shared_expert_combination_strategy": "sum",
    "expert_selection_fn": "sigmoid",
    "norm_topk_prob": True,
    "rms_norm_eps": 1e-5,
    "logit_scale": 1.0,
    "tie_word_embeddings": False,
})


def build_model(config_dict, seed, weight_dtype):
    torch.manual_seed(seed)
    config = Cohere2MoeConfig.from_dict(dict(config_dict))
    config._attn_implementation = "eager"
    if hasattr(config, "_experts_implementation"):
        config._experts_implementation = "eager"  # the plain per-expert loop, exact in float32
    model = Cohere2MoeForCausalLM(config).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name:  # norms around 1 so they matter but stay stable
                param.copy_(1.0 + 0.1 * torch.randn_like(param))
            # Round every weight to the stored dtype, then compute in float32.
            param.copy_(param.to(weight_dtype).to(torch.float32))
    return model.to(torch.float32)


def fused_state_dict(model, dtype):
    """transformers 5's in-memory layout: mlp.experts.gate_up_proj [E, 2I, H], down_proj [E, H, I]."""
    out = {k: v.contiguous() for k, v in model.state_dict().items()}
    if model.config.tie_word_embeddings:
        out.pop("lm_head.weight", None)
    return {k: v.to(dtype) for k, v in out.items()}


def save_sharded(tensors, path, num_shards):
    """Writes model-0000i-of-0000n.safetensors plus model.safetensors.index.json."""
    names = sorted(tensors)
    weight_map = {}
    total = 0
    for shard in range(num_shards):
        file = f"model-{shard + 1:05d}-of-{num_shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[shard::num_shards]}
        save_file(part, os.path.join(path, file), metadata={"format": "pt"})
        weight_map.update({n: file for n in part})
        total += sum(t.numel() * t.element_size() for t in part.values())
    with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)


def per_expert_state_dict(model, dtype):
    """The released layout: one 2-D tensor per expert and projection."""
    out = {}
    for name, tensor in model.state_dict().items():
        if name == "lm_head.weight" and model.config.tie_word_embeddings:
            continue
        if name.endswith("mlp.experts.gate_up_proj"):
            prefix = name[: -len("gate_up_proj")]
            inter = tensor.shape[1] // 2
            for e in range(tensor.shape[0]):
                out[f"{prefix}{e}.gate_proj.weight"] = tensor[e, :inter].contiguous()
                out[f"{prefix}{e}.up_proj.weight"] = tensor[e, inter:].contiguous()
        elif name.endswith("mlp.experts.down_proj"):
            prefix = name[: -len("down_proj")]
            for e in range(tensor.shape[0]):
                out[f"{prefix}{e}.down_proj.weight"] = tensor[e].contiguous()
        else:
            out[name] = tensor.contiguous()
    return {k: v.to(dtype) for k, v in out.items()}


@torch.no_grad()
def record(model, prompt_ids, device):
    model = model.to(device)
    ids = torch.tensor([prompt_ids], device=device)
    out = model(input_ids=ids, use_cache=True)
    prompt_logits = out.logits[0].float()
    cache = out.past_key_values
    greedy, decode_logits = [], []
    next_id = int(prompt_logits[-1].argmax())
    for step in range(DECODE_STEPS):
        greedy.append(next_id)
        position = torch.tensor([[len(prompt_ids) + step]], device=device)
        out = model(input_ids=torch.tensor([[next_id]], device=device), past_key_values=cache,
                    position_ids=position, use_cache=True)
        cache = out.past_key_values
        logits = out.logits[0, -1].float()
        decode_logits.append(logits)
        next_id = int(logits.argmax())
    # Cross-check HF's cached decode against one uncached pass over the whole sequence.
    full = model(input_ids=torch.tensor([prompt_ids + greedy], device=device)).logits[0].float()
    cached = torch.cat([prompt_logits, torch.stack(decode_logits)])
    drift = (full - cached).abs().max().item() / full.abs().max().item()
    assert drift < 1e-4, f"HF cached vs uncached logits differ: {drift}"
    all_logits = torch.cat([prompt_logits, torch.stack(decode_logits)])
    top2 = all_logits.topk(2, dim=-1).values
    margin = (top2[:, 0] - top2[:, 1]).min().item()
    return prompt_logits.cpu(), greedy, torch.stack(decode_logits).cpu(), margin, drift


@torch.no_grad()
def min_router_gap(model, ids):
    """Smallest float32 gap between the k-th and (k+1)-th router logit over every position and MoE
    layer: a bf16 path can pick other experts where it is below its rounding noise."""
    k = model.config.num_experts_per_tok
    out = model(input_ids=torch.tensor([ids]), output_router_logits=True)
    gaps = [r.float().topk(k + 1, dim=-1).values for r in out.router_logits]
    return min((g[:, k - 1] - g[:, k]).min().item() for g in gaps)


def bf16_safe_seed(config_dict, first_seed, min_gap, weight_dtype, device, tries=200):
    """The first seed whose model and prompt keep every routing decision min_gap away from a tie."""
    for seed in range(first_seed, first_seed + tries):
        model = build_model(config_dict, seed, weight_dtype)
        generator = torch.Generator().manual_seed(seed + 1)
        prompt = [2] + torch.randint(5, VOCAB - 1, (PROMPT_LEN - 1,), generator=generator).tolist()
        _, greedy, _, _, _ = record(model, prompt, device)
        gap = min_router_gap(model, prompt + greedy)
        if gap >= min_gap:
            print(f"seed {seed}: smallest router gap {gap:.3e} >= {min_gap}")
            return seed
    raise SystemExit(f"no seed in {tries} tries keeps router gaps >= {min_gap}")


@torch.no_grad()
def write_routing(path, model, ids):
    """routing.json: HF's routing decisions over `ids`; returns the full pass's logits."""
    with RoutingRecorder(model) as routing:
        logits = model(input_ids=torch.tensor([ids])).logits[0].float()
    router_logits, expert_ids = routing.stacked()
    with open(os.path.join(path, "routing.json"), "w") as f:
        json.dump({"source": "HF float32, one uncached pass over prompt_ids + greedy_ids",
                   "moe_layers": routing.layers, "expert_ids": expert_ids.tolist(),
                   "router_logits": router_logits.tolist()}, f)
    gap = kth_gaps(router_logits, model.config.num_experts_per_tok).min().item()
    print(f"{os.path.basename(path)}: routing.json, smallest k/k+1 router gap {gap:.2e}")
    return logits


def rewrite_routing(out_dir, name, config_dict, seed, weight_dtype):
    """Adds routing.json to an existing fixture after checking the rebuilt model reproduces it."""
    path = os.path.join(out_dir, name)
    with open(os.path.join(path, "golden.json")) as f:
        golden = json.load(f)
    model = build_model(config_dict, seed, weight_dtype)
    generator = torch.Generator().manual_seed(seed + 1)
    prompt = [2] + torch.randint(5, VOCAB - 1, (PROMPT_LEN - 1,), generator=generator).tolist()
    if prompt != golden["prompt_ids"]:
        raise SystemExit(f"{name}: the rebuilt prompt differs from golden.json")
    logits = write_routing(path, model, prompt + golden["greedy_ids"])
    want = torch.tensor(golden["prompt_logits"] + golden["decode_logits"])
    drift = (logits[: len(want)] - want).abs().max().item() / want.abs().max().item()
    if drift > 1e-5:
        raise SystemExit(f"{name}: rebuilt model's logits differ from golden.json by {drift:.1e}")
    print(f"{name}: rebuilt model reproduces golden.json (relative drift {drift:.1e})")


def write_fixture(out_dir, name, config_dict, seed, weight_dtype, layout, device):
    path = os.path.join(out_dir, name)
    os.makedirs(path, exist_ok=True)
    model = build_model(config_dict, seed, weight_dtype)
    if layout == "per_expert":
        with open(os.path.join(path, "config.json"), "w") as f:
            json.dump(config_dict, f, indent=2)
        save_file(per_expert_state_dict(model, weight_dtype), os.path.join(path, "model.safetensors"),
                  metadata={"format": "pt"})
    else:  # fused experts, transformers' own config form, two shards with an index
        with open(os.path.join(path, "config.json"), "w") as f:
            f.write(model.config.to_json_string())
        save_sharded(fused_state_dict(model, weight_dtype), path, 2)
    generator = torch.Generator().manual_seed(seed + 1)
    prompt = [2] + torch.randint(5, VOCAB - 1, (PROMPT_LEN - 1,), generator=generator).tolist()
    prompt_logits, greedy, decode_logits, margin, drift = record(model, prompt, device)
    golden = {
        "source": f"transformers Cohere2MoeForCausalLM, eager attention, float32, seed {seed}",
        "prompt_ids": prompt,
        "prompt_logits": prompt_logits.tolist(),
        "greedy_ids": greedy,
        "decode_logits": decode_logits.tolist(),
        "min_top2_margin": margin,
    }
    with open(os.path.join(path, "golden.json"), "w") as f:
        json.dump(golden, f)
    write_routing(path, model.to("cpu"), prompt + greedy)
    files = sorted(os.listdir(path))
    print(f"{name:28s} layout={layout:10s} dtype={str(weight_dtype):15s} margin={margin:.2e} "
          f"hf_cache_drift={drift:.1e} greedy={greedy} files={files}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="tests/fixtures/golden")
    parser.add_argument("--only", help="write only this fixture")
    parser.add_argument("--routing-only", action="store_true",
                        help="add routing.json to the existing fixtures, nothing else")
    args = parser.parse_args()
    device = "cpu"  # tiny models: the CPU's float32 is the most exact oracle
    torch.set_float32_matmul_precision("highest")
    import transformers
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, device {device}")
    fixtures = {
        "north": lambda: (NORTH, 1234, torch.bfloat16, "per_expert"),
        "layernorm_softmax_shared": lambda: (LAYERNORM_SOFTMAX_SHARED, 2345, torch.bfloat16,
                                             "fused"),
        "sigmoid_renorm_sum": lambda: (SIGMOID_RENORM_SUM, 3456, torch.float32, "fused"),
        # A bf16-robust North fixture would take its seed from bf16_safe_seed(...); at this size
        # (5 MoE layers x 56 positions) no seed in 5000..5199 keeps every gap >= 0.02.
    }
    for name, make in fixtures.items():
        if args.only in (None, name):
            config_dict, seed, weight_dtype, layout = make()
            if args.routing_only:
                rewrite_routing(args.out, name, config_dict, seed, weight_dtype)
            else:
                write_fixture(args.out, name, config_dict, seed, weight_dtype, layout, device)


if __name__ == "__main__":
    main()
