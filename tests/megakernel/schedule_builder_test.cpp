#include "megakernel/schedule/schedule_builder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "megakernel/schedule/verifier.h"
#include "megakernel/schedule/work_queues.h"
#include "model/presets.h"

namespace mkserve::megakernel {
namespace {

Schedule Build(const ModelConfig& config, int64_t batch, int64_t context, int64_t num_sms,
               const SchedulePolicy& policy = SchedulePolicy::Default()) {
  const ContextBucket bucket = BucketForContext(config, context);
  // The policy's "tiles" over the default shapes, as ScheduleCache applies them.
  const TileShapes tiles =
      WithTileOverrides(ChooseTileShapes(config, batch, bucket, num_sms), policy.tiles);
  return BuildSchedule(config, batch, bucket, num_sms, tiles, policy);
}

std::vector<const TaskDescriptor*> InGlobalOrder(const Schedule& schedule) {
  std::vector<const TaskDescriptor*> all;
  for (const auto& list : schedule.sm_tasks) {
    for (const TaskDescriptor& task : list) all.push_back(&task);
  }
  std::sort(all.begin(), all.end(), [](const TaskDescriptor* a, const TaskDescriptor* b) {
    return a->arg[kArgSequence] < b->arg[kArgSequence];
  });
  return all;
}

// The verifier accepts `schedule` with every standard work instance (data checks included).
void ExpectVerifies(const ModelConfig& config, const Schedule& schedule) {
  for (const RunTimeWork& work : StandardWork(config, schedule.batch, schedule.bucket)) {
    const VerifyReport report = VerifySchedule(config, schedule, work);
    EXPECT_TRUE(report.ok()) << "batch " << schedule.batch << ": " << report.Summary();
  }
}

// A bad tuning value, as a policy's "tiles" would set it, fails when the schedule is built (8K).
void ExpectBuildRefuses(const ModelConfig& config, int64_t batch,
                        const std::map<std::string, int64_t>& overrides) {
  const ContextBucket bucket = BucketForContext(config, 8192);
  const TileShapes tiles =
      WithTileOverrides(ChooseTileShapes(config, batch, bucket, 132), overrides);
  EXPECT_THROW(BuildSchedule(config, batch, bucket, 132, tiles, SchedulePolicy::Default()), Error);
}

TEST(ScheduleBuilderTest, NorthBatchOneHasTheExpectedTasksPerLayer) {
  const ModelConfig config = NmcPreset();
  const Schedule schedule = Build(config, 1, 8192, 132);
  ASSERT_EQ(schedule.sm_tasks.size(), 132u);
  std::map<std::pair<uint32_t, uint32_t>, int> per_op;  // (layer, opcode) -> tasks
  for (const TaskDescriptor* task : InGlobalOrder(schedule)) ++per_op[{task->layer, task->opcode}];
  // Layer 1 is a sliding MoE layer: (32 q heads + 2 x 4 kv heads) x 128 / 64 QKV tiles, 4 static
  // splits per (row, kv head) (batch 1's cap), 2048 / 64 x 4 O-proj tiles, 128 / 16 x 4 router
  // tiles.
  EXPECT_EQ((per_op[{1, kQkv}]), (32 + 8) * 2);
  EXPECT_EQ((per_op[{1, kAttention}]), 4 * 4);
  EXPECT_EQ((per_op[{1, kAttentionCombine}]), 4);
  EXPECT_EQ((per_op[{1, kOProj}]), 32 * 4);
  EXPECT_EQ((per_op[{1, kRouter}]), 8 * 4);
  // One row: expert items by pick, whose claims run the top-k: no top-k task, no finalize.
  EXPECT_EQ((per_op[{1, kTopK}]), 0);
  EXPECT_EQ((per_op[{1, kMoeFinalize}]), 0);
  EXPECT_EQ((per_op[{1, kExpertGateUpClaim}]), 132);
  EXPECT_EQ((per_op[{1, kMoeCombine}]), 1);
  EXPECT_EQ((per_op[{1, kJoin}]), 1);
  // Layer 4 is the first full (NoPE) MoE layer: claims instead of static splits.
  ASSERT_EQ(config.layers[1].attention, AttentionKind::kSliding);
  ASSERT_EQ(config.layers[4].attention, AttentionKind::kFull);
  EXPECT_EQ((per_op[{4, kAttention}]), 0);
  EXPECT_EQ((per_op[{4, kAttentionClaim}]), 132);
  EXPECT_EQ((per_op[{4, kAttentionCombine}]), 4);
  // Layer 0 is dense: 3072 / 64 gate/up tiles, 2048 / 64 x 2 down tiles, no MoE ops.
  EXPECT_EQ((per_op[{0, kDenseGateUp}]), 48);
  EXPECT_EQ((per_op[{0, kDenseDown}]), 64);
  EXPECT_EQ((per_op[{0, kRouter}]), 0);
  // The LM head: 262144 / 64 tiles, the last 4 per SM claimed by one claim task on each SM.
  EXPECT_EQ((per_op[{49, kLmHead}]), 262144 / 64 - 4 * 132);
  EXPECT_EQ((per_op[{49, kLmHeadClaim}]), 132);
}

// Past 32 rows there are enough (row, KV head) units for the SMs: one sliding split, which writes
// attn_in itself, so the layer has no combine and O-proj waits on the attention tasks directly.
TEST(ScheduleBuilderTest, OneSlidingSplitHasNoCombine) {
  const ModelConfig config = NmcPreset(4);
  const Schedule schedule = Build(config, 64, 8192, 132);
  ASSERT_EQ(schedule.tiles.sliding_splits, 1);
  std::set<uint32_t> attention_signals, oproj_waits;
  int combines = 0;
  for (const auto& list : schedule.sm_tasks) {
    for (const TaskDescriptor& task : list) {
      if (task.layer != 1) continue;
      if (task.opcode == kAttentionCombine) ++combines;
      if (task.opcode == kAttention) attention_signals.insert(task.signal_counter);
      if (task.opcode == kOProj) oproj_waits.insert(task.wait0_counter);
    }
  }
  EXPECT_EQ(combines, 0);
  EXPECT_EQ(attention_signals, oproj_waits);
}

// Without sampling teams, whose places are fixed, not round robin
// (SampleTeamsTakeTheSmsTheRowsLeave).
TEST(ScheduleBuilderTest, GlobalOrderStartsWithEmbedAndEndsWithTheLmHeadClaims) {
  const ModelConfig config = TinyPreset();
  SchedulePolicy policy = SchedulePolicy::Default();
  policy.include_sampling = false;
  const Schedule schedule = Build(config, 5, 256, 7, policy);
  const auto all = InGlobalOrder(schedule);
  ASSERT_FALSE(all.empty());
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i]->arg[kArgSequence], i);
  EXPECT_EQ(all.front()->opcode, kEmbed);
  EXPECT_EQ(all.back()->opcode, kLmHeadClaim);
  // Round robin carries one cursor across waves: task k goes to SM k % 7.
  for (size_t sm = 0; sm < schedule.sm_tasks.size(); ++sm) {
    for (const TaskDescriptor& task : schedule.sm_tasks[sm]) {
      EXPECT_EQ(task.arg[kArgSequence] % 7, sm);
    }
  }
}

