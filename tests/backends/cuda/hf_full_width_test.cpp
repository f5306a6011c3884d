// CudaBackend against HF transformers at North Mini Code's full width: a 5-layer
// random bf16 model (dense + forced RoPE, sliding, full NoPE; 128 experts top-8; vocab 262144)
// and float32 HF logits and routing written by tools/oracle/full_width_reference.py on the GPU
// machine. Teacher-forced, 128 positions of a short prompt and the last 256 of a 9216-token prompt
// (the sliding layers cross their 4096 window). The bar:
// (a) forced routing (HF's expert ids in every MoE layer, weights from our router logits): cosine
//     >= 0.999 at every position; where our own router would have picked otherwise, the
//     reference gap it inverts is a near-tie (backend_test_util.h);
// (b) free routing: top-1 agreement with HF fp32 at least HF bf16's own on the same prompt, and
//     the 95th percentile of |logprob difference| (of HF fp32's top-1 token) at most HF bf16's
//     (the script stores HF bf16's scores, computed the same way); every routing difference that
//     no earlier flip explains is a near-tie, and positions before the first one meet the cosine
//     bar;
// (c) a model with as many experts as top-k (no routing choice): p95 |logprob difference| <= 0.01
//     and the same top-1 wherever HF's top-2 margin exceeds 0.01.
// Then the same wanted positions as decode steps, one token each, through the megakernel decode
// path (the prompt before them prefilled): (b)'s bars under free routing and (c)'s.
// MKSERVE_HF_REFERENCE_DIR names the script's --out folder (the no-choice model is in its
// no_choice/); scripts/gpu_check.sh sets it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "backend_test_util.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/tools/tool_hooks.h"
#include "gpu_test_util.h"

namespace mkserve::cuda::testing {
namespace {

constexpr double kMinCosine = 0.999;
constexpr double kNoChoiceMaxP95LogprobDiff = 0.01;
constexpr double kNoChoiceMinMargin = 0.01;  // top-1 must agree where HF's top-2 margin is above
constexpr int64_t kChunkTokens = 2048;
constexpr int64_t kKvBlocksPerGroup = 400;  // 2 runs x (9216 + 128) tokens are 292 blocks of 64

template <typename T>
std::vector<T> ReadArray(const std::filesystem::path& path, size_t count) {
  std::vector<T> values(count);
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(count * sizeof(T)));
  if (!in) throw std::runtime_error("short read of " + path.string());
  return values;
}

struct Sequence {
  std::string name;
  std::vector<int32_t> ids;
  std::vector<int64_t> positions;  // where HF logits were recorded (consecutive)
  int64_t vocab = 0;
  std::vector<float> logits;       // [positions][vocab]
  ReferenceRouting routing;        // rows = every position of ids
  double bf16_top1_agreement = 0;  // HF's own bf16 run, free routing: the bar of (b)
  double bf16_p95_logprob_diff = 0;
};

Sequence ReadSequence(const std::filesystem::path& dir, const nlohmann::json& j,
                      const ModelConfig& config) {
  Sequence s;
  s.name = j.at("name").get<std::string>();
  s.ids = j.at("ids").get<std::vector<int32_t>>();
  s.positions = j.at("positions").get<std::vector<int64_t>>();
  s.vocab = j.at("vocab").get<int64_t>();
  s.bf16_top1_agreement = j.at("hf_bf16").at("top1_agreement").get<double>();
  s.bf16_p95_logprob_diff = j.at("hf_bf16").at("p95_logprob_diff").get<double>();
  s.logits =
      ReadArray<float>(dir / j.at("logits_file").get<std::string>(), s.positions.size() * s.vocab);
  ReferenceRouting& r = s.routing;
  r.num_moe_layers = config.num_moe_layers();
  r.num_rows = static_cast<int64_t>(s.ids.size());
  r.top_k = config.num_experts_per_token;
  r.num_experts = config.num_experts;
  r.expert_ids = ReadArray<int32_t>(dir / j.at("expert_ids_file").get<std::string>(),
                                    r.num_moe_layers * r.num_rows * r.top_k);
  r.router_logits = ReadArray<float>(dir / j.at("router_logits_file").get<std::string>(),
                                     r.num_moe_layers * r.num_rows * r.num_experts);
  return s;
}

int64_t Argmax(const float* row, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (row[i] > row[best]) best = i;
  }
  return best;
}

