// Names of opcodes, for the verifier's messages and the timeline.
#pragma once

#include <cstdint>
#include <string_view>

namespace mkserve::megakernel {

// "unknown" for a value outside the Opcode enum.
std::string_view OpcodeName(uint32_t opcode);

}  // namespace mkserve::megakernel