TEST(ScheduleBuilderTest, QkvTilesOfAHeadSignalThatHeadsCounterWithTheAttentionTarget) {
  const ModelConfig config = NmcPreset(4);
  const Schedule schedule = Build(config, 3, 4096, 132);
  std::map<uint32_t, int> tiles_per_counter;
  uint32_t attention_target = 0;
  for (const auto& list : schedule.sm_tasks) {
    for (const TaskDescriptor& task : list) {
      if (task.layer != 1) continue;
      if (task.opcode == kQkv) ++tiles_per_counter[task.signal_counter];
      if (task.opcode == kAttention) attention_target = task.wait0_target;
    }
  }
  ASSERT_EQ(tiles_per_counter.size(), 4u);  // one counter per KV head
  for (const auto& [counter, tiles] : tiles_per_counter) EXPECT_EQ(tiles, 20);
  EXPECT_EQ(attention_target, 20u);
}

TEST(ScheduleBuilderTest, SmCountIsAParameter) {
  const ModelConfig config = TinyPreset();
  for (int64_t sms : {1, 3, 132}) {
    const Schedule schedule = Build(config, 2, 512, sms);
    EXPECT_EQ(static_cast<int64_t>(schedule.sm_tasks.size()), sms);
    const auto packed = schedule.PackedTasks();
    EXPECT_EQ(static_cast<int64_t>(packed.size()), sms * schedule.max_tasks_per_sm());
    int64_t total = 0;
    for (uint32_t count : schedule.TaskCounts()) total += count;
    EXPECT_EQ(total, schedule.num_tasks());
  }
}

TEST(ScheduleBuilderTest, LeastLoadedPlacementBalancesEstimatedBytes) {
  const ModelConfig config = NmcPreset(4);
  SchedulePolicy policy = SchedulePolicy::Default();
  policy.placement = Placement::kLeastLoaded;
  const Schedule schedule = Build(config, 8, 8192, 16, policy);
  // Every SM gets work and the lists stay in global order.
  for (const auto& list : schedule.sm_tasks) {
    ASSERT_FALSE(list.empty());
    for (size_t i = 1; i < list.size(); ++i) {
      EXPECT_LT(list[i - 1].arg[kArgSequence], list[i].arg[kArgSequence]);
    }
  }
  EXPECT_NE(schedule.TaskCounts(), Build(config, 8, 8192, 16).TaskCounts());
}

