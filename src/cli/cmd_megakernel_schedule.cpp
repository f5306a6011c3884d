// `mkserve megakernel-schedule [--model DIR | --preset nmc|tiny [--layers N]] [--batch 1,8,64]
// [--context 8192] [--sms 132] [--megakernel-policy FILE]`: builds the decode megakernel's
// schedules on the CPU (no GPU needed) and runs the verifier on each with every standard work
// instance. One row per batch size: the bucket, the task counts, the tile shapes and the
// verdict. A policy that fails here fails serve's warm-up too, so tuning starts here, not on the
// GPU.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/megakernel_policy_flag.h"
#include "common/args.h"
#include "common/error.h"
#include "megakernel/schedule/context_bucket.h"
#include "megakernel/schedule/model_support.h"
#include "megakernel/schedule/schedule_cache.h"
#include "megakernel/schedule/schedule_policy.h"
#include "megakernel/schedule/verifier.h"
#include "model/presets.h"

namespace mkserve::cli {
namespace {

namespace mk = mkserve::megakernel;

constexpr int64_t kMaxSms = 1024;

constexpr char kUsage[] =
    "usage: mkserve megakernel-schedule [--model DIR | --preset nmc|tiny [--layers N]]\n"
    "                                   [--batch 1,8,64] [--context 8192] [--sms 132]\n"
    "                                   [--megakernel-policy FILE]\n"
    "Builds the megakernel's schedule for each batch size at a context of --context tokens on\n"
    "--sms SMs (132: H100 SXM / H200), with the default policy or --megakernel-policy FILE (as\n"
    "serve and bench take it), and verifies it with every standard work instance.\n"
    "Exits 1 when a schedule cannot be built or fails the verifier.\n";

ModelConfig LoadConfig(Args& args) {
  const std::string model = args.String("model", "");
  const std::string preset = args.String("preset", "");
  std::optional<int64_t> layers;
  if (args.Value("layers")) layers = args.Int("layers", 0);
  if (!model.empty() && (!preset.empty() || layers)) {
    throw Error("--model reads config.json; --preset and --layers are for the built-in shapes");
  }
  if (!model.empty()) return ModelConfig::LoadDir(model);
  return PresetByName(preset.empty() ? "nmc" : preset, layers);
}

std::string TileSummary(const mk::TileShapes& t, int64_t batch) {
  return "qkv " + std::to_string(t.qkv_tile) + ", o " + std::to_string(t.oproj_tile) + ", up " +
         std::to_string(t.expert_up_tile) + ", down " + std::to_string(t.expert_down_tile) +
         ", lm " + std::to_string(t.lm_head_tile) +
         (t.lm_head_claimed_per_sm != 0
              ? " (" + std::to_string(t.lm_head_claimed_per_sm) + " a SM claimed)"
              : "") +
         ", splits " + std::to_string(t.sliding_splits) + "/" + std::to_string(t.full_split_slots) +
         (mk::FusesNormAt(t, batch) ? ", fused norm" : "") +
         (t.pick_items != 0 ? ", items by pick" : "") +
         (mk::TopKInClaimsAt(t, batch) ? ", top-k in the claims" : "") +
         (t.prime_router != 0 ? ", router primed" : "") +
         (batch <= t.prime_qkv_max_batch ? ", QKV primed" : "") +
         (batch <= t.prime_lm_head_max_batch ? ", LM head primed" : "") +
         (t.early_expert_items != 0 ? ", early expert items " + std::to_string(t.early_expert_items)
                                    : "");
}

// The schedule `cache` selects for `batch` rows at `context` tokens, checked with every standard
// work instance; schedule is null when it could not be built.
struct Verdict {
  const mk::Schedule* schedule = nullptr;
  bool ok = false;
  std::string text;
};

Verdict BuildAndVerify(mk::ScheduleCache& cache, int64_t batch, int64_t context) {
  Verdict v;
  try {
    v.schedule = &cache.Select(batch, context);
    const std::vector<mk::RunTimeWork> instances =
        mk::StandardWork(cache.config(), batch, v.schedule->bucket);
    for (size_t i = 0; i < instances.size(); ++i) {
      const mk::VerifyReport report = mk::VerifySchedule(cache.config(), *v.schedule, instances[i]);
      if (!report.ok()) {
        v.text = "FAILED, instance " + std::to_string(i + 1) + ": " + report.Summary();
        return v;
      }
    }
    v.ok = true;
    v.text = "ok (" + std::to_string(instances.size()) + " instances)";
  } catch (const Error& e) {
    v.text = std::string("FAILED: ") + e.what();
  }
  return v;
}

int RunMegakernelSchedule(std::span<const std::string> argv) {
  Args args(argv);
  const ModelConfig config = LoadConfig(args);
  const std::vector<int64_t> batches = args.IntList("batch", {1, 8, 64});
  const int64_t context = args.Int("context", 8192);
  const int64_t sms = args.Int("sms", 132);
  const std::string policy_file = MegakernelPolicyPath(args);
  args.Finish();
  if (context < 1) throw Error("--context must be at least 1 token");
  // One CTA per SM: real GPUs have up to a few hundred (H100 SXM / H200: 132).
  if (sms < 1 || sms > kMaxSms) throw Error("--sms must be 1.." + std::to_string(kMaxSms));
  if (const std::optional<std::string> why = mk::MegakernelUnsupportedReason(config)) {
    throw Error(*why);
  }
  const mk::SchedulePolicy policy =
      policy_file.empty()
          ? mk::SchedulePolicy::Default()
          : mk::SchedulePolicy::FromJson(nlohmann::json::parse(MegakernelPolicyJson(policy_file)));
  const int64_t max_batch = *std::max_element(batches.begin(), batches.end());
  mk::ScheduleCache cache(config, max_batch,
                          mk::DefaultBucketBounds(config.max_position_embeddings), sms, policy);
  std::printf(
      "| batch | bucket (tokens) | tasks | tasks per SM | counters | queues | tiles | verifier | "
      "ms |\n|---|---|---|---|---|---|---|---|---|\n");
  bool all_ok = true;
  for (int64_t batch : batches) {
    const auto start = std::chrono::steady_clock::now();
    Verdict verdict = BuildAndVerify(cache, batch, context);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    all_ok = all_ok && verdict.ok;
    std::replace(verdict.text.begin(), verdict.text.end(), '\n', ' ');
    const mk::Schedule* schedule = verdict.schedule;
    if (schedule == nullptr) {
      std::printf("| %lld | - | - | - | - | - | - | %s | %.0f |\n", static_cast<long long>(batch),
                  verdict.text.c_str(), ms);
      continue;
    }
    size_t fewest = schedule->sm_tasks.front().size(), most = fewest;
    for (const auto& tasks : schedule->sm_tasks) {
      fewest = std::min(fewest, tasks.size());
      most = std::max(most, tasks.size());
    }
    std::printf("| %lld | %lld | %lld | %zu-%zu | %zu | %zu | %s | %s | %.0f |\n",
                static_cast<long long>(batch),
                static_cast<long long>(schedule->bucket.max_context_tokens),
                static_cast<long long>(schedule->num_tasks()), fewest, most,
                schedule->counters.size(), schedule->queues.size(),
                TileSummary(schedule->tiles, schedule->batch).c_str(), verdict.text.c_str(), ms);
  }
  return all_ok ? 0 : 1;
}

const CommandRegistration kRegistration({
    "megakernel-schedule",
    "build and verify the decode megakernel's schedules on the CPU (--megakernel-policy FILE to "
    "check one)",
    kUsage,
    RunMegakernelSchedule,
});

}  // namespace
}  // namespace mkserve::cli
