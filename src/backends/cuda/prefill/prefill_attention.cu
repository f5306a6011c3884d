#include "backends/cuda/prefill/prefill_attention.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <string>

#include "backends/cuda/core/cuda_check.h"
#include "backends/cuda/core/kernel_common.cuh"
#include "backends/cuda/core/mma_sm80.cuh"
#include "common/error.h"
#include "engine/kv_layout.h"

namespace mkserve::cuda {
namespace {

constexpr int kRows = static_cast<int>(kPrefillQueryTile);
constexpr int kMTiles = kRows / 16;  // m16 tiles per warp: each K/V fragment feeds kMTiles mmas
constexpr int kPageKeys = static_cast<int>(kBlockTokens);  // one page per key tile
constexpr int kSubKeys = 32;  // keys per softmax step: half a page keeps S at 32 registers
constexpr int kKeyTiles = kSubKeys / 8;  // n8 tiles of S per step
constexpr int kMaxGroup = 8;             // warps (query heads) per CTA
constexpr int kPad = 8;  // bf16 per shared row: ldmatrix rows land in distinct banks

template <int kHeadDim>
constexpr int kStride = kHeadDim + kPad;

// The tile's tokens, shared by all warps; seq -1 marks rows past the step's end.
struct TileRows {
  int32_t pos[kRows], seq[kRows], first[kRows];
};

// The keys one pass (one sequence of the tile) reads, and whether every page needs the mask.
struct PassRange {
  int64_t first_key, last_key;  // over the pass's rows
  int64_t first_page, last_page;
  int32_t max_first, min_pos;
  bool all_rows;
};

// Row r of the tile is m tile r / 16, fragment row r % 16; a thread holds rows g and g + 8 of each
// m tile (h = 0, 1).
template <int kHeadDim>
struct WarpState {
  float o[kMTiles][kHeadDim / 8][4];
  float m[kMTiles][2], l[kMTiles][2];  // log2 domain
  const __nv_bfloat16* q;              // the warp's kRows x head_dim query block in shared memory
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
  return {kmin, kmax, kmin / kPageKeys, kmax / kPageKeys, max_first, min_pos, members == kRows};
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

// S = Q K^T for the page (kRows x 64 per warp), scaled into the log2 domain.
template <int kHeadDim>
__device__ void Scores(const WarpState<kHeadDim>& st, const __nv_bfloat16* k_tile, float scale,
                       float (&s)[kMTiles][kKeyTiles][4]) {
  const int lane = threadIdx.x % kWarpSize;
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int j = 0; j < kKeyTiles; ++j)
      s[mt][j][0] = s[mt][j][1] = s[mt][j][2] = s[mt][j][3] = 0.0f;
  }
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) {
    uint32_t qa[kMTiles][4];
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      const int r = mt * 16 + lane % 8 + ((lane / 8) % 2) * 8, col = kk * 16 + (lane / 16) * 8;
      LdMatrixX4(qa[mt], SharedAddress(st.q + r * kStride<kHeadDim> + col));
    }
#pragma unroll
    for (int jj = 0; jj < kKeyTiles / 2; ++jj) {
      const int key = jj * 16 + lane % 8 + (lane / 16) * 8;
      const int dim = kk * 16 + ((lane / 8) % 2) * 8;
      uint32_t b[4];
      LdMatrixX4(b, SharedAddress(k_tile + key * kStride<kHeadDim> + dim));
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        MmaBf16(s[mt][2 * jj], qa[mt], b[0], b[1]);
        MmaBf16(s[mt][2 * jj + 1], qa[mt], b[2], b[3]);
      }
    }
  }
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int j = 0; j < kKeyTiles; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) s[mt][j][e] *= scale;
    }
  }
}

// -inf where the key is outside the row's [first, pos] or the row is of another sequence.
__device__ void Mask(const TileRows& rows, int32_t seq, int64_t first_key,
                     float (&s)[kMTiles][kKeyTiles][4]) {
  const int lane = threadIdx.x % kWarpSize, g = lane / 4, c = lane % 4;
#pragma unroll
  for (int mh = 0; mh < 2 * kMTiles; ++mh) {
    const int mt = mh / 2, h = mh % 2, r = mt * 16 + g + 8 * h;
    const bool mine = rows.seq[r] == seq;
    const int64_t first = rows.first[r], pos = rows.pos[r];
#pragma unroll
    for (int j = 0; j < kKeyTiles; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int64_t key = first_key + j * 8 + 2 * c + e;
        if (!mine || key < first || key > pos) s[mt][j][2 * h + e] = -INFINITY;
      }
    }
  }
}

