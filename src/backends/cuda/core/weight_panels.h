// Projection weights in the order the tensor-core GEMV bodies read them ("panels").
//
// The decode bodies multiply 8 row pairs (16 weight rows, an mma's M) at a time, 32 K elements
// per lane pair of 16-byte loads. Stored row-major, one copy instruction of a warp then reads 8
// rows x 64 bytes; H200 HBM serves that 8-10 % slower than contiguous reads when every SM
// streams (pipe_probe), and a build reading contiguous rounds ran batch 1 at 8K 2.70 -> 2.51 ms.
// So a matrix is stored as panels of 16 rows; a panel is a run of chunks of 32 K elements, and a
// chunk holds its 16 row pieces one after another (1 KB): every warp round is contiguous.
//
//   panel p, chunk c, slot s, element e  at  (p * chunks + c) * 512 + s * 32 + e
//
// Which logical row sits in (panel, slot) follows the pairs the bodies multiply together: slots
// 0-7 are the first rows of the panel's 8 pairs and slots 8-15 their second rows.
//   kAdjacentRows: pair g is rows (2g, 2g + 1)           (QKV, O-proj, down, LM head)
//   kGateUp:       pair i is rows (i, gate_rows + i)     (fused gate|up: gate row i, up row i)
// K is padded to whole chunks and rows to whole panels; the padding is zero and never read
// into a result. Element (row, k) is at RowStart(row) + (k / 32) * 512 + k % 32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/host_device.h"

namespace mkserve::cuda {

inline constexpr int64_t kPanelRows = 16;
inline constexpr int64_t kPanelChunk = 32;                                // K elements
inline constexpr int64_t kPanelChunkElements = kPanelRows * kPanelChunk;  // 1 KB of bf16

// Elements of one panel of rows `k` long (K padded to whole chunks): what the device bodies
// carry instead of a row stride.
MKSERVE_HOST_DEVICE inline int64_t PanelElementsFor(int64_t k) {
  return (k + kPanelChunk - 1) / kPanelChunk * kPanelChunkElements;
}

// Where K element `kk`'s chunk starts within a row's panel slot (kk sits kk % kPanelChunk in).
MKSERVE_HOST_DEVICE inline int64_t PanelChunkStart(int64_t kk) {
  return kk / kPanelChunk * kPanelChunkElements;
}

enum class PanelPairs { kAdjacentRows, kGateUp };

struct PanelMatrix {
  int64_t rows = 0;  // logical rows (kGateUp: 2 * gate_rows)
  int64_t k = 0;     // logical row length
  PanelPairs pairs = PanelPairs::kAdjacentRows;

  MKSERVE_HOST_DEVICE static PanelMatrix AdjacentRows(int64_t rows, int64_t k) {
    return {rows, k, PanelPairs::kAdjacentRows};
  }
  MKSERVE_HOST_DEVICE static PanelMatrix GateUp(int64_t gate_rows, int64_t k) {
    return {2 * gate_rows, k, PanelPairs::kGateUp};
  }

  MKSERVE_HOST_DEVICE int64_t PanelElements() const { return PanelElementsFor(k); }
  MKSERVE_HOST_DEVICE int64_t Panels() const {
    const int64_t pairs_per_panel = kPanelRows / 2;
    const int64_t pair_count = pairs == PanelPairs::kGateUp ? rows / 2 : (rows + 1) / 2;
    return (pair_count + pairs_per_panel - 1) / pairs_per_panel;
  }
  MKSERVE_HOST_DEVICE int64_t Elements() const { return Panels() * PanelElements(); }
  MKSERVE_HOST_DEVICE int64_t RowStart(int64_t row) const;
  MKSERVE_HOST_DEVICE int64_t Offset(int64_t row, int64_t kk) const {
    return RowStart(row) + PanelChunkStart(kk) + kk % kPanelChunk;
  }
};

// Where pair `pair`'s row `half` (0 or 1) starts, for a panel of `panel_elements`: the two
// functions the device bodies call with the pair they multiply.
MKSERVE_HOST_DEVICE inline int64_t PanelPairStart(int64_t pair, int half, int64_t panel_elements) {
  const int64_t pairs_per_panel = kPanelRows / 2;
  return pair / pairs_per_panel * panel_elements +
         (half * pairs_per_panel + pair % pairs_per_panel) * kPanelChunk;
}

MKSERVE_HOST_DEVICE inline int64_t PanelMatrix::RowStart(int64_t row) const {
  const int64_t gate_rows = rows / 2;
  if (pairs == PanelPairs::kGateUp) {
    return PanelPairStart(row % gate_rows, static_cast<int>(row / gate_rows), PanelElements());
  }
  return PanelPairStart(row / 2, static_cast<int>(row % 2), PanelElements());
}

// Host copies, for tests and small tensors: `src` row-major [rows][k] into panels and back.
template <class T>
std::vector<T> PackPanelsOnHost(const std::vector<T>& src, const PanelMatrix& m,
                                int64_t count = 1) {
  std::vector<T> out(static_cast<std::size_t>(m.Elements() * count), T{});
  for (int64_t i = 0; i < count; ++i) {
    for (int64_t row = 0; row < m.rows; ++row) {
      for (int64_t kk = 0; kk < m.k; ++kk) {
        out[i * m.Elements() + m.Offset(row, kk)] = src[(i * m.rows + row) * m.k + kk];
      }
    }
  }
  return out;
}

template <class T>
std::vector<T> UnpackPanelsOnHost(const std::vector<T>& src, const PanelMatrix& m,
                                  int64_t count = 1) {
  std::vector<T> out(static_cast<std::size_t>(m.rows * m.k * count));
  for (int64_t i = 0; i < count; ++i) {
    for (int64_t row = 0; row < m.rows; ++row) {
      for (int64_t kk = 0; kk < m.k; ++kk) {
        out[(i * m.rows + row) * m.k + kk] = src[i * m.Elements() + m.Offset(row, kk)];
      }
    }
  }
  return out;
}

}  // namespace mkserve::cuda