// log(sum(exp(row))) in double.
double LogSumExp(const float* row, int64_t n) {
  double max = row[0];
  for (int64_t i = 1; i < n; ++i) max = std::max(max, double{row[i]});
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(double{row[i]} - max);
  return max + std::log(sum);
}

// Sorted, element ceil(0.95 n) - 1 (the script computes HF bf16's the same way).
double Percentile95(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t rank = (95 * values.size() + 99) / 100;
  return values[rank > 0 ? rank - 1 : 0];
}

struct LogitScore {
  std::vector<double> cosines;        // per wanted position
  std::vector<double> logprob_diffs;  // |ours - fp32| logprob of fp32's top-1, per position
  std::vector<double> margins;        // fp32's top-1 minus top-2 logit, per position
  std::vector<bool> top1_agrees;
  double min_cosine = 1.0, agreement = 0, p95_logprob_diff = 0;
  int64_t below = 0;
  std::string below_positions;
  std::string mismatches;  // top-1 differences: reference margin vs our logit error there
};

// A top-1 difference at one position: how far HF's best is above our best in HF's logits, next
// to our logits' RMS error there (an output near-tie when the margin is within that noise).
std::string MismatchDetail(int64_t position, const std::vector<float>& got,
                           const std::vector<float>& want, int64_t ours, int64_t theirs) {
  double sum_sq = 0;
  for (size_t v = 0; v < got.size(); ++v) sum_sq += std::pow(double{got[v]} - want[v], 2);
  char detail[128];
  std::snprintf(detail, sizeof(detail), " %lld (margin %.4f, our RMS error %.4f)",
                static_cast<long long>(position), want[theirs] - want[ours],
                std::sqrt(sum_sq / static_cast<double>(got.size())));
  return detail;
}

LogitScore Score(const Sequence& s, const std::vector<std::vector<float>>& got) {
  LogitScore score;
  int64_t agree = 0;
  for (size_t i = 0; i < s.positions.size(); ++i) {
    const std::vector<float>& row = got.at(i);
    const std::vector<float> want(s.logits.begin() + i * s.vocab,
                                  s.logits.begin() + (i + 1) * s.vocab);
    const double cosine = Cosine(row, want);
    score.cosines.push_back(cosine);
    score.min_cosine = std::min(score.min_cosine, cosine);
    if (!(cosine >= kMinCosine)) {
      ++score.below;
      score.below_positions.append(" ").append(std::to_string(s.positions[i]));
    }
    const int64_t ours = Argmax(row.data(), s.vocab), theirs = Argmax(want.data(), s.vocab);
    agree += ours == theirs;
    score.top1_agrees.push_back(ours == theirs);
    score.logprob_diffs.push_back(std::fabs((row[theirs] - LogSumExp(row.data(), s.vocab)) -
                                            (want[theirs] - LogSumExp(want.data(), s.vocab))));
    double second = -INFINITY;
    for (int64_t v = 0; v < s.vocab; ++v) {
      if (v != theirs) second = std::max(second, double{want[v]});
    }
    score.margins.push_back(want[theirs] - second);
    if (ours != theirs) {
      score.mismatches.append(MismatchDetail(s.positions[i], row, want, ours, theirs));
    }
  }
  score.agreement = static_cast<double>(agree) / static_cast<double>(s.positions.size());
  score.p95_logprob_diff = Percentile95(score.logprob_diffs);
  return score;
}

// The model, the reference and the KV blocks of one reference folder, loaded once.
struct Reference {
  ModelConfig config;
  std::vector<Sequence> sequences;
  std::shared_ptr<ToolHooks> hooks = std::make_shared<ToolHooks>();
  std::unique_ptr<CudaBackend> backend;
  std::unique_ptr<SimpleBlocks> blocks;
  int64_t next_sequence_id = 1;
};

