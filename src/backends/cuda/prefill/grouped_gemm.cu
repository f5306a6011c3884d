#include "backends/cuda/prefill/grouped_gemm.h"

#include <string>

#include "backends/cuda/core/cuda_check.h"
#include "backends/cuda/core/kernel_common.cuh"
#include "backends/cuda/core/mma_sm80.cuh"
#include "backends/cuda/core/weight_panels.h"
#include "common/error.h"

namespace mkserve::cuda {
namespace {

// A CTA covers kTileM = 32 * kWarpM sorted rows with 4 warps, 2 along M (16 * kWarpM rows each)
// x 2 along N (64 columns each): kWarpM = 4 gives 64x64 warp tiles (few shared-memory loads per
// mma); kWarpM = 2 (64-row tiles) for small groups (prefill chunks of ~1K tokens give ~64 rows per
// expert).
constexpr int kTileN = 128;  // weight rows per CTA (64 gate + 64 up in the SiLU epilogue)
constexpr int kTileK = 32;   // one panel chunk: a weight row's K tile is 64 contiguous bytes
static_assert(kTileK == kPanelChunk);
constexpr int kStages = 4;
constexpr int kStride = kTileK + 8;  // 80-byte rows: ldmatrix rows land in distinct banks
constexpr int kThreads = 128;
constexpr int kChunks = kTileK / kVecElements;        // 16-byte pieces per tile row
constexpr int kWLoads = kTileN * kChunks / kThreads;  // weight rows' pieces per thread
constexpr int kSmallGroupRows = 96;  // mean rows per group below which 64-row tiles pay

template <int kWarpM>
constexpr int kTileM = 32 * kWarpM;
template <int kWarpM>
constexpr int kStageElements = (kTileM<kWarpM> + kTileN) * kStride;
template <int kWarpM>
constexpr size_t kSmemBytes = kStages* kStageElements<kWarpM> * sizeof(__nv_bfloat16);

struct TileCoords {
  int32_t group, row0, end;  // group -1: this CTA has no tile
};

// Warp 0 scans the groups' tile counts (ceil(rows / tile_m)) for the group holding tile `tile`.
__device__ void FindTile(const GroupedGemmArgs& a, int tile_m, int64_t tile, TileCoords* coords) {
  if (threadIdx.x >= kWarpSize) return;
  const int lane = threadIdx.x;
  if (lane == 0) coords->group = -1;
  __syncwarp();
  int64_t before = 0;
  for (int64_t base = 0; base < a.num_groups; base += kWarpSize) {
    const int64_t g = base + lane;
    const int32_t begin = g < a.num_groups ? a.offsets[g] : 0;
    const int32_t end = g < a.num_groups ? a.offsets[g + 1] : 0;
    const int32_t tiles = (end - begin + tile_m - 1) / tile_m;
    int32_t inclusive = tiles;
    for (int d = 1; d < kWarpSize; d *= 2) {
      const int32_t up = __shfl_up_sync(0xffffffffu, inclusive, d);
      if (lane >= d) inclusive += up;
    }
    const int64_t first = before + inclusive - tiles;
    if (tiles > 0 && tile >= first && tile < first + tiles) {
      *coords = {static_cast<int32_t>(g), begin + static_cast<int32_t>(tile - first) * tile_m, end};
    }
    before += __shfl_sync(0xffffffffu, inclusive, kWarpSize - 1);
  }
}

// Shared-memory row of the weight tile that the warp's n8 tile `j` reads.
template <bool kSiluMul>
__device__ inline int WeightRow(int wn, int j) {
  if (!kSiluMul) return wn * 64 + j * 8;
  return j < 4 ? wn * 32 + j * 8 : kTileN / 2 + wn * 32 + (j - 4) * 8;
}

// A group's weights: [n][k], or [2n][k] gate rows then up rows, in panels (weight_panels.h).
template <bool kSiluMul>
__device__ inline PanelMatrix WeightPanels(const GroupedGemmArgs& a) {
  return kSiluMul ? PanelMatrix::GateUp(a.n, a.k) : PanelMatrix::AdjacentRows(a.n, a.k);
}

// Global sources of this thread's kWarpM A rows and two weight rows (fixed over k).
template <bool kSiluMul, int kWarpM>
struct Sources {
  const __nv_bfloat16* a_row[kWarpM];
  const __nv_bfloat16* w_row[kWLoads];
  bool a_ok[kWarpM], w_ok[kWLoads];

