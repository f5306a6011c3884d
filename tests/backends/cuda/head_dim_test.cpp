// Host only: the head_dim dispatch of the attention kernels refuses sizes it has no kernel for.
#include "backends/cuda/core/head_dim.h"

#include <gtest/gtest.h>

namespace mkserve::cuda {
namespace {

TEST(HeadDimTest, DispatchesTheBuiltSizesAndRefusesOthers) {
  for (int64_t dim : {16, 32, 64, 128}) {
    int launched = 0;
    ForHeadDim(dim, [&](auto d) { launched = decltype(d)::value; });
    EXPECT_EQ(launched, dim);
    EXPECT_TRUE(IsSupportedHeadDim(dim));
  }
  for (int64_t dim : {0, 8, 96, 256}) {
    EXPECT_FALSE(IsSupportedHeadDim(dim));
    bool launched = false;
    EXPECT_THROW(ForHeadDim(dim, [&](auto) { launched = true; }), Error) << dim;
    EXPECT_FALSE(launched) << "head_dim " << dim << " ran a kernel built for another size";
  }
}

}  // namespace
}  // namespace mkserve::cuda