TEST(ScheduleBuilderTest, BadInputsGiveErrorsNamingTheProblem) {
  const ModelConfig config = TinyPreset();
  const ContextBucket bucket = BucketForContext(config, 256);
  TileShapes tiles = ChooseTileShapes(config, 4, bucket, 8);
  EXPECT_THROW(ChooseTileShapes(config, 65, bucket, 8), Error);
  EXPECT_THROW(ChooseTileShapes(config, 0, bucket, 8), Error);
  tiles.qkv_tile = 5;
  try {
    BuildSchedule(config, 4, bucket, 8, tiles, SchedulePolicy::Default());
    FAIL() << "a qkv tile that does not divide head_dim was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("qkv_tile"), std::string::npos) << e.what();
  }
  EXPECT_THROW(BuildSchedule(config, 4, bucket, 0, ChooseTileShapes(config, 4, bucket, 8),
                             SchedulePolicy::Default()),
               Error);
  // Counts a policy could set so large that building would run out of time or memory, or
  // wrap a descriptor field: refused by name before any task is built.
  const ModelConfig nmc = NmcPreset(4);
  for (const char* field : {"expert_claimers", "attention_claimers"}) {
    ExpectBuildRefuses(nmc, 1, {{field, 100000000}});
    ExpectBuildRefuses(nmc, 1, {{field, 0}});
  }
  ExpectBuildRefuses(nmc, 64, {{"expert_rows", 65}});
  ExpectBuildRefuses(nmc, 64, {{"expert_rows", int64_t{1} << 32}});
}

TEST(SchedulePolicyTest, JsonRoundTripsAndRejectsBadOrders) {
  SchedulePolicy policy = SchedulePolicy::Default();
  policy.placement = Placement::kLeastLoaded;
  policy.include_sampling = true;
  policy.wave_sms = {{Wave::kOProj, {0.75, 1.0}}, {Wave::kExpertDown, {0.0, 0.5}}};
  EXPECT_EQ(SchedulePolicy::FromJson(policy.ToJson()), policy);

  nlohmann::json json = SchedulePolicy::Default().ToJson();
  json["layer_waves"].erase(0);  // drops "qkv"
  try {
    SchedulePolicy::FromJson(json);
    FAIL() << "a policy without qkv was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lacks \"qkv\""), std::string::npos) << e.what();
  }
  json = SchedulePolicy::Default().ToJson();
  json["layer_waves"].push_back("join");
  EXPECT_THROW(SchedulePolicy::FromJson(json), Error);
  EXPECT_THROW(SchedulePolicy::FromJson({{"placement", "random"}}), Error);
  EXPECT_THROW(SchedulePolicy::FromJson({{"layer_waves", {"qkv", "warp"}}}), Error);
  EXPECT_THROW(SchedulePolicy::FromJson({{"speed", 3}}), Error);
  for (const nlohmann::json& shares :
       {nlohmann::json{{"oproj", {0.5, 0.5}}}, nlohmann::json{{"oproj", {-0.1, 0.5}}},
        nlohmann::json{{"oproj", {0.5, 1.5}}}, nlohmann::json{{"oproj", {0.5}}},
        nlohmann::json{{"oproj", "half"}}, nlohmann::json{{"warp", {0.0, 1.0}}},
        nlohmann::json{{"sample", {0.0, 1.0}}}}) {  // sampling teams have a fixed placement
    EXPECT_THROW(SchedulePolicy::FromJson({{"wave_sms", shares}}), Error) << shares.dump();
  }
}

// wave_sms: a wave's tasks land only on its share of the SMs, under either placement, and the
// verifier accepts the schedule (any placement that keeps the global order is deadlock-free).
TEST(ScheduleBuilderTest, AWaveCanBeKeptToAShareOfTheSms) {
  const ModelConfig config = NmcPreset(6);
  const ContextBucket bucket = BucketForContext(config, 8192);
  for (Placement placement : {Placement::kRoundRobin, Placement::kLeastLoaded}) {
    SchedulePolicy policy = SchedulePolicy::Default();
    policy.placement = placement;
    // 0.3 of 132 SMs is not whole: the shares must still divide the SMs, not share one.
    policy.wave_sms = {{Wave::kOProj, {0.3, 1.0}},
                       {Wave::kExpertGateUp, {0.0, 0.3}},
                       {Wave::kExpertDown, {0.0, 0.3}}};
    const TileShapes tiles = ChooseTileShapes(config, 1, bucket, 132);
    const Schedule schedule = BuildSchedule(config, 1, bucket, 132, tiles, policy);
    int oproj = 0, claims = 0;
    for (size_t sm = 0; sm < schedule.sm_tasks.size(); ++sm) {
      for (const TaskDescriptor& task : schedule.sm_tasks[sm]) {
        if (task.opcode == kOProj) {
          ++oproj;
          EXPECT_GE(sm, 40u);  // round(0.3 * 132)
        }
        if (task.opcode == kExpertGateUpClaim || task.opcode == kExpertDownClaim) {
          ++claims;
          EXPECT_LT(sm, 40u);
        }
      }
    }
    EXPECT_GT(oproj, 0);
    EXPECT_GT(claims, 0);
    for (const RunTimeWork& work : StandardWork(config, 1, schedule.bucket)) {
      const VerifyReport report = VerifySchedule(config, schedule, work);
      EXPECT_TRUE(report.ok()) << report.Summary();
    }
  }
}