  __device__ Sources(const GroupedGemmArgs& a, const TileCoords& t, int64_t n0) {
    const PanelMatrix m = WeightPanels<kSiluMul>(a);
    const __nv_bfloat16* w = a.w + static_cast<int64_t>(t.group) * m.Elements();
#pragma unroll
    for (int i = 0; i < kWarpM; ++i) {
      const int32_t row = t.row0 + (threadIdx.x + i * kThreads) / kChunks;
      a_ok[i] = row < t.end;
      const int64_t src = a_ok[i] ? (a.a_rows != nullptr ? a.a_rows[row] : row) : 0;
      a_row[i] = a.a + src * a.k;
    }
#pragma unroll
    for (int i = 0; i < kWLoads; ++i) {
      const int r = (threadIdx.x + i * kThreads) / kChunks;
      const int64_t col = kSiluMul ? n0 + r % (kTileN / 2) : n0 + r;
      w_ok[i] = col < a.n;
      const int64_t w_index = (kSiluMul && r >= kTileN / 2 ? a.n : 0) + (w_ok[i] ? col : 0);
      w_row[i] = w + m.RowStart(w_index);
    }
  }

  __device__ void Load(__nv_bfloat16* stage, int64_t k0) const {
    const int col = (threadIdx.x % kChunks) * kVecElements;
    const int64_t chunk = PanelChunkStart(k0);  // the weights' K tile
#pragma unroll
    for (int i = 0; i < kWarpM; ++i) {
      const int r = (threadIdx.x + i * kThreads) / kChunks;
      CpAsync16(stage + r * kStride + col, a_row[i] + k0 + col, a_ok[i]);
    }
#pragma unroll
    for (int i = 0; i < kWLoads; ++i) {
      const int r = (threadIdx.x + i * kThreads) / kChunks;
      CpAsync16(stage + (kTileM<kWarpM> + r) * kStride + col, w_row[i] + chunk + col, w_ok[i]);
    }
  }
};

template <bool kSiluMul, int kWarpM>
__device__ void MmaStage(const __nv_bfloat16* stage, float (&acc)[kWarpM][8][4]) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int wm = warp / 2, wn = warp % 2;
  const __nv_bfloat16* w_tile = stage + kTileM<kWarpM> * kStride;
#pragma unroll
  for (int kk = 0; kk < kTileK / 16; ++kk) {
    uint32_t af[kWarpM][4];
#pragma unroll
    for (int mi = 0; mi < kWarpM; ++mi) {
      const int row = (wm * kWarpM + mi) * 16 + lane % 8 + ((lane / 8) % 2) * 8;
      LdMatrixX4(af[mi], SharedAddress(stage + row * kStride + kk * 16 + (lane / 16) * 8));
    }
#pragma unroll
    for (int jp = 0; jp < 4; ++jp) {
      const int row = WeightRow<kSiluMul>(wn, 2 * jp) + lane % 8 + (lane / 16) * 8;
      uint32_t b[4];
      LdMatrixX4(b, SharedAddress(w_tile + row * kStride + kk * 16 + ((lane / 8) % 2) * 8));
#pragma unroll
      for (int mi = 0; mi < kWarpM; ++mi) {
        MmaBf16(acc[mi][2 * jp], af[mi], b[0], b[1]);
        MmaBf16(acc[mi][2 * jp + 1], af[mi], b[2], b[3]);
      }
    }
  }
}

template <bool kSiluMul, int kWarpM>
__device__ void StoreTile(const GroupedGemmArgs& a, const TileCoords& t, int64_t n0,
                          const float (&acc)[kWarpM][8][4]) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int wm = warp / 2, wn = warp % 2, g = lane / 4, c = lane % 4;
#pragma unroll
  for (int mi = 0; mi < kWarpM; ++mi) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t row = t.row0 + (wm * kWarpM + mi) * 16 + g + 8 * h;
      if (row >= t.end) continue;
#pragma unroll
      for (int j = 0; j < (kSiluMul ? 4 : 8); ++j) {
        const int64_t col = n0 + (kSiluMul ? wn * 32 : wn * 64) + j * 8 + 2 * c;
        if (col >= a.n) continue;
        if constexpr (kSiluMul) {
          const float* gate = acc[mi][j];
          const float* up = acc[mi][j + 4];
          *reinterpret_cast<__nv_bfloat162*>(static_cast<__nv_bfloat16*>(a.out) + row * a.n + col) =
              __floats2bfloat162_rn(Silu(gate[2 * h]) * up[2 * h],
                                    Silu(gate[2 * h + 1]) * up[2 * h + 1]);
        } else {
          *reinterpret_cast<float2*>(static_cast<float*>(a.out) + row * a.n + col) =
              make_float2(acc[mi][j][2 * h], acc[mi][j][2 * h + 1]);
        }
      }
    }
  }
}

