#include "cli/megakernel_policy_flag.h"

#include <optional>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "megakernel/schedule/schedule_policy.h"

namespace mkserve::cli {

std::string MegakernelPolicyPath(Args& args) {
  const std::optional<std::string> path = args.Value("megakernel-policy");
  if (path && path->empty()) throw Error("--megakernel-policy needs a file, got ''");
  return path.value_or("");
}

std::string MegakernelPolicyJson(const std::string& path) {
  try {
    return megakernel::SchedulePolicy::FromFile(path).ToJson().dump();
  } catch (const Error& e) {
    throw Error(std::string("--megakernel-policy: ") + e.what());
  }
}

}  // namespace mkserve::cli
