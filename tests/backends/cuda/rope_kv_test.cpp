// QKV -> RoPE (interleaved GPT-J pairs) -> q out and K/V into the paged cache, against a CPU
// rotation in double precision; NoPE layers copy through unrotated.
#include <gtest/gtest.h>

#include "backends/cuda/decode/linear.h"
#include "backends/cuda/decode/rope_kv.h"
#include "common/error.h"
#include "engine/kv_layout.h"
#include "gpu_test_util.h"

namespace mkserve::cuda::testing {
namespace {

constexpr int64_t kHeads = 4, kKvHeads = 2, kHeadDim = 16, kBlocks = 4;
constexpr float kTheta = 50000.0f;

void RotateCpu(float* v, int64_t position, bool rope) {
  if (!rope) return;
  for (int64_t p = 0; p < kHeadDim / 2; ++p) {
    const double angle = static_cast<double>(position) * RopeInvFreq(kTheta, p, kHeadDim);
    const double x0 = v[2 * p], x1 = v[2 * p + 1];
    v[2 * p] = static_cast<float>(x0 * std::cos(angle) - x1 * std::sin(angle));
    v[2 * p + 1] = static_cast<float>(x1 * std::cos(angle) + x0 * std::sin(angle));
  }
}

void RunCase(bool rope) {
  const int64_t q_width = kHeads * kHeadDim, kv_width = kKvHeads * kHeadDim;
  const int64_t width = q_width + 2 * kv_width;
  const std::vector<int32_t> positions = {0, 1, 77, 4095};
  const std::vector<int32_t> slots = {3 * 64 + 0, 3 * 64 + 1, 0 * 64 + 13, 2 * 64 + 63};
  const int64_t tokens = static_cast<int64_t>(positions.size());
  std::vector<float> qkv = RandomFloats(tokens * width, 21);
  auto d_qkv = ToDevice(qkv);
  auto d_pos = ToDevice(positions);
  auto d_slots = ToDevice(slots);
  auto d_q = NanBf16(tokens * q_width);
  auto d_cache = NanBf16(kBlocks * kBlockTokens * 2 * kv_width);
  RopeKvArgs args{d_qkv.data(), d_pos.data(), d_slots.data(), d_q.data(), d_cache.data(), tokens,
                  kHeads,       kKvHeads,     kHeadDim,       rope,       kTheta};
  RopeAndWriteKv(args, 0);
  std::vector<float> q = ToHostFloat(d_q), cache = ToHostFloat(d_cache);
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<float> want(qkv.begin() + t * width, qkv.begin() + (t + 1) * width);
    for (int64_t h = 0; h < kHeads + kKvHeads; ++h)
      RotateCpu(&want[h * kHeadDim], positions[t], rope);
    for (auto& v : want) v = RoundBf16(v);
    std::vector<float> got_q(q.begin() + t * q_width, q.begin() + (t + 1) * q_width);
    std::vector<float> got_kv(cache.begin() + slots[t] * 2 * kv_width,
                              cache.begin() + (slots[t] + 1) * 2 * kv_width);
    ExpectClose(got_q, std::vector<float>(want.begin(), want.begin() + q_width), 2e-3f, 8e-3f, "q");
    ExpectClose(got_kv, std::vector<float>(want.begin() + q_width, want.end()), 2e-3f, 8e-3f, "kv");
  }
}

TEST(RopeKvTest, RotatesAndWritesSlots) { RunCase(true); }
TEST(RopeKvTest, NopeCopiesThrough) { RunCase(false); }

// QkvRopeKv (the QKV GEMV with RoPE + KV write as its epilogue) against a CPU projection and
// rotation, and bitwise against Linear followed by RopeAndWriteKv (the prefill path).
struct FusedCase {
  int64_t tokens, k;  // 1 token: the single-row kernel; k 264 / 2056: both GEMV tiles
  bool rope;
};

class QkvRopeKvTest : public ::testing::TestWithParam<FusedCase> {};

TEST_P(QkvRopeKvTest, MatchesCpuAndUnfusedPath) {
  const FusedCase c = GetParam();
  const int64_t q_width = kHeads * kHeadDim, kv_width = kKvHeads * kHeadDim;
  const int64_t width = q_width + 2 * kv_width, tokens = c.tokens, k = c.k;
  const std::vector<int32_t> all_positions = {4095, 0, 1, 77, 200},
                             all_slots = {141, 192, 193, 13, 255};
  const std::vector<int32_t> positions(all_positions.begin(), all_positions.begin() + tokens);
  const std::vector<int32_t> slots(all_slots.begin(), all_slots.begin() + tokens);
  const std::vector<float> x = RandomBf16Values(tokens * k, 22);
  const std::vector<float> w = RandomBf16Values(width * k, 23, 0.05f);
  auto d_x = ToDeviceBf16(x), d_w = ToDeviceBf16(w);
  auto d_pos = ToDevice(positions);
  auto d_slots = ToDevice(slots);
  const int64_t cache_elements = kBlocks * kBlockTokens * 2 * kv_width;
  auto d_q = NanBf16(tokens * q_width), d_cache = NanBf16(cache_elements);
  RopeKvArgs args{nullptr, d_pos.data(), d_slots.data(), d_q.data(), d_cache.data(), tokens,
                  kHeads,  kKvHeads,     kHeadDim,       c.rope,     kTheta};
  QkvRopeKv(d_x.data(), k, d_w.data(), args, 0);
  const std::vector<float> q = ToHostFloat(d_q), cache = ToHostFloat(d_cache);

  auto d_qkv = NanFloats(tokens * width);
  auto d_q_ref = NanBf16(tokens * q_width), d_cache_ref = NanBf16(cache_elements);
  GemvSmallM(d_x.data(), tokens, k, d_w.data(), width, 1.0f, d_qkv.data(), 0);
  args.qkv = d_qkv.data();
  args.q_out = d_q_ref.data();
  args.cache = d_cache_ref.data();
  RopeAndWriteKv(args, 0);
  const std::vector<float> q_ref = ToHostFloat(d_q_ref), cache_ref = ToHostFloat(d_cache_ref);
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<float> want(width);
    for (int64_t j = 0; j < width; ++j) {
      double sum = 0;
      for (int64_t i = 0; i < k; ++i) sum += double{x[t * k + i]} * w[j * k + i];
      want[j] = static_cast<float>(sum);
    }
    for (int64_t h = 0; h < kHeads + kKvHeads; ++h)
      RotateCpu(&want[h * kHeadDim], positions[t], c.rope);
    const auto row = [&](const std::vector<float>& v, int64_t at, int64_t n) {
      return std::vector<float>(v.begin() + at, v.begin() + at + n);
    };
    const int64_t kv_at = slots[t] * 2 * kv_width;
    ExpectClose(row(q, t * q_width, q_width), row(want, 0, q_width), 2e-3f, 8e-3f, "q");
    ExpectClose(row(cache, kv_at, 2 * kv_width), row(want, q_width, 2 * kv_width), 2e-3f, 8e-3f,
                "kv");
    EXPECT_EQ(row(q, t * q_width, q_width), row(q_ref, t * q_width, q_width)) << "token " << t;
    EXPECT_EQ(row(cache, kv_at, 2 * kv_width), row(cache_ref, kv_at, 2 * kv_width))
        << "token " << t;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, QkvRopeKvTest,
                         ::testing::Values(FusedCase{1, 2056, true}, FusedCase{5, 2056, true},
                                           FusedCase{1, 264, false}, FusedCase{5, 264, true}));

TEST(QkvRopeKvShapeTest, RejectsKNotMultipleOfEight) {
  RopeKvArgs args;
  args.num_tokens = 1;
  args.head_dim = 16;
  EXPECT_THROW(QkvRopeKv(nullptr, 12, nullptr, args, 0), Error);
}

}  // namespace
}  // namespace mkserve::cuda::testing