// pick_items: no finalize; the top-k tasks carry kFlagPickItems and the claims wait for them
// (target: the row groups) and name their tiles per pick; the verifier accepts every instance.
TEST(ScheduleBuilderTest, ExpertItemsByPickNeedNoFinalize) {
  const ModelConfig config = NmcPreset(6);
  SchedulePolicy policy = SchedulePolicy::Default();
  // topk_in_finalize is ignored by pick; top-k tasks, not the claims, pick here.
  policy.tiles = {{"pick_items", 1}, {"topk_in_finalize", 1}, {"topk_in_claims_max_batch", 0}};
  for (int64_t batch : {1, 2, 8}) {
    const Schedule schedule = Build(config, batch, 8192, 132, policy);
    const TileShapes& tiles = schedule.tiles;
    const uint32_t row_groups =
        static_cast<uint32_t>((batch + tiles.row_tile - 1) / tiles.row_tile);
    int top_ks = 0, claims = 0;
    for (const TaskDescriptor* task : InGlobalOrder(schedule)) {
      EXPECT_NE(task->opcode, kMoeFinalize);
      if (task->opcode == kTopK) {
        ++top_ks;
        EXPECT_EQ(task->flags, kFlagPickItems);
      }
      if (task->opcode == kExpertGateUpClaim || task->opcode == kExpertDownClaim) {
        claims += task->arg[kArgMaxItems] == 0 ? 1 : 0;  // early claims aside
        EXPECT_EQ(task->flags, kFlagPickItems);
        EXPECT_EQ(task->wait0_target, row_groups);
        const bool down = task->opcode == kExpertDownClaim;
        EXPECT_EQ(task->arg[kArgTiles],
                  down ? 2048u / tiles.expert_down_tile : 768u / tiles.expert_up_tile);
        if (down) {
          EXPECT_EQ(task->arg[kArgTiles2], 768u / tiles.expert_up_tile);
        }
      }
    }
    EXPECT_EQ(top_ks, config.num_moe_layers() * static_cast<int>(row_groups));
    EXPECT_EQ(claims, config.num_moe_layers() * 2 * static_cast<int>(tiles.expert_claimers));
    ExpectVerifies(config, schedule);
  }
  ExpectBuildRefuses(config, 1, {{"pick_items", 2}});
}

// The top-k in the claims (batch 1's default, up to topk_in_claims_max_batch rows by pick): no
// top-k task and no finalize; the claims carry kFlagTopKInClaims and wait for every router task;
// the router tasks of batch 1 prime their weights; the published picks are zeroed before the
// step; the verifier accepts every instance. Larger batches of the same policy keep their top-k
// tasks.
TEST(ScheduleBuilderTest, TheClaimsCanRunTheTopK) {
  const ModelConfig config = NmcPreset(6);
  SchedulePolicy policy = SchedulePolicy::Default();
  policy.tiles = {{"pick_items", 1}, {"topk_in_claims_max_batch", 4}};
  for (int64_t batch : {1, 4, 8}) {
    const Schedule schedule = Build(config, batch, 8192, 132, policy);
    const bool routes = batch <= 4;
    int top_ks = 0, claims = 0, primed = 0;
    for (const TaskDescriptor* task : InGlobalOrder(schedule)) {
      EXPECT_NE(task->opcode, kMoeFinalize);
      top_ks += task->opcode == kTopK;
      primed += task->opcode == kRouter && (task->flags & kFlagPrimeWeights) != 0;
      if (task->opcode != kExpertGateUpClaim && task->opcode != kExpertDownClaim) continue;
      claims += task->arg[kArgMaxItems] == 0 ? 1 : 0;  // early claims aside
      EXPECT_EQ(task->flags, kFlagPickItems | (routes ? kFlagTopKInClaims : 0u));
      if (routes) {
        EXPECT_EQ(task->wait0_target, (128u / 16) * 4);  // the router tasks
      }
    }
    EXPECT_EQ(top_ks, routes ? 0 : config.num_moe_layers() * static_cast<int>(batch));
    EXPECT_EQ(claims,
              config.num_moe_layers() * 2 * static_cast<int>(schedule.tiles.expert_claimers));
    EXPECT_EQ(primed, batch == 1 ? config.num_moe_layers() * 32 : 0);
    uint64_t published_bytes = 0;
    for (const ScratchToZero& zero : schedule.zero_before_step) {
      if (zero.buffer == kScratchPublishedPicks) published_bytes += zero.bytes;
    }
    EXPECT_EQ(published_bytes, routes ? 6u * static_cast<uint64_t>(batch) * 8 * 8 : 0u);
    ExpectVerifies(config, schedule);
  }
  ExpectBuildRefuses(config, 1, {{"topk_in_claims_max_batch", 5}});
  ExpectBuildRefuses(config, 1, {{"topk_in_claims_max_batch", -1}});
  ExpectBuildRefuses(config, 1, {{"prime_router", 2}});
  ExpectBuildRefuses(config, 1, {{"prime_router", 1}, {"router_splits", 1}, {"router_tile", 32}});
}

