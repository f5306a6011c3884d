// The attention head sizes the kernels are compiled for, and the dispatch from a runtime
// head_dim to the template instance. Host-only, so it can be tested without a GPU.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "common/error.h"

namespace mkserve::cuda {

inline bool IsSupportedHeadDim(int64_t head_dim) {
  return head_dim == 16 || head_dim == 32 || head_dim == 64 || head_dim == 128;
}

// Calls launch(std::integral_constant<int, D>{}) with the attention head_dim D the kernels are
// templated on; any other head_dim is an mkserve::Error (never a silent 128).
template <typename Launch>
void ForHeadDim(int64_t head_dim, Launch&& launch) {
  switch (head_dim) {
    case 16:
      return launch(std::integral_constant<int, 16>{});
    case 32:
      return launch(std::integral_constant<int, 32>{});
    case 64:
      return launch(std::integral_constant<int, 64>{});
    case 128:
      return launch(std::integral_constant<int, 128>{});
    default:
      throw Error("attention: head_dim " + std::to_string(head_dim) +
                  " is not supported (the kernels are built for 16, 32, 64 and 128)");
  }
}

}  // namespace mkserve::cuda
