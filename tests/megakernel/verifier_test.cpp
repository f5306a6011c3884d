// The verifier passes good schedules and names each planted mistake.
#include "megakernel/schedule/verifier.h"

#include <gtest/gtest.h>

#include <string>

#include "megakernel/schedule/schedule_builder.h"
#include "model/presets.h"

namespace mkserve::megakernel {
namespace {

using Kind = VerifyFailureKind;

// A tiny model whose attention uses several splits, so every op kind is present.
struct Tiny {
  ModelConfig config = TinyPreset();
  Schedule schedule;
  std::vector<RunTimeWork> work;

  explicit Tiny(int64_t batch, int64_t num_sms = 3,
                const SchedulePolicy& policy = SchedulePolicy::Default()) {
    const ContextBucket bucket = BucketForContext(config, 1024);
    TileShapes tiles = ChooseTileShapes(config, batch, bucket, num_sms);
    tiles.min_pages_per_split = 1;
    tiles.sliding_splits = 2;
    tiles.full_split_slots = 4;
    schedule = BuildSchedule(config, batch, bucket, num_sms, tiles, policy);
    work = StandardWork(config, batch, bucket);
  }

  VerifyReport Verify() const { return VerifySchedule(config, schedule, work[0]); }

  TaskDescriptor& First(uint32_t opcode, uint32_t layer) {
    for (auto& list : schedule.sm_tasks) {
      for (TaskDescriptor& task : list) {
        if (task.opcode == opcode && task.layer == layer) return task;
      }
    }
    throw std::runtime_error("no such task");
  }
};

// `task` waits for what `earlier` waits for (a task of the layer before, say).
void WaitAsFor(TaskDescriptor& task, const TaskDescriptor& earlier) {
  task.wait0_counter = earlier.wait0_counter;
  task.wait0_target = earlier.wait0_target;
  task.wait1_counter = earlier.wait1_counter;
  task.wait1_target = earlier.wait1_target;
}

TEST(VerifierTest, BuiltSchedulesPassForEveryInstance) {
  for (int64_t batch : {1, 2, 5, 8}) {
    for (int64_t sms : {1, 3, 16}) {
      Tiny tiny(batch, sms);
      for (const RunTimeWork& work : tiny.work) {
        const VerifyReport report = VerifySchedule(tiny.config, tiny.schedule, work);
        EXPECT_TRUE(report.ok()) << "batch " << batch << " sms " << sms << ": " << report.Summary();
        EXPECT_GT(report.nodes, tiny.schedule.num_tasks());  // work items were simulated too
      }
    }
  }
}

TEST(VerifierTest, ADroppedArrivalIsAnUnreachableTarget) {
  Tiny tiny(2);
  tiny.First(kQkv, 1).signal_counter = kNoCounter;
  const VerifyReport report = tiny.Verify();
  EXPECT_TRUE(report.Has(Kind::kUnreachableTarget)) << report.Summary();
  EXPECT_TRUE(report.Has(Kind::kDeadlock)) << report.Summary();
}

TEST(VerifierTest, ARaisedTargetIsUnreachable) {
  Tiny tiny(2);
  tiny.First(kAttentionCombine, 2).wait0_target += 1;
  const VerifyReport report = tiny.Verify();
  EXPECT_TRUE(report.Has(Kind::kUnreachableTarget)) << report.Summary();
  EXPECT_TRUE(report.Has(Kind::kDeadlock)) << report.Summary();
}

TEST(VerifierTest, AnExtraArrivalIsAnOverArrival) {
  Tiny tiny(2);
  TaskDescriptor copy = tiny.First(kOProj, 3);
  copy.arg[kArgSequence] = 1u << 30;  // last in the order, so only the counts are wrong
  tiny.schedule.sm_tasks[0].push_back(copy);
  const VerifyReport report = tiny.Verify();
  EXPECT_TRUE(report.Has(Kind::kOverArrival)) << report.Summary();
  EXPECT_TRUE(report.Has(Kind::kDoubleWrite)) << report.Summary();
}

TEST(VerifierTest, SwappingAProducerBehindItsConsumerIsACircularWait) {
  Tiny tiny(2, 3);
  // Find, on one SM, a task and a later task that waits on its counter; swap them.
  bool swapped = false;
  for (auto& list : tiny.schedule.sm_tasks) {
    for (size_t i = 0; i < list.size() && !swapped; ++i) {
      for (size_t j = i + 1; j < list.size() && !swapped; ++j) {
        if (list[i].signal_counter != kNoCounter &&
            list[j].wait0_counter == list[i].signal_counter) {
          std::swap(list[i], list[j]);
          swapped = true;
        }
      }
    }
  }
  ASSERT_TRUE(swapped);
  const VerifyReport report = tiny.Verify();
  EXPECT_TRUE(report.Has(Kind::kHeadOfLineBlock)) << report.Summary();
  EXPECT_TRUE(report.Has(Kind::kDeadlock)) << report.Summary();
  EXPECT_TRUE(report.Has(Kind::kOrderViolation)) << report.Summary();
}

TEST(VerifierTest, AMissingWaitIsAReadWithoutDependency) {
  Tiny tiny(2);
  TaskDescriptor& oproj = tiny.First(kOProj, 1);
  oproj.wait0_counter = kNoCounter;
  oproj.wait0_target = 0;
  const VerifyReport report = tiny.Verify();
  EXPECT_TRUE(report.Has(Kind::kReadWithoutDependency)) << report.Summary();
  EXPECT_FALSE(report.Has(Kind::kDeadlock)) << report.Summary();
}

TEST(VerifierTest, AWriterOfTheNextLayerThatDoesNotWaitForReadersIsCaught) {
  Tiny tiny(2);
  // Layer 2's router adds into router_logits as soon as layer 2's input exists... if it waits
  // for layer 1's input instead, it can overwrite what layer 1's top-k still reads (and read
  // stale input).
  WaitAsFor(tiny.First(kRouter, 2), tiny.First(kRouter, 1));
  const VerifyReport report = tiny.Verify();
  EXPECT_TRUE(report.Has(Kind::kWriteAfterRead)) << report.Summary();
  EXPECT_TRUE(report.Has(Kind::kReadWithoutDependency)) << report.Summary();
}

// The device keeps one array of expert items that every MoE layer's finalize rewrites (the
// decoder's UploadedFor): a finalize that could run while the layer before still claims its
// items is caught here, before a schedule is used.
TEST(VerifierTest, AFinalizeThatOverwritesItemsStillBeingClaimedIsCaught) {
  Tiny tiny(8);
  ASSERT_EQ(tiny.schedule.tiles.pick_items, 0);  // items by finalize, not by pick
  ASSERT_TRUE(tiny.Verify().ok()) << tiny.Verify().Summary();
  WaitAsFor(tiny.First(kMoeFinalize, 2), tiny.First(kMoeFinalize, 1));
  const VerifyReport report = tiny.Verify();
  EXPECT_TRUE(report.Has(Kind::kWriteAfterRead)) << report.Summary();
  EXPECT_NE(report.Summary().find("overwrites expert_queues of layer 1"), std::string::npos)
      << report.Summary();
}

TEST(VerifierTest, FusedNormTasksWaitForBothBranchesAndThePreviousJoin) {
  Tiny tiny(1);  // batch 1 fuses the norm of every MoE layer after the first
  const TaskDescriptor& qkv = tiny.First(kQkv, 2);
  ASSERT_NE(qkv.flags & kFlagFusedNorm, 0u);
  EXPECT_NE(tiny.First(kJoin, 1).flags & kFlagResidualOnly, 0u);
  // Layer 1's join arrives on layer 2's O-proj counter, the one layer 3's tasks wait for.
  EXPECT_EQ(tiny.First(kJoin, 1).signal_counter, tiny.First(kOProj, 2).signal_counter);
  EXPECT_TRUE(tiny.Verify().ok()) << tiny.Verify().Summary();
}

TEST(VerifierTest, AFusedNormThatSkipsTheFfnWaitIsCaught) {
  Tiny tiny(1);
  TaskDescriptor& qkv = tiny.First(kQkv, 2);
  qkv.wait1_counter = kNoCounter;  // layer 1's ffn_out may still be in flight
  const VerifyReport report = tiny.Verify();
  EXPECT_TRUE(report.Has(Kind::kReadWithoutDependency)) << report.Summary();
}

TEST(VerifierTest, AResidualJoinThatDoesNotArriveIsCaught) {
  Tiny tiny(1);
  // Without the join's arrival the next layer's O-proj counter never reaches its target (and the
  // layer after it would read a residual that nothing it waits for wrote).
  tiny.First(kJoin, 1).signal_counter = kNoCounter;
  const VerifyReport report = tiny.Verify();
  EXPECT_TRUE(report.Has(Kind::kUnreachableTarget)) << report.Summary();
}

TEST(VerifierTest, AResidualJoinOnTheWrongLayersCounterIsCaught) {
  Tiny tiny(1);
  // Layer 1's join arrives on layer 3's O-proj counter instead of layer 2's: layer 3's tasks
  // would read layer 1's residual before the join wrote it.
  TaskDescriptor& join = tiny.First(kJoin, 1);
  std::swap(join.signal_counter, tiny.First(kJoin, 2).signal_counter);
  const VerifyReport report = tiny.Verify();
  EXPECT_TRUE(report.Has(Kind::kCounterReused)) << report.Summary();
}

TEST(VerifierTest, ATileWrittenTwiceLeavesAnotherUnwritten) {
  Tiny tiny(3);
  TaskDescriptor& tile = tiny.First(kLmHead, 6);
  tile.arg[kArgOutBegin] += 64;
  tile.arg[kArgOutEnd] += 64;
  const VerifyReport report = tiny.Verify();
  EXPECT_TRUE(report.Has(Kind::kDoubleWrite)) << report.Summary();
  EXPECT_TRUE(report.Has(Kind::kCoverageGap)) << report.Summary();
}

TEST(VerifierTest, ASplitKRangeThatOverlapsIsCaught) {
  Tiny tiny(1);
  TaskDescriptor& down = tiny.First(kDenseDown, 0);
  down.k_end += 8;  // the splits' K ranges now overlap
  const VerifyReport report = tiny.Verify();
  EXPECT_TRUE(report.Has(Kind::kDoubleWrite)) << report.Summary();
}

TEST(VerifierTest, SignallingAnotherOpsCounterIsReuse) {
  Tiny tiny(2);
  const uint32_t qkv_counter = tiny.First(kQkv, 1).signal_counter;
  tiny.First(kRouter, 1).signal_counter = qkv_counter;
  const VerifyReport report = tiny.Verify();
  EXPECT_TRUE(report.Has(Kind::kCounterReused)) << report.Summary();
}

TEST(VerifierTest, AQueueTooSmallForTheRoutingOverflows) {
  Tiny tiny(4);
  for (QueueInfo& queue : tiny.schedule.queues) {
    if (queue.kind == QueueKind::kExpertDown) queue.capacity = 1;
  }
  const VerifyReport report = tiny.Verify();
  EXPECT_TRUE(report.Has(Kind::kQueueOverflow)) << report.Summary();
}

TEST(VerifierTest, APolicyThatOrdersTheJoinFirstIsAnOrderViolation) {
  SchedulePolicy policy = SchedulePolicy::Default();
  std::erase(policy.layer_waves, Wave::kJoin);
  policy.layer_waves.insert(policy.layer_waves.begin(), Wave::kJoin);
  Tiny tiny(2, 3, policy);
  const VerifyReport report = tiny.Verify();
  EXPECT_TRUE(report.Has(Kind::kOrderViolation)) << report.Summary();
}

// A by-pick schedule of the tiny model on 3 SMs (`topk_in_claims_max_batch` says whether the
// claims run the top-k), which the verifier must accept for every standard instance.
struct ByPick {
  ModelConfig config = TinyPreset();
  Schedule good;
  std::vector<RunTimeWork> work;

