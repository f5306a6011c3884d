#include "cli/megakernel_policy_flag.h"

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "megakernel/schedule/schedule_policy.h"

namespace mkserve::cli {

std::string MegakernelPolicyJson(const std::string& path) {
  try {
    return megakernel::SchedulePolicy::FromFile(path).ToJson().dump();
  } catch (const Error& e) {
    throw Error(std::string("--megakernel-policy: ") + e.what());
  }
}

}  // namespace mkserve::cli
