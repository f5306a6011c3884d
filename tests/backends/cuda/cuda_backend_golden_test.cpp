// CudaBackend against the HF transformers golden fixtures (tests/fixtures/golden): every prompt
// position's logits and 16 greedy decode steps, for the North semantics and the other branches
// (LayerNorm + softmax + averaged shared expert; renormalised sigmoid + summed shared experts +
// untied head from float32 weights), with HF's routing (routing.json) forced and running free:
// - forced: logits within tolerance everywhere, same greedy tokens, and wherever our router would
//   have picked otherwise the reference's inverted gap is a near-tie (backend_test_util.h);
// - free: routing differences no earlier flip explains are near-ties, and every position before
//   the first difference meets the forced-mode bar (the tiny random north model has router gaps
//   of a few 1e-3, so bf16 flips some; a flip then moves later positions by far more than bf16
//   noise, and the figures there are printed, not asserted).
// Prefill is also run in two chunks (forced). RoutingOverride itself is checked against a CPU loop.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>

#include "backend_test_util.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/decode/router.h"
#include "backends/cuda/tools/tool_hooks.h"
#include "common/error.h"
#include "gpu_test_util.h"

namespace mkserve::cuda::testing {
namespace {

constexpr double kMinCosine = 0.999;

struct Golden {
  std::vector<int32_t> prompt_ids, greedy_ids;
  std::vector<std::vector<float>> prompt_logits, decode_logits;
  ReferenceRouting routing;  // rows: prompt_ids + greedy_ids
};

ReferenceRouting ReadRouting(const std::filesystem::path& dir, const ModelConfig& config) {
  std::ifstream in(dir / "routing.json");
  if (!in) throw std::runtime_error("no routing.json in " + dir.string());
  const nlohmann::json j = nlohmann::json::parse(in);
  const auto ids = j.at("expert_ids").get<std::vector<std::vector<std::vector<int32_t>>>>();
  const auto logits = j.at("router_logits").get<std::vector<std::vector<std::vector<float>>>>();
  ReferenceRouting r;
  r.num_moe_layers = config.num_moe_layers();
  r.num_rows = static_cast<int64_t>(ids.at(0).size());
  r.top_k = config.num_experts_per_token;
  r.num_experts = config.num_experts;
  if (static_cast<int64_t>(ids.size()) != r.num_moe_layers) {
    throw std::runtime_error("routing.json: wrong number of MoE layers");
  }
  for (size_t l = 0; l < ids.size(); ++l) {
    for (size_t t = 0; t < ids[l].size(); ++t) {
      r.expert_ids.insert(r.expert_ids.end(), ids[l][t].begin(), ids[l][t].end());
      r.router_logits.insert(r.router_logits.end(), logits[l][t].begin(), logits[l][t].end());
    }
  }
  if (r.expert_ids.size() != static_cast<size_t>(r.num_moe_layers * r.num_rows * r.top_k) ||
      r.router_logits.size() !=
          static_cast<size_t>(r.num_moe_layers * r.num_rows * r.num_experts)) {
    throw std::runtime_error("routing.json: ragged expert_ids or router_logits");
  }
  return r;
}

Golden ReadGolden(const std::filesystem::path& dir) {
  std::ifstream in(dir / "golden.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  return {j.at("prompt_ids").get<std::vector<int32_t>>(),
          j.at("greedy_ids").get<std::vector<int32_t>>(),
          j.at("prompt_logits").get<std::vector<std::vector<float>>>(),
          j.at("decode_logits").get<std::vector<std::vector<float>>>(),
          ReadRouting(dir, ModelConfig::Load(dir / "config.json"))};
}

std::unique_ptr<CudaBackend> LoadForTest(const std::filesystem::path& dir,
                                         std::shared_ptr<ToolHooks> hooks) {
  const ModelConfig config = ModelConfig::Load(dir / "config.json");
  CudaBackendOptions options;
  options.hooks = std::move(hooks);
  options.kv_layout = PlanKvLayout(config, 8 << 20, 2 * config.kv_width() * 2, 4);
  options.max_num_tokens = 256;
  return LoadCudaBackend(dir, options);
}

void ExpectLogitsClose(const std::vector<float>& got, const std::vector<float>& want,
                       const std::string& where) {
  ASSERT_EQ(got.size(), want.size()) << where;
  EXPECT_GE(Cosine(got, want), kMinCosine) << where;
  double max_diff = 0, max_abs = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    max_diff = std::max(max_diff, static_cast<double>(std::fabs(got[i] - want[i])));
    max_abs = std::max(max_abs, static_cast<double>(std::fabs(want[i])));
  }
  EXPECT_LE(max_diff, 0.05 * max_abs + 1e-3) << where;
}

// One teacher-forced run: the prompt's logits, then 15 decode steps feeding HF's greedy tokens.
// Position p's logits are logits[p]; tokens[p - prompt + 1] is our greedy pick after position p.
struct TeacherForcedRun {
  std::vector<std::vector<float>> logits;  // prompt positions, then decode positions
  std::vector<int32_t> tokens;
};

TeacherForcedRun RunTeacherForced(const Golden& golden, const std::filesystem::path& dir,
                                  RoutingOverride* routing) {
  auto hooks = std::make_shared<ToolHooks>();
  hooks->set_routing_override(routing);
  auto backend = LoadForTest(dir, hooks);
  SimpleBlocks blocks(backend->kv_layout());
  const int64_t prompt = static_cast<int64_t>(golden.prompt_ids.size());
  const auto tables = blocks.Allocate(prompt + static_cast<int64_t>(golden.greedy_ids.size()));
  const SamplingParams greedy = GreedyParams();
  StepInputs prefill;
  prefill.sequences.push_back(MakeStep(1, golden.prompt_ids, 0, tables, &greedy, true));
  routing->set_first_row(0);
  SequenceResult result = backend->Step(prefill).results.at(0);
  TeacherForcedRun run{std::move(result.logits), {result.token_id}};
  for (size_t i = 0; i + 1 < golden.greedy_ids.size(); ++i) {
    const std::vector<int32_t> token = {golden.greedy_ids[i]};  // teacher-forced
    StepInputs decode;
    decode.sequences.push_back(
        MakeStep(1, token, prompt + static_cast<int64_t>(i), tables, &greedy, true));
    routing->set_first_row(prompt + static_cast<int64_t>(i));
    SequenceResult step = backend->Step(decode).results.at(0);
    run.logits.push_back(std::move(step.logits.at(0)));
    run.tokens.push_back(step.token_id);
  }
  return run;
}

// Checks positions [0, end): logits close and the greedy pick after each equal to HF's.
void ExpectRunMatches(const Golden& golden, const TeacherForcedRun& run, int64_t end,
                      const std::string& mode) {
  const int64_t prompt = static_cast<int64_t>(golden.prompt_ids.size());
  ASSERT_EQ(run.logits.size(), prompt + golden.greedy_ids.size() - 1) << mode;
  for (int64_t p = 0; p < std::min<int64_t>(end, run.logits.size()); ++p) {
    const bool in_prompt = p < prompt;
    const std::vector<float>& want =
        in_prompt ? golden.prompt_logits[p] : golden.decode_logits[p - prompt];
    const std::string where =
        mode + (in_prompt ? " prompt position " : " decode position ") + std::to_string(p);
    ExpectLogitsClose(run.logits[p], want, where);
    if (p >= prompt - 1) {
      ExpectSameGreedy(run.tokens[p - prompt + 1], golden.greedy_ids[p - prompt + 1], want, where);
    }
  }
}

int64_t CountBelow(const Golden& golden, const TeacherForcedRun& run) {
  int64_t below = 0;
  const size_t prompt = golden.prompt_ids.size();
  for (size_t p = 0; p < run.logits.size(); ++p) {
    const auto& want = p < prompt ? golden.prompt_logits[p] : golden.decode_logits[p - prompt];
    below += !(Cosine(run.logits[p], want) >= kMinCosine);
  }
  return below;
}

void ExpectRoutingNearTies(const std::string& what, const RoutingComparison& c) {
  const std::string first = c.num_different == 0 ? "none" : std::to_string(c.first_different_row);
  std::printf(
      "%s: routing %lld of %lld decisions differ (%lld judged, largest inverted gap %.2e, bound "
      "%.2e), first at row %s; router logits RMS %.3f, our error RMS %.2e\n",
      what.c_str(), static_cast<long long>(c.num_different),
      static_cast<long long>(c.num_decisions), static_cast<long long>(c.num_checked), c.largest_gap,
      kNearTieEpsilons * kBf16Epsilon * c.logit_rms, first.c_str(), c.logit_rms, c.logit_rms_error);
  for (const std::string& problem : c.problems) ADD_FAILURE() << what << ": " << problem;
}

class GoldenTest : public ::testing::TestWithParam<std::string> {
 protected:
  std::filesystem::path Dir() const {
    // Tests run from the repository root; the compiled-in source dir is the fallback (a build
    // carried to another machine may have been configured elsewhere).
    const std::filesystem::path local = std::filesystem::path("tests/fixtures/golden") / GetParam();
    if (std::filesystem::exists(local / "golden.json")) return local;
    return std::filesystem::path(MKSERVE_SOURCE_DIR) / "tests/fixtures/golden" / GetParam();
  }
  ModelConfig Config() const { return ModelConfig::Load(Dir() / "config.json"); }
};

TEST_P(GoldenTest, ForcedRoutingPrefillAndGreedyDecodeMatchHf) {
  const Golden golden = ReadGolden(Dir());
  RoutingOverride routing(Config(), golden.routing.num_rows, golden.routing.expert_ids);
  const TeacherForcedRun run = RunTeacherForced(golden, Dir(), &routing);
  ExpectRunMatches(golden, run, static_cast<int64_t>(run.logits.size()), "forced");
  // Inputs equal the reference's up to bf16 noise, so every other pick must be a near-tie.
  ExpectRoutingNearTies("forced " + GetParam() + ", our free picks",
                        CompareRouting(golden.routing, routing.TracedIds(), routing.TracedLogits(),
                                       static_cast<int64_t>(run.logits.size()), false));
}

TEST_P(GoldenTest, FreeRoutingDiffersOnlyAtNearTies) {
  const Golden golden = ReadGolden(Dir());
  RoutingOverride routing(Config(), golden.routing.num_rows, {});
  const TeacherForcedRun run = RunTeacherForced(golden, Dir(), &routing);
  const RoutingComparison c =
      CompareRouting(golden.routing, routing.TracedIds(), routing.TracedLogits(),
                     static_cast<int64_t>(run.logits.size()), true);
  ExpectRoutingNearTies("free " + GetParam(), c);
  std::printf("free %s (for the record): %lld of %zu positions below cosine %.3f\n",
              GetParam().c_str(), static_cast<long long>(CountBelow(golden, run)),
              run.logits.size(), kMinCosine);
  ExpectRunMatches(golden, run, c.first_different_row, "free, before any routing difference");
}

TEST_P(GoldenTest, ChunkedPrefillMatchesHf) {
  const Golden golden = ReadGolden(Dir());
  RoutingOverride routing(Config(), golden.routing.num_rows, golden.routing.expert_ids);
  auto hooks = std::make_shared<ToolHooks>();
  hooks->set_routing_override(&routing);
  auto backend = LoadForTest(Dir(), hooks);
  SimpleBlocks blocks(backend->kv_layout());
  const auto tables = blocks.Allocate(static_cast<int64_t>(golden.prompt_ids.size()));
  const int64_t split = 17;
  const std::vector<int32_t> first(golden.prompt_ids.begin(), golden.prompt_ids.begin() + split);
  const std::vector<int32_t> rest(golden.prompt_ids.begin() + split, golden.prompt_ids.end());
  StepInputs one, two;
  one.sequences.push_back(MakeStep(1, first, 0, tables, nullptr, false));
  routing.set_first_row(0);
  backend->Step(one);
  two.sequences.push_back(MakeStep(1, rest, split, tables, nullptr, true));
  routing.set_first_row(split);
  SequenceResult result = backend->Step(two).results.at(0);
  ASSERT_EQ(result.logits.size(), rest.size());
  for (size_t t = 0; t < rest.size(); ++t) {
    ExpectLogitsClose(result.logits[t], golden.prompt_logits[split + t],
                      "chunk 2 position " + std::to_string(t));
  }
}

// RoutingOverride on its own: a 3-layer config (dense, MoE, MoE), 128 experts top-8, rows 13..32
// of MoE layer 1 routed by RouterTopK, then forced; weights against a CPU loop.
ModelConfig OverrideConfig(ExpertSelection selection, bool renormalize) {
  ModelConfig config;
  config.num_experts = 128;
  config.num_experts_per_token = 8;
  config.expert_selection = selection;
  config.norm_topk_prob = renormalize;
  config.layers.resize(3);
  config.layers[0].ffn = FfnKind::kDense;
  return config;
}

std::vector<float> ForcedWeights(const ModelConfig& c, const float* logits, const int32_t* ids) {
  std::vector<float> w(c.num_experts_per_token);
  double sum = 0, top = -INFINITY;
  for (size_t j = 0; j < w.size(); ++j) top = std::max(top, static_cast<double>(logits[ids[j]]));
  for (size_t j = 0; j < w.size(); ++j) {
    const double x = logits[ids[j]];
    w[j] =
        static_cast<float>(c.expert_selection == ExpertSelection::kSigmoid ? 1 / (1 + std::exp(-x))
                                                                           : std::exp(x - top));
    sum += w[j];
  }
  if (c.expert_selection == ExpertSelection::kSoftmax || c.norm_topk_prob) {
    for (float& v : w) v = static_cast<float>(v / sum);
  }
  return w;
}

TEST(RoutingOverrideTest, ForcesIdsWithOurWeightsAndTracesTheFreeChoice) {
  constexpr int64_t kRows = 50, kTokens = 20, kFirstRow = 13, kLayer = 2, kMoeIndex = 1;
  for (const auto& [selection, renormalize] :
       {std::pair{ExpertSelection::kSigmoid, false}, std::pair{ExpertSelection::kSigmoid, true},
        std::pair{ExpertSelection::kSoftmax, true}}) {
    const ModelConfig config = OverrideConfig(selection, renormalize);
    const int64_t k = config.num_experts_per_token, e = config.num_experts;
    std::mt19937 rng(static_cast<uint32_t>(selection) * 2 + renormalize);
    std::vector<int32_t> forced;
    std::vector<int32_t> all(e);
    for (int64_t r = 0; r < 2 * kRows; ++r) {
      std::iota(all.begin(), all.end(), 0);
      std::shuffle(all.begin(), all.end(), rng);
      forced.insert(forced.end(), all.begin(), all.begin() + k);
    }
    const std::vector<float> logits = RandomFloats(kTokens * e, 7);
    DeviceBuffer<float> d_logits = ToDevice(logits), d_weights = NanFloats(kTokens * k);
    DeviceBuffer<int32_t> d_ids = ToDevice(std::vector<int32_t>(kTokens * k, -7));
    RouterTopK(
        {d_logits.data(), kTokens, e, k, selection, renormalize, d_ids.data(), d_weights.data()},
        nullptr);
    const std::vector<int32_t> free_ids = ToHost(d_ids);
    RoutingOverride routing(config, kRows, forced);
    routing.set_first_row(kFirstRow);
    routing.Apply(kLayer, d_logits.data(), kTokens, d_ids.data(), d_weights.data(), nullptr);
    const std::vector<int32_t> ids = ToHost(d_ids), traced = routing.TracedIds();
    const std::vector<float> weights = ToHost(d_weights), traced_logits = routing.TracedLogits();
    for (int64_t t = 0; t < kTokens; ++t) {
      const int32_t* want = forced.data() + ((kMoeIndex * kRows) + kFirstRow + t) * k;
      ASSERT_TRUE(std::equal(want, want + k, ids.begin() + t * k)) << "token " << t;
      ExpectClose({weights.begin() + t * k, weights.begin() + (t + 1) * k},
                  ForcedWeights(config, logits.data() + t * e, want), 1e-6f, 1e-5f, "weights");
    }
    for (int64_t i = 0; i < static_cast<int64_t>(traced.size()); ++i) {
      const int64_t row = i / k - kMoeIndex * kRows - kFirstRow;  // token of this traced entry
      const int32_t want = row >= 0 && row < kTokens ? free_ids[row * k + i % k] : -1;
      ASSERT_EQ(traced[i], want) << "traced id " << i;
    }
    for (int64_t i = 0; i < static_cast<int64_t>(traced_logits.size()); ++i) {
      const int64_t row = i / e - kMoeIndex * kRows - kFirstRow;
      if (row >= 0 && row < kTokens) {
        ASSERT_EQ(traced_logits[i], logits[row * e + i % e]) << "traced logit " << i;
      } else {
        ASSERT_TRUE(std::isnan(traced_logits[i])) << "untraced logit " << i;
      }
    }
  }
}

TEST(RoutingOverrideTest, RejectsBadIdsAndRows) {
  const ModelConfig config = OverrideConfig(ExpertSelection::kSigmoid, false);
  const int64_t k = config.num_experts_per_token, rows = 4, num_ids = 2 * rows * k;
  std::vector<int32_t> good(num_ids);
  for (int64_t i = 0; i < num_ids; ++i) good[i] = static_cast<int32_t>(i % k);
  auto with = [&](int64_t index, int32_t value) {
    std::vector<int32_t> ids = good;
    ids[index] = value;
    return ids;
  };
  EXPECT_THROW((void)RoutingOverride(config, rows, with(5, 128)), Error);
  EXPECT_THROW((void)RoutingOverride(config, rows, with(5, -1)), Error);
  EXPECT_THROW((void)RoutingOverride(config, rows, with(k + 3, 1)), Error);  // 1 twice in row 1
  EXPECT_THROW(
      (void)RoutingOverride(config, rows, std::vector<int32_t>(good.begin(), good.end() - 1)),
      Error);
  RoutingOverride routing(config, rows, good);
  DeviceBuffer<float> logits = NanFloats(8 * config.num_experts), weights = NanFloats(8 * k);
  DeviceBuffer<int32_t> ids = ToDevice(std::vector<int32_t>(8 * k, 0));
  routing.set_first_row(2);
  EXPECT_THROW(routing.Apply(1, logits.data(), 3, ids.data(), weights.data(), nullptr), Error);
  EXPECT_THROW(routing.Apply(0, logits.data(), 1, ids.data(), weights.data(), nullptr), Error);
  EXPECT_NO_THROW(routing.Apply(1, logits.data(), 2, ids.data(), weights.data(), nullptr));
}

// The routing judge itself: 2 MoE layers x 3 rows, top-2 of 4, reference logits 1.0 > 0.99 > 0.5
// > 0 (ids {0, 1}); RMS 0.75, so the near-tie bound is 0.023.
TEST(CompareRoutingTest, JudgesOnlyNearTiesAndOnlyRootsWhenFree) {
  ReferenceRouting ref;
  ref.num_moe_layers = 2, ref.num_rows = 3, ref.top_k = 2, ref.num_experts = 4;
  for (int i = 0; i < 6; ++i) {
    ref.expert_ids.insert(ref.expert_ids.end(), {0, 1});
    ref.router_logits.insert(ref.router_logits.end(), {1.0f, 0.99f, 0.5f, 0.0f});
  }
  std::vector<int32_t> ours = ref.expert_ids;
  const std::vector<float> logits = ref.router_logits;
  RoutingComparison same = CompareRouting(ref, ours, logits, 3, false);
  EXPECT_EQ(same.num_different, 0);
  EXPECT_TRUE(same.problems.empty());
  ours[1 * 2 + 1] = 2;    // layer 0 row 1 picks 2 over 1: inverts 0.49, not a near-tie
  ours[(3 + 2) * 2] = 3;  // layer 1 row 2 picks 3 over 0: after the flip above
  RoutingComparison forced = CompareRouting(ref, ours, logits, 3, false);
  EXPECT_EQ(forced.num_different, 2);
  EXPECT_EQ(forced.problems.size(), 2u);
  RoutingComparison free = CompareRouting(ref, ours, logits, 3, true);
  EXPECT_EQ(free.num_checked, 1);  // the layer-1 difference may be a consequence
  EXPECT_EQ(free.first_different_row, 1);
  ref.router_logits[1 * 4 + 2] = 0.98f;  // now 1 (0.99) vs 2 (0.98) is a near-tie
  EXPECT_TRUE(CompareRouting(ref, ours, logits, 3, true).problems.empty());
  ours[0] = -1;  // row 0 never traced
  EXPECT_EQ(CompareRouting(ref, ours, logits, 3, true).problems.size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Models, GoldenTest,
                         ::testing::Values("north", "layernorm_softmax_shared",
                                           "sigmoid_renorm_sum"),
                         // Named by fixture so a filter such as '*north*' selects one model.
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace mkserve::cuda::testing
