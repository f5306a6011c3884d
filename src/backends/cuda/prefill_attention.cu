#include "backends/cuda/prefill_attention.h"

#include <climits>
#include <cmath>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/kernel_common.cuh"
#include "backends/cuda/mma_sm80.cuh"
#include "common/error.h"
#include "engine/kv_layout.h"

namespace mkserve::cuda {
namespace {

constexpr int kRows = static_cast<int>(kPrefillQueryTile);
constexpr int kPageKeys = static_cast<int>(kBlockTokens);  // one page per key tile
constexpr int kKeyTiles = kPageKeys / 8;                   // n8 tiles of S per page
constexpr int kMaxGroup = 8;                               // warps (query heads) per CTA
constexpr int kPad = 8;  // bf16 per shared row: ldmatrix rows land in distinct banks

template <int kHeadDim>
constexpr int kStride = kHeadDim + kPad;

// The tile's tokens, shared by all warps; seq -1 marks rows past the step's end.
struct TileRows {
  int32_t pos[kRows], seq[kRows], first[kRows];
};

// The keys one pass (one sequence of the tile) reads, and whether every page needs the mask.
struct PassRange {
  int64_t first_page, last_page;
  int32_t max_first, min_pos;
  bool all_rows;
};

template <int kHeadDim>
struct WarpState {
  float o[kHeadDim / 8][4];
  float m[2], l[2];               // rows g and g + 8 (log2 domain)
  uint32_t qa[kHeadDim / 16][4];  // the warp's 16x head_dim query block as A fragments
};

__device__ PassRange RangeOf(const TileRows& rows, int32_t seq) {
  int32_t kmin = INT_MAX, kmax = -1, max_first = 0, min_pos = INT_MAX, members = 0;
  for (int r = 0; r < kRows; ++r) {
    if (rows.seq[r] != seq) continue;
    kmin = min(kmin, rows.first[r]);
    kmax = max(kmax, rows.pos[r]);
    max_first = max(max_first, rows.first[r]);
    min_pos = min(min_pos, rows.pos[r]);
    ++members;
  }
  return {kmin / kPageKeys, kmax / kPageKeys, max_first, min_pos, members == kRows};
}

// K and V of one page for this CTA's kv head into shared memory (cp.async, not waited for).
template <int kHeadDim>
__device__ void LoadPage(const AttentionArgs& a, int32_t block, __nv_bfloat16* k_tile,
                         __nv_bfloat16* v_tile) {
  constexpr int kChunks = kHeadDim / kVecElements;
  const int64_t kv_width = a.num_kv_heads * kHeadDim;
  const bool valid = block >= 0;  // a released page is never visible; read nothing
  const __nv_bfloat16* page = a.cache +
                              (valid ? static_cast<int64_t>(block) : 0) * kPageKeys * 2 * kv_width +
                              blockIdx.y * kHeadDim;
  for (int i = threadIdx.x; i < 2 * kPageKeys * kChunks; i += blockDim.x) {
    const int which = i / (kPageKeys * kChunks), key = (i / kChunks) % kPageKeys;
    const int col = (i % kChunks) * kVecElements;
    __nv_bfloat16* dst = (which == 0 ? k_tile : v_tile) + key * kStride<kHeadDim> + col;
    CpAsync16(dst, page + (key * 2 + which) * kv_width + col, valid);
  }
}

// S = Q K^T for the page (16 x 64 per warp), scaled into the log2 domain.
template <int kHeadDim>
__device__ void Scores(const WarpState<kHeadDim>& st, const __nv_bfloat16* k_tile, float scale,
                       float (&s)[kKeyTiles][4]) {
  const int lane = threadIdx.x % kWarpSize;
#pragma unroll
  for (int j = 0; j < kKeyTiles; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) {
#pragma unroll
    for (int jj = 0; jj < kKeyTiles / 2; ++jj) {
      const int key = jj * 16 + lane % 8 + (lane / 16) * 8;
      const int dim = kk * 16 + ((lane / 8) % 2) * 8;
      uint32_t b[4];
      LdMatrixX4(b, SharedAddress(k_tile + key * kStride<kHeadDim> + dim));
      MmaBf16(s[2 * jj], st.qa[kk], b[0], b[1]);
      MmaBf16(s[2 * jj + 1], st.qa[kk], b[2], b[3]);
    }
  }
#pragma unroll
  for (int j = 0; j < kKeyTiles; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) s[j][e] *= scale;
  }
}

// -inf where the key is outside the row's [first, pos] or the row is of another sequence.
__device__ void Mask(const TileRows& rows, int32_t seq, int64_t page, float (&s)[kKeyTiles][4]) {
  const int lane = threadIdx.x % kWarpSize, g = lane / 4, c = lane % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = g + 8 * h;
    const bool mine = rows.seq[r] == seq;
    const int64_t first = rows.first[r], pos = rows.pos[r];
#pragma unroll
    for (int j = 0; j < kKeyTiles; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int64_t key = page * kPageKeys + j * 8 + 2 * c + e;
        if (!mine || key < first || key > pos) s[j][2 * h + e] = -INFINITY;
      }
    }
  }
}

