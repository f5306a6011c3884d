// SchedulePolicy: the tunable order and placement of a schedule, as data. The builder takes it;
// it can come from JSON, so trying another wave order or placement needs no rebuild.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace mkserve::megakernel {

// A wave: all tasks of one op of one layer. The global order of a step is: kEmbed, then for each
// layer its waves in SchedulePolicy::layer_waves order (waves the layer lacks are skipped), then
// kLmHead and kSample.
enum class Wave {
  kEmbed,
  kQkv,
  kAttention,
  kAttentionCombine,
  kOProj,
  kDenseGateUp,
  kDenseDown,
  kRouter,
  kTopK,
  kMoeFinalize,
  kExpertGateUp,
  kExpertDown,
  kMoeCombine,
  kJoin,
  kLmHead,
  kSample,
  kCount,
};

std::string_view WaveName(Wave wave);
std::optional<Wave> WaveFromName(std::string_view name);
bool IsLayerWave(Wave wave);  // every wave but kEmbed, kLmHead and kSample

enum class Placement {
  kRoundRobin,   // task k of the global order goes to SM k % num_sms (of its wave's share)
  kLeastLoaded,  // each task goes to the SM with the least estimated bytes so far
};

// A share of the SMs, as fractions of the SM count so a policy carries across GPUs: SMs
// [round(begin * n), round(end * n)), at least one; shares that meet at a fraction divide the
// SMs between them.
struct SmShare {
  double begin = 0.0, end = 1.0;
  bool operator==(const SmShare&) const = default;
};

struct SchedulePolicy {
  std::vector<Wave> layer_waves;  // each layer wave exactly once
  Placement placement = Placement::kRoundRobin;
  // Waves whose tasks are placed only on a share of the SMs (e.g. the O-proj away from the SMs
  // that run expert claims); the placement rule applies inside the share. Not kSample, whose
  // teams have a fixed placement.
  std::map<Wave, SmShare> wave_sms;
  // kSample teams after the LM head: every row's argmax, and the rows the step samples, inside
  // the kernel (false: the decoder leaves the logits to an argmax or sampler kernel after it).
  bool include_sampling = true;
  // Tile shape fields (TileShapes' names) that replace ChooseTileShapes' choice at every batch.
  std::map<std::string, int64_t> tiles;

  // Attention and MoE interleaved so MoE tiles fill SMs idle at the tail of attention.
  static SchedulePolicy Default();
  // {"layer_waves": [names], "placement": "round_robin"|"least_loaded", "include_sampling": b,
  //  "tiles": {"qkv_tile": 32, ...}, "wave_sms": {"oproj": [0.75, 1.0], ...}};
  // a missing key keeps the default, a wrong one throws mkserve::Error naming it.
  static SchedulePolicy FromJson(const nlohmann::json& json);
  nlohmann::json ToJson() const;

  // The JSON file at `path` (FromJson); throws mkserve::Error naming the file when it cannot be
  // read, is not JSON, or FromJson refuses it.
  static SchedulePolicy FromFile(const std::string& path);

  // Throws unless layer_waves lists every layer wave exactly once and every SM share is a
  // non-empty part of [0, 1] of a wave other than kSample.
  void Validate() const;

  bool operator==(const SchedulePolicy&) const = default;
};

}  // namespace mkserve::megakernel