// GEMM tiles prime their weights (kFlagPrimeWeights) at batches up to their knob: QKV tiles up
// to prime_qkv_max_batch (2 by default), the LM head's static tiles up to
// prime_lm_head_max_batch; at most 8, the GEMM body's ring path. Every tile of the kind below the
// bound, none above; 0 turns it off; claimed LM head tiles never (they are not known before their
// claim).
TEST(ScheduleBuilderTest, GemmTilesPrimeTheirWeightsUpToTheirBatchBound) {
  const ModelConfig config = NmcPreset(6);
  const struct {
    const char* knob;
    uint32_t opcode;
    int64_t by_default;
  } kinds[] = {{"prime_qkv_max_batch", kQkv, 2}, {"prime_lm_head_max_batch", kLmHead, 0}};
  for (const auto& kind : kinds) {
    for (int64_t prime_max : {-2, 8, 0, 3}) {  // -2: the default policy
      SchedulePolicy policy = SchedulePolicy::Default();
      if (prime_max >= 0) policy.tiles = {{kind.knob, prime_max}};
      if (prime_max < 0) prime_max = kind.by_default;
      for (int64_t batch : {1, 3, 4, 8, 9, 64}) {
        const Schedule schedule = Build(config, batch, 8192, 132, policy);
        int tiles = 0, primed = 0;
        for (const TaskDescriptor* task : InGlobalOrder(schedule)) {
          if (task->opcode == kLmHeadClaim) EXPECT_EQ(task->flags & kFlagPrimeWeights, 0u);
          if (task->opcode != kind.opcode) continue;
          ++tiles;
          primed += (task->flags & kFlagPrimeWeights) != 0;
        }
        EXPECT_GT(tiles, 0) << kind.knob;
        EXPECT_EQ(primed, batch <= prime_max ? tiles : 0)
            << kind.knob << " batch " << batch << " max " << prime_max;
        ExpectVerifies(config, schedule);
      }
    }
    ExpectBuildRefuses(config, 1, {{kind.knob, 9}});
    ExpectBuildRefuses(config, 1, {{kind.knob, -1}});
  }
}

// early_expert_items: every SM that holds no QKV task of a MoE layer takes a bounded copy of the
// layer's gate/up claim, ahead of its attention tasks; the SMs with QKV tasks take none.
TEST(ScheduleBuilderTest, EarlyExpertClaimsGoToTheSmsWithoutQkv) {
  const ModelConfig config = NmcPreset(6);
  SchedulePolicy policy = SchedulePolicy::Default();
  policy.tiles = {{"early_expert_items", 2}};
  for (int64_t batch : {1, 8}) {
    const Schedule schedule = Build(config, batch, 8192, 132, policy);
    for (int64_t layer = 1; layer < config.num_layers; ++layer) {
      int early = 0, without_qkv = 0;
      for (const auto& list : schedule.sm_tasks) {
        bool qkv = false, attention_seen = false, early_here = false;
        for (const TaskDescriptor& task : list) {
          if (task.layer != static_cast<uint32_t>(layer)) continue;
          qkv |= task.opcode == kQkv;
          attention_seen |= task.opcode == kAttention || task.opcode == kAttentionClaim;
          if (task.opcode != kExpertGateUpClaim || task.arg[kArgMaxItems] == 0) continue;
          EXPECT_EQ(task.arg[kArgMaxItems], 2u);
          EXPECT_FALSE(attention_seen) << "an early claim after its SM's attention";
          EXPECT_FALSE(early_here) << "two early claims on one SM";
          early_here = true;
        }
        without_qkv += !qkv;
        early += early_here;
        EXPECT_FALSE(qkv && early_here) << "an early claim on an SM with a QKV tile";
      }
      EXPECT_EQ(early, without_qkv) << "layer " << layer;
      EXPECT_GT(early, 0);
    }
    ExpectVerifies(config, schedule);
  }
  ExpectBuildRefuses(config, 1, {{"early_expert_items", -1}});
  ExpectBuildRefuses(config, 1, {{"early_expert_items", int64_t{1} << 32}});  // would wrap to 0
}

