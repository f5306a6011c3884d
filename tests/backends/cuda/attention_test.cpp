// Paged attention against a double-precision CPU reference: prefill chunks of several sequences
// (causal, full and sliding, GQA), decode rows with split-KV, scattered physical blocks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "backends/cuda/decode/attention.h"
#include "engine/kv_layout.h"
#include "gpu_test_util.h"
#include "model/model_config.h"

namespace mkserve::cuda::testing {
namespace {

struct Shape {
  int64_t heads, kv_heads, head_dim, window;
  int splits;
};

struct Seq {
  int64_t start, count;  // tokens start..start+count-1 query; keys 0..start+count-1 cached
};

class AttentionTest : public ::testing::TestWithParam<Shape> {
 protected:
  void Run(const std::vector<Seq>& seqs) {
    const Shape s = GetParam();
    const int64_t kv_width = s.kv_heads * s.head_dim, q_width = s.heads * s.head_dim;
    int64_t max_pages = 1, total_pages = 0, tokens = 0;
    for (const Seq& q : seqs) {
      max_pages = std::max(max_pages, (q.start + q.count + kBlockTokens - 1) / kBlockTokens);
      total_pages += (q.start + q.count + kBlockTokens - 1) / kBlockTokens;
      tokens += q.count;
    }
    // Physical blocks in a shuffled order, so page lookups are really exercised.
    std::vector<int32_t> physical(total_pages + 3);
    std::iota(physical.begin(), physical.end(), 0);
    std::shuffle(physical.begin(), physical.end(), std::mt19937(7));
    std::vector<int32_t> tables(seqs.size() * max_pages, -1), positions, seq_of_token;
    size_t next = 0;
    for (size_t i = 0; i < seqs.size(); ++i) {
      for (int64_t p = 0; p * kBlockTokens < seqs[i].start + seqs[i].count; ++p) {
        tables[i * max_pages + p] = physical[next++];
      }
      for (int64_t t = 0; t < seqs[i].count; ++t) {
        positions.push_back(static_cast<int32_t>(seqs[i].start + t));
        seq_of_token.push_back(static_cast<int32_t>(i));
      }
    }
    const int64_t num_blocks = static_cast<int64_t>(physical.size());
    std::vector<float> cache = RandomBf16Values(num_blocks * kBlockTokens * 2 * kv_width, 31);
    std::vector<float> q = RandomBf16Values(tokens * q_width, 32);
    auto d_cache = ToDeviceBf16(cache);
    auto d_q = ToDeviceBf16(q);
    auto d_pos = ToDevice(positions);
    auto d_seq = ToDevice(seq_of_token);
    auto d_tables = ToDevice(tables);
    std::vector<float> want(tokens * q_width), abs_weighted(tokens * q_width);
    for (int64_t t = 0; t < tokens; ++t) {
      const int32_t* table = &tables[seq_of_token[t] * max_pages];
      for (int64_t h = 0; h < s.heads; ++h) {
        const int64_t at = (t * s.heads + h) * s.head_dim;
        Reference(cache, table, &q[at], positions[t], h / (s.heads / s.kv_heads), &want[at],
                  &abs_weighted[at]);
      }
    }
    for (auto* attention : {&PagedAttention, &PagedAttentionCudaCores}) {
      auto d_out = NanBf16(tokens * q_width);
      auto d_acc = NanFloats(tokens * s.heads * s.splits * s.head_dim);
      auto d_stats = NanFloats(tokens * s.heads * s.splits * 2);
      AttentionArgs a{d_q.data(), d_cache.data(), d_pos.data(), d_seq.data(), d_tables.data(),
                      max_pages,  tokens,         s.heads,      s.kv_heads,   s.head_dim,
                      s.window,   s.splits,       d_out.data(), d_acc.data(), d_stats.data()};
      attention(a, 0);
      ExpectAttentionClose(ToHostFloat(d_out), want, abs_weighted,
                           attention == &PagedAttention ? "paged" : "cuda cores");
    }
  }

