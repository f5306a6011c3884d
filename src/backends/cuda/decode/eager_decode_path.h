// EagerDecodePath: the layered kernels launched one by one for every step. Serves any decode
// plan with at most kLogitRowsPerChunk logits rows (whatever the sampling), and with hooks set.
#pragma once

#include <memory>

#include "backends/cuda/decode/decode_path.h"

namespace mkserve::cuda {

class EagerDecodePath : public DecodePath {
 public:
  explicit EagerDecodePath(const DecodePathContext& context) : c_(context) {}

  std::string_view name() const override { return "eager"; }
  bool Accepts(const StepPlan& plan) const override;
  void Run(const StepPlan& plan, const InStepSamples* in_step, cudaStream_t stream) override;

 private:
  const DecodePathContext& c_;
};

std::unique_ptr<DecodePath> MakeEagerDecodePath(const DecodePathContext& context);

}  // namespace mkserve::cuda
