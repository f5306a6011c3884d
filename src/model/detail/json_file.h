// A checkpoint's JSON files (config.json, generation_config.json, the shard index): read whole,
// with errors that name the file.
#pragma once

#include <filesystem>

#include <nlohmann/json.hpp>

namespace mkserve::detail {

// Throws mkserve::Error naming `path` when it is not a regular file, cannot be read or is not
// valid JSON.
nlohmann::json ReadJsonFile(const std::filesystem::path& path);

}  // namespace mkserve::detail
