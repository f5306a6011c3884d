// Whole-model test helpers: a trivial block allocator and one-sequence steps, shared by the
// golden-fixture and CPU-comparison tests of CudaBackend; the routing comparison against a
// reference's recorded routing (forced / free modes of the HF tests).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/kv_layout.h"

namespace mkserve::cuda::testing {

// Hands out consecutive physical blocks per KV group; each sequence owns its tables.
class SimpleBlocks {
 public:
  explicit SimpleBlocks(const KvLayout& layout) : layout_(layout), next_(layout.num_groups(), 0) {}

  // Tables covering `tokens` positions for a new sequence.
  std::vector<std::vector<int32_t>> Allocate(int64_t tokens) {
    std::vector<std::vector<int32_t>> tables(layout_.num_groups());
    const int64_t pages = (tokens + kBlockTokens - 1) / kBlockTokens;
    for (int64_t g = 0; g < layout_.num_groups(); ++g) {
      for (int64_t p = 0; p < pages; ++p) tables[g].push_back(next_[g]++);
    }
    return tables;
  }

 private:
  KvLayout layout_;
  std::vector<int32_t> next_;
};

inline SequenceStep MakeStep(int64_t id, const std::vector<int32_t>& tokens, int64_t start,
                             const std::vector<std::vector<int32_t>>& tables,
                             const SamplingParams* sampling, bool return_logits) {
  SequenceStep step;
  step.sequence_id = id;
  step.token_ids = tokens;
  step.start_position = start;
  for (const auto& table : tables) step.block_tables.push_back(table);
  step.sample = sampling != nullptr;
  step.sampling = sampling;
  step.return_logits = return_logits;
  return step;
}

// HF's routing of one sequence, rows = positions: expert ids [moe layer][row][top_k] (HF's
// selection) and float32 router logits [moe layer][row][num_experts].
struct ReferenceRouting {
  int64_t num_moe_layers = 0, num_rows = 0, top_k = 0, num_experts = 0;
  std::vector<int32_t> expert_ids;
  std::vector<float> router_logits;