// `subdir`: "" for the routed model, "no_choice" for the one with as many experts as top-k;
// `decode_path`: CudaBackendOptions::decode_path.
Reference& LoadReference(const std::string& subdir, const std::string& decode_path = "eager") {
  static std::map<std::string, std::unique_ptr<Reference>> loaded;
  const std::string key = subdir + "|" + decode_path;
  if (loaded.count(key) > 0) return *loaded[key];
  loaded.clear();  // one model on the GPU at a time
  const char* env = std::getenv("MKSERVE_HF_REFERENCE_DIR");
  if (env == nullptr) {
    throw std::runtime_error(
        "set MKSERVE_HF_REFERENCE_DIR to the output folder of "
        "tools/oracle/full_width_reference.py");
  }
  const std::filesystem::path dir = std::filesystem::path(env) / subdir;
  std::ifstream in(dir / "reference.json");
  if (!in) throw std::runtime_error("no reference.json in " + dir.string());
  const nlohmann::json json = nlohmann::json::parse(in);
  auto ref = std::make_unique<Reference>();
  ref->config = ModelConfig::Load(dir / "model" / "config.json");
  for (const auto& j : json.at("sequences")) {
    ref->sequences.push_back(ReadSequence(dir, j, ref->config));
  }
  CudaBackendOptions options;
  // SimpleBlocks never releases, so every group (sliding too) holds every sequence whole.
  KvLayout layout = PlanKvLayout(ref->config, int64_t{4} << 30, 2 * ref->config.kv_width() * 2, 2);
  for (KvGroup& group : layout.groups) group.num_blocks = kKvBlocksPerGroup;
  options.kv_layout = layout;
  options.max_num_tokens = kChunkTokens;
  options.hooks = ref->hooks;
  options.decode_path = decode_path;
  options.warmup_context_tokens = 0;  // schedules and graphs are built on first use
  ref->backend = LoadCudaBackend(dir / "model", options);
  ref->blocks = std::make_unique<SimpleBlocks>(ref->backend->kv_layout());
  loaded[key] = std::move(ref);
  return *loaded[key];
}

// Prefills the whole sequence in chunks under `routing` (null: our own routing, untraced); the
// last chunk starts at the first wanted position and returns its logits.
std::vector<std::vector<float>> TeacherForcedLogits(Reference& ref, const Sequence& s,
                                                    RoutingOverride* routing) {
  const auto tables = ref.blocks->Allocate(static_cast<int64_t>(s.ids.size()));
  const int64_t sequence_id = ref.next_sequence_id++;
  const int64_t first_wanted = s.positions.front();
  ref.hooks->set_routing_override(routing);
  std::vector<std::vector<float>> logits;
  for (int64_t start = 0; start < static_cast<int64_t>(s.ids.size());) {
    const bool last = start >= first_wanted;
    const int64_t end =
        last ? static_cast<int64_t>(s.ids.size()) : std::min(first_wanted, start + kChunkTokens);
    std::vector<int32_t> chunk(s.ids.begin() + start, s.ids.begin() + end);
    StepInputs inputs;
    inputs.sequences.push_back(MakeStep(sequence_id, chunk, start, tables, nullptr, last));
    if (routing != nullptr) routing->set_first_row(start);
    StepOutputs outputs = ref.backend->Step(inputs);
    if (last) logits = std::move(outputs.results.at(0).logits);
    start = end;
  }
  ref.hooks->set_routing_override(nullptr);
  return logits;
}

// Prefills the sequence up to its first wanted position, then runs every wanted position as a
// decode step of one token (our own routing) and returns their logits; each step must have gone
// through `decode_path`.
std::vector<std::vector<float>> DecodedLogits(Reference& ref, const Sequence& s,
                                              const std::string& decode_path) {
  const auto tables = ref.blocks->Allocate(static_cast<int64_t>(s.ids.size()));
  const int64_t sequence_id = ref.next_sequence_id++;
  const int64_t first_wanted = s.positions.front();
  for (int64_t start = 0; start < first_wanted;) {
    const int64_t end = std::min(first_wanted, start + kChunkTokens);
    std::vector<int32_t> chunk(s.ids.begin() + start, s.ids.begin() + end);
    StepInputs inputs;
    inputs.sequences.push_back(MakeStep(sequence_id, chunk, start, tables, nullptr, false));
    ref.backend->Step(inputs);
    start = end;
  }
  std::vector<std::vector<float>> logits;
  for (int64_t position = first_wanted; position < static_cast<int64_t>(s.ids.size()); ++position) {
    const std::vector<int32_t> token = {s.ids[position]};
    StepInputs inputs;
    inputs.sequences.push_back(MakeStep(sequence_id, token, position, tables, nullptr, true));
    StepOutputs outputs = ref.backend->Step(inputs);
    EXPECT_EQ(outputs.decode_path, decode_path) << s.name << " position " << position;
    logits.push_back(std::move(outputs.results.at(0).logits.at(0)));
  }
  return logits;
}