// Online softmax over the page's scores, then O += P V.
template <int kHeadDim>
__device__ void Accumulate(WarpState<kHeadDim>& st, float (&s)[kKeyTiles][4],
                           const __nv_bfloat16* v_tile) {
  const int lane = threadIdx.x % kWarpSize;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float tile_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < kKeyTiles; ++j)
      tile_max = fmaxf(tile_max, fmaxf(s[j][2 * h], s[j][2 * h + 1]));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
    const float new_max = fmaxf(st.m[h], tile_max);
    const float base = new_max == -INFINITY ? 0.0f : new_max;  // nothing visible yet: all zero
    const float correction = exp2f(st.m[h] - base);
    st.m[h] = new_max;
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < kKeyTiles; ++j) {
      s[j][2 * h] = exp2f(s[j][2 * h] - base);
      s[j][2 * h + 1] = exp2f(s[j][2 * h + 1] - base);
      sum += s[j][2 * h] + s[j][2 * h + 1];
    }
    st.l[h] = st.l[h] * correction + sum;  // per-thread partial; reduced over the quad at the end
#pragma unroll
    for (int d = 0; d < kHeadDim / 8; ++d) {
      st.o[d][2 * h] *= correction;
      st.o[d][2 * h + 1] *= correction;
    }
  }
