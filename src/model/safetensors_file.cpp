#include "model/safetensors_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace mkserve {
namespace {

using nlohmann::json;

constexpr size_t kHeaderLengthBytes = 8;
constexpr int kMaxJsonDepth = 64;  // real headers nest 3 deep; deeper is an attack or garbage
constexpr char kMetadataKey[] = "__metadata__";

struct Entry {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

[[noreturn]] void Fail(const std::string& label, const std::string& what) {
  throw Error(label + ": " + what);
}

[[noreturn]] void FailTensor(const std::string& label, const std::string& name,
                             const std::string& what) {
  throw Error(label + ": tensor \"" + name + "\": " + what);
}

uint64_t ReadLittleEndian64(std::span<const std::byte> bytes) {
  uint64_t value = 0;
  for (size_t i = 0; i < kHeaderLengthBytes; ++i) {
    value |= static_cast<uint64_t>(bytes[i]) << (8 * i);
  }
  return value;
}

// Rejects deep nesting before building the JSON tree, so a hostile header cannot exhaust the
// stack in the parser or the destructor.
bool NestingWithin(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

json ParseHeaderJson(std::string_view text, const std::string& label) {
  if (!NestingWithin(text, kMaxJsonDepth)) Fail(label, "header JSON is nested too deeply");
  // The JSON parser stops at a NUL, which would let garbage hide behind one.
  if (text.find('\0') != std::string_view::npos) Fail(label, "header is not valid JSON (NUL byte)");
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& error) {
    Fail(label, "header is not valid JSON (" + std::string(error.what()) + ")");
  }
}

uint64_t NonNegativeInt(const json& value, const std::string& label, const std::string& name,
                        const std::string& field) {
  if (!value.is_number_unsigned()) {
    FailTensor(label, name, field + " must hold non-negative integers, got " + value.dump());
  }
  return value.get<uint64_t>();
}

std::vector<int64_t> ParseShape(const json& entry, const std::string& label,
                                const std::string& name, uint64_t& num_elements) {
  if (!entry.contains("shape") || !entry["shape"].is_array()) {
    FailTensor(label, name, "missing or non-list \"shape\"");
  }
  std::vector<int64_t> shape;
  num_elements = 1;
  for (const json& dim : entry["shape"]) {
    uint64_t size = NonNegativeInt(dim, label, name, "shape");
    if (size > static_cast<uint64_t>(INT64_MAX) ||
        __builtin_mul_overflow(num_elements, size, &num_elements)) {
      FailTensor(label, name, "shape " + entry["shape"].dump() + " overflows");
    }
    shape.push_back(static_cast<int64_t>(size));
  }
  return shape;
}

Entry ParseEntry(const std::string& label, const std::string& name, const json& value,
                 uint64_t data_bytes) {
  if (!value.is_object()) FailTensor(label, name, "header entry is not an object");
  Entry entry;
  entry.name = name;
  if (!value.contains("dtype") || !value["dtype"].is_string()) {
    FailTensor(label, name, "missing or non-string \"dtype\"");
  }
  std::string dtype_name = value["dtype"].get<std::string>();
  std::optional<DType> dtype = ParseDType(dtype_name);
  if (!dtype) {
    FailTensor(label, name, "dtype " + dtype_name + " is not supported (BF16, F16, F32, F8_E4M3)");
  }
  entry.dtype = *dtype;
  uint64_t num_elements = 0;
  entry.shape = ParseShape(value, label, name, num_elements);
  const json* offsets = value.contains("data_offsets") ? &value["data_offsets"] : nullptr;
  if (!offsets || !offsets->is_array() || offsets->size() != 2) {
    FailTensor(label, name, "\"data_offsets\" must be a list [begin, end]");
  }
  entry.begin = NonNegativeInt((*offsets)[0], label, name, "data_offsets");
  entry.end = NonNegativeInt((*offsets)[1], label, name, "data_offsets");
  std::string range = "data_offsets " + offsets->dump();
  if (entry.begin > entry.end) FailTensor(label, name, range + " has begin > end");
  if (entry.end > data_bytes) {
    FailTensor(label, name,
               range + " reach past the data section (" + std::to_string(data_bytes) +
                   " bytes; file truncated?)");
  }
  uint64_t expected_bytes = 0;
  if (__builtin_mul_overflow(num_elements, DTypeSize(entry.dtype), &expected_bytes) ||
      expected_bytes != entry.end - entry.begin) {
    FailTensor(label, name,
               range + " span " + std::to_string(entry.end - entry.begin) + " bytes but shape " +
                   value["shape"].dump() + " of " + dtype_name + " needs " +
                   std::to_string(num_elements) + " x " + std::to_string(DTypeSize(entry.dtype)));
  }
  return entry;
}

std::map<std::string, std::string> ParseMetadata(const json& value, const std::string& label) {
  if (!value.is_object()) Fail(label, "\"__metadata__\" must be an object of strings");
  std::map<std::string, std::string> metadata;
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string()) Fail(label, "\"__metadata__\" value of \"" + key + "\" is not a string");
    metadata[key] = item.get<std::string>();
  }
  return metadata;
}

