// Writes .safetensors files: the header first (offsets known from the shapes), then each
// tensor's bytes in order, produced one at a time so a file larger than memory can be written.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "model/tensor.h"

namespace mkserve {

struct TensorSpec {
  std::string name;
  DType dtype = DType::kBF16;
  std::vector<int64_t> shape;

  size_t size_bytes() const;
};

struct TensorData {
  TensorSpec spec;
  std::vector<std::byte> bytes;  // spec.size_bytes() of them
};

using TensorFiller = std::function<void(const TensorSpec& spec, std::span<std::byte> out)>;

// The header bytes (length prefix + JSON padded with spaces to 8-byte alignment) for tensors
// laid out in the given order.
std::vector<std::byte> SafetensorsHeader(const std::vector<TensorSpec>& tensors,
                                         const std::map<std::string, std::string>& metadata);

// Streams tensors into `path` (via a temporary file renamed at the end). `fill` is called once
// per tensor, in order, with a zeroed buffer of exactly its size.
void WriteSafetensors(const std::filesystem::path& path, const std::vector<TensorSpec>& tensors,
                      const TensorFiller& fill,
                      const std::map<std::string, std::string>& metadata = {});

// In-memory forms, mostly for tests.
std::vector<std::byte> SerializeSafetensors(
    const std::vector<TensorData>& tensors,
    const std::map<std::string, std::string>& metadata = {});
void WriteSafetensors(const std::filesystem::path& path, const std::vector<TensorData>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

}  // namespace mkserve
