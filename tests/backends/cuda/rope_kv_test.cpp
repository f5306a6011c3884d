// QKV -> RoPE (interleaved GPT-J pairs) -> q out and K/V into the paged cache, against a CPU
// rotation in double precision; NoPE layers copy through unrotated.
#include <gtest/gtest.h>

#include "backends/cuda/rope_kv.h"
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

}  // namespace
}  // namespace mkserve::cuda::testing
