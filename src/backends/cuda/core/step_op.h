// The operation classes of a layered step, as StepHooks sees them (per-op timing in the tools).
#pragma once

namespace mkserve::cuda {

enum class StepOp {
  kEmbed,
  kAddNorm,
  kQkv,
  kRopeKv,
  kAttention,
  kOProj,
  kRouter,  // router logits + top-k
  kFfn,     // MoE experts, shared experts and dense MLPs
  kLmHead,  // row gather + LM head GEMV/GEMM
  kSampling,
  kCount,
};

inline constexpr int kNumStepOps = static_cast<int>(StepOp::kCount);

const char* StepOpName(StepOp op);

}  // namespace mkserve::cuda