// Grid (column tiles, row-tile slots); slots past the groups' tiles exit at once.
template <bool kSiluMul, int kWarpM>
__global__ void __launch_bounds__(kThreads, 2) GroupedGemmKernel(GroupedGemmArgs a) {
  extern __shared__ __align__(16) unsigned char smem[];
  auto* stages = reinterpret_cast<__nv_bfloat16*>(smem);
  __shared__ TileCoords coords;
  FindTile(a, kTileM<kWarpM>, blockIdx.y, &coords);
  __syncthreads();
  const TileCoords t = coords;
  if (t.group < 0) return;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * (kSiluMul ? kTileN / 2 : kTileN);
  const Sources<kSiluMul, kWarpM> src(a, t, n0);
  const int64_t k_tiles = a.k / kTileK;
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < k_tiles) src.Load(stages + s * kStageElements<kWarpM>, s * kTileK);
    CpAsyncCommit();
  }
  float acc[kWarpM][8][4] = {};
  for (int64_t kt = 0; kt < k_tiles; ++kt) {
    CpAsyncWait<kStages - 2>();
    __syncthreads();  // stage kt landed for all; stage kt - 1 is free to refill
    const int64_t next = kt + kStages - 1;
    if (next < k_tiles) {
      src.Load(stages + (next % kStages) * kStageElements<kWarpM>, next * kTileK);
    }
    CpAsyncCommit();
    MmaStage<kSiluMul, kWarpM>(stages + (kt % kStages) * kStageElements<kWarpM>, acc);
  }
  StoreTile<kSiluMul, kWarpM>(a, t, n0, acc);
}

template <bool kSiluMul, int kWarpM>
void Launch(const GroupedGemmArgs& a, cudaStream_t stream) {
  constexpr int kSmem = static_cast<int>(kSmemBytes<kWarpM>);
  static const cudaError_t attribute = cudaFuncSetAttribute(
      GroupedGemmKernel<kSiluMul, kWarpM>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  MKSERVE_CUDA_CHECK(attribute);
  const int64_t tile_n = kSiluMul ? kTileN / 2 : kTileN;
  // Every group wastes at most one partial tile: sum ceil(rows_g / M) <= rows / M + groups.
  const int64_t slots = CeilDiv(a.max_rows, kTileM<kWarpM>) + a.num_groups;
  const dim3 grid(static_cast<unsigned>(CeilDiv(a.n, tile_n)), static_cast<unsigned>(slots));
  GroupedGemmKernel<kSiluMul, kWarpM><<<grid, kThreads, kSmem, stream>>>(a);
  MKSERVE_CUDA_CHECK_LAUNCH();
}

template <bool kSiluMul>
void LaunchForRows(const GroupedGemmArgs& a, cudaStream_t stream) {
  if (a.max_rows < kSmallGroupRows * a.num_groups) return Launch<kSiluMul, 2>(a, stream);
  Launch<kSiluMul, 4>(a, stream);
}

}  // namespace

bool GroupedGemmSupports(int64_t k, int64_t n) {
  return k > 0 && k % kTileK == 0 && n > 0 && n % kVecElements == 0;
}

void GroupedGemm(const GroupedGemmArgs& a, cudaStream_t stream) {
  if (!GroupedGemmSupports(a.k, a.n) || a.num_groups <= 0 || a.max_rows < 0 ||
      a.max_rows > INT32_MAX / 2) {
    throw Error("GroupedGemm: unsupported shape k=" + std::to_string(a.k) +
                " n=" + std::to_string(a.n) + " groups=" + std::to_string(a.num_groups) +
                " rows=" + std::to_string(a.max_rows) +
                " (k a multiple of 32, n a multiple of 8, at least one group)");
  }
  if (a.max_rows == 0) return;
  if (a.epilogue == GroupedEpilogue::kSiluMulBf16) return LaunchForRows<true>(a, stream);
  LaunchForRows<false>(a, stream);
}

}  // namespace mkserve::cuda
