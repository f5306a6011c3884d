#include "backends/cpu/attention.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "common/error.h"

namespace mkserve::cpu {
namespace {

// One layer, num_heads query heads over num_kv_heads KV heads of head_dim 2, three blocks.
struct AttentionFixture {
  ModelConfig config;
  LayerSpec spec;
  KvLayout layout;
  ThreadPool pool{2};

  AttentionFixture(int64_t num_heads, int64_t num_kv_heads, int64_t window_tokens) {
    config.num_layers = 1;
    config.num_heads = num_heads;
    config.num_kv_heads = num_kv_heads;
    config.head_dim = 2;
    spec.attention = window_tokens > 0 ? AttentionKind::kSliding : AttentionKind::kFull;
    spec.window_tokens = window_tokens;
    KvGroup group;
    group.attention = spec.attention;
    group.window_tokens = window_tokens;
    group.layer_ids = {0};
    group.num_blocks = 3;
    layout.groups.push_back(group);
  }

  // Runs tokens [start, start + count) with q = 0 (uniform attention) and V of KV head g at
  // position p = [p * sign(g), g + 1], sign = +1 for head 0 and -1 for head 1. Returns out.
  std::vector<float> RunUniform(KvCache& cache, std::span<const int32_t> table, int64_t start,
                                int64_t count) {
    std::vector<float> q(count * config.q_width(), 0.0f);
    std::vector<float> k(count * config.kv_width(), 0.0f);
    std::vector<float> v(count * config.kv_width());
    for (int64_t t = 0; t < count; ++t) {
      for (int64_t g = 0; g < config.num_kv_heads; ++g) {
        float position = static_cast<float>(start + t);
        v[t * config.kv_width() + g * 2] = g == 0 ? position : -position;
        v[t * config.kv_width() + g * 2 + 1] = static_cast<float>(g + 1);
      }
    }
    std::vector<float> out(count * config.q_width(), NAN);
    AttentionChunk chunk{0, table, start, count};
    PagedAttention(config, spec, chunk, q, k, v, cache, out, pool);
    return out;
  }
};

TEST(AttentionTest, FullAttentionAveragesEveryEarlierPosition) {
  AttentionFixture fixture(1, 1, 0);
  KvCache cache(fixture.layout, 1, fixture.config.kv_width());
  std::vector<int32_t> table = {0};
  std::vector<float> out = fixture.RunUniform(cache, table, 0, 11);
  EXPECT_FLOAT_EQ(out[0 * 2], 0.0f);
  EXPECT_FLOAT_EQ(out[3 * 2], 1.5f);   // mean(0..3)
  EXPECT_FLOAT_EQ(out[10 * 2], 5.0f);  // mean(0..10)
  EXPECT_FLOAT_EQ(out[10 * 2 + 1], 1.0f);
}

TEST(AttentionTest, SlidingWindowHoldsExactlyWindowKeys) {
  AttentionFixture fixture(1, 1, 4);
  KvCache cache(fixture.layout, 1, fixture.config.kv_width());
  std::vector<int32_t> table = {0};
  std::vector<float> out = fixture.RunUniform(cache, table, 0, 11);
  EXPECT_FLOAT_EQ(out[2 * 2], 1.0f);   // mean(0..2): the window is not full yet
  EXPECT_FLOAT_EQ(out[3 * 2], 1.5f);   // mean(0..3): exactly four keys
  EXPECT_FLOAT_EQ(out[4 * 2], 2.5f);   // mean(1..4): key 0 just left
  EXPECT_FLOAT_EQ(out[10 * 2], 8.5f);  // mean(7..10), not mean(6..10) = 8 or mean(8..10) = 9
}

TEST(AttentionTest, FirstKeyInWindowEdge) {
  EXPECT_EQ(FirstKeyInWindow(10, 4), 7);
  EXPECT_EQ(FirstKeyInWindow(3, 4), 0);
  EXPECT_EQ(FirstKeyInWindow(4, 4), 1);
  LayerSpec full;
  EXPECT_EQ(FirstAttendedPosition(full, 1000), 0);
}

TEST(AttentionTest, GroupedQueryHeadsShareConsecutiveKvHeads) {
  AttentionFixture fixture(4, 2, 0);  // heads 0, 1 -> KV head 0; heads 2, 3 -> KV head 1
  KvCache cache(fixture.layout, 1, fixture.config.kv_width());
  std::vector<int32_t> table = {0};
  std::vector<float> out = fixture.RunUniform(cache, table, 0, 5);
  const int64_t last = 4 * fixture.config.q_width();
  EXPECT_FLOAT_EQ(out[last + 0 * 2], 2.0f);  // mean(0..4), KV head 0
  EXPECT_FLOAT_EQ(out[last + 1 * 2], 2.0f);
  EXPECT_FLOAT_EQ(out[last + 2 * 2], -2.0f);  // KV head 1
  EXPECT_FLOAT_EQ(out[last + 3 * 2 + 1], 2.0f);
}

TEST(AttentionTest, ScoresAreScaledByInverseSqrtHeadDim) {
  AttentionFixture fixture(1, 1, 0);
  KvCache cache(fixture.layout, 1, fixture.config.kv_width());
  std::vector<int32_t> table = {0};
  // Keys [0, 0] and [1, 0]; q = [sqrt(2) ln 3, 0] gives scores 0 and ln 3 after the 1/sqrt(2)
  // scale, so softmax weights 1/4 and 3/4; values [0, 1] and [1, 1].
  std::vector<float> q = {0.0f, 0.0f, std::sqrt(2.0f) * std::log(3.0f), 0.0f};
  std::vector<float> k = {0.0f, 0.0f, 1.0f, 0.0f};
  std::vector<float> v = {0.0f, 1.0f, 1.0f, 1.0f};
  std::vector<float> out(4, NAN);
  PagedAttention(fixture.config, fixture.spec, AttentionChunk{0, table, 0, 2}, q, k, v, cache, out,
                 fixture.pool);
  EXPECT_NEAR(out[2], 0.75f, 1e-6f);
  EXPECT_NEAR(out[3], 1.0f, 1e-6f);
}

TEST(AttentionTest, SlidingLayerNeverReadsReleasedBlocks) {
  AttentionFixture fixture(1, 1, 4);
  KvCache cache(fixture.layout, 1, fixture.config.kv_width());
  std::vector<int32_t> table = {2, 0};  // scattered physical blocks
  fixture.RunUniform(cache, table, 0, 72);
  std::vector<int32_t> released = {-1, 0};  // block 0 (positions 0..63) is out of every window
  std::vector<float> out = fixture.RunUniform(cache, released, 72, 1);
  EXPECT_FLOAT_EQ(out[0], 70.5f);  // mean(69..72)
}

TEST(AttentionTest, FullLayerRejectsAReleasedBlock) {
  AttentionFixture fixture(1, 1, 0);
  KvCache cache(fixture.layout, 1, fixture.config.kv_width());
  std::vector<int32_t> table = {0, 1};
  fixture.RunUniform(cache, table, 0, 72);
  std::vector<int32_t> released = {-1, 1};
  EXPECT_THROW(fixture.RunUniform(cache, released, 72, 1), Error);
}

TEST(AttentionTest, BlockOfNamesWhatIsWrong) {
  AttentionFixture fixture(1, 1, 0);
  KvCache cache(fixture.layout, 1, fixture.config.kv_width());
  std::vector<int32_t> short_table = {0};
  std::vector<int32_t> bad_block = {7};
  try {
    cache.BlockOf(0, short_table, 64);
    FAIL() << "a position beyond the table must throw";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("block table has only 1 blocks"), std::string::npos);
  }
  EXPECT_THROW(cache.BlockOf(0, bad_block, 0), Error);
}

}  // namespace
}  // namespace mkserve::cpu
