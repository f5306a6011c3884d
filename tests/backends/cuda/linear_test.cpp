// The weight-streaming GEMV (1..64 rows) and the cuBLAS path against a double-precision CPU GEMM.
#include <gtest/gtest.h>

#include <tuple>

#include "backends/cuda/decode/linear.h"
#include "gpu_test_util.h"

namespace mkserve::cuda::testing {
namespace {

std::vector<float> CpuLinear(const std::vector<float>& x, int64_t m, int64_t k,
                             const std::vector<float>& w, int64_t n, float alpha) {
  std::vector<float> out(m * n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t c = 0; c < k; ++c) sum += static_cast<double>(x[i * k + c]) * w[j * k + c];
      out[i * n + j] = static_cast<float>(alpha * sum);
    }
  }
  return out;
}

// (rows m, reduction k): k = 776 (97 vectors) takes the 4-row x 4-vector GEMV tile with a ragged
// last chunk; k = 2056 (257 vectors) the 2-row x 8-vector tile, one lane in its second chunk.
class LinearTest : public ::testing::TestWithParam<std::tuple<int64_t, int64_t>> {
 protected:
  void Check(bool cublas) {
    const auto [m, k] = GetParam();
    const int64_t n = 333;  // odd: the last row group is partial
    const float alpha = 0.5f;
    std::vector<float> x = RandomBf16Values(m * k, 11), w = RandomBf16Values(n * k, 12, 0.05f);
    auto d_x = ToDeviceBf16(x);
    auto d_w = ToDeviceBf16(w);
    auto d_out = NanFloats(m * n);
    cublasHandle_t handle;
    MKSERVE_CUBLAS_CHECK(cublasCreate(&handle));
    if (cublas) {
      GemmCublas(handle, d_x.data(), m, k, d_w.data(), n, alpha, d_out.data(), 0);
    } else {
      GemvSmallM(d_x.data(), m, k, d_w.data(), n, alpha, d_out.data(), 0);
    }
    std::vector<float> got = ToHost(d_out);
    cublasDestroy(handle);
    ExpectClose(got, CpuLinear(x, m, k, w, n, alpha), 1e-4f, 1e-4f, cublas ? "cublas" : "gemv");
  }
};

TEST_P(LinearTest, GemvMatchesCpu) { Check(false); }
TEST_P(LinearTest, CublasMatchesCpu) { Check(true); }

INSTANTIATE_TEST_SUITE_P(Rows, LinearTest,
                         ::testing::Combine(::testing::Values(1, 3, 8, 9, 13, 64, 130),
                                            ::testing::Values(776, 2056)));

TEST(LinearShapeTest, RejectsKNotMultipleOfEight) {
  EXPECT_THROW(GemvSmallM(nullptr, 1, 12, nullptr, 4, 1.0f, nullptr, 0), Error);
}

}  // namespace
}  // namespace mkserve::cuda::testing
