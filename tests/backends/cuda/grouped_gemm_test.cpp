// The tensor-core grouped GEMM against a double-precision CPU loop (empty groups, groups of one
// row, partial row and column tiles, partial weight panels, gathered rows, the SiLU*up epilogue),
// and the MoE prefill path built on it against the decode-sized MoeForward. Weights are packed
// into panels on the host (weight_panels.h), the references read them row-major.
#include "backends/cuda/prefill/grouped_gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "backends/cuda/core/weight_layout.h"
#include "backends/cuda/decode/moe.h"
#include "backends/cuda/prefill/moe_grouped.h"
#include "common/error.h"
#include "gpu_test_util.h"

namespace mkserve::cuda::testing {
namespace {

struct Problem {
  std::vector<int32_t> counts;  // rows per group
  int64_t k, n;
  bool silu_mul, gather;
};

double SiluRef(double x) { return x / (1.0 + std::exp(-x)); }

// out[r] = a[a_rows[r]] . w[g]^T (or silu(gate) * up) in double, group g owning rows r.
std::vector<float> Reference(const Problem& p, const std::vector<int32_t>& offsets,
                             const std::vector<int32_t>& a_rows, const std::vector<float>& a,
                             const std::vector<float>& w) {
  const int64_t groups = static_cast<int64_t>(p.counts.size());
  const int64_t w_rows = p.silu_mul ? 2 * p.n : p.n;
  std::vector<float> want(offsets[groups] * p.n);
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t r = offsets[g]; r < offsets[g + 1]; ++r) {
      const float* x = &a[a_rows[r] * p.k];
      for (int64_t c = 0; c < p.n; ++c) {
        auto dot = [&](int64_t w_row) {
          double sum = 0;
          for (int64_t i = 0; i < p.k; ++i) sum += double{x[i]} * w[(g * w_rows + w_row) * p.k + i];
          return sum;
        };
        want[r * p.n + c] =
            static_cast<float>(p.silu_mul ? SiluRef(dot(c)) * dot(p.n + c) : dot(c));
      }
    }
  }
  return want;
}

void RunProblem(const Problem& p) {
  const int64_t groups = static_cast<int64_t>(p.counts.size());
  std::vector<int32_t> offsets(groups + 1, 0);
  for (int64_t g = 0; g < groups; ++g) offsets[g + 1] = offsets[g] + p.counts[g];
  const int64_t rows = offsets[groups], source_rows = rows + 3;
  const int64_t w_rows = p.silu_mul ? 2 * p.n : p.n;
  const std::vector<float> a = RandomBf16Values(source_rows * p.k, 71);
  const std::vector<float> w = RandomBf16Values(groups * w_rows * p.k, 72, 0.1f);
  std::vector<int32_t> a_rows(rows);
  std::iota(a_rows.begin(), a_rows.end(), 0);
  if (p.gather) std::shuffle(a_rows.begin(), a_rows.end(), std::mt19937(73));
  auto d_a = ToDeviceBf16(a);
  const PanelMatrix panels =
      p.silu_mul ? PanelMatrix::GateUp(p.n, p.k) : PanelMatrix::AdjacentRows(p.n, p.k);
  auto d_w = ToDeviceBf16(PackPanelsOnHost(w, panels, groups));
  auto d_offsets = ToDevice(offsets);
  auto d_rows = ToDevice(std::vector<int32_t>(a_rows.begin(), a_rows.end()));
  auto d_f32 = NanFloats(std::max<int64_t>(rows * p.n, 1));
  auto d_bf16 = NanBf16(std::max<int64_t>(rows * p.n, 1));
  GroupedGemmArgs args{d_a.data(),
                       p.gather ? d_rows.data() : nullptr,
                       d_w.data(),
                       d_offsets.data(),
                       groups,
                       rows + 200,  // spare slots must stay idle
                       p.k,
                       p.n,
                       p.silu_mul ? GroupedEpilogue::kSiluMulBf16 : GroupedEpilogue::kStoreF32,
                       p.silu_mul ? static_cast<void*>(d_bf16.data()) : d_f32.data()};
  GroupedGemm(args, 0);
  const std::vector<float> want = Reference(p, offsets, a_rows, a, w);
  if (rows == 0) {  // every CTA finds no tile: nothing may be written
    EXPECT_TRUE(std::isnan(ToHost(d_f32)[0]));
    EXPECT_TRUE(std::isnan(ToHostFloat(d_bf16)[0]));
    return;
  }
  if (p.silu_mul) {
    ExpectClose(ToHostFloat(d_bf16), want, 2e-3f, 1e-2f, "grouped silu*up");
  } else {
    ExpectClose(ToHost(d_f32), want, 1e-4f, 1e-4f, "grouped gemm");
  }
}