// Tensors must tile the data section: sorted by offset, each starts where the previous ended.
void CheckTiling(std::vector<Entry>& entries, uint64_t data_bytes, const std::string& label) {
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expected = 0;
  const Entry* previous = nullptr;
  for (const Entry& entry : entries) {
    if (entry.begin < expected) {
      FailTensor(label, entry.name,
                 "overlaps tensor \"" + previous->name + "\" (bytes " +
                     std::to_string(entry.begin) + ".." + std::to_string(expected) + ")");
    }
    if (entry.begin > expected) {
      FailTensor(label, entry.name,
                 "leaves a hole in the data section at bytes " + std::to_string(expected) + ".." +
                     std::to_string(entry.begin));
    }
    expected = entry.end;
    previous = &entry;
  }
  if (expected != data_bytes) {
    Fail(label, std::to_string(data_bytes - expected) + " bytes after the last tensor (" +
                    (previous ? "\"" + previous->name + "\"" : std::string("none")) +
                    ") are not described by the header");
  }
}

}  // namespace

SafetensorsContents ParseSafetensors(std::span<const std::byte> file_bytes,
                                     const std::string& file_label) {
  if (file_bytes.size() < kHeaderLengthBytes) {
    Fail(file_label, "file is " + std::to_string(file_bytes.size()) +
                         " bytes, too short for the 8-byte header length");
  }
  uint64_t header_bytes = ReadLittleEndian64(file_bytes);
  if (header_bytes > kMaxSafetensorsHeaderBytes) {
    Fail(file_label, "header length " + std::to_string(header_bytes) + " is over the 100 MB limit");
  }
  if (header_bytes > file_bytes.size() - kHeaderLengthBytes) {
    Fail(file_label, "header length " + std::to_string(header_bytes) + " is larger than the " +
                         std::to_string(file_bytes.size() - kHeaderLengthBytes) +
                         " bytes after it (file truncated?)");
  }
  std::string_view text(reinterpret_cast<const char*>(file_bytes.data()) + kHeaderLengthBytes,
                        header_bytes);
  json header = ParseHeaderJson(text, file_label);
  if (!header.is_object()) Fail(file_label, "header JSON is not an object");
  std::span<const std::byte> data = file_bytes.subspan(kHeaderLengthBytes + header_bytes);
  SafetensorsContents contents;
  std::vector<Entry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name == kMetadataKey) {
      contents.metadata = ParseMetadata(value, file_label);
    } else {
      entries.push_back(ParseEntry(file_label, name, value, data.size()));
    }
  }
  CheckTiling(entries, data.size(), file_label);
  for (Entry& entry : entries) {
    contents.tensors.push_back(
        TensorView{.name = std::move(entry.name),
                   .dtype = entry.dtype,
                   .shape = std::move(entry.shape),
                   .bytes = data.subspan(entry.begin, entry.end - entry.begin)});
  }
  return contents;
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::Open(const std::filesystem::path& path) {
  // Non-blocking: a FIFO in the file's place must fail the regular-file check, not block the open.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) Fail(path.string(), std::string("cannot open: ") + std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    Fail(path.string(), "not a regular file");
  }
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  file->size_bytes_ = static_cast<uint64_t>(info.st_size);
  if (file->size_bytes_ > 0) {
    void* mapping = ::mmap(nullptr, file->size_bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
    int mmap_errno = errno;
    ::close(fd);
    if (mapping == MAP_FAILED)
      Fail(path.string(), std::string("mmap: ") + std::strerror(mmap_errno));
    file->mapping_ = mapping;
  } else {
    ::close(fd);
  }
  std::span<const std::byte> bytes(static_cast<const std::byte*>(file->mapping_),
                                   file->size_bytes_);
  file->contents_ = ParseSafetensors(bytes, path.string());
  return file;
}

SafetensorsFile::~SafetensorsFile() {
  if (mapping_ != nullptr) ::munmap(mapping_, size_bytes_);
}

}  // namespace mkserve
