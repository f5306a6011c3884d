#include "backends/cuda/decode/decode_path_registry.h"

#include <functional>

#include "backends/cuda/decode/eager_decode_path.h"
#include "backends/cuda/decode/graph_decode_path.h"
#include "common/error.h"
#include "megakernel/device/megakernel_decode_path.h"

namespace mkserve::cuda {
namespace {

using DecodePathFactory = std::unique_ptr<DecodePath> (*)(const DecodePathContext&);
using DecodePathSize = int64_t (*)(const ModelConfig&);

struct Registered {
  std::string_view name;
  DecodePathFactory make;
  DecodePathSize bytes;  // null: nothing beyond the context's buffers
};

// One line per path.
constexpr Registered kPaths[] = {
    {"eager", MakeEagerDecodePath, nullptr},
    {"graph", MakeGraphDecodePath, nullptr},
    {"megakernel", megakernel::MakeMegakernelDecodePath, megakernel::MegakernelDecodePathBytes},
};

const Registered* Find(std::string_view name) {
  for (const Registered& path : kPaths) {
    if (path.name == name) return &path;
  }
  return nullptr;
}

}  // namespace

std::vector<std::string> DecodePathNames() {
  std::vector<std::string> names;
  for (const Registered& path : kPaths) names.emplace_back(path.name);
  return names;
}

void CheckDecodePathChoice(std::string_view choice) {
  if (choice == kLayeredDecode || Find(choice) != nullptr) return;
  std::string known(kLayeredDecode);
  for (const Registered& path : kPaths) known += ", " + std::string(path.name);
  throw Error("unknown decode path '" + std::string(choice) + "' (known: " + known + ")");
}

namespace {

// The paths `choice` names, first to last.
std::vector<const Registered*> Order(std::string_view choice) {
  CheckDecodePathChoice(choice);
  if (choice == kLayeredDecode) return {Find("graph"), Find("eager")};
  std::vector<const Registered*> order = {Find(choice)};
  if (choice != "eager") order.push_back(Find("eager"));
  return order;
}

}  // namespace

std::vector<std::unique_ptr<DecodePath>> MakeDecodePaths(std::string_view choice,
                                                         const DecodePathContext& context) {
  std::vector<std::unique_ptr<DecodePath>> paths;
  for (const Registered* path : Order(choice)) paths.push_back(path->make(context));
  return paths;
}

int64_t DecodePathBytes(std::string_view choice, const ModelConfig& config) {
  int64_t bytes = 0;
  for (const Registered* path : Order(choice)) bytes += path->bytes ? path->bytes(config) : 0;
  return bytes;
}

}  // namespace mkserve::cuda
