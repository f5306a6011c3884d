"""HF's routing decisions, recorded next to its logits so a bf16 engine can be checked with the
reference's routing forced (and its own free choices judged against the reference's near-ties).

RoutingRecorder hooks every Cohere2MoeTopKRouter (its forward returns router_logits,
router_scores, selected_experts) and keeps, per MoE layer in layer order, the float32 router
logits [T][E] and the expert ids HF selected [T][k] (torch.topk order, best first).
"""
import torch


class RoutingRecorder:
    def __init__(self, model):
        self.model = model
        self.logits, self.ids, self.layers, self._hooks = [], [], [], []

    def __enter__(self):
        for index, layer in enumerate(self.model.model.layers):
            gate = getattr(layer.mlp, "gate", None)
            if gate is None:  # dense layer
                continue
            self.layers.append(index)
            self._hooks.append(gate.register_forward_hook(self._record))
        return self

    def __exit__(self, *exc):
        for hook in self._hooks:
            hook.remove()

    def _record(self, module, inputs, output):
        router_logits, _, selected = output
        self.logits.append(router_logits.detach().float().cpu())
        self.ids.append(selected.detach().to(torch.int32).cpu())

    def stacked(self):
        """(logits [L][T][E] float32, ids [L][T][k] int32) of the one forward pass recorded."""
        if len(self.logits) != len(self.layers):
            raise RuntimeError(f"recorded {len(self.logits)} router calls for "
                               f"{len(self.layers)} MoE layers: run exactly one forward pass")
        return torch.stack(self.logits), torch.stack(self.ids)


class RoutingForcer:
    """Forces given expert ids [L][T][k] into every Cohere2MoeTopKRouter (MoE layers in order),
    with scores from the router's own logits as HF computes them (sigmoid, optionally
    renormalised, or softmax over the k): HF run with another run's routing decisions."""

    def __init__(self, model, ids):
        self.model, self.ids, self._hooks = model, ids, []

    def __enter__(self):
        gates = [layer.mlp.gate for layer in self.model.model.layers
                 if getattr(layer.mlp, "gate", None) is not None]
        if len(gates) != self.ids.shape[0]:
            raise RuntimeError(f"{self.ids.shape[0]} layers of forced ids for {len(gates)} routers")
        for gate, ids in zip(gates, self.ids):
            self._hooks.append(gate.register_forward_hook(self._forcing(ids)))
        return self

    def __exit__(self, *exc):
        for hook in self._hooks:
            hook.remove()

    @staticmethod
    def _forcing(ids):
        def hook(module, inputs, output):
            router_logits = output[0]
            selected = ids.to(router_logits.device, torch.int64).view(router_logits.shape[0], -1)
            scores = router_logits.gather(-1, selected)
            if module.expert_selection_fn == "softmax":
                scores = torch.nn.functional.softmax(scores, dim=1, dtype=torch.float)
            else:
                scores = torch.sigmoid(scores)
                if module.norm_topk_prob:
                    scores = scores / scores.sum(dim=-1, keepdim=True)
            return router_logits, scores, selected
        return hook


def kth_gaps(logits, k):
    """Per (layer, position): k-th minus (k+1)-th router logit, the margin of the top-k set.
    Infinite where every expert is chosen (k equals the expert count): no choice, no margin."""
    if k >= logits.shape[-1]:
        return torch.full(logits.shape[:-1], torch.inf)
    top = logits.topk(k + 1, dim=-1).values
    return top[..., k - 1] - top[..., k]


def swap_gaps(ref_logits, ref_ids, other_ids):
    """Per (layer, position) where the expert sets differ: the reference-logit gap our choice had
    to invert, max over dropped reference experts minus min over added ones (0 where equal)."""
    in_ref = torch.zeros(ref_logits.shape, dtype=torch.bool).scatter_(-1, ref_ids.long(), True)
    in_other = torch.zeros(ref_logits.shape, dtype=torch.bool).scatter_(-1, other_ids.long(), True)
    dropped = torch.where(in_ref & ~in_other, ref_logits, torch.tensor(-torch.inf))
    added = torch.where(in_other & ~in_ref, ref_logits, torch.tensor(torch.inf))
    gap = dropped.max(-1).values - added.min(-1).values
    differs = (in_ref != in_other).any(-1)
    return torch.where(differs, gap, torch.zeros_like(gap)), differs


def describe_differences(name, ref_logits, ref_ids, other_ids):
    """One line: how many routing decisions differ and how large the inverted gaps were."""
    gaps, differs = swap_gaps(ref_logits, ref_ids, other_ids)
    count = int(differs.sum())
    largest = float(gaps[differs].max()) if count else 0.0
    return (f"{name}: {count} of {differs.numel()} routing decisions differ, largest inverted "
            f"reference gap {largest:.2e}")
