// The tensor-core prefill attention against a double-precision CPU loop and against PagedAttention:
// ragged chunks of several sequences whose 32-token tiles straddle sequences, windows that cross
// page boundaries, decode rows mixed in, GQA 8:1 at head_dim 128 and the small head dims.
#include "backends/cuda/prefill/prefill_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "common/error.h"
#include "engine/kv_layout.h"
#include "gpu_test_util.h"
#include "model/model_config.h"

namespace mkserve::cuda::testing {
namespace {

struct Shape {
  int64_t heads, kv_heads, head_dim, window;
};

struct Seq {
  int64_t start, count;  // queries at start..start+count-1; keys 0..start+count-1 cached
};

// One chunk's inputs on the host and the device.
struct Chunk {
  int64_t tokens = 0, max_pages = 1;
  std::vector<int32_t> tables, positions, seq_of_token;
  std::vector<float> cache, q;
};

Chunk MakeChunk(const Shape& s, const std::vector<Seq>& seqs) {
  Chunk c;
  int64_t total_pages = 0;
  for (const Seq& q : seqs) {
    const int64_t pages = (q.start + q.count + kBlockTokens - 1) / kBlockTokens;
    c.max_pages = std::max(c.max_pages, pages);
    total_pages += pages;
    c.tokens += q.count;
  }
  std::vector<int32_t> physical(total_pages + 2);  // shuffled: page lookups really matter
  std::iota(physical.begin(), physical.end(), 0);
  std::shuffle(physical.begin(), physical.end(), std::mt19937(11));
  c.tables.assign(seqs.size() * c.max_pages, -1);
  size_t next = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    for (int64_t p = 0; p * kBlockTokens < seqs[i].start + seqs[i].count; ++p) {
      c.tables[i * c.max_pages + p] = physical[next++];
    }
    for (int64_t t = 0; t < seqs[i].count; ++t) {
      c.positions.push_back(static_cast<int32_t>(seqs[i].start + t));
      c.seq_of_token.push_back(static_cast<int32_t>(i));
    }
  }
  const int64_t kv_width = s.kv_heads * s.head_dim;
  c.cache =
      RandomBf16Values(static_cast<int64_t>(physical.size()) * kBlockTokens * 2 * kv_width, 5);
  c.q = RandomBf16Values(c.tokens * s.heads * s.head_dim, 6, 0.5f);
  return c;
}

// softmax(q . k / sqrt(d)) . v over keys [FirstKeyInWindow(pos), pos], in double, and per
// element sum_k p_k |v_k|: rounding each p to bf16 (as the P.V product does) moves the output by
// at most 2^-8 times that.
struct Expected {
  std::vector<float> out, abs_weighted;
};

Expected Reference(const Shape& s, const Chunk& c) {
  const int64_t kv_width = s.kv_heads * s.head_dim, group = s.heads / s.kv_heads;
  Expected e{std::vector<float>(c.tokens * s.heads * s.head_dim),
             std::vector<float>(c.tokens * s.heads * s.head_dim)};
  for (int64_t t = 0; t < c.tokens; ++t) {
    const int32_t* table = &c.tables[c.seq_of_token[t] * c.max_pages];
    const int64_t pos = c.positions[t];
    const int64_t first = s.window > 0 ? FirstKeyInWindow(pos, s.window) : 0;
    for (int64_t h = 0; h < s.heads; ++h) {
      auto row = [&](int64_t key, int which) {
        const int64_t slot = table[key / kBlockTokens] * kBlockTokens + key % kBlockTokens;
        return &c.cache[slot * 2 * kv_width + which * kv_width + (h / group) * s.head_dim];
      };
      const float* q = &c.q[(t * s.heads + h) * s.head_dim];
      std::vector<double> p;
      double max = -1e300, total = 0;
      for (int64_t key = first; key <= pos; ++key) {
        double dot = 0;
        for (int64_t d = 0; d < s.head_dim; ++d) dot += static_cast<double>(q[d]) * row(key, 0)[d];
        p.push_back(dot / std::sqrt(static_cast<double>(s.head_dim)));
        max = std::max(max, p.back());
      }
      for (double& v : p) total += (v = std::exp(v - max));
      for (int64_t d = 0; d < s.head_dim; ++d) {
        double value = 0, abs_value = 0;
        for (int64_t key = first; key <= pos; ++key) {
          value += p[key - first] * row(key, 1)[d];
          abs_value += p[key - first] * std::fabs(row(key, 1)[d]);
        }
        e.out[(t * s.heads + h) * s.head_dim + d] = static_cast<float>(value / total);
        e.abs_weighted[(t * s.heads + h) * s.head_dim + d] = static_cast<float>(abs_value / total);
      }
    }
  }
  return e;
}

// |got - want| <= 2e-3 + 1e-2 |want| (bf16 output) + 2^-8 sum p|v| (bf16 probabilities).
void ExpectAttentionClose(const std::vector<float>& got, const std::vector<float>& want,
                          const Expected& bound, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double tolerance =
        2e-3 + 1e-2 * std::fabs(want[i]) + std::ldexp(bound.abs_weighted[i], -8);
    if (!(std::fabs(got[i] - want[i]) <= tolerance) && bad++ < 5) {
      ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want " << want[i]
                    << ", tolerance " << tolerance;
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " elements off";
}

class PrefillAttentionTest : public ::testing::TestWithParam<Shape> {
 protected:
  void Run(const std::vector<Seq>& seqs) {
    const Shape s = GetParam();
    const Chunk c = MakeChunk(s, seqs);
    auto d_cache = ToDeviceBf16(c.cache);
    auto d_q = ToDeviceBf16(c.q);
    auto d_pos = ToDevice(c.positions);
    auto d_seq = ToDevice(c.seq_of_token);
    auto d_tables = ToDevice(c.tables);
    auto d_out = NanBf16(c.tokens * s.heads * s.head_dim);
    auto d_paged = NanBf16(c.tokens * s.heads * s.head_dim);
    AttentionArgs a{d_q.data(),      d_cache.data(), d_pos.data(), d_seq.data(),
                    d_tables.data(), c.max_pages,    c.tokens,     s.heads,
                    s.kv_heads,      s.head_dim,     s.window,     1,
                    d_out.data(),    nullptr,        nullptr};
    ASSERT_TRUE(PrefillAttentionSupports(a));
    DeviceBuffer<float> carry_acc(c.tokens * s.heads * s.head_dim);
    DeviceBuffer<float> carry_stats(c.tokens * s.heads * kPrefillCarryStats);
    PrefillAttention(a, {carry_acc.data(), carry_stats.data()}, 0);
    const std::vector<float> got = ToHostFloat(d_out);
    const Expected want = Reference(s, c);
    ExpectAttentionClose(got, want.out, want, "prefill vs cpu");
    a.out = d_paged.data();
    PagedAttention(a, 0);  // the decode kernel, one split
    ExpectAttentionClose(got, ToHostFloat(d_paged), want, "prefill vs paged");
  }
};

TEST_P(PrefillAttentionTest, RaggedChunk) {
  // Tiles straddle sequences (tile 64..95 holds three); a second chunk at 150.
  Run({{0, 70}, {0, 5}, {150, 60}, {37, 41}});
}

TEST_P(PrefillAttentionTest, DecodeRowsMixedIn) { Run({{300, 1}, {0, 33}, {64, 1}, {129, 20}}); }

TEST_P(PrefillAttentionTest, LongSequence) { Run({{0, 300}}); }

// Past kPrefillPagesPerLaunch pages the passes run as several launches with the state carried:
// a chunk at 5.3K context (2 launches) whose tiles straddle a short sequence, and one at 10.3K
// (3 launches) that starts mid-page.
TEST_P(PrefillAttentionTest, LongContextRunsAsSeveralLaunches) {
  Run({{5230, 40}, {0, 20}, {10230, 57}});
}

INSTANTIATE_TEST_SUITE_P(Shapes, PrefillAttentionTest,
                         ::testing::Values(Shape{32, 4, 128, 0}, Shape{32, 4, 128, 70},
                                           Shape{16, 2, 128, 100}, Shape{8, 2, 64, 0},
                                           Shape{8, 8, 32, 64}, Shape{4, 2, 16, 16}));

// North's window: queries at 4090..4139 see keys from 0..44 on, across page 64's boundary.
TEST(PrefillAttentionWindowTest, NorthWindowCrossesPages) {
  const Shape s{8, 1, 128, 4096};
  const Chunk c = MakeChunk(s, {{4090, 50}, {10, 30}});
  auto d_cache = ToDeviceBf16(c.cache);
  auto d_q = ToDeviceBf16(c.q);
  auto d_pos = ToDevice(c.positions);
  auto d_seq = ToDevice(c.seq_of_token);
  auto d_tables = ToDevice(c.tables);
  auto d_out = NanBf16(c.tokens * s.heads * s.head_dim);
  AttentionArgs a{d_q.data(),      d_cache.data(), d_pos.data(), d_seq.data(),
                  d_tables.data(), c.max_pages,    c.tokens,     s.heads,
                  s.kv_heads,      s.head_dim,     s.window,     1,
                  d_out.data(),    nullptr,        nullptr};
  ASSERT_EQ(PrefillAttentionLaunches(a), 1);  // a window's range fits one launch
  PrefillAttention(a, {}, 0);
  const Expected want = Reference(s, c);
  ExpectAttentionClose(ToHostFloat(d_out), want.out, want, "window 4096");
}

TEST(PrefillAttentionShapeTest, RejectsUnsupportedShapes) {
  AttentionArgs a;
  a.num_heads = 32;
  a.num_kv_heads = 2;  // 16 query heads per kv head
  a.head_dim = 128;
  EXPECT_FALSE(PrefillAttentionSupports(a));
  EXPECT_THROW(PrefillAttention(a, {}, 0), Error);
  a.num_kv_heads = 4;
  a.head_dim = 96;
  EXPECT_FALSE(PrefillAttentionSupports(a));
  EXPECT_THROW(PrefillAttention(a, {}, 0), Error);
}

TEST(PrefillAttentionShapeTest, SeveralLaunchesNeedACarry) {
  AttentionArgs a;
  a.num_heads = 32;
  a.num_kv_heads = 4;
  a.head_dim = 128;
  a.num_tokens = 64;
  a.max_pages = 2 * kPrefillPagesPerLaunch + 1;
  EXPECT_EQ(PrefillAttentionLaunches(a), 3);
  EXPECT_THROW(PrefillAttention(a, {}, 0), Error);  // before any launch
  a.window_tokens = 4096;  // North's sliding layers: one launch at any context
  EXPECT_EQ(PrefillAttentionLaunches(a), 1);
}

TEST(PrefillAttentionShapeTest, PrefersTheKernelForLongChunksOnly) {
  EXPECT_TRUE(PreferPrefillAttention(8192, 1));
  EXPECT_TRUE(PreferPrefillAttention(1024, 64));
  EXPECT_FALSE(PreferPrefillAttention(64, 64));  // decode rows
  EXPECT_FALSE(PreferPrefillAttention(32, 1));   // too short to fill a GPU either way
}

}  // namespace
}  // namespace mkserve::cuda::testing