// Online softmax of one fragment row (h) of one m tile over the page's scores.
template <int kHeadDim>
__device__ void SoftmaxRow(WarpState<kHeadDim>& st, int mt, int h, float (&s)[kKeyTiles][4]) {
  float tile_max = -INFINITY;
#pragma unroll
  for (int j = 0; j < kKeyTiles; ++j)
    tile_max = fmaxf(tile_max, fmaxf(s[j][2 * h], s[j][2 * h + 1]));
  tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
  tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
  const float new_max = fmaxf(st.m[mt][h], tile_max);
  const float base = new_max == -INFINITY ? 0.0f : new_max;  // nothing visible yet: all zero
  const float correction = exp2f(st.m[mt][h] - base);
  st.m[mt][h] = new_max;
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < kKeyTiles; ++j) {
    s[j][2 * h] = exp2f(s[j][2 * h] - base);
    s[j][2 * h + 1] = exp2f(s[j][2 * h + 1] - base);
    sum += s[j][2 * h] + s[j][2 * h + 1];
  }
  st.l[mt][h] = st.l[mt][h] * correction + sum;  // per-thread partial; quad-reduced at the end
#pragma unroll
  for (int d = 0; d < kHeadDim / 8; ++d) {
    st.o[mt][d][2 * h] *= correction;
    st.o[mt][d][2 * h + 1] *= correction;
  }
}

// Online softmax over the page's scores, then O += P V (each V fragment feeds every m tile).
template <int kHeadDim>
__device__ void Accumulate(WarpState<kHeadDim>& st, float (&s)[kMTiles][kKeyTiles][4],
                           const __nv_bfloat16* v_tile) {
  const int lane = threadIdx.x % kWarpSize;
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
    SoftmaxRow<kHeadDim>(st, mt, 0, s[mt]);
    SoftmaxRow<kHeadDim>(st, mt, 1, s[mt]);
  }
#pragma unroll
  for (int kk = 0; kk < kKeyTiles / 2; ++kk) {
    uint32_t pa[kMTiles][4];
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      pa[mt][0] = PackBf16x2(s[mt][2 * kk][0], s[mt][2 * kk][1]);
      pa[mt][1] = PackBf16x2(s[mt][2 * kk][2], s[mt][2 * kk][3]);
      pa[mt][2] = PackBf16x2(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
      pa[mt][3] = PackBf16x2(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
    }
#pragma unroll
    for (int dd = 0; dd < kHeadDim / 16; ++dd) {
      const int key = kk * 16 + lane % 8 + ((lane / 8) % 2) * 8;
      const int dim = dd * 16 + (lane / 16) * 8;
      uint32_t b[4];
      LdMatrixX4Trans(b, SharedAddress(v_tile + key * kStride<kHeadDim> + dim));
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        MmaBf16(st.o[mt][2 * dd], pa[mt], b[0], b[1]);
        MmaBf16(st.o[mt][2 * dd + 1], pa[mt], b[2], b[3]);
      }
    }
  }
}

// This launch's pages of one sequence's key range (launch z takes pages z * kPrefillPagesPerLaunch
// on from the range's first), double-buffered through cp.async.
template <int kHeadDim>
__device__ void RunPass(const AttentionArgs& a, const TileRows& rows, int32_t seq, float scale,
                        int launch, __nv_bfloat16* kv_smem, WarpState<kHeadDim>& st) {
  constexpr int kTileElements = kPageKeys * kStride<kHeadDim>;
  const PassRange range = RangeOf(rows, seq);
  const int64_t first_page = range.first_page + launch * kPrefillPagesPerLaunch;
  const int64_t last_page = min(range.last_page, first_page + kPrefillPagesPerLaunch - 1);
  if (first_page > last_page) return;  // the range ended in an earlier launch
  const int32_t* table = a.block_tables + static_cast<int64_t>(seq) * a.max_pages;
  LoadPage<kHeadDim>(a, table[first_page], kv_smem, kv_smem + kTileElements);
  CpAsyncCommit();
  for (int64_t page = first_page; page <= last_page; ++page) {
    __nv_bfloat16* k_tile = kv_smem + ((page - first_page) % 2) * 2 * kTileElements;
    if (page < last_page) {
      __nv_bfloat16* next = kv_smem + ((page + 1 - first_page) % 2) * 2 * kTileElements;
      LoadPage<kHeadDim>(a, table[page + 1], next, next + kTileElements);
      CpAsyncCommit();
      CpAsyncWait<1>();
    } else {
      CpAsyncWait<0>();
    }
    __syncthreads();  // the page is in shared memory for every warp
#pragma unroll 1
    for (int half = 0; half < kPageKeys / kSubKeys; ++half) {
      const int64_t first_key = page * kPageKeys + half * kSubKeys;
      const int64_t last_key = first_key + kSubKeys - 1;
      if (last_key < range.first_key || first_key > range.last_key) continue;  // all masked
      const __nv_bfloat16* k_rows = k_tile + half * kSubKeys * kStride<kHeadDim>;
      float s[kMTiles][kKeyTiles][4];
      Scores<kHeadDim>(st, k_rows, scale, s);
      if (!range.all_rows || first_key < range.max_first || last_key > range.min_pos) {
        Mask(rows, seq, first_key, s);
      }
      Accumulate<kHeadDim>(st, s, k_rows + kTileElements);
    }
    __syncthreads();  // every warp is done with this buffer before it is refilled
  }
}

