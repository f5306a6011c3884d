#include "megakernel/device/megakernel_decode_path.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "megakernel/device/megakernel_decoder.h"

namespace mkserve::megakernel {
namespace {

class MegakernelDecodePath : public cuda::DecodePath {
 public:
  explicit MegakernelDecodePath(const cuda::DecodePathContext& context) : c_(context) {
    if (!MegakernelUnsupportedReason(c_.config)) {
      MegakernelDecoderOptions options;
      options.max_batch = max_batch();
      if (!c_.options.megakernel_policy.empty()) {
        options.policy =
            SchedulePolicy::FromJson(nlohmann::json::parse(c_.options.megakernel_policy));
      }
      panels_.emplace(c_.config, c_.weights);
      decoder_.emplace(c_.config, c_.weights, *panels_, c_.kv_pool, options);
    }
  }

  std::string_view name() const override { return "megakernel"; }

  // The decoder writes one logits row per sequence, in sequence order: the plan must want
  // exactly those rows. Hooks (profiling, forced routing) need the layered kernels.
  bool Accepts(const cuda::StepPlan& plan) const override {
    if (!decoder_ || plan.num_sequences < 1 || plan.num_sequences > max_batch()) return false;
    if (c_.options.hooks && c_.options.hooks->active()) return false;
    if (static_cast<int64_t>(plan.logit_rows.size()) != plan.num_sequences) return false;
    for (size_t r = 0; r < plan.logit_rows.size(); ++r) {
      if (plan.logit_rows[r].token_index != static_cast<int32_t>(r)) return false;
    }
    return true;
  }

  // The kernel's kSample tasks sample the staged rows (the schedule policy's include_sampling).
  bool SamplesInStep() const override { return decoder_ && decoder_->samples_in_step(); }
  // MegakernelDecoder::Run waits for its step's last kernel (the watchdog).
  bool WaitsForStep() const override { return true; }

  void Run(const cuda::StepPlan& plan, const cuda::InStepSamples* in_step,
           cudaStream_t stream) override {
    cuda::StepWorkspace& ws = c_.workspace;
    const bool stuck = c_.options.hooks && c_.options.hooks->TakeStuckStep();
    decoder_->Run(plan, ws.logits.data(), StepSampling{ws.sampled.device(), in_step}, stream,
                  stuck ? StepFault::kStuckWait : StepFault::kNone);
  }

  bool Starts() const override { return decoder_.has_value(); }
  void Start(const cuda::StepPlan& plan, const cuda::InStepSamples* in_step,
             std::span<const int32_t> pick_rows, int32_t* argmax, int slot,
             cudaStream_t stream) override {
    const bool stuck = c_.options.hooks && c_.options.hooks->TakeStuckStep();
    decoder_->Start(plan, c_.workspace.logits.data(), StepSampling{argmax, in_step}, stream, slot,
                    pick_rows, stuck ? StepFault::kStuckWait : StepFault::kNone);
  }
  void Finish(int slot) override { decoder_->Finish(slot); }

  // Every schedule of 1..max_batch rows in the buckets up to the one holding the warm-up context,
  // built and verified on the host's cores (about 10 s on one), then uploaded, before the first
  // request (tens of ms each otherwise).
  int64_t WarmUp(const cuda::DecodeWarmUp& request, cudaStream_t stream) override {
    (void)stream;
    if (!decoder_) return 0;
    const int64_t batches = std::min(request.max_batch, max_batch());
    std::vector<std::pair<int64_t, int64_t>> steps;  // (rows, longest context)
    for (int64_t bound : decoder_->bucket_bounds()) {
      for (int64_t batch = 1; batch <= batches; ++batch) {
        steps.emplace_back(batch, bound);
      }
      if (bound > request.max_context_tokens) break;  // +1: the decoded token attends to itself
    }
    const int threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 16u));
    return decoder_->Prepare(steps, threads, request.deadline, request.progress);
  }

 private:
  int64_t max_batch() const { return std::min<int64_t>(kMaxMegakernelBatch, c_.options.max_batch); }

  const cuda::DecodePathContext& c_;
  std::optional<ProjectionPanels> panels_;    // the KV budget left room for them
  std::optional<MegakernelDecoder> decoder_;  // empty: the model is not one the kernel runs
};

}  // namespace

std::unique_ptr<cuda::DecodePath> MakeMegakernelDecodePath(const cuda::DecodePathContext& context) {
  return std::make_unique<MegakernelDecodePath>(context);
}

int64_t MegakernelDecodePathBytes(const ModelConfig& config) {
  return MegakernelUnsupportedReason(config) ? 0 : ProjectionPanels::Bytes(config);
}

}  // namespace mkserve::megakernel
