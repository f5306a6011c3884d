#include "backends/cuda/core/step_op.h"

namespace mkserve::cuda {

const char* StepOpName(StepOp op) {
  switch (op) {
    case StepOp::kEmbed:
      return "embed";
    case StepOp::kAddNorm:
      return "add+norm";
    case StepOp::kQkv:
      return "qkv linear";
    case StepOp::kRopeKv:
      return "rope+kv write";
    case StepOp::kAttention:
      return "attention";
    case StepOp::kOProj:
      return "o-proj";
    case StepOp::kRouter:
      return "router+topk";
    case StepOp::kFfn:
      return "moe/mlp";
    case StepOp::kLmHead:
      return "lm head";
    case StepOp::kSampling:
      return "sampling";
    case StepOp::kCount:
      break;
  }
  return "?";
}

}  // namespace mkserve::cuda