// The grid is sized for rows + 200: 64-row tiles when that is under 96 rows per group (the north
// shapes and the MoE test), 128-row tiles otherwise (the first two cases).
TEST(GroupedGemmTest, PlainGroupsOfEverySize) {
  RunProblem({{0, 1, 127, 128, 129, 300, 0, 5}, 64, 136, false, false});
}

TEST(GroupedGemmTest, GatheredRowsSiluMul) {
  RunProblem({{3, 0, 200, 64, 0, 131}, 96, 72, true, true});
}

TEST(GroupedGemmTest, NorthShapes) {  // gate/up K=2048 N=768, down K=768 N=2048
  RunProblem({{40, 0, 130, 7}, 2048, 768, true, true});
  RunProblem({{40, 0, 130, 7}, 768, 2048, false, false});
}

TEST(GroupedGemmTest, AllGroupsEmpty) { RunProblem({{0, 0, 0}, 32, 8, false, false}); }

TEST(GroupedGemmTest, RejectsUnsupportedShapes) {
  EXPECT_FALSE(GroupedGemmSupports(48, 64));  // k not a multiple of 32
  EXPECT_FALSE(GroupedGemmSupports(64, 12));  // n not a multiple of 8
  GroupedGemmArgs args;
  args.k = 48;
  args.n = 64;
  args.num_groups = 1;
  EXPECT_THROW(GroupedGemm(args, 0), Error);
}

// Distinct experts per token, more tokens on the low ids (uneven groups, some empty).
void SkewedRouting(int64_t tokens, int64_t top_k, int64_t experts, std::vector<int32_t>* ids,
                   std::vector<float>* weights) {
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t base = (t * t) % 5, step = 1 + 2 * (t % 3);  // odd step: distinct experts
    for (int64_t j = 0; j < top_k; ++j) {
      ids->push_back(static_cast<int32_t>((base + j * step) % experts));
      weights->push_back(0.1f * static_cast<float>(j + 1));
    }
  }
}

// MoeForwardGrouped (device-side grouped GEMMs) equals MoeForward on the same routing.
TEST(GroupedGemmTest, MoePrefillPathMatchesDecodePath) {
  const int64_t tokens = 300, hidden = 128, inter = 96, experts = 16, top_k = 4;
  const std::vector<float> x = RandomBf16Values(tokens * hidden, 81);
  const std::vector<float> gate_up = RandomBf16Values(experts * 2 * inter * hidden, 82, 0.1f);
  const std::vector<float> down = RandomBf16Values(experts * hidden * inter, 83, 0.1f);
  std::vector<int32_t> ids;
  std::vector<float> weights;
  SkewedRouting(tokens, top_k, experts, &ids, &weights);
  auto d_x = ToDeviceBf16(x);
  auto d_gate_up =
      ToDeviceBf16(PackPanelsOnHost(gate_up, ExpertGateUpPanels(hidden, inter), experts));
  auto d_down = ToDeviceBf16(PackPanelsOnHost(down, ExpertDownPanels(hidden, inter), experts));
  auto d_ids = ToDevice(ids);
  auto d_weights = ToDevice(weights);
  auto d_index = ToDevice(std::vector<int32_t>(MoeIndexElements(experts, tokens * top_k), -1));
  auto d_hidden = NanBf16(tokens * top_k * inter);
  auto d_expert_out = NanFloats(tokens * top_k * hidden);
  MoeWorkspace ws = MoeIndexViews(d_index.data(), experts, tokens * top_k);
  ws.hidden = d_hidden.data();
  ws.expert_out = d_expert_out.data();
  auto d_grouped = NanFloats(tokens * hidden);
  auto d_plain = NanFloats(tokens * hidden);
  MoeArgs args{d_x.data(),
               d_ids.data(),
               d_weights.data(),
               d_gate_up.data(),
               d_down.data(),
               nullptr,
               SharedExpertCombination::kAverage,
               tokens,
               hidden,
               inter,
               experts,
               top_k,
               d_grouped.data()};
  MoeForwardGrouped(args, ws, 0);
  const std::vector<float> grouped = ToHost(d_grouped);
  args.out = d_plain.data();
  MoeForward(args, ws, 0);
  ExpectClose(grouped, ToHost(d_plain), 1e-3f, 5e-3f, "grouped vs decode MoE");
}

}  // namespace
}  // namespace mkserve::cuda::testing
