// The panel layout (weight_panels.h) on the host: every element of a matrix has its own place,
// the padding is exactly what is left, a warp round of the GEMV body (8 pairs x 4 chunks) is one
// contiguous 4 KB run, pairs are the rows the bodies multiply together, and pack / unpack invert
// each other.
#include "backends/cuda/core/weight_panels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

namespace mkserve::cuda {
namespace {

struct Shape {
  PanelMatrix m;
  const char* what;
};

const Shape kShapes[] = {
    {PanelMatrix::AdjacentRows(64, 64), "whole panels"},
    {PanelMatrix::AdjacentRows(136, 64), "rows past the last whole panel"},
    {PanelMatrix::AdjacentRows(7, 40), "odd rows, K off the chunk grid"},
    {PanelMatrix::GateUp(48, 96), "gate/up, whole panels"},
    {PanelMatrix::GateUp(12, 24), "gate/up, a partial panel and chunk"},
};

TEST(WeightPanelsTest, EveryElementHasItsOwnPlaceInsideTheStorage) {
  for (const Shape& s : kShapes) {
    std::set<int64_t> places;
    for (int64_t row = 0; row < s.m.rows; ++row) {
      for (int64_t k = 0; k < s.m.k; ++k) {
        const int64_t at = s.m.Offset(row, k);
        ASSERT_GE(at, 0) << s.what;
        ASSERT_LT(at, s.m.Elements()) << s.what;
        ASSERT_TRUE(places.insert(at).second) << s.what << ": row " << row << " k " << k;
      }
    }
    // Padding: rows up to whole panels (16 rows, or 8 gate/up pairs), K up to whole chunks.
    const int64_t padded_k = (s.m.k + 31) / 32 * 32;
    EXPECT_EQ(s.m.Elements(), s.m.Panels() * 16 * padded_k) << s.what;
    EXPECT_GE(s.m.Panels() * 16, s.m.rows) << s.what;
    EXPECT_LT((s.m.Panels() - 1) * 16, s.m.rows) << s.what;
  }
}

TEST(WeightPanelsTest, AWarpRoundIsOneContiguousRun) {
  // The body's lane (r, j) of copy (u, h) reads pair g0 + r, half h, K 32 (c + u) + 8 j..+8.
  const PanelMatrix m = PanelMatrix::AdjacentRows(2048, 768);
  for (int64_t g0 : {0, 8, 64}) {
    for (int64_t c : {0, 4, 20}) {
      std::vector<int64_t> starts;
      for (int u = 0; u < 4; ++u) {
        for (int h = 0; h < 2; ++h) {
          for (int lane = 0; lane < 32; ++lane) {
            const int64_t row = 2 * (g0 + lane / 4) + h, k = 32 * (c + u) + 8 * (lane % 4);
            starts.push_back(m.Offset(row, k));
            EXPECT_EQ(m.Offset(row, k + 7), m.Offset(row, k) + 7);  // one 16-byte vector
          }
        }
      }
      for (size_t i = 1; i < starts.size(); ++i) EXPECT_EQ(starts[i], starts[i - 1] + 8) << i;
    }
  }
}

TEST(WeightPanelsTest, PairsAreTheRowsMultipliedTogether) {
  const PanelMatrix plain = PanelMatrix::AdjacentRows(64, 64);
  const PanelMatrix gate_up = PanelMatrix::GateUp(24, 64);
  for (int64_t pair = 0; pair < 24; ++pair) {
    for (int half = 0; half < 2; ++half) {
      EXPECT_EQ(PanelPairStart(pair, half, plain.PanelElements()), plain.RowStart(2 * pair + half));
      EXPECT_EQ(PanelPairStart(pair, half, gate_up.PanelElements()),
                gate_up.RowStart(half * 24 + pair));
    }
  }
}

TEST(WeightPanelsTest, PackAndUnpackInvertEachOther) {
  for (const Shape& s : kShapes) {
    const int64_t count = 3;
    std::vector<int> rows(static_cast<size_t>(s.m.rows * s.m.k * count));
    std::iota(rows.begin(), rows.end(), 1);
    const std::vector<int> packed = PackPanelsOnHost(rows, s.m, count);
    ASSERT_EQ(static_cast<int64_t>(packed.size()), count * s.m.Elements());
    EXPECT_EQ(UnpackPanelsOnHost(packed, s.m, count), rows) << s.what;
    const int64_t zeros = std::count(packed.begin(), packed.end(), 0);
    EXPECT_EQ(zeros, count * (s.m.Elements() - s.m.rows * s.m.k)) << s.what << ": padding";
  }
}

}  // namespace
}  // namespace mkserve::cuda
