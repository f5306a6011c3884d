#include "backends/cuda/decode/decode_path_registry.h"

#include <functional>

#include "backends/cuda/decode/eager_decode_path.h"
#include "backends/cuda/decode/graph_decode_path.h"
#include "common/error.h"
#include "megakernel/device/megakernel_decode_path.h"

namespace mkserve::cuda {
namespace {

using DecodePathFactory = std::unique_ptr<DecodePath> (*)(const DecodePathContext&);

struct Registered {
  std::string_view name;
  DecodePathFactory make;
};

// One line per path.
constexpr Registered kPaths[] = {
    {"eager", MakeEagerDecodePath},
    {"graph", MakeGraphDecodePath},
    {"megakernel", megakernel::MakeMegakernelDecodePath},
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

std::vector<std::unique_ptr<DecodePath>> MakeDecodePaths(std::string_view choice,
                                                         const DecodePathContext& context) {
  CheckDecodePathChoice(choice);
  std::vector<std::string_view> order;
  if (choice == kLayeredDecode) {
    order = {"graph", "eager"};
  } else {
    order = {choice};
    if (choice != "eager") order.push_back("eager");
  }
  std::vector<std::unique_ptr<DecodePath>> paths;
  for (std::string_view name : order) paths.push_back(Find(name)->make(context));
  return paths;
}

}  // namespace mkserve::cuda
