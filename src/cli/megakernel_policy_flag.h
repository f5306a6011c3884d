// --megakernel-policy FILE, shared by serve and bench: the schedule policy read and checked
// before any weight loads, as the JSON text CudaBackendOptions::megakernel_policy carries.
#pragma once

#include <string>

namespace mkserve::cli {

// Throws mkserve::Error starting with the flag's name (and naming the file) when the file
// cannot be read or is not a valid policy.
std::string MegakernelPolicyJson(const std::string& path);

}  // namespace mkserve::cli