  // early_expert_items on `num_sms` SMs: bounded gate/up claims where a layer has SMs without QKV.
  ByPick(int64_t batch, int64_t topk_in_claims_max_batch, int64_t early_expert_items = 0,
         int64_t num_sms = 3) {
    const ContextBucket bucket = BucketForContext(config, 1024);
    TileShapes tiles = ChooseTileShapes(config, batch, bucket, num_sms);
    tiles.pick_items = 1;
    tiles.topk_in_claims_max_batch = topk_in_claims_max_batch;
    tiles.early_expert_items = early_expert_items;
    good = BuildSchedule(config, batch, bucket, num_sms, tiles, SchedulePolicy::Default());
    work = StandardWork(config, batch, bucket);
    for (const RunTimeWork& w : work) {
      const VerifyReport report = VerifySchedule(config, good, w);
      EXPECT_TRUE(report.ok()) << "batch " << batch << ": " << report.Summary();
    }
  }

  // The schedule with `change` applied to its first `opcode` task of `layer` (1: the first MoE
  // layer; the LM head's is the number of layers), verified with the first instance.
  template <class Change>
  VerifyReport Planted(uint32_t opcode, Change change, uint32_t layer = 1) const {
    Schedule bad = good;
    for (auto& list : bad.sm_tasks) {
      for (TaskDescriptor& task : list) {
        if (task.opcode == opcode && task.layer == layer) {
          change(task);
          return VerifySchedule(config, bad, work[0]);
        }
      }
    }
    throw std::runtime_error("no such task");
  }
};

// By pick the down claims build their waits from arg[kArgTiles2]: a wrong count there, or a
// top-k without the by-pick flag, must not pass.
TEST(VerifierTest, PickItemsDescriptorsThatDisagreeWithTheTilesAreCaught) {
  for (int64_t batch : {1, 3}) {
    const ByPick by_pick(batch, 0);  // top-k tasks (below: the claims running it)
    auto planted = [&](uint32_t opcode, auto change) { return by_pick.Planted(opcode, change); };
    EXPECT_TRUE(planted(kExpertDownClaim, [](TaskDescriptor& t) {
                  t.arg[kArgTiles2] += 1;
                }).Has(Kind::kBadDescriptor));
    EXPECT_TRUE(planted(kExpertGateUpClaim, [](TaskDescriptor& t) {
                  t.arg[kArgTiles] -= 1;
                }).Has(Kind::kBadDescriptor));
    EXPECT_TRUE(planted(kTopK, [](TaskDescriptor& t) {
                  t.flags &= ~kFlagPickItems;
                }).Has(Kind::kBadDescriptor));
  }
}

// With the top-k in the claims they wait for the routers and compute the picks themselves: those
// schedules pass; a claim that skips the routers' wait reads unfinished logits, and a claim
// without the flag, or a top-k task beside the claims, is a bad descriptor.
TEST(VerifierTest, TopKInTheClaimsPassesAndItsMistakesAreCaught) {
  for (int64_t batch : {1, 4}) {
    const ByPick by_pick(batch, 4);
    for (const auto& list : by_pick.good.sm_tasks) {
      for (const TaskDescriptor& task : list) EXPECT_NE(task.opcode, kTopK) << "a top-k task";
    }
    auto planted = [&](uint32_t opcode, auto change) { return by_pick.Planted(opcode, change); };
    EXPECT_TRUE(planted(kExpertGateUpClaim, [](TaskDescriptor& t) {
                  t.wait0_counter = kNoCounter;
                  t.wait0_target = 0;
                }).Has(Kind::kReadWithoutDependency));
    EXPECT_TRUE(planted(kExpertDownClaim, [](TaskDescriptor& t) {
                  t.flags &= ~kFlagTopKInClaims;
                }).Has(Kind::kBadDescriptor));
    EXPECT_TRUE(
        planted(kRouter, [](TaskDescriptor& t) { t.opcode = kTopK; }).Has(Kind::kBadDescriptor));
  }
}

// A bounded claim (kArgMaxItems) only on gate/up claims, whose items never wait, and never as a
// queue's only kind of claimer: the items it leaves need a claimer that takes the rest.
TEST(VerifierTest, BoundedClaimsPassAndTheirMistakesAreCaught) {
  for (int64_t batch : {1, 4}) {
    const ByPick bounded(batch, 4, /*early_expert_items=*/1, /*num_sms=*/32);
    int bounded_claims = 0;
    for (const auto& list : bounded.good.sm_tasks) {
      for (const TaskDescriptor& task : list) bounded_claims += task.arg[kArgMaxItems] != 0;
    }
    EXPECT_GT(bounded_claims, 0);
    auto planted = [&](uint32_t opcode, auto change) { return bounded.Planted(opcode, change); };
    EXPECT_TRUE(planted(kExpertDownClaim, [](TaskDescriptor& t) {
                  t.arg[kArgMaxItems] = 1;
                }).Has(Kind::kBadDescriptor));
    EXPECT_TRUE(planted(kRouter, [](TaskDescriptor& t) {
                  t.arg[kArgMaxItems] = 1;
                }).Has(Kind::kBadDescriptor));
    Schedule all_bounded = bounded.good;
    for (auto& list : all_bounded.sm_tasks) {
      for (TaskDescriptor& task : list) {
        if (task.opcode == kExpertGateUpClaim) task.arg[kArgMaxItems] = 1;
      }
    }
    const VerifyReport report = VerifySchedule(bounded.config, all_bounded, bounded.work[0]);
    EXPECT_TRUE(report.Has(Kind::kBadDescriptor)) << report.Summary();
  }
}

// Primed weights (kFlagPrimeWeights) only on router tasks and on QKV, O-proj and static LM head
// tiles of up to 8 rows, which the GEMM body's ring path runs: a primed tile of more rows, a
// primed attention task or a primed LM head claim is a bad descriptor.
TEST(VerifierTest, PrimedWeightsOnlyWhereTheKernelPrimesThem) {
  const ByPick primed(1, 1);
  auto planted = [&](uint32_t opcode, auto change) {
    const bool lm_head = opcode == kLmHead || opcode == kLmHeadClaim;
    return primed.Planted(opcode, change,
                          lm_head ? static_cast<uint32_t>(primed.config.num_layers) : 1u);
  };
  EXPECT_TRUE(planted(kQkv, [](TaskDescriptor& t) {
                t.flags |= kFlagPrimeWeights;
                t.row_end = t.row_begin + kMaxPrimedTileRows + 1;
              }).Has(Kind::kBadDescriptor));
  EXPECT_TRUE(planted(kAttention, [](TaskDescriptor& t) {
                t.flags |= kFlagPrimeWeights;
              }).Has(Kind::kBadDescriptor));
  EXPECT_TRUE(planted(kLmHeadClaim, [](TaskDescriptor& t) {
                t.flags |= kFlagPrimeWeights;
              }).Has(Kind::kBadDescriptor));
  for (uint32_t opcode : {kQkv, kLmHead}) {
    EXPECT_TRUE(planted(opcode, [](TaskDescriptor& t) { t.flags |= kFlagPrimeWeights; }).ok());
  }
}

TEST(VerifierTest, AnUnknownCounterStopsTheCheckWithAClearFailure) {
  Tiny tiny(2);  // a finalize (one row has none: its items are by pick)
  tiny.First(kMoeFinalize, 1).wait0_counter = 1u << 20;
  const VerifyReport report = tiny.Verify();
  EXPECT_TRUE(report.Has(Kind::kUnknownCounter)) << report.Summary();
}

SchedulePolicy WithSampling() {
  SchedulePolicy policy = SchedulePolicy::Default();
  policy.include_sampling = true;
  return policy;
}

TEST(VerifierTest, BuiltSchedulesWithSamplingTeamsPass) {
  for (int64_t batch : {1, 2, 5, 8}) {
    for (int64_t sms : {1, 3, 16}) {  // teams of 1 up to 16, one-member teams sharing SMs
      Tiny tiny(batch, sms, WithSampling());
      ASSERT_EQ(tiny.First(kSample, 6).opcode, kSample);
      for (const RunTimeWork& work : tiny.work) {
        const VerifyReport report = VerifySchedule(tiny.config, tiny.schedule, work);
        EXPECT_TRUE(report.ok()) << "batch " << batch << " sms " << sms << ": " << report.Summary();
      }
    }
  }
}

// Two rows on 8 SMs: teams of 4, member (r, k) the last task of SM 4r + k.
struct Teams : Tiny {
  Teams() : Tiny(2, 8, WithSampling()) {}