  const int32_t* ids(int64_t layer, int64_t row) const {
    return expert_ids.data() + (layer * num_rows + row) * top_k;
  }
  const float* logits(int64_t layer, int64_t row) const {
    return router_logits.data() + (layer * num_rows + row) * num_experts;
  }
};

// Routing near-tie bound. Our router logits differ from the float32 reference's through the bf16
// rounding of GEMM inputs upstream (relative error <= 2^-8 per element, RMS ~2^-8/sqrt(3); a few
// roundings per layer add up in the residual): a few tenths of kBf16Epsilon times the logits' RMS
// per logit. Our pick can differ only where that noise, in two logits, inverts the reference's
// gap; kNearTieEpsilons = 4 is several standard deviations of it (4 * 2^-7 * RMS: 0.028 at full
// North width, RMS 0.9; ~0.04 on the north fixture), while a wrong kernel inverts gaps of the
// order of the RMS itself.
inline constexpr double kBf16Epsilon = 1.0 / 128;  // 2^-7: bf16 keeps 8 significant bits
inline constexpr double kNearTieEpsilons = 4.0;
inline constexpr double kNoiseTail = 4.0;  // CompareRouting: largest / RMS of a row's error

struct RoutingComparison {
  int64_t num_decisions = 0;   // (moe layer, row) pairs compared
  int64_t num_different = 0;   // our expert set differs from the reference's
  int64_t num_checked = 0;     // differences judged (all, or only root ones)
  double largest_gap = 0;      // largest inverted reference gap among those judged
  std::string largest_detail;  // where it is, our logits' error there (diagnosis)
  double logit_rms = 0;        // RMS of the reference's router logits
  double logit_rms_error = 0;  // RMS of ours minus the reference's, over compared rows
  int64_t first_different_row = std::numeric_limits<int64_t>::max();  // in any layer
  std::vector<std::string> problems;  // untraced rows, differences beyond the near-tie bound
};

// The reference gap our choice inverts: the best reference expert we dropped minus the worst one
// we added (0 when the sets are equal). Sets of top_k distinct ids.
inline double InvertedGap(const ReferenceRouting& ref, int64_t layer, int64_t row,
                          const int32_t* ours) {
  const int32_t* want = ref.ids(layer, row);
  const float* logits = ref.logits(layer, row);
  double dropped = -INFINITY, added = INFINITY;
  for (int64_t j = 0; j < ref.top_k; ++j) {
    if (std::find(ours, ours + ref.top_k, want[j]) == ours + ref.top_k) {
      dropped = std::max(dropped, static_cast<double>(logits[want[j]]));
    }
    if (std::find(want, want + ref.top_k, ours[j]) == want + ref.top_k) {
      added = std::min(added, static_cast<double>(logits[ours[j]]));
    }
  }
  return std::isinf(dropped) ? 0.0 : dropped - added;
}

inline bool IsExpertSet(const int32_t* ids, int64_t top_k, int64_t num_experts) {
  for (int64_t j = 0; j < top_k; ++j) {
    if (ids[j] < 0 || ids[j] >= num_experts || std::find(ids, ids + j, ids[j]) != ids + j) {
      return false;
    }
  }
  return true;
}

inline bool SameExpertSet(const int32_t* a, const int32_t* b, int64_t top_k) {
  return std::all_of(a, a + top_k,
                     [&](int32_t id) { return std::find(b, b + top_k, id) != b + top_k; });
}

// RMS of the reference's router logits and of ours minus them, over rows [0, num_rows).
inline void LogitStats(const ReferenceRouting& ref, const std::vector<float>& ours,
                       int64_t num_rows, RoutingComparison* c) {
  double sum_sq = 0, err_sq = 0;
  for (int64_t l = 0; l < ref.num_moe_layers; ++l) {
    const size_t begin = static_cast<size_t>(l * ref.num_rows * ref.num_experts);
    for (size_t i = begin; i < begin + static_cast<size_t>(num_rows * ref.num_experts); ++i) {
      const double want = ref.router_logits[i], diff = ours[i] - want;
      sum_sq += want * want;
      err_sq += diff * diff;
    }
  }
  const double count = static_cast<double>(ref.num_moe_layers * num_rows * ref.num_experts);
  c->logit_rms = std::sqrt(sum_sq / count);
  c->logit_rms_error = std::sqrt(err_sq / count);  // NaN when a row was never traced
}

struct RowError {
  double rms = 0;
  double max = 0;
};

// Our router logits' error on one row: RMS and largest |ours - reference| over the experts.
inline RowError RouterRowError(const ReferenceRouting& ref, const std::vector<float>& ours,
                               int64_t layer, int64_t row) {
  const float* want = ref.logits(layer, row);
  const float* got = ours.data() + (layer * ref.num_rows + row) * ref.num_experts;
  double sum_sq = 0;
  RowError error;
  for (int64_t e = 0; e < ref.num_experts; ++e) {
    const double diff = std::fabs(static_cast<double>(got[e]) - want[e]);
    sum_sq += diff * diff;
    error.max = std::max(error.max, diff);
  }
  error.rms = std::sqrt(sum_sq / static_cast<double>(ref.num_experts));
  return error;
}

inline std::string RowErrorDetail(const RowError& error) {
  return "our logit error there: RMS " + std::to_string(error.rms) + ", max " +
         std::to_string(error.max);
}

// Compares our traced routing (RoutingOverride::TracedIds / TracedLogits layout) with the
// reference over rows [0, num_rows). With roots_only, a difference is judged only when no earlier
// MoE layer differs at the same or an earlier row (free running: later ones may be consequences
// of that flip); otherwise every difference is judged (forced routing keeps the inputs equal).
// Judged differences must invert a reference gap below kNearTieEpsilons * kBf16Epsilon * RMS, or
// one our measured error on that row explains: two logits each off by at most the row's largest
// error can swap a gap below twice that error, as long as the row's error looks like rounding
// noise: its RMS within the bound (a wrong kernel's is of the order of the logits' RMS) and its
// largest no more than kNoiseTail times its RMS (the largest of 128 Gaussian errors is about 2.6
// sigma; one wrong logit among 128 stands at about 11). Deep in a free-running model the noise
// grows with depth: an H100 run measured RMS 0.015 and largest 0.039 at MoE layer 30 of 48.
inline RoutingComparison CompareRouting(const ReferenceRouting& ref,
                                        const std::vector<int32_t>& ours,
                                        const std::vector<float>& our_logits, int64_t num_rows,
                                        bool roots_only) {
  RoutingComparison c;
  LogitStats(ref, our_logits, num_rows, &c);
  const double bound = kNearTieEpsilons * kBf16Epsilon * c.logit_rms;
  int64_t root_limit = std::numeric_limits<int64_t>::max();  // first difference of layers < l
  for (int64_t l = 0; l < ref.num_moe_layers; ++l) {
    int64_t layer_first = std::numeric_limits<int64_t>::max();
    for (int64_t r = 0; r < num_rows; ++r, ++c.num_decisions) {
      const int32_t* got = ours.data() + (l * ref.num_rows + r) * ref.top_k;
      const std::string where = "moe layer " + std::to_string(l) + " row " + std::to_string(r);
      if (!IsExpertSet(got, ref.top_k, ref.num_experts)) {
        c.problems.push_back(where + ": not traced (no valid expert set)");
        continue;
      }
      if (SameExpertSet(got, ref.ids(l, r), ref.top_k)) continue;
      ++c.num_different;
      layer_first = std::min(layer_first, r);
      c.first_different_row = std::min(c.first_different_row, r);
      if (roots_only && r >= root_limit) continue;
      ++c.num_checked;
      const double gap = InvertedGap(ref, l, r, got);
      const RowError error = RouterRowError(ref, our_logits, l, r);
      if (gap >= c.largest_gap) {
        c.largest_gap = gap;
        c.largest_detail = where + ", " + RowErrorDetail(error);
      }
      const bool noise_like = error.rms <= bound && error.max <= kNoiseTail * error.rms;
      const bool explained_by_error = noise_like && gap < 2 * error.max;
      if (!(gap < bound) && !explained_by_error) {
        c.problems.push_back(where + ": inverted reference gap " + std::to_string(gap) +
                             " >= near-tie bound " + std::to_string(bound) + " and >= twice " +
                             RowErrorDetail(error));
      }
    }
    root_limit = std::min(root_limit, layer_first);
  }
  return c;
}

}  // namespace mkserve::cuda::testing