#pragma unroll
  for (int kk = 0; kk < kKeyTiles / 2; ++kk) {
    const uint32_t pa[4] = {PackBf16x2(s[2 * kk][0], s[2 * kk][1]),
                            PackBf16x2(s[2 * kk][2], s[2 * kk][3]),
                            PackBf16x2(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                            PackBf16x2(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
    for (int dd = 0; dd < kHeadDim / 16; ++dd) {
      const int key = kk * 16 + lane % 8 + ((lane / 8) % 2) * 8;
      const int dim = dd * 16 + (lane / 16) * 8;
      uint32_t b[4];
      LdMatrixX4Trans(b, SharedAddress(v_tile + key * kStride<kHeadDim> + dim));
      MmaBf16(st.o[2 * dd], pa, b[0], b[1]);
      MmaBf16(st.o[2 * dd + 1], pa, b[2], b[3]);
    }
  }
}

// All pages of one sequence's key range, double-buffered through cp.async.
template <int kHeadDim>
__device__ void RunPass(const AttentionArgs& a, const TileRows& rows, int32_t seq, float scale,
                        __nv_bfloat16* kv_smem, WarpState<kHeadDim>& st) {
  constexpr int kTileElements = kPageKeys * kStride<kHeadDim>;
  const PassRange range = RangeOf(rows, seq);
  const int32_t* table = a.block_tables + static_cast<int64_t>(seq) * a.max_pages;
  LoadPage<kHeadDim>(a, table[range.first_page], kv_smem, kv_smem + kTileElements);
  CpAsyncCommit();
  for (int64_t page = range.first_page; page <= range.last_page; ++page) {
    __nv_bfloat16* k_tile = kv_smem + ((page - range.first_page) % 2) * 2 * kTileElements;
    if (page < range.last_page) {
      __nv_bfloat16* next = kv_smem + ((page + 1 - range.first_page) % 2) * 2 * kTileElements;
      LoadPage<kHeadDim>(a, table[page + 1], next, next + kTileElements);
      CpAsyncCommit();
      CpAsyncWait<1>();
    } else {
      CpAsyncWait<0>();
    }
    __syncthreads();  // the page is in shared memory for every warp
    float s[kKeyTiles][4];
    Scores<kHeadDim>(st, k_tile, scale, s);
    const int64_t first_key = page * kPageKeys, last_key = first_key + kPageKeys - 1;
    if (!range.all_rows || first_key < range.max_first || last_key > range.min_pos) {
      Mask(rows, seq, page, s);
    }
    Accumulate<kHeadDim>(st, s, k_tile + kTileElements);
    __syncthreads();  // every warp is done with this buffer before it is refilled
  }
}

// Rows of the tile into shared memory; the warp's query block into A fragments.
template <int kHeadDim>
__device__ void LoadTile(const AttentionArgs& a, int64_t first_token, int head, TileRows& rows,
                         __nv_bfloat16* q_smem, WarpState<kHeadDim>& st) {
  constexpr int kChunks = kHeadDim / kVecElements;
  const int lane = threadIdx.x % kWarpSize;
  if (threadIdx.x < kRows) {
    const int64_t t = first_token + threadIdx.x;
    const bool live = t < a.num_tokens;
    const int32_t pos = live ? a.positions[t] : 0;
    rows.pos[threadIdx.x] = pos;
    rows.seq[threadIdx.x] = live ? a.seq_of_token[t] : -1;
    // FirstKeyInWindow (model_config.h) on the device; window 0 is full attention.
    rows.first[threadIdx.x] = static_cast<int32_t>(
        a.window_tokens > 0 ? max(int64_t{0}, pos - a.window_tokens + 1) : int64_t{0});
  }
  for (int i = lane; i < kRows * kChunks; i += kWarpSize) {
    const int r = i / kChunks, col = (i % kChunks) * kVecElements;
    const int64_t t = first_token + r;
    const bool live = t < a.num_tokens;
    CpAsync16(q_smem + r * kStride<kHeadDim> + col,
              a.q + ((live ? t : 0) * a.num_heads + head) * kHeadDim + col, live);
  }
  CpAsyncCommit();
  CpAsyncWait<0>();
  __syncthreads();  // rows visible to all; each warp's query block in shared memory
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) {
    const int r = lane % 8 + ((lane / 8) % 2) * 8, col = kk * 16 + (lane / 16) * 8;
    LdMatrixX4(st.qa[kk], SharedAddress(q_smem + r * kStride<kHeadDim> + col));
  }
}

template <int kHeadDim>
__device__ void StoreRows(const AttentionArgs& a, const WarpState<kHeadDim>& st,
                          int64_t first_token, int head) {
  const int lane = threadIdx.x % kWarpSize, g = lane / 4, c = lane % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = st.l[h];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int64_t t = first_token + g + 8 * h;
    if (t >= a.num_tokens) continue;
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    __nv_bfloat16* out = a.out + (t * a.num_heads + head) * kHeadDim + 2 * c;
#pragma unroll
    for (int d = 0; d < kHeadDim / 8; ++d) {
      *reinterpret_cast<__nv_bfloat162*>(out + d * 8) =
          __floats2bfloat162_rn(st.o[d][2 * h] * inv, st.o[d][2 * h + 1] * inv);
    }
  }
}

