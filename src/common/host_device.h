// MKSERVE_HOST_DEVICE marks small functions that host code and CUDA kernels share (one definition
// of a convention, e.g. the sliding window's first key, instead of a device copy of it).
#pragma once

#if defined(__CUDACC__)
#define MKSERVE_HOST_DEVICE __host__ __device__
#else
#define MKSERVE_HOST_DEVICE
#endif
