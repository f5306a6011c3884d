// DecodeOpBytes (host only): the per-op byte model of `mkserve bench --breakdown` against numbers
// worked out by hand from the North Mini Code geometry, and against the whole-step model.
#include "backends/cuda/tools/step_breakdown.h"

#include <gtest/gtest.h>

#include "backends/cuda/tools/decode_bench.h"
#include "model/presets.h"

namespace mkserve::cuda {
namespace {

double Bytes(const std::array<double, kNumStepOps>& bytes, StepOp op) {
  return bytes[static_cast<int>(op)];
}

TEST(DecodeOpBytesTest, NorthNumbersByHand) {
  const ModelConfig config = NmcPreset();
  const auto bytes = DecodeOpBytes(config, 1, 8192, 8);
  EXPECT_DOUBLE_EQ(Bytes(bytes, StepOp::kLmHead), 262144.0 * 2048 * 2);
  // 49 layers of q (32 x 128) + k, v (4 x 128 each) by 2048, bf16.
  EXPECT_DOUBLE_EQ(Bytes(bytes, StepOp::kQkv), 49.0 * (4096 + 1024) * 2048 * 2);
  EXPECT_DOUBLE_EQ(Bytes(bytes, StepOp::kOProj), 49.0 * 4096 * 2048 * 2);
  // 48 MoE layers: router 128 x 2048 bf16 plus the fp32 input row.
  EXPECT_DOUBLE_EQ(Bytes(bytes, StepOp::kRouter), 48.0 * (128 * 2048 * 2 + 2048 * 4));
  // Dense layer 0 (3 x 3072 x 2048) and 8 experts (3 x 768 x 2048) in each MoE layer.
  EXPECT_DOUBLE_EQ(Bytes(bytes, StepOp::kFfn),
                   3.0 * 3072 * 2048 * 2 + 48.0 * 8 * 3 * 768 * 2048 * 2);
  // K and V (4 x 128 bf16 each) per attended key: 13 full layers see 8193, 36 sliding see 4096.
  EXPECT_DOUBLE_EQ(Bytes(bytes, StepOp::kAttention), (13.0 * 8193 + 36.0 * 4096) * 2 * 512 * 2);
  EXPECT_DOUBLE_EQ(Bytes(bytes, StepOp::kSampling), 262144.0 * 4);
}

// The weight and KV classes add up to the step model of docs/speed-of-light.md, once the
// activation bytes the step model leaves out are taken back off.
TEST(DecodeOpBytesTest, AddsUpToStepBytes) {
  const ModelConfig config = NmcPreset(6);
  const int64_t batch = 8, context = 5000, experts = 40;
  const auto bytes = DecodeOpBytes(config, batch, context, experts);
  double sum = 0;
  for (StepOp op : {StepOp::kQkv, StepOp::kAttention, StepOp::kOProj, StepOp::kRouter, StepOp::kFfn,
                    StepOp::kLmHead}) {
    sum += Bytes(bytes, op);
  }
  sum -= config.num_moe_layers() * batch * config.hidden_size * 4.0;  // router input rows
  EXPECT_DOUBLE_EQ(sum, DecodeStepBytes(config, batch, context, experts));
}

}  // namespace
}  // namespace mkserve::cuda