// Rows of the tile and the warp's query block into shared memory.
template <int kHeadDim>
__device__ void LoadTile(const AttentionArgs& a, int64_t first_token, int head, TileRows& rows,
                         __nv_bfloat16* q_smem) {
  constexpr int kChunks = kHeadDim / kVecElements;
  const int lane = threadIdx.x % kWarpSize;
  if (threadIdx.x < kRows) {  // blockDim >= 32 >= kRows
    const int64_t t = first_token + threadIdx.x;
    const bool live = t < a.num_tokens;
    const int32_t pos = live ? a.positions[t] : 0;
    rows.pos[threadIdx.x] = pos;
    rows.seq[threadIdx.x] = live ? a.seq_of_token[t] : -1;
    rows.first[threadIdx.x] =  // window 0 is full attention
        static_cast<int32_t>(a.window_tokens > 0 ? FirstKeyInWindow(pos, a.window_tokens) : 0);
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
}

template <int kHeadDim>
__device__ void StoreRows(const AttentionArgs& a, const WarpState<kHeadDim>& st,
                          int64_t first_token, int head) {
  const int lane = threadIdx.x % kWarpSize, g = lane / 4, c = lane % 4;
#pragma unroll
  for (int mh = 0; mh < 2 * kMTiles; ++mh) {
    const int mt = mh / 2, h = mh % 2;
    float l = st.l[mt][h];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int64_t t = first_token + mt * 16 + g + 8 * h;
    if (t >= a.num_tokens) continue;
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    __nv_bfloat16* out = a.out + (t * a.num_heads + head) * kHeadDim + 2 * c;
#pragma unroll
    for (int d = 0; d < kHeadDim / 8; ++d) {
      *reinterpret_cast<__nv_bfloat162*>(out + d * 8) =
          __floats2bfloat162_rn(st.o[mt][d][2 * h] * inv, st.o[mt][d][2 * h + 1] * inv);
    }
  }
}

// The warp's online-softmax state between launches, exactly as the registers hold it: o per
// element, m per row (the same in every lane of a quad), l as each lane's own partial sum (summed
// over the quad only at the end, as in one launch), so the result is bitwise that of one launch.
template <int kHeadDim>
__device__ void StoreCarry(const AttentionArgs& a, const PrefillCarry& carry,
                           const WarpState<kHeadDim>& st, int64_t first_token, int head) {
  const int lane = threadIdx.x % kWarpSize, g = lane / 4, c = lane % 4;
#pragma unroll
  for (int mh = 0; mh < 2 * kMTiles; ++mh) {
    const int mt = mh / 2, h = mh % 2;
    const int64_t t = first_token + mt * 16 + g + 8 * h;
    if (t >= a.num_tokens) continue;
    const int64_t row = t * a.num_heads + head;
    if (c == 0) carry.stats[kPrefillCarryStats * row] = st.m[mt][h];
    carry.stats[kPrefillCarryStats * row + 1 + c] = st.l[mt][h];
    float* acc = carry.acc + row * kHeadDim + 2 * c;
#pragma unroll
    for (int d = 0; d < kHeadDim / 8; ++d) {
      *reinterpret_cast<float2*>(acc + d * 8) =
          make_float2(st.o[mt][d][2 * h], st.o[mt][d][2 * h + 1]);
    }
  }
}

template <int kHeadDim>
__device__ void LoadCarry(const AttentionArgs& a, const PrefillCarry& carry,
                          WarpState<kHeadDim>& st, int64_t first_token, int head) {
  const int lane = threadIdx.x % kWarpSize, g = lane / 4, c = lane % 4;
#pragma unroll
  for (int mh = 0; mh < 2 * kMTiles; ++mh) {
    const int mt = mh / 2, h = mh % 2;
    const int64_t t = first_token + mt * 16 + g + 8 * h;
    if (t >= a.num_tokens) continue;
    const int64_t row = t * a.num_heads + head;
    st.m[mt][h] = carry.stats[kPrefillCarryStats * row];
    st.l[mt][h] = carry.stats[kPrefillCarryStats * row + 1 + c];
    const float* acc = carry.acc + row * kHeadDim + 2 * c;
#pragma unroll
    for (int d = 0; d < kHeadDim / 8; ++d) {
      const float2 v = *reinterpret_cast<const float2*>(acc + d * 8);
      st.o[mt][d][2 * h] = v.x;
      st.o[mt][d][2 * h + 1] = v.y;
    }
  }
}

// Grid (32-token tiles, kv heads), one warp per query head of the group. The last tiles (longest
// causal ranges) are scheduled first so the short ones fill the tail. Launch `launch` of
// `launches` takes its share of each pass's pages, starting from the state the previous launch
// left in `carry`; the last one writes the output.
template <int kHeadDim>
__global__ void __launch_bounds__(kMaxGroup* kWarpSize)
    PrefillAttentionKernel(AttentionArgs a, float scale, PrefillCarry carry, int launch,
                           int launches) {
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
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int d = 0; d < kHeadDim / 8; ++d) {
      st.o[mt][d][0] = st.o[mt][d][1] = st.o[mt][d][2] = st.o[mt][d][3] = 0.0f;
    }
    st.m[mt][0] = st.m[mt][1] = -INFINITY;
    st.l[mt][0] = st.l[mt][1] = 0.0f;
  }
  st.q = q_smem;
  if (launch > 0) LoadCarry<kHeadDim>(a, carry, st, first_token, head);
  LoadTile<kHeadDim>(a, first_token, head, rows, q_smem);
  for (int r = 0; r < kRows; ++r) {
    bool seen = rows.seq[r] < 0;
    for (int earlier = 0; earlier < r && !seen; ++earlier) seen = rows.seq[earlier] == rows.seq[r];
    if (!seen) RunPass<kHeadDim>(a, rows, rows.seq[r], scale, launch, kv_smem, st);
  }
  if (launch + 1 < launches) {
    StoreCarry<kHeadDim>(a, carry, st, first_token, head);
  } else {
    StoreRows<kHeadDim>(a, st, first_token, head);
  }
}

