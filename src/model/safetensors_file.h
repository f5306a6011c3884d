// SafetensorsFile: one memory-mapped .safetensors file with a fully validated header.
// Format: 8-byte little-endian header length N, N bytes of JSON header, then the data section.
// Each header entry is {"dtype", "shape", "data_offsets": [begin, end]} relative to the data
// section; entries must tile the data section exactly (no holes, no overlap), as the format
// specifies. Any violation is an mkserve::Error naming the file and the tensor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/tensor.h"

namespace mkserve {

inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100ull << 20;  // larger is corruption

struct SafetensorsContents {
  std::vector<TensorView> tensors;              // in data order; views borrow from the parsed bytes
  std::map<std::string, std::string> metadata;  // the optional "__metadata__" string map
};

// Parses and validates a whole file image. `file_label` names the file in errors.
SafetensorsContents ParseSafetensors(std::span<const std::byte> file_bytes,
                                     const std::string& file_label);

class SafetensorsFile {
 public:
  static std::unique_ptr<SafetensorsFile> Open(const std::filesystem::path& path);
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  ~SafetensorsFile();

  const std::filesystem::path& path() const { return path_; }
  uint64_t size_bytes() const { return size_bytes_; }
  const std::vector<TensorView>& tensors() const { return contents_.tensors; }
  const std::map<std::string, std::string>& metadata() const { return contents_.metadata; }

 private:
  SafetensorsFile() = default;
  std::filesystem::path path_;
  void* mapping_ = nullptr;
  uint64_t size_bytes_ = 0;
  SafetensorsContents contents_;
};

}  // namespace mkserve
