// --megakernel-policy FILE, shared by serve and bench: the schedule policy read and checked
// before any weight loads, as the JSON text CudaBackendOptions::megakernel_policy carries.
#pragma once

#include <string>

#include "common/args.h"

namespace mkserve::cli {

// The flag's file, "" when the flag is absent. Given empty (an unset $POLICY in a script) it is
// an error: the default policy would be checked or run in its place without a word.
std::string MegakernelPolicyPath(Args& args);

// Throws mkserve::Error starting with the flag's name (and naming the file) when the file
// cannot be read or is not a valid policy.
std::string MegakernelPolicyJson(const std::string& path);

}  // namespace mkserve::cli