template <int kHeadDim>
void Launch(const AttentionArgs& a, const PrefillCarry& carry, int launches, cudaStream_t stream) {
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
  for (int launch = 0; launch < launches; ++launch) {
    PrefillAttentionKernel<kHeadDim>
        <<<grid, group * kWarpSize, smem, stream>>>(a, scale, carry, launch, launches);
    MKSERVE_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace

bool PrefillAttentionSupports(const AttentionArgs& a) {
  return a.num_kv_heads > 0 && a.num_heads % a.num_kv_heads == 0 &&
         a.num_heads / a.num_kv_heads <= kMaxGroup && IsSupportedHeadDim(a.head_dim);
}

bool PreferPrefillAttention(int64_t num_tokens, int64_t num_sequences) {
  constexpr int64_t kMinTokens = 64, kMinTokensPerSequence = 16;
  return num_tokens >= kMinTokens && num_tokens >= kMinTokensPerSequence * num_sequences;
}

int64_t PrefillAttentionLaunches(const AttentionArgs& args) {
  // Pages one pass may span: the longest context, or a window plus the tile's own spread.
  int64_t pages = std::max<int64_t>(args.max_pages, 1);
  if (args.window_tokens > 0) {
    pages = std::min(pages, (args.window_tokens + kRows) / kPageKeys + 2);
  }
  return (pages + kPrefillPagesPerLaunch - 1) / kPrefillPagesPerLaunch;
}

void PrefillAttention(const AttentionArgs& args, const PrefillCarry& carry, cudaStream_t stream) {
  if (!PrefillAttentionSupports(args)) {
    throw Error("PrefillAttention: unsupported shape: heads " + std::to_string(args.num_heads) +
                ", kv heads " + std::to_string(args.num_kv_heads) + ", head_dim " +
                std::to_string(args.head_dim) +
                " (head_dim 16, 32, 64 or 128; at most 8 query heads per kv head)");
  }
  if (args.num_tokens <= 0) return;
  const int64_t launches = PrefillAttentionLaunches(args);
  if (launches > 1 && (carry.acc == nullptr || carry.stats == nullptr)) {
    throw Error("PrefillAttention: a key range of " + std::to_string(args.max_pages) +
                " pages runs in " + std::to_string(launches) +
                " launches and needs a carry buffer");
  }
  ForHeadDim(args.head_dim, [&](auto dim) {
    Launch<decltype(dim)::value>(args, carry, static_cast<int>(launches), stream);
  });
}

}  // namespace mkserve::cuda