void PrintRouting(const std::string& what, const RoutingComparison& c) {
  std::printf(
      "%s: routing %lld of %lld decisions differ (%lld judged, largest inverted gap %.2e at %s, "
      "bound %.2e); router logits RMS %.3f, our error RMS %.2e\n",
      what.c_str(), static_cast<long long>(c.num_different),
      static_cast<long long>(c.num_decisions), static_cast<long long>(c.num_checked), c.largest_gap,
      c.largest_detail.c_str(), kNearTieEpsilons * kBf16Epsilon * c.logit_rms, c.logit_rms,
      c.logit_rms_error);
}

void ExpectNoProblems(const std::string& what, const RoutingComparison& c) {
  EXPECT_TRUE(c.problems.empty()) << what << ": " << c.problems.size()
                                  << " routing problems, first: "
                                  << (c.problems.empty() ? "" : c.problems.front());
}

// (b)'s bar under free routing: HF bf16's own top-1 agreement and p95 |logprob difference|.
void ExpectHfBf16Bar(const Sequence& s, const LogitScore& score) {
  EXPECT_GE(score.agreement, s.bf16_top1_agreement)
      << s.name << ": top-1 agreement below HF bf16's; differs at" << score.mismatches;
  EXPECT_LE(score.p95_logprob_diff, s.bf16_p95_logprob_diff)
      << s.name << ": p95 |logprob difference| above HF bf16's";
}

// (c): p95 |logprob difference| within 0.01 and the same top-1 wherever HF's margin is clear.
void ExpectNoChoiceBar(const std::string& what, const Sequence& s,
                       const std::vector<std::vector<float>>& got) {
  ASSERT_EQ(got.size(), s.positions.size()) << what << " " << s.name;
  const LogitScore score = Score(s, got);
  int64_t clear = 0, clear_agree = 0;
  std::string differs;
  for (size_t i = 0; i < s.positions.size(); ++i) {
    if (!(score.margins[i] > kNoChoiceMinMargin)) continue;
    ++clear;
    clear_agree += score.top1_agrees[i];
    if (!score.top1_agrees[i]) differs += " " + std::to_string(s.positions[i]);
  }
  std::printf(
      "%s %s: min cosine %.6f, p95 |logprob diff| %.4f (HF bf16 %.4f), top-1 %lld of %lld "
      "positions with margin > %.2f (all: %.4f, HF bf16 %.4f)\n",
      what.c_str(), s.name.c_str(), score.min_cosine, score.p95_logprob_diff,
      s.bf16_p95_logprob_diff, static_cast<long long>(clear_agree), static_cast<long long>(clear),
      kNoChoiceMinMargin, score.agreement, s.bf16_top1_agreement);
  EXPECT_LE(score.p95_logprob_diff, kNoChoiceMaxP95LogprobDiff) << what << " " << s.name;
  EXPECT_EQ(clear_agree, clear) << what << " " << s.name
                                << ": top-1 differs despite a clear margin at" << differs;
}

TEST(HfFullWidthTest, ForcedRoutingLogitsMatchTransformers) {
  Reference& ref = LoadReference("");
  for (const Sequence& s : ref.sequences) {
    RoutingOverride routing(ref.config, s.routing.num_rows, s.routing.expert_ids);
    const auto got = TeacherForcedLogits(ref, s, &routing);
    ASSERT_EQ(got.size(), s.positions.size()) << s.name;
    const LogitScore score = Score(s, got);
    std::printf(
        "forced %s: %zu tokens, %zu positions, min cosine %.6f, positions below %.3f: %lld, "
        "top-1 agreement %.4f, p95 |logprob diff| %.4f\n",
        s.name.c_str(), s.ids.size(), s.positions.size(), score.min_cosine, kMinCosine,
        static_cast<long long>(score.below), score.agreement, score.p95_logprob_diff);
    EXPECT_EQ(score.below, 0) << s.name << ": positions with cosine < " << kMinCosine << ":"
                              << score.below_positions;
    if (!score.mismatches.empty()) {
      std::printf("forced %s top-1 differences:%s\n", s.name.c_str(), score.mismatches.c_str());
    }
    // Upstream state equals the reference's here, so every pick our router would make otherwise
    // must be a near-tie.
    const RoutingComparison c = CompareRouting(s.routing, routing.TracedIds(),
                                               routing.TracedLogits(), s.routing.num_rows, false);
    PrintRouting("forced " + s.name + ", our free picks", c);
    ExpectNoProblems("forced " + s.name, c);
  }
}

