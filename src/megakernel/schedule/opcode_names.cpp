#include "megakernel/schedule/opcode_names.h"

#include <array>

#include "megakernel/task_abi.h"

namespace mkserve::megakernel {

std::string_view OpcodeName(uint32_t opcode) {
  static constexpr std::array<std::string_view, kOpcodeCount> kNames = {"nop",
                                                                        "embed",
                                                                        "join",
                                                                        "qkv",
                                                                        "attention",
                                                                        "attention_claim",
                                                                        "attention_combine",
                                                                        "oproj",
                                                                        "dense_gate_up",
                                                                        "dense_down",
                                                                        "router",
                                                                        "topk",
                                                                        "moe_finalize",
                                                                        "expert_gate_up_claim",
                                                                        "expert_down_claim",
                                                                        "moe_combine",
                                                                        "lm_head",
                                                                        "sample",
                                                                        "lm_head_claim"};
  return opcode < kOpcodeCount ? kNames[opcode] : std::string_view("unknown");
}

}  // namespace mkserve::megakernel