// topk_in_finalize: no kTopK tasks; each MoE layer's finalize waits for the router's tiles and
// carries kFlagWithTopK; the verifier accepts the schedules, data checks included (the finalize
// reads the router logits and writes the routing it then reads).
TEST(ScheduleBuilderTest, TopKCanRunInsideTheFinalize) {
  const ModelConfig config = NmcPreset(6);
  SchedulePolicy policy = SchedulePolicy::Default();
  // By pick (batch 1's default) there is no finalize.
  policy.tiles = {{"topk_in_finalize", 1}, {"pick_items", 0}};
  for (int64_t batch : {1, 8, 64}) {
    const Schedule schedule = Build(config, batch, 8192, 132, policy);
    const TileShapes& tiles = schedule.tiles;
    int finalizes = 0;
    for (const TaskDescriptor* task : InGlobalOrder(schedule)) {
      EXPECT_NE(task->opcode, kTopK);
      if (task->opcode != kMoeFinalize) continue;
      ++finalizes;
      EXPECT_EQ(task->flags, kFlagWithTopK);
      EXPECT_EQ(task->row_begin, 0u);
      EXPECT_EQ(task->row_end, static_cast<uint32_t>(batch));
      EXPECT_EQ(task->wait0_target, (128u / tiles.router_tile) * tiles.router_splits);
    }
    EXPECT_EQ(finalizes, config.num_moe_layers());
    ExpectVerifies(config, schedule);
  }
  ExpectBuildRefuses(config, 1, {{"topk_in_finalize", 2}});
}

// The fused norm up to fused_norm_max_batch rows (2 by default): a MoE layer after the first has
// its QKV and router tasks flagged and waiting for the previous O-proj and FFN, the previous join
// writes the residual only; one value serves every batch size of a policy.
TEST(ScheduleBuilderTest, TheNormIsFusedUpToItsBatch) {
  const ModelConfig config = NmcPreset(6);
  const ContextBucket bucket = BucketForContext(config, 8192);
  auto fused_layers = [&](const Schedule& schedule) {
    std::set<uint32_t> layers;
    for (const TaskDescriptor* task : InGlobalOrder(schedule)) {
      if (task->opcode == kQkv && (task->flags & kFlagFusedNorm) != 0) {
        layers.insert(task->layer);
        EXPECT_NE(task->wait1_counter, kNoCounter);  // the O-proj and the FFN
      }
      if (task->opcode == kJoin && task->layer + 1 < config.num_layers) {
        const bool next_fused = config.layers[task->layer + 1].ffn == FfnKind::kMoe &&
                                FusesNormAt(schedule.tiles, schedule.batch);
        EXPECT_EQ((task->flags & kFlagResidualOnly) != 0, next_fused);
      }
    }
    return layers;
  };
  const std::set<uint32_t> moe_after_first = {1, 2, 3, 4, 5};
  for (int64_t batch : {1, 2, 3, 8, 16}) {
    for (int64_t max_batch : {int64_t{-1}, int64_t{0}, int64_t{8}}) {  // -1: the default
      TileShapes tiles = ChooseTileShapes(config, batch, bucket, 132);
      if (max_batch >= 0) tiles.fused_norm_max_batch = max_batch;
      const Schedule schedule =
          BuildSchedule(config, batch, bucket, 132, tiles, SchedulePolicy::Default());
      const bool fused = batch <= (max_batch >= 0 ? max_batch : 2);
      EXPECT_EQ(fused_layers(schedule), fused ? moe_after_first : std::set<uint32_t>{})
          << "batch " << batch << ", fused_norm_max_batch " << max_batch;
      ExpectVerifies(config, schedule);
    }
  }
  // A fused QKV task stages at most 8 rows.
  ExpectBuildRefuses(config, 1, {{"fused_norm_max_batch", kMaxFusedNormBatch + 1}});
}

// At batch 1 up to the 16K bucket the full-attention layers take at most 8 splits (measured
// faster there); longer buckets and larger batches keep the SM-covering count.
TEST(ScheduleBuilderTest, BatchOneCapsFullAttentionSplitsUpTo16K) {
  const ModelConfig config = NmcPreset();
  auto slots = [&](int64_t batch, int64_t context) {
    return ChooseTileShapes(config, batch, BucketForContext(config, context), 132).full_split_slots;
  };
  EXPECT_EQ(slots(1, 4096), 8);
  EXPECT_EQ(slots(1, 16384), 8);
  EXPECT_EQ(slots(1, 32768), 16);
  EXPECT_EQ(slots(1, 131072), 32);
  EXPECT_EQ(slots(2, 8192), 16);
  EXPECT_LE(slots(1, 1024), 8);
}

