// Checkpoint: the safetensors files of a model directory (single file or sharded through
// model.safetensors.index.json), memory-mapped and validated, with tensors looked up by name.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/tensor.h"

namespace mkserve {

class SafetensorsFile;

class Checkpoint {
 public:
  // Opens DIR/model.safetensors or every shard named by DIR/model.safetensors.index.json.
  // A truncated or malformed file is an mkserve::Error naming the file and the tensor.
  static Checkpoint Open(const std::filesystem::path& model_dir);
  Checkpoint(Checkpoint&&) noexcept;
  Checkpoint& operator=(Checkpoint&&) noexcept;
  ~Checkpoint();

  const TensorView* Find(const std::string& name) const;  // nullptr when absent
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  // Shard files in load order, with their sizes: what an uploader streams.
  std::vector<std::filesystem::path> files() const;

 private:
  Checkpoint();
  void OpenSharded(const std::filesystem::path& index_path);
  void AddFile(std::unique_ptr<SafetensorsFile> file);

  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, TensorView> tensors_;
};

}  // namespace mkserve
