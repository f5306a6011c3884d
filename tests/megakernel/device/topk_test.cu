// The megakernel's router top-k (`WarpTopK`) against the exact ranking on the CPU: the picks
// (a NaN as -inf, ties to the lower id) must be identical and their weights (sigmoid or softmax,
// renormalised or not) within float rounding, with four keys a lane (up to 128 experts) and eight
// (up to 256), up to 16 picks. Rows carry planted ties, NaNs and one-ulp near-ties.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backends/cuda/core/cuda_check.h"
#include "backends/cuda/core/device_buffer.h"
#include "megakernel/device/ops_moe.cuh"
#include "topk_rows.h"

namespace mkserve::megakernel {
namespace {

// One warp ranks every row of `p.router_logits` (layer 0, p.batch rows) as the kernel does: its
// own key loading (LoadRowKeys: a NaN as -inf) and WarpTopK. ids[row][k], weights[row][k].
__global__ void RankRows(StepParams p, int32_t* ids, float* weights) {
  const int lane = threadIdx.x % 32;
  for (int r = 0; r < p.batch; ++r) {
    const LanePick pick = WarpTopK(p, LoadRowKeys(p, 0, r));
    if (lane < p.top_k) {
      ids[static_cast<int64_t>(r) * p.top_k + lane] = pick.expert;
      weights[static_cast<int64_t>(r) * p.top_k + lane] = pick.weight;
    }
  }
}

struct Shape {
  int experts, top_k;
  bool sigmoid, renormalize;
};

void ExpectExactRanking(const Shape& shape) {
  const int rows = 400;
  const std::vector<float> logits = topk_rows::RandomRows(shape.experts, rows);
  const std::vector<int32_t> want = topk_rows::CpuTopK(logits, shape.experts, shape.top_k, rows);
  cuda::DeviceBuffer<float> logits_d(static_cast<int64_t>(logits.size()));
  MKSERVE_CUDA_CHECK(
      cudaMemcpy(logits_d.data(), logits.data(), logits_d.bytes(), cudaMemcpyHostToDevice));
  cuda::DeviceBuffer<int32_t> ids_d(static_cast<int64_t>(rows) * shape.top_k);
  cuda::DeviceBuffer<float> weights_d(static_cast<int64_t>(rows) * shape.top_k);
  MKSERVE_CUDA_CHECK(cudaMemset(ids_d.data(), 0xFF, ids_d.bytes()));  // poisoned: -1
  StepParams p;
  p.num_experts = shape.experts;
  p.top_k = shape.top_k;
  p.sigmoid_router = shape.sigmoid ? 1 : 0;
  p.renormalize = shape.renormalize ? 1 : 0;
  p.router_logits = logits_d.data();
  p.batch = rows;
  RankRows<<<1, 32>>>(p, ids_d.data(), weights_d.data());
  MKSERVE_CUDA_CHECK(cudaGetLastError());
  MKSERVE_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<int32_t> ids(static_cast<size_t>(rows) * shape.top_k);
  std::vector<float> weights(ids.size());
  MKSERVE_CUDA_CHECK(cudaMemcpy(ids.data(), ids_d.data(), ids_d.bytes(), cudaMemcpyDeviceToHost));
  MKSERVE_CUDA_CHECK(
      cudaMemcpy(weights.data(), weights_d.data(), weights_d.bytes(), cudaMemcpyDeviceToHost));
  int unlike = 0;
  for (int r = 0; r < rows; ++r) {
    const size_t at = static_cast<size_t>(r) * shape.top_k;
    bool same = true;
    for (int j = 0; j < shape.top_k; ++j) same = same && ids[at + j] == want[at + j];
    if (!same) {
      if (++unlike <= 3) ADD_FAILURE() << "row " << r << ": pick ids differ from the exact ranking";
      continue;
    }
    // The weights as the CPU router computes them, in pick order.
    auto logit = [&](int j) {
      const float v = logits[static_cast<size_t>(r) * shape.experts + want[at + j]];
      return std::isnan(v) ? -INFINITY : v;
    };
    std::vector<double> w(shape.top_k);
    double sum = 0;
    for (int j = 0; j < shape.top_k; ++j) {
      w[j] = shape.sigmoid ? 1.0 / (1.0 + std::exp(-double{logit(j)}))
                           : std::exp(double{logit(j)} - double{logit(0)});
      sum += w[j];
    }
    for (int j = 0; j < shape.top_k; ++j) {
      const double expected = !shape.sigmoid || shape.renormalize ? w[j] / sum : w[j];
      EXPECT_NEAR(weights[at + j], expected, 1e-6 + 1e-5 * std::fabs(expected))
          << "row " << r << ", pick " << j;
    }
  }
  EXPECT_EQ(unlike, 0) << shape.experts << " experts, top " << shape.top_k;
}

TEST(WarpTopK, SigmoidRenormalisedAsNorth) { ExpectExactRanking({128, 8, true, true}); }
TEST(WarpTopK, Softmax) { ExpectExactRanking({128, 8, false, false}); }
TEST(WarpTopK, SigmoidAsIs) { ExpectExactRanking({128, 8, true, false}); }
TEST(WarpTopK, FewPicks) { ExpectExactRanking({128, 2, true, true}); }
TEST(WarpTopK, FewerExperts) { ExpectExactRanking({40, 6, false, false}); }
TEST(WarpTopK, EveryExpertPicked) { ExpectExactRanking({8, 8, true, true}); }
TEST(WarpTopK, EightKeysALane) { ExpectExactRanking({256, 8, true, true}); }
TEST(WarpTopK, SixteenPicks) { ExpectExactRanking({128, 16, false, false}); }

}  // namespace
}  // namespace mkserve::megakernel
