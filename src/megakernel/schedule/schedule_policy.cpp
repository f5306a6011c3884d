#include "megakernel/schedule/schedule_policy.h"

#include <array>
#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/input_json.h"
#include "common/regular_file.h"
#include "megakernel/schedule/tile_shapes.h"

namespace mkserve::megakernel {

namespace {

constexpr std::array<std::string_view, static_cast<int>(Wave::kCount)> kWaveNames = {
    "embed",       "qkv",           "attention",      "attention_combine",
    "oproj",       "dense_gate_up", "dense_down",     "router",
    "topk",        "moe_finalize",  "expert_gate_up", "expert_down",
    "moe_combine", "join",          "lm_head",        "sample"};

}  // namespace

std::string_view WaveName(Wave wave) { return kWaveNames.at(static_cast<int>(wave)); }

std::optional<Wave> WaveFromName(std::string_view name) {
  for (int i = 0; i < static_cast<int>(Wave::kCount); ++i) {
    if (kWaveNames[i] == name) return static_cast<Wave>(i);
  }
  return std::nullopt;
}

bool IsLayerWave(Wave wave) {
  return wave != Wave::kEmbed && wave != Wave::kLmHead && wave != Wave::kSample &&
         wave != Wave::kCount;
}

SchedulePolicy SchedulePolicy::Default() {
  SchedulePolicy policy;
  // The attention combine before the expert claims: on the SMs that hold one it runs as soon as
  // its splits land instead of after that SM's gate/up claim loop, so the O-proj's inputs are
  // ready when the claims end (H200, 8K: batch 1 3.593 -> 3.550 ms, 8 9.788 -> 9.724). The O-proj
  // itself stays after the claims: before them, its waits held 128 SMs out of the expert work
  // (batch 1 4.24 ms).
  policy.layer_waves = {Wave::kQkv,
                        Wave::kRouter,
                        Wave::kDenseGateUp,
                        Wave::kTopK,
                        Wave::kMoeFinalize,
                        Wave::kAttention,
                        Wave::kAttentionCombine,
                        Wave::kExpertGateUp,
                        Wave::kDenseDown,
                        Wave::kExpertDown,
                        Wave::kOProj,
                        Wave::kMoeCombine,
                        Wave::kJoin};
  return policy;
}

void SchedulePolicy::Validate() const {
  std::array<int, static_cast<int>(Wave::kCount)> seen{};
  for (Wave wave : layer_waves) {
    if (!IsLayerWave(wave)) {
      throw Error("schedule policy: layer_waves may not contain \"" + std::string(WaveName(wave)) +
                  "\" (it is not a per-layer wave)");
    }
    if (++seen[static_cast<int>(wave)] > 1) {
      throw Error("schedule policy: layer_waves lists \"" + std::string(WaveName(wave)) +
                  "\" twice");
    }
  }
  for (int i = 0; i < static_cast<int>(Wave::kCount); ++i) {
    if (IsLayerWave(static_cast<Wave>(i)) && seen[i] == 0) {
      throw Error("schedule policy: layer_waves lacks \"" + std::string(kWaveNames[i]) + "\"");
    }
  }
  for (const auto& [wave, share] : wave_sms) {
    if (wave == Wave::kSample) {
      throw Error(
          "schedule policy: wave_sms may not contain \"sample\" (sampling teams have a "
          "fixed placement)");
    }
    if (!(share.begin >= 0.0 && share.begin < share.end && share.end <= 1.0)) {
      throw Error("schedule policy: wave_sms." + std::string(WaveName(wave)) +
                  " must be [begin, end] with 0 <= begin < end <= 1, got [" +
                  std::to_string(share.begin) + ", " + std::to_string(share.end) + "]");
    }
  }
}

SchedulePolicy SchedulePolicy::FromJson(const nlohmann::json& json) {
  if (!json.is_object()) throw Error("schedule policy: expected a JSON object");
  SchedulePolicy policy = Default();
  for (const auto& [key, value] : json.items()) {
    if (key == "layer_waves") {
      if (!value.is_array()) throw Error("schedule policy: layer_waves must be an array of names");
      policy.layer_waves.clear();
      for (const auto& name : value) {
        std::optional<Wave> wave =
            name.is_string() ? WaveFromName(name.get<std::string>()) : std::nullopt;
        if (!wave) throw Error("schedule policy: unknown wave " + name.dump() + " in layer_waves");
        policy.layer_waves.push_back(*wave);
      }
    } else if (key == "placement") {
      const std::string name = value.is_string() ? value.get<std::string>() : value.dump();
      if (name == "round_robin") {
        policy.placement = Placement::kRoundRobin;
      } else if (name == "least_loaded") {
        policy.placement = Placement::kLeastLoaded;
      } else {
        throw Error("schedule policy: placement must be \"round_robin\" or \"least_loaded\", got " +
                    value.dump());
      }
    } else if (key == "include_sampling") {
      if (!value.is_boolean()) throw Error("schedule policy: include_sampling must be a boolean");
      policy.include_sampling = value.get<bool>();
    } else if (key == "wave_sms") {
      if (!value.is_object()) throw Error("schedule policy: wave_sms must be an object");
      for (const auto& [name, share] : value.items()) {
        const std::optional<Wave> wave = WaveFromName(name);
        if (!wave) throw Error("schedule policy: unknown wave \"" + name + "\" in wave_sms");
        if (!share.is_array() || share.size() != 2 || !share[0].is_number() ||
            !share[1].is_number()) {
          throw Error("schedule policy: wave_sms." + name + " must be [begin, end] fractions");
        }
        policy.wave_sms[*wave] = {share[0].get<double>(), share[1].get<double>()};
      }
    } else if (key == "tiles") {
      if (!value.is_object()) throw Error("schedule policy: tiles must be an object of integers");
      for (const auto& [name, size] : value.items()) {
        if (!size.is_number_integer()) {
          throw Error("schedule policy: tiles." + name + " must be an integer");
        }
        policy.tiles[name] = size.get<int64_t>();
      }
      WithTileOverrides(TileShapes{}, policy.tiles);  // names checked now, values per schedule
    } else {
      throw Error("schedule policy: unknown key \"" + key + "\"");
    }
  }
  policy.Validate();
  return policy;
}

SchedulePolicy SchedulePolicy::FromFile(const std::string& path) {
  RequireRegularFile(path);
  std::ifstream file(path);
  if (!file) throw Error("schedule policy " + path + ": cannot be read");
  const std::string text(std::istreambuf_iterator<char>(file), {});
  if (!file && !file.eof()) throw Error("schedule policy " + path + ": cannot be read");
  nlohmann::json json = ParseInputJson(text, "schedule policy " + path);
  try {
    return FromJson(json);
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
}

nlohmann::json SchedulePolicy::ToJson() const {
  nlohmann::json waves = nlohmann::json::array();
  for (Wave wave : layer_waves) waves.push_back(std::string(WaveName(wave)));
  nlohmann::json shares = nlohmann::json::object();
  for (const auto& [wave, share] : wave_sms) {
    shares[std::string(WaveName(wave))] = {share.begin, share.end};
  }
  return {{"layer_waves", waves},
          {"placement", placement == Placement::kRoundRobin ? "round_robin" : "least_loaded"},
          {"include_sampling", include_sampling},
          {"tiles", tiles},
          {"wave_sms", shares}};
}

}  // namespace mkserve::megakernel