  // |got - want| <= 2e-3 + 1e-2 |want| (bf16 output) + 2^-8 sum p|v| (bf16 probabilities).
  static void ExpectAttentionClose(const std::vector<float>& got, const std::vector<float>& want,
                                   const std::vector<float>& abs_weighted, const char* what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    int64_t bad = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const double tolerance = 2e-3 + 1e-2 * std::fabs(want[i]) + std::ldexp(abs_weighted[i], -8);
      if (!(std::fabs(got[i] - want[i]) <= tolerance) && bad++ < 5) {
        ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want " << want[i];
      }
    }
    EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " elements off";
  }

  void Reference(const std::vector<float>& cache, const int32_t* table, const float* q,
                 int64_t position, int64_t kv_head, float* out, float* abs_weighted) {
    const Shape s = GetParam();
    const int64_t kv_width = s.kv_heads * s.head_dim;
    const int64_t first = s.window > 0 ? FirstKeyInWindow(position, s.window) : 0;
    auto row = [&](int64_t key, int which) {
      const int64_t slot = table[key / kBlockTokens] * kBlockTokens + key % kBlockTokens;
      return &cache[slot * 2 * kv_width + which * kv_width + kv_head * s.head_dim];
    };
    std::vector<double> scores;
    double max = -1e300;
    for (int64_t key = first; key <= position; ++key) {
      double dot = 0;
      for (int64_t d = 0; d < s.head_dim; ++d) dot += static_cast<double>(q[d]) * row(key, 0)[d];
      scores.push_back(dot / std::sqrt(static_cast<double>(s.head_dim)));
      max = std::max(max, scores.back());
    }
    double total = 0;
    for (double& sc : scores) total += (sc = std::exp(sc - max));
    for (int64_t d = 0; d < s.head_dim; ++d) {
      double value = 0, abs_value = 0;
      for (int64_t key = first; key <= position; ++key) {
        value += scores[key - first] * row(key, 1)[d];
        abs_value += scores[key - first] * std::fabs(row(key, 1)[d]);
      }
      out[d] = static_cast<float>(value / total);
      abs_weighted[d] = static_cast<float>(abs_value / total);
    }
  }
};

TEST_P(AttentionTest, PrefillChunks) {
  Run({{0, 70}, {0, 5}, {100, 40}});  // a fresh prompt, a short one, a second chunk
}

TEST_P(AttentionTest, DecodeRows) { Run({{300, 1}, {0, 1}, {63, 1}, {64, 1}, {1000, 1}}); }

// Odd lengths, windows that start mid-page and cross pages, a context longer than the window.
TEST_P(AttentionTest, RaggedDecodeRows) {
  Run({{0, 1}, {2, 1}, {129, 1}, {777, 1}, {1500, 1}, {4100, 1}, {191, 1}});
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionTest,
                         ::testing::Values(Shape{32, 4, 128, 0, 1}, Shape{32, 4, 128, 0, 4},
                                           Shape{32, 4, 128, 100, 1}, Shape{32, 4, 128, 100, 3},
                                           Shape{8, 2, 16, 16, 1}, Shape{8, 2, 16, 16, 5},
                                           Shape{4, 4, 64, 0, 2}, Shape{16, 1, 32, 0, 64},
                                           // North: GQA 8:1, 4096 window, splits 1..many
                                           Shape{32, 4, 128, 4096, 1}, Shape{32, 4, 128, 4096, 7},
                                           Shape{32, 4, 128, 0, 16}, Shape{32, 4, 128, 300, 65},
                                           Shape{64, 4, 128, 0, 5}, Shape{12, 4, 64, 33, 2}));

TEST(ChooseNumSplitsTest, CoversTheGpuWithinLimits) {
  EXPECT_EQ(ChooseNumSplits(4096, 4, 8192, 132, 1024), 1);       // prefill: plenty of CTAs
  EXPECT_EQ(ChooseNumSplits(1, 4, 8192, 132, 1024), 128);        // 132 wanted, 128 pages
  EXPECT_EQ(ChooseNumSplits(1, 4, 100, 132, 1024), 2);           // only two pages exist
  EXPECT_EQ(ChooseNumSplits(64, 4, 8192, 132, 1024), 3);         // 528 CTAs / 256
  EXPECT_EQ(ChooseNumSplits(1, 1, 1 << 20, 132, 1024), 256);     // capped at 256 splits
  EXPECT_LE(ChooseNumSplits(40, 4, 1 << 20, 132, 64) * 40, 64);  // partial capacity respected
}

}  // namespace
}  // namespace mkserve::cuda::testing