// Grid (16-token tiles, kv heads), one warp per query head of the group. The last tiles (longest
// causal ranges) are scheduled first so the short ones fill the tail.
template <int kHeadDim>
__global__ void __launch_bounds__(kMaxGroup* kWarpSize)
    PrefillAttentionKernel(AttentionArgs a, float scale) {
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ TileRows rows;
  const int warp = threadIdx.x / kWarpSize;
  const int group = blockDim.x / kWarpSize;
  const int head = blockIdx.y * group + warp;
  const int64_t first_token = static_cast<int64_t>(gridDim.x - 1 - blockIdx.x) * kRows;
  auto* q_smem = reinterpret_cast<__nv_bfloat16*>(smem) + warp * kRows * kStride<kHeadDim>;
  auto* kv_smem = reinterpret_cast<__nv_bfloat16*>(smem) + group * kRows * kStride<kHeadDim>;
  WarpState<kHeadDim> st;
#pragma unroll
  for (int d = 0; d < kHeadDim / 8; ++d) st.o[d][0] = st.o[d][1] = st.o[d][2] = st.o[d][3] = 0.0f;
  st.m[0] = st.m[1] = -INFINITY;
  st.l[0] = st.l[1] = 0.0f;
  LoadTile<kHeadDim>(a, first_token, head, rows, q_smem, st);
  for (int r = 0; r < kRows; ++r) {
    bool seen = rows.seq[r] < 0;
    for (int earlier = 0; earlier < r && !seen; ++earlier) seen = rows.seq[earlier] == rows.seq[r];
    if (!seen) RunPass<kHeadDim>(a, rows, rows.seq[r], scale, kv_smem, st);
  }
  StoreRows<kHeadDim>(a, st, first_token, head);
}

template <int kHeadDim>
void Launch(const AttentionArgs& a, cudaStream_t stream) {
  const int group = static_cast<int>(a.num_heads / a.num_kv_heads);
  const size_t smem =
      (group * kRows + 2 * 2 * kPageKeys) * kStride<kHeadDim> * sizeof(__nv_bfloat16);
  static const cudaError_t attribute = cudaFuncSetAttribute(
      PrefillAttentionKernel<kHeadDim>, cudaFuncAttributeMaxDynamicSharedMemorySize,
      static_cast<int>((kMaxGroup * kRows + 2 * 2 * kPageKeys) * kStride<kHeadDim> *
                       sizeof(__nv_bfloat16)));
  MKSERVE_CUDA_CHECK(attribute);
  const dim3 grid(static_cast<unsigned>(CeilDiv(a.num_tokens, kRows)),
                  static_cast<unsigned>(a.num_kv_heads));
  const float scale = kLog2e / sqrtf(static_cast<float>(kHeadDim));
  PrefillAttentionKernel<kHeadDim><<<grid, group * kWarpSize, smem, stream>>>(a, scale);
  MKSERVE_CUDA_CHECK_LAUNCH();
}

}  // namespace

bool PrefillAttentionSupports(const AttentionArgs& a) {
  return a.num_kv_heads > 0 && a.num_heads % a.num_kv_heads == 0 &&
         a.num_heads / a.num_kv_heads <= kMaxGroup &&
         (a.head_dim == 16 || a.head_dim == 32 || a.head_dim == 64 || a.head_dim == 128);
}

bool PreferPrefillAttention(int64_t num_tokens, int64_t num_sequences) {
  return num_tokens >= 4 * kPrefillQueryTile && num_tokens >= kPrefillQueryTile * num_sequences;
}

void PrefillAttention(const AttentionArgs& args, cudaStream_t stream) {
  if (!PrefillAttentionSupports(args)) {
    throw Error("PrefillAttention: unsupported shape: heads " + std::to_string(args.num_heads) +
                ", kv heads " + std::to_string(args.num_kv_heads) + ", head_dim " +
                std::to_string(args.head_dim) +
                " (head_dim 16, 32, 64 or 128; at most 8 query heads per kv head)");
  }
  if (args.num_tokens <= 0) return;
  switch (args.head_dim) {
    case 16:
      return Launch<16>(args, stream);
    case 32:
      return Launch<32>(args, stream);
    case 64:
      return Launch<64>(args, stream);
    default:
      return Launch<128>(args, stream);
  }
}

}  // namespace mkserve::cuda
