#include "model/safetensors_writer.h"

#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace mkserve {
namespace {

constexpr size_t kHeaderAlignment = 8;  // the reference writer pads the JSON to 8 bytes

std::vector<TensorSpec> Specs(const std::vector<TensorData>& tensors) {
  std::vector<TensorSpec> specs;
  for (const TensorData& tensor : tensors) {
    if (tensor.bytes.size() != tensor.spec.size_bytes()) {
      throw Error("tensor \"" + tensor.spec.name + "\": " + std::to_string(tensor.bytes.size()) +
                  " bytes given, shape needs " + std::to_string(tensor.spec.size_bytes()));
    }
    specs.push_back(tensor.spec);
  }
  return specs;
}

}  // namespace

size_t TensorSpec::size_bytes() const {
  size_t count = 1;
  for (int64_t dim : shape) count *= static_cast<size_t>(dim);
  return count * DTypeSize(dtype);
}

std::vector<std::byte> SafetensorsHeader(const std::vector<TensorSpec>& tensors,
                                         const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  size_t offset = 0;
  for (const TensorSpec& tensor : tensors) {
    if (header.contains(tensor.name)) throw Error("tensor \"" + tensor.name + "\" written twice");
    size_t end = offset + tensor.size_bytes();
    header[tensor.name] = {{"dtype", DTypeName(tensor.dtype)},
                           {"shape", tensor.shape},
                           {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string text = header.dump();
  text.append((kHeaderAlignment - text.size() % kHeaderAlignment) % kHeaderAlignment, ' ');
  std::vector<std::byte> bytes(8 + text.size());
  uint64_t length = text.size();
  for (size_t i = 0; i < 8; ++i) bytes[i] = static_cast<std::byte>((length >> (8 * i)) & 0xff);
  std::memcpy(bytes.data() + 8, text.data(), text.size());
  return bytes;
}

void WriteSafetensors(const std::filesystem::path& path, const std::vector<TensorSpec>& tensors,
                      const TensorFiller& fill,
                      const std::map<std::string, std::string>& metadata) {
  std::filesystem::path temporary = path;
  temporary += ".partial";
  std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
  if (!out) throw Error("cannot write " + temporary.string());
  std::vector<std::byte> header = SafetensorsHeader(tensors, metadata);
  out.write(reinterpret_cast<const char*>(header.data()),
            static_cast<std::streamsize>(header.size()));
  std::vector<std::byte> buffer;
  for (const TensorSpec& tensor : tensors) {
    buffer.assign(tensor.size_bytes(), std::byte{0});
    fill(tensor, buffer);
    out.write(reinterpret_cast<const char*>(buffer.data()),
              static_cast<std::streamsize>(buffer.size()));
  }
  out.close();
  if (!out) throw Error("writing " + temporary.string() + " failed (disk full?)");
  std::filesystem::rename(temporary, path);
}

std::vector<std::byte> SerializeSafetensors(const std::vector<TensorData>& tensors,
                                            const std::map<std::string, std::string>& metadata) {
  std::vector<TensorSpec> specs = Specs(tensors);
  std::vector<std::byte> bytes = SafetensorsHeader(specs, metadata);
  for (const TensorData& tensor : tensors) {
    bytes.insert(bytes.end(), tensor.bytes.begin(), tensor.bytes.end());
  }
  return bytes;
}

void WriteSafetensors(const std::filesystem::path& path, const std::vector<TensorData>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::vector<TensorSpec> specs = Specs(tensors);
  // The filler is called once per tensor, in order.
  size_t next = 0;
  WriteSafetensors(
      path, specs,
      [&](const TensorSpec&, std::span<std::byte> out) {
        std::memcpy(out.data(), tensors[next++].bytes.data(), out.size());
      },
      metadata);
}

}  // namespace mkserve