// Batch 1 takes at most 4 sliding splits, batches 3 and 4 at most 8 (measured faster there); 2
// and 5 keep the SM-covering count (16 and 7 on 132 SMs).
TEST(ScheduleBuilderTest, SmallBatchesCapTheirSlidingSplits) {
  const ModelConfig config = NmcPreset();
  auto splits = [&](int64_t batch, int64_t context) {
    return ChooseTileShapes(config, batch, BucketForContext(config, context), 132).sliding_splits;
  };
  for (int64_t context : {4096, 8192, 32768}) {
    EXPECT_EQ(splits(1, context), 4) << context;
    EXPECT_EQ(splits(2, context), 16) << context;
    EXPECT_EQ(splits(3, context), 8) << context;
    EXPECT_EQ(splits(4, context), 8) << context;
    EXPECT_EQ(splits(5, context), 7) << context;
  }
}

// The LM head: static tiles from the start of the vocabulary, then one claim task as the last LM
// head task of every SM, whose queue holds the rest; together every tile once.
TEST(ScheduleBuilderTest, LmHeadTilesAreStaticThenClaimedOnce) {
  const ModelConfig config = NmcPreset();
  for (int64_t per_sm : {-1, 0, 4, 1000}) {  // -1: the default
    SchedulePolicy policy = SchedulePolicy::Default();
    if (per_sm >= 0) policy.tiles = {{"lm_head_claimed_per_sm", per_sm}};
    const Schedule schedule = Build(config, 1, 8192, 132, policy);
    const int64_t width = schedule.tiles.lm_head_tile, tiles = config.vocab_size / width;
    const int64_t claimed = std::min(tiles, schedule.tiles.lm_head_claimed_per_sm * 132);
    std::vector<int> covered(tiles, 0);
    int claims = 0;
    for (const auto& list : schedule.sm_tasks) {
      bool claimed_here = false;
      for (const TaskDescriptor& task : list) {
        if (task.opcode == kLmHead) {
          EXPECT_FALSE(claimed_here) << "a static LM head tile after the SM's claim";
          ++covered.at(task.arg[kArgOutBegin] / width);
          EXPECT_EQ(task.arg[kArgOutEnd] - task.arg[kArgOutBegin], width);
        } else if (task.opcode == kLmHeadClaim) {
          claimed_here = true;
          ++claims;
          EXPECT_EQ(task.arg[kArgTiles], claimed);
          for (uint32_t i = 0; i < task.arg[kArgTiles]; ++i) {
            if (claims == 1) ++covered.at(LmHeadItemBegin(task, i, width) / width);
          }
        }
      }
    }
    EXPECT_EQ(claims, claimed > 0 ? 132 : 0) << per_sm;
    EXPECT_EQ(std::count(covered.begin(), covered.end(), 1), tiles) << per_sm;
  }
  EXPECT_EQ(ChooseTileShapes(config, 1, BucketForContext(config, 8192), 132).lm_head_claimed_per_sm,
            4);
}