TEST(HfFullWidthTest, FreeRoutingDiffersOnlyAtNearTies) {
  Reference& ref = LoadReference("");
  for (const Sequence& s : ref.sequences) {
    RoutingOverride routing(ref.config, s.routing.num_rows, {});
    const auto got = TeacherForcedLogits(ref, s, &routing);
    ASSERT_EQ(got.size(), s.positions.size()) << s.name;
    const LogitScore score = Score(s, got);
    const RoutingComparison c = CompareRouting(s.routing, routing.TracedIds(),
                                               routing.TracedLogits(), s.routing.num_rows, true);
    std::printf(
        "free %s: min cosine %.6f, positions below %.3f: %lld, top-1 agreement %.4f (HF bf16 "
        "%.4f), p95 |logprob diff| %.4f (HF bf16 %.4f), first routing difference at position "
        "%lld\n",
        s.name.c_str(), score.min_cosine, kMinCosine, static_cast<long long>(score.below),
        score.agreement, s.bf16_top1_agreement, score.p95_logprob_diff, s.bf16_p95_logprob_diff,
        static_cast<long long>(c.first_different_row));
    ExpectHfBf16Bar(s, score);
    PrintRouting("free " + s.name, c);
    ExpectNoProblems("free " + s.name, c);
    for (size_t i = 0; i < s.positions.size() && s.positions[i] < c.first_different_row; ++i) {
      EXPECT_GE(score.cosines[i], kMinCosine)
          << s.name << " position " << s.positions[i] << " precedes every routing difference";
    }
  }
}

TEST(HfFullWidthTest, NoRoutingChoiceTracksFp32) {
  Reference& ref = LoadReference("no_choice");
  ASSERT_EQ(ref.config.num_experts, ref.config.num_experts_per_token);
  for (const Sequence& s : ref.sequences) {
    ExpectNoChoiceBar("no-choice", s, TeacherForcedLogits(ref, s, nullptr));
  }
}

// The wanted positions decoded one token a step by the megakernel, free routing: (b)'s bars,
// HF bf16's own top-1 agreement and p95 |logprob difference| against HF fp32.
TEST(HfFullWidthTest, MegakernelDecodeMeetsTheFreeRoutingBar) {
  Reference& ref = LoadReference("", "megakernel");
  for (const Sequence& s : ref.sequences) {
    const auto got = DecodedLogits(ref, s, "megakernel");
    ASSERT_EQ(got.size(), s.positions.size()) << s.name;
    const LogitScore score = Score(s, got);
    std::printf(
        "megakernel decode %s: %zu steps, min cosine %.6f, top-1 agreement %.4f (HF bf16 %.4f), "
        "p95 |logprob diff| %.4f (HF bf16 %.4f)\n",
        s.name.c_str(), got.size(), score.min_cosine, score.agreement, s.bf16_top1_agreement,
        score.p95_logprob_diff, s.bf16_p95_logprob_diff);
    ExpectHfBf16Bar(s, score);
  }
}

// The no-choice model decoded by the megakernel: (c)'s bar, where routing cannot differ.
TEST(HfFullWidthTest, MegakernelDecodeWithNoRoutingChoiceTracksFp32) {
  Reference& ref = LoadReference("no_choice", "megakernel");
  for (const Sequence& s : ref.sequences) {
    ExpectNoChoiceBar("megakernel decode, no-choice", s, DecodedLogits(ref, s, "megakernel"));
  }
}

}  // namespace
}  // namespace mkserve::cuda::testing
