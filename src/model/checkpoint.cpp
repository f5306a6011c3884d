#include "model/checkpoint.h"

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/regular_file.h"
#include "model/detail/json_file.h"
#include "model/safetensors_file.h"

namespace mkserve {
namespace {

namespace fs = std::filesystem;
using detail::ReadJsonFile;
using nlohmann::json;

constexpr char kSingleFile[] = "model.safetensors";
constexpr char kIndexFile[] = "model.safetensors.index.json";

// A shard name must stay inside the model directory.
bool IsPlainFileName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\\') == std::string::npos;
}

// tensor name -> shard file name, validated.
std::map<std::string, std::string> ReadWeightMap(const fs::path& index_path) {
  json index = ReadJsonFile(index_path);
  const std::string label = index_path.string();
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    throw Error(label + ": missing \"weight_map\" object");
  }
  std::map<std::string, std::string> weight_map;
  for (const auto& [tensor, shard] : index["weight_map"].items()) {
    if (!shard.is_string() || !IsPlainFileName(shard.get<std::string>())) {
      throw Error(label + ": tensor \"" + tensor + "\" maps to " + shard.dump() +
                  ", not a file name in the model directory");
    }
    weight_map[tensor] = shard.get<std::string>();
  }
  if (weight_map.empty()) throw Error(label + ": \"weight_map\" is empty");
  return weight_map;
}

}  // namespace

Checkpoint::Checkpoint() = default;
Checkpoint::Checkpoint(Checkpoint&&) noexcept = default;
Checkpoint& Checkpoint::operator=(Checkpoint&&) noexcept = default;
Checkpoint::~Checkpoint() = default;

Checkpoint Checkpoint::Open(const fs::path& model_dir) {
  Checkpoint checkpoint;
  if (EntryExists(model_dir / kIndexFile)) {
    checkpoint.OpenSharded(model_dir / kIndexFile);
  } else if (EntryExists(model_dir / kSingleFile)) {
    checkpoint.AddFile(SafetensorsFile::Open(model_dir / kSingleFile));
  } else {
    throw Error(model_dir.string() + ": no " + kSingleFile + " or " + kIndexFile);
  }
  return checkpoint;
}

void Checkpoint::AddFile(std::unique_ptr<SafetensorsFile> file) {
  for (const TensorView& tensor : file->tensors()) {
    if (!tensors_.emplace(tensor.name, tensor).second) {
      throw Error(file->path().string() + ": tensor \"" + tensor.name +
                  "\" also appears in an earlier shard");
    }
  }
  files_.push_back(std::move(file));
}

void Checkpoint::OpenSharded(const fs::path& index_path) {
  std::map<std::string, std::string> weight_map = ReadWeightMap(index_path);
  std::set<std::string> shards;
  for (const auto& [tensor, shard] : weight_map) shards.insert(shard);
  for (const std::string& shard : shards) {
    fs::path shard_path = index_path.parent_path() / shard;
    std::error_code unreadable;  // a symlink loop, say: reported as the shard's, not thrown
    if (!fs::is_regular_file(shard_path, unreadable)) {
      auto user = std::find_if(weight_map.begin(), weight_map.end(),
                               [&](const auto& entry) { return entry.second == shard; });
      throw Error(index_path.string() + ": shard " + shard + " (holding tensor \"" + user->first +
                  "\") " + (EntryExists(shard_path) ? "is not a regular file" : "does not exist"));
    }
    std::unique_ptr<SafetensorsFile> file = SafetensorsFile::Open(shard_path);
    for (const TensorView& tensor : file->tensors()) {
      auto entry = weight_map.find(tensor.name);
      if (entry == weight_map.end() || entry->second != shard) {
        throw Error(
            shard_path.string() + ": tensor \"" + tensor.name + "\" is not in this shard " +
            "according to " + kIndexFile +
            (entry == weight_map.end() ? " (not listed)" : " (listed in " + entry->second + ")"));
      }
    }
    AddFile(std::move(file));
  }
  for (const auto& [tensor, shard] : weight_map) {
    if (!tensors_.contains(tensor)) {
      throw Error(index_path.string() + ": tensor \"" + tensor + "\" is listed in " + shard +
                  " but that shard does not contain it");
    }
  }
}

const TensorView* Checkpoint::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

std::vector<fs::path> Checkpoint::files() const {
  std::vector<fs::path> paths;
  for (const auto& file : files_) paths.push_back(file->path());
  return paths;
}

}  // namespace mkserve