  std::vector<TaskDescriptor>& ListOf(int row, int rank) {
    auto& list = schedule.sm_tasks[row * 4 + rank];
    if (list.back().opcode != kSample || list.back().row_begin != static_cast<uint32_t>(row) ||
        list.back().arg[kArgTeamRank] != static_cast<uint32_t>(rank)) {
      throw std::runtime_error("the builder placed the team elsewhere");
    }
    return list;
  }
  TaskDescriptor& Member(int row, int rank) { return ListOf(row, rank).back(); }

  // The report names a sampling team failure containing `words`.
  void ExpectTeamFailure(const std::string& words) const {
    const VerifyReport report = Verify();
    EXPECT_TRUE(report.Has(Kind::kBadSampleTeam)) << report.Summary();
    EXPECT_NE(report.Summary().find(words), std::string::npos) << report.Summary();
  }
};

TEST(VerifierTest, TeamsAsBuiltPass) {
  Teams teams;
  EXPECT_EQ(teams.Member(1, 3).arg[kArgTeamSize], 4u);
  EXPECT_TRUE(teams.Verify().ok()) << teams.Verify().Summary();
}

TEST(VerifierTest, TwoMembersOfATeamOnOneSmAreCaught) {
  Teams teams;
  // Rank 1 of row 0 behind rank 0 on SM 0: rank 0 waits at the barrier for a member behind it.
  auto& from = teams.ListOf(0, 1);
  teams.ListOf(0, 0).push_back(from.back());
  from.pop_back();
  teams.ExpectTeamFailure("are on the same SM");
  EXPECT_TRUE(teams.Verify().Has(Kind::kDeadlock)) << teams.Verify().Summary();
}

TEST(VerifierTest, AMemberThatIsNotLastInItsListIsCaught) {
  Teams teams;
  // Rank 1 of row 0 onto SM 4, in sequence order: before row 1's rank 0.
  auto& from = teams.ListOf(0, 1);
  auto& to = teams.ListOf(1, 0);
  to.insert(to.end() - 1, from.back());
  from.pop_back();
  teams.ExpectTeamFailure("is not the last task of its SM's list");
}

TEST(VerifierTest, AMissingRankIsCaught) {
  Teams teams;
  teams.ListOf(1, 2).pop_back();
  teams.ExpectTeamFailure("lacks rank 2");
  EXPECT_TRUE(teams.Verify().Has(Kind::kDeadlock)) << teams.Verify().Summary();  // the barrier
}

TEST(VerifierTest, ARowWithoutATeamIsCaught) {
  Teams teams;
  for (int rank = 0; rank < 4; ++rank) teams.ListOf(1, rank).pop_back();
  teams.ExpectTeamFailure("row 1 has no sampling team");
}

TEST(VerifierTest, AMemberWithAnotherTeamSizeIsCaught) {
  Teams teams;
  teams.Member(0, 3).arg[kArgTeamSize] = 5;
  teams.ExpectTeamFailure("disagree on the team size");
}

TEST(VerifierTest, AMemberWaitingOnTheWrongCounterIsCaught) {
  Teams teams;
  // The LM head's own input (the last join): the logits may not be there yet. (The tiny model's
  // 16 LM head tiles are all claimed on 8 SMs.)
  const TaskDescriptor& lm_head = teams.First(kLmHeadClaim, 6);
  teams.Member(1, 1).wait0_counter = lm_head.wait0_counter;
  teams.Member(1, 1).wait0_target = lm_head.wait0_target;
  teams.ExpectTeamFailure("not the LM head's counter");
}

TEST(VerifierTest, AMemberWaitingForTooFewLmHeadTilesIsCaught) {
  Teams teams;
  teams.Member(0, 2).wait0_target -= 1;
  teams.ExpectTeamFailure("not all 16 LM head tiles");
}

// The LM head's claims (the tiny model's 16 tiles, 3 SMs: 4 a SM would be 12 claimed, 4 static)
// must cover the vocabulary the sample teams read, and never past it.
TEST(VerifierTest, LmHeadClaimsThatMissOrOvershootTheVocabularyAreCaught) {
  Tiny tiny(2, 3, WithSampling());
  ASSERT_TRUE(tiny.Verify().ok()) << tiny.Verify().Summary();
  auto plant = [&](int delta) {
    Schedule bad = tiny.schedule;
    for (auto& list : bad.sm_tasks) {
      for (TaskDescriptor& task : list) {
        if (task.opcode == kLmHeadClaim) task.arg[kArgTiles] += delta;
      }
    }
    return VerifySchedule(tiny.config, bad, tiny.work[0]);
  };
  const VerifyReport short_by_one = plant(-1);
  EXPECT_TRUE(short_by_one.Has(Kind::kUnreachableTarget)) << short_by_one.Summary();
  EXPECT_TRUE(short_by_one.Has(Kind::kDeadlock)) << short_by_one.Summary();  // the teams
  const VerifyReport past_the_end = plant(1);
  EXPECT_TRUE(past_the_end.Has(Kind::kBadDescriptor)) << past_the_end.Summary();
  EXPECT_NE(past_the_end.Summary().find("claims LM head tiles up to feature"), std::string::npos)
      << past_the_end.Summary();
}

}  // namespace
}  // namespace mkserve::megakernel
