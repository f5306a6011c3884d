#include "backends/cuda/decode/eager_decode_path.h"

#include "backends/cuda/decode/layered_forward.h"

namespace mkserve::cuda {

bool EagerDecodePath::Accepts(const StepPlan& plan) const {
  return plan.decode_only && static_cast<int64_t>(plan.logit_rows.size()) <= kLogitRowsPerChunk;
}

void EagerDecodePath::Run(const StepPlan& plan, const InStepSamples* /*in_step*/,
                          cudaStream_t stream) {
  const DeviceMetadata meta = UploadMetadata(plan, c_.workspace.metadata, stream);
  const LayeredForward forward(c_, stream);
  forward.Run(plan, meta);
  if (!plan.logit_rows.empty()) {
    forward.ComputeLogits(meta.logit_tokens, 0, static_cast<int64_t>(plan.logit_rows.size()));
  }
}

std::unique_ptr<DecodePath> MakeEagerDecodePath(const DecodePathContext& context) {
  return std::make_unique<EagerDecodePath>(context);
}

}  // namespace mkserve::cuda
