// Greedy sampling on the GPU: the argmax of each logits row, lowest token id on ties (the CPU
// sampler's rule), so greedy tokens are identical across backends.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace mkserve::cuda {

void ArgmaxRows(const float* logits, int64_t num_rows, int64_t vocab, int32_t* token_ids,
                cudaStream_t stream);

}  // namespace mkserve::cuda
