#include "backends/cuda/tools/router_override.h"

#include <string>

#include "backends/cuda/core/cuda_check.h"
#include "backends/cuda/decode/router.h"
#include "common/error.h"

namespace mkserve::cuda {
namespace {

constexpr int kThreadsPerBlock = 128;

struct ForceArgs {
  const int32_t* forced;  // [num_tokens][top_k], this step's rows
  const float* logits;    // [num_tokens][num_experts]
  int64_t num_tokens;
  int64_t num_experts;
  int64_t top_k;
  ExpertSelection selection;
  bool renormalize;
  int32_t* expert_ids;
  float* weights;
};

// One thread per token: the forced ids, weighted as RouterKernel weights its own picks.
__global__ void ForceRoutingKernel(ForceArgs a) {
  const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (t >= a.num_tokens) return;
  const int32_t* ids = a.forced + t * a.top_k;
  const float* row = a.logits + t * a.num_experts;
  float top = row[ids[0]];
  for (int64_t j = 1; j < a.top_k; ++j) top = fmaxf(top, row[ids[j]]);
  float sum = 0.0f;
  for (int64_t j = 0; j < a.top_k; ++j) {
    const float logit = row[ids[j]];
    const float w =
        a.selection == ExpertSelection::kSigmoid ? 1.0f / (1.0f + expf(-logit)) : expf(logit - top);
    a.expert_ids[t * a.top_k + j] = ids[j];
    a.weights[t * a.top_k + j] = w;
    sum += w;
  }
  if (a.selection == ExpertSelection::kSoftmax || a.renormalize) {
    for (int64_t j = 0; j < a.top_k; ++j) a.weights[t * a.top_k + j] /= sum;
  }
}

void CheckForcedIds(const std::vector<int32_t>& ids, int64_t num_experts, int64_t top_k) {
  for (size_t row = 0; row * top_k < ids.size(); ++row) {
    for (int64_t j = 0; j < top_k; ++j) {
      const int32_t id = ids[row * top_k + j];
      if (id < 0 || id >= num_experts) {
        throw Error("RoutingOverride: forced expert id " + std::to_string(id) + " in row " +
                    std::to_string(row) + " is outside [0, " + std::to_string(num_experts) + ")");
      }
      for (int64_t i = 0; i < j; ++i) {
        if (ids[row * top_k + i] == id) {
          throw Error("RoutingOverride: expert " + std::to_string(id) + " forced twice in row " +
                      std::to_string(row));
        }
      }
    }
  }
}

}  // namespace

RoutingOverride::RoutingOverride(const ModelConfig& config, int64_t num_rows,
                                 const std::vector<int32_t>& forced_ids)
    : num_experts_(config.num_experts),
      top_k_(config.num_experts_per_token),
      selection_(config.expert_selection),
      renormalize_(config.norm_topk_prob),
      num_rows_(num_rows) {
  for (const LayerSpec& layer : config.layers) {
    moe_index_.push_back(layer.ffn == FfnKind::kMoe ? num_moe_layers_++ : -1);
  }
  if (num_rows <= 0 || num_moe_layers_ == 0 || top_k_ <= 0 || top_k_ > kMaxTopK) {
    throw Error("RoutingOverride: needs rows (" + std::to_string(num_rows) +
                ") and a MoE model with top_k in 1..16");
  }
  const int64_t num_ids = num_moe_layers_ * num_rows * top_k_;
  if (!forced_ids.empty()) {
    if (static_cast<int64_t>(forced_ids.size()) != num_ids) {
      throw Error("RoutingOverride: " + std::to_string(forced_ids.size()) +
                  " forced ids, want [moe layers " + std::to_string(num_moe_layers_) + "][rows " +
                  std::to_string(num_rows) + "][top_k " + std::to_string(top_k_) + "]");
    }
    CheckForcedIds(forced_ids, num_experts_, top_k_);
    forced_ids_ = DeviceBuffer<int32_t>(num_ids);
    MKSERVE_CUDA_CHECK(cudaMemcpy(forced_ids_.data(), forced_ids.data(), forced_ids_.bytes(),
                                  cudaMemcpyHostToDevice));
  }
  traced_ids_ = DeviceBuffer<int32_t>(num_ids);
  traced_logits_ = DeviceBuffer<float>(num_moe_layers_ * num_rows * num_experts_);
  // All bits set: id -1 and a NaN logit, so an untraced row cannot pass for a traced one.
  MKSERVE_CUDA_CHECK(cudaMemset(traced_ids_.data(), 0xff, traced_ids_.bytes()));
  MKSERVE_CUDA_CHECK(cudaMemset(traced_logits_.data(), 0xff, traced_logits_.bytes()));
}

std::vector<int32_t> RoutingOverride::TracedIds() const {
  std::vector<int32_t> ids(traced_ids_.count());
  MKSERVE_CUDA_CHECK(cudaDeviceSynchronize());
  MKSERVE_CUDA_CHECK(
      cudaMemcpy(ids.data(), traced_ids_.data(), traced_ids_.bytes(), cudaMemcpyDeviceToHost));
  return ids;
}

std::vector<float> RoutingOverride::TracedLogits() const {
  std::vector<float> logits(traced_logits_.count());
  MKSERVE_CUDA_CHECK(cudaDeviceSynchronize());
  MKSERVE_CUDA_CHECK(cudaMemcpy(logits.data(), traced_logits_.data(), traced_logits_.bytes(),
                                cudaMemcpyDeviceToHost));
  return logits;
}

void RoutingOverride::Apply(int64_t layer_id, const float* logits, int64_t num_tokens,
                            int32_t* expert_ids, float* weights, cudaStream_t stream) const {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  MKSERVE_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  if (capture != cudaStreamCaptureStatusNone) {
    throw Error("RoutingOverride: not usable inside a CUDA graph capture (turn graphs off)");
  }
  if (num_tokens <= 0) return;
  if (layer_id < 0 || layer_id >= static_cast<int64_t>(moe_index_.size()) ||
      moe_index_[layer_id] < 0 || first_row_ < 0 || first_row_ + num_tokens > num_rows_) {
    throw Error("RoutingOverride: layer " + std::to_string(layer_id) + " rows [" +
                std::to_string(first_row_) + ", " + std::to_string(first_row_ + num_tokens) +
                ") outside the override's MoE layers or its " + std::to_string(num_rows_) +
                " rows");
  }
  const int64_t row = moe_index_[layer_id] * num_rows_ + first_row_;
  MKSERVE_CUDA_CHECK(cudaMemcpyAsync(traced_ids_.data() + row * top_k_, expert_ids,
                                     num_tokens * top_k_ * sizeof(int32_t),
                                     cudaMemcpyDeviceToDevice, stream));
  MKSERVE_CUDA_CHECK(cudaMemcpyAsync(traced_logits_.data() + row * num_experts_, logits,
                                     num_tokens * num_experts_ * sizeof(float),
                                     cudaMemcpyDeviceToDevice, stream));
  if (!is_forced()) return;
  const ForceArgs args{forced_ids_.data() + row * top_k_,
                       logits,
                       num_tokens,
                       num_experts_,
                       top_k_,
                       selection_,
                       renormalize_,
                       expert_ids,
                       weights};
  const unsigned blocks =
      static_cast<unsigned>((num_tokens + kThreadsPerBlock - 1) / kThreadsPerBlock);
  ForceRoutingKernel<<<blocks, kThreadsPerBlock, 0, stream>>>(args);
  MKSERVE_CUDA_CHECK_LAUNCH();
}

}  // namespace mkserve::cuda
