#include "server/server_metrics.h"

#include <gtest/gtest.h>

#include <sstream>

namespace mkserve::server {
namespace {

// The value on the line that starts with `series ` (exact series incl. labels), or -1.
double SeriesValue(const std::string& text, const std::string& series) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return -1;
}

TEST(ServerMetricsTest, CountersByOutcomeAndTokens) {
  ServerMetrics metrics;
  metrics.RecordRequest(RequestOutcome::kStop);
  metrics.RecordRequest(RequestOutcome::kStop);
  metrics.RecordRequest(RequestOutcome::kAborted);
  metrics.AddTokens(10, 3);
  metrics.AddTokens(5, 4);
  std::string text = metrics.Render({});
  EXPECT_EQ(SeriesValue(text, "mkserve_requests_total{outcome=\"stop\"}"), 2);
  EXPECT_EQ(SeriesValue(text, "mkserve_requests_total{outcome=\"aborted\"}"), 1);
  EXPECT_EQ(SeriesValue(text, "mkserve_requests_total{outcome=\"length\"}"), 0);
  EXPECT_EQ(SeriesValue(text, "mkserve_prompt_tokens_total"), 15);
  EXPECT_EQ(SeriesValue(text, "mkserve_generation_tokens_total"), 7);
}

TEST(ServerMetricsTest, LargeCountersAreNotRoundedToScientific) {
  ServerMetrics metrics;
  metrics.AddTokens(123456789, 0);
  std::string text = metrics.Render({});
  EXPECT_NE(text.find("mkserve_prompt_tokens_total 123456789\n"), std::string::npos);
}

TEST(ServerMetricsTest, HistogramBucketsAreCumulative) {
  ServerMetrics metrics;
  metrics.ObserveTimeToFirstToken(0.005);  // first bucket (le 0.01)
  metrics.ObserveTimeToFirstToken(0.2);    // le 0.25
  metrics.ObserveTimeToFirstToken(100);    // only +Inf
  std::string text = metrics.Render({});
  const std::string name = "mkserve_time_to_first_token_seconds";
  EXPECT_EQ(SeriesValue(text, name + "_bucket{le=\"0.01\"}"), 1);
  EXPECT_EQ(SeriesValue(text, name + "_bucket{le=\"0.1\"}"), 1);
  EXPECT_EQ(SeriesValue(text, name + "_bucket{le=\"0.25\"}"), 2);
  EXPECT_EQ(SeriesValue(text, name + "_bucket{le=\"30\"}"), 2);
  EXPECT_EQ(SeriesValue(text, name + "_bucket{le=\"+Inf\"}"), 3);
  EXPECT_EQ(SeriesValue(text, name + "_count"), 3);
  EXPECT_NEAR(SeriesValue(text, name + "_sum"), 100.205, 1e-9);
  EXPECT_NE(text.find("# TYPE " + name + " histogram"), std::string::npos);
}

TEST(ServerMetricsTest, EngineGauges) {
  ServerMetrics metrics;
  EngineGauges gauges{.num_running = 3,
                      .num_waiting = 2,
                      .kv_blocks_used = 17,
                      .kv_blocks_total = 100,
                      .prefix_cache_hit_rate = 0.25,
                      .batch_size = 3};
  std::string text = metrics.Render(gauges);
  EXPECT_EQ(SeriesValue(text, "mkserve_num_requests_running"), 3);
  EXPECT_EQ(SeriesValue(text, "mkserve_num_requests_waiting"), 2);
  EXPECT_EQ(SeriesValue(text, "mkserve_kv_blocks_used"), 17);
  EXPECT_EQ(SeriesValue(text, "mkserve_kv_blocks_total"), 100);
  EXPECT_EQ(SeriesValue(text, "mkserve_prefix_cache_hit_rate"), 0.25);
  EXPECT_EQ(SeriesValue(text, "mkserve_batch_size"), 3);
}

TEST(ServerMetricsTest, EveryLineIsCommentOrSample) {
  ServerMetrics metrics;
  metrics.ObserveInterTokenLatency(0.003);
  std::istringstream lines(metrics.Render({}));
  std::string line;
  while (std::getline(lines, line)) {
    ASSERT_FALSE(line.empty());
    if (line[0] == '#') continue;
    size_t space = line.rfind(' ');
    ASSERT_NE(space, std::string::npos) << line;
    EXPECT_NO_THROW(std::stod(line.substr(space + 1))) << line;
  }
}

}  // namespace
}  // namespace mkserve::server
