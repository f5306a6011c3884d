#include "backends/cuda/tools/step_breakdown.h"

#include <algorithm>
#include <chrono>

#include "backends/cuda/tools/decode_bench.h"

namespace mkserve::cuda {
namespace {

constexpr double kBf16 = 2.0, kF32 = 4.0;

double& At(std::array<double, kNumStepOps>& bytes, StepOp op) {
  return bytes[static_cast<int>(op)];
}

}  // namespace

std::array<double, kNumStepOps> DecodeOpBytes(const ModelConfig& config, int64_t batch,
                                              int64_t context_tokens, int64_t distinct_experts) {
  std::array<double, kNumStepOps> bytes{};
  const double hidden = static_cast<double>(config.hidden_size);
  const double tokens = static_cast<double>(batch);
  const double qkv_width = static_cast<double>(config.q_width() + 2 * config.kv_width());
  At(bytes, StepOp::kEmbed) = tokens * hidden * kBf16;
  // Residual plus the two adds in fp32, and gamma; one norm per layer and the final one.
  At(bytes, StepOp::kAddNorm) =
      (config.num_layers + 1) * (3 * tokens * hidden * kF32 + hidden * kBf16);
  for (const LayerSpec& spec : config.layers) {
    At(bytes, StepOp::kQkv) += qkv_width * hidden * kBf16;
    At(bytes, StepOp::kRopeKv) += tokens * qkv_width * kF32;
    const double attended =
        spec.attention == AttentionKind::kSliding
            ? std::min<double>(context_tokens + 1, static_cast<double>(spec.window_tokens))
            : static_cast<double>(context_tokens + 1);
    At(bytes, StepOp::kAttention) += tokens * 2.0 * config.kv_width() * kBf16 * attended;
    At(bytes, StepOp::kOProj) += static_cast<double>(config.q_width()) * hidden * kBf16;
    if (spec.ffn == FfnKind::kDense) {
      At(bytes, StepOp::kFfn) += 3.0 * spec.ffn_intermediate_size * hidden * kBf16;
      continue;
    }
    At(bytes, StepOp::kRouter) += config.num_experts * hidden * kBf16 + tokens * hidden * kF32;
    At(bytes, StepOp::kFfn) += (distinct_experts + config.num_shared_experts) * 3.0 *
                               config.expert_intermediate_size * hidden * kBf16;
  }
  At(bytes, StepOp::kLmHead) = static_cast<double>(config.vocab_size) * hidden * kBf16;
  At(bytes, StepOp::kSampling) = tokens * config.vocab_size * kF32;
  return bytes;
}

StepBreakdown BenchBreakdown(CudaBackend& backend, ToolHooks& hooks, int64_t batch,
                             int64_t context_tokens, int warmup_steps, int steps) {
  const auto decode_batch = MakeDecodeBatch(backend, batch, context_tokens);
  StepProfiler profiler;
  hooks.set_profiler(&profiler);
  for (int i = 0; i < warmup_steps; ++i) backend.Step(decode_batch->inputs);
  profiler.Clear();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) backend.Step(decode_batch->inputs);
  const double wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  hooks.set_profiler(nullptr);
  StepBreakdown result;
  result.batch = batch;
  result.context_tokens = context_tokens;
  result.wall_ms = wall_ms / steps;
  result.distinct_experts = CountDistinctExperts(backend, batch);
  const auto bytes =
      DecodeOpBytes(backend.config(), batch, context_tokens, result.distinct_experts);
  for (double ms : profiler.total_ms()) result.gpu_ms += ms / steps;
  for (int i = 0; i < kNumStepOps; ++i) {
    OpShare& op = result.ops[i];
    op.op = static_cast<StepOp>(i);
    op.us_per_step = 1e3 * profiler.total_ms()[i] / steps;
    op.share = result.gpu_ms > 0 ? op.us_per_step / (1e3 * result.gpu_ms) : 0.0;
    op.bytes = bytes[i];
    op.gb_per_second = op.us_per_step > 0 ? op.bytes / (op.us_per_step * 1e3) : 0.0;
  }
  return result;
}

}  // namespace mkserve::cuda