// A policy file (`--megakernel-policy`): read, parsed and checked, every failure naming the file.
TEST(SchedulePolicyTest, FromFileNamesTheFileOnEveryFailure) {
  const std::string dir = ::testing::TempDir();
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir + name) << text;
    return dir + name;
  };
  SchedulePolicy want = SchedulePolicy::Default();
  want.tiles = {{"topk_in_finalize", 1}};
  EXPECT_EQ(SchedulePolicy::FromFile(write("good.json", want.ToJson().dump())), want);
  // A folder, and a value nested 100,000 deep (printing it in the error overflowed the stack).
  const std::string deep =
      "{\"placement\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  for (const std::string& path :
       {dir + "missing.json", write("broken.json", "{\"tiles\": "),
        write("unknown.json", "{\"speed\": 3}"), write("deep.json", deep), dir}) {
    try {
      SchedulePolicy::FromFile(path);
      ADD_FAILURE() << path << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
}

SchedulePolicy WithSampling(std::map<std::string, int64_t> tiles = {}) {
  SchedulePolicy policy = SchedulePolicy::Default();
  policy.include_sampling = true;
  policy.tiles = std::move(tiles);
  return policy;
}

// Checks the kSample tasks form one team of `team` members per row, waiting for every LM head
// tile and numbered after every other task; with team > 1 member (r, k) is the last task of SM
// r * team + k, a team of one goes on SM r % num_sms.
void ExpectSampleTeams(const Schedule& schedule, int64_t team) {
  const auto all = InGlobalOrder(schedule);
  const int64_t members = schedule.batch * team;
  ASSERT_GE(static_cast<int64_t>(all.size()), members);
  const TaskDescriptor& lm_head = *all[all.size() - members - 1];
  ASSERT_TRUE(lm_head.opcode == kLmHead || lm_head.opcode == kLmHeadClaim);
  const uint32_t lm_done =
      lm_head.opcode == kLmHead ? lm_head.signal_counter : lm_head.arg[kArgItemSignalBase];
  const uint32_t lm_tiles = static_cast<uint32_t>(schedule.counters[lm_done].expected_arrivals);
  std::set<int64_t> seen;
  for (int64_t sm = 0; sm < schedule.num_sms; ++sm) {
    const auto& list = schedule.sm_tasks[sm];
    for (size_t i = 0; i < list.size(); ++i) {
      const TaskDescriptor& task = list[i];
      if (task.opcode != kSample) continue;
      const int64_t row = task.row_begin, rank = task.arg[kArgTeamRank];
      EXPECT_EQ(task.row_end, task.row_begin + 1);
      EXPECT_EQ(task.arg[kArgTeamSize], static_cast<uint32_t>(team));
      EXPECT_EQ(sm, team > 1 ? row * team + rank : row % schedule.num_sms);
      if (team > 1) {
        EXPECT_EQ(i + 1, list.size()) << "row " << row << " rank " << rank;
      }
      EXPECT_EQ(task.wait0_counter, lm_done);
      EXPECT_EQ(task.wait0_target, lm_tiles);
      EXPECT_EQ(task.signal_counter, kNoCounter);
      EXPECT_GT(task.arg[kArgSequence], lm_head.arg[kArgSequence]);
      EXPECT_TRUE(seen.insert(row * team + rank).second) << "row " << row << " rank " << rank;
    }
  }
  EXPECT_EQ(static_cast<int64_t>(seen.size()), members);
  // Every tile: the static ones and the claims' queue (LmHeadTilesAreStaticThenClaimedOnce).
  uint32_t tiles = 0;
  const TaskDescriptor* claim = nullptr;
  for (const TaskDescriptor* task : all) {
    tiles += task->opcode == kLmHead ? 1 : 0;
    if (task->opcode == kLmHeadClaim) claim = task;
  }
  if (claim != nullptr) tiles += claim->arg[kArgTiles];
  EXPECT_EQ(lm_tiles, tiles);
}

// By default a row's team takes the SMs the batch leaves it: 132 members for one row, 33 for four.
TEST(ScheduleBuilderTest, SampleTeamsTakeTheSmsTheRowsLeave) {
  const ModelConfig config = TinyPreset();
  for (const auto& [batch, team] : {std::pair<int64_t, int64_t>{1, 132}, {4, 33}}) {
    const Schedule schedule = Build(config, batch, 1024, 132, WithSampling());
    ExpectSampleTeams(schedule, team);
    ExpectVerifies(config, schedule);
  }
}

// A policy's "tiles" caps the team size (fewer members where the SMs run out); a cap outside
// what the ABI allows is refused by name.
TEST(ScheduleBuilderTest, ASampleTeamSizeCapsTheTeams) {
  const ModelConfig config = TinyPreset();
  const Schedule schedule = Build(config, 4, 1024, 132, WithSampling({{"sample_team", 8}}));
  ExpectSampleTeams(schedule, 8);
  ExpectVerifies(config, schedule);
  // A cap, not a demand: 17 rows of 8 would need 136 of the 132 SMs, so each row gets 7.
  ExpectSampleTeams(Build(config, 17, 1024, 132, WithSampling({{"sample_team", 8}})), 7);
  const ContextBucket bucket = BucketForContext(config, 1024);
  for (const auto& [batch, team] :
       {std::pair<int64_t, int64_t>{1, int64_t{kMaxSampleTeam} + 1}, {1, -1}}) {
    try {
      BuildSchedule(
          config, batch, bucket, 132,
          WithTileOverrides(ChooseTileShapes(config, batch, bucket, 132), {{"sample_team", team}}),
          WithSampling());
      ADD_FAILURE() << "sample_team " << team << " at batch " << batch << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("sample_team"), std::string::npos) << e.what();
    }
  }
}

// A team of one has no barrier and needs no SM of its own: more rows than SMs still sample, by
// default or when a policy asks for one member.
TEST(ScheduleBuilderTest, OneMemberTeamsFitAnyBatch) {
  const ModelConfig config = TinyPreset();
  for (const auto& [batch, sms] : {std::pair<int64_t, int64_t>{5, 3}, {8, 4}, {64, 16}}) {
    const Schedule schedule = Build(config, batch, 1024, sms, WithSampling());
    ExpectSampleTeams(schedule, 1);
    ExpectVerifies(config, schedule);
  }
  const Schedule schedule = Build(config, 2, 1024, 16, WithSampling({{"sample_team", 1}}));
  ExpectSampleTeams(schedule, 1);
  ExpectVerifies(config, schedule);
}

TEST(ScheduleBuilderTest, SamplingIsAddedOnRequest) {
  const ModelConfig config = TinyPreset();
  SchedulePolicy policy = SchedulePolicy::Default();
  policy.include_sampling = true;
  const auto all = InGlobalOrder(Build(config, 3, 256, 4, policy));
  EXPECT_EQ(all.back()->opcode, kSample);
  EXPECT_EQ(all.back()->wait0_target, 1024u / 64u);  // every LM head tile
}

}  // namespace
}  // namespace mkserve::megakernel
