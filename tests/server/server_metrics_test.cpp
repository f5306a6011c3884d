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

TEST(ServerMetricsTest, OutcomesTokensAndHttpCodes) {
  EngineSnapshot engine;
  engine.requests_stop = 2;
  engine.requests_cancelled = 1;
  engine.prompt_tokens_total = 123456789;  // must not print as 1.23457e+08
  engine.generation_tokens_total = 7;
  engine.prompt_chunk_tokens_total = 32767;
  HttpCounters http;
  http.Record(200);
  http.Record(400);
  http.Record(400);
  std::string text = RenderMetrics(engine, http.Counts());
  EXPECT_EQ(SeriesValue(text, "mkserve_requests_total{outcome=\"stop\"}"), 2);
  EXPECT_EQ(SeriesValue(text, "mkserve_requests_total{outcome=\"cancelled\"}"), 1);
  EXPECT_EQ(SeriesValue(text, "mkserve_requests_total{outcome=\"length\"}"), 0);
  EXPECT_NE(text.find("mkserve_prompt_tokens_total 123456789\n"), std::string::npos);
  EXPECT_EQ(SeriesValue(text, "mkserve_generation_tokens_total"), 7);
  EXPECT_EQ(SeriesValue(text, "mkserve_prompt_chunk_tokens_total"), 32767);
  EXPECT_EQ(SeriesValue(text, "mkserve_http_responses_total{code=\"400\"}"), 2);
  EXPECT_EQ(SeriesValue(text, "mkserve_http_responses_total{code=\"200\"}"), 1);
}

TEST(ServerMetricsTest, HistogramBucketsAreCumulative) {
  Histogram histogram({0.01, 0.1, 1.0});
  histogram.Observe(0.005);
  histogram.Observe(0.2);
  histogram.Observe(100);
  std::string text = RenderHistogram("ttft", "help", histogram);
  EXPECT_EQ(SeriesValue(text, "ttft_bucket{le=\"0.01\"}"), 1);
  EXPECT_EQ(SeriesValue(text, "ttft_bucket{le=\"0.1\"}"), 1);
  EXPECT_EQ(SeriesValue(text, "ttft_bucket{le=\"1\"}"), 2);
  EXPECT_EQ(SeriesValue(text, "ttft_bucket{le=\"+Inf\"}"), 3);
  EXPECT_EQ(SeriesValue(text, "ttft_count"), 3);
  EXPECT_NEAR(SeriesValue(text, "ttft_sum"), 100.205, 1e-9);
  EXPECT_NE(text.find("# TYPE ttft histogram"), std::string::npos);
}

TEST(ServerMetricsTest, KvGaugesSumGroupsAndHitRateIsARatio) {
  EngineSnapshot engine;
  engine.num_running = 3;
  engine.num_waiting = 2;
  engine.kv_groups = {{.used_blocks = 10, .total_blocks = 60},
                      {.used_blocks = 7, .total_blocks = 40}};
  engine.prefix_cache_query_tokens = 200;
  engine.prefix_cache_hit_tokens = 50;
  engine.last_batch_size = 3;
  std::string text = RenderMetrics(engine, {});
  EXPECT_EQ(SeriesValue(text, "mkserve_num_requests_running"), 3);
  EXPECT_EQ(SeriesValue(text, "mkserve_num_requests_waiting"), 2);
  EXPECT_EQ(SeriesValue(text, "mkserve_kv_blocks_used"), 17);
  EXPECT_EQ(SeriesValue(text, "mkserve_kv_blocks_total"), 100);
  EXPECT_EQ(SeriesValue(text, "mkserve_prefix_cache_hit_rate"), 0.25);
  EXPECT_EQ(SeriesValue(text, "mkserve_last_batch_size"), 3);
}

TEST(ServerMetricsTest, StepTimeIsLabelledByKind) {
  EngineSnapshot engine;
  StepKindStats& mixed = engine.steps[static_cast<int>(StepKind::kMixed)];
  mixed.duration_s.Observe(0.08);
  mixed.duration_s.Observe(0.06);
  mixed.backend_seconds = 0.12;
  mixed.prefill_tokens = 900;
  mixed.decode_rows = 128;
  std::string text = RenderMetrics(engine, {});
  EXPECT_EQ(SeriesValue(text, "mkserve_step_duration_seconds_count{kind=\"mixed\"}"), 2);
  EXPECT_NEAR(SeriesValue(text, "mkserve_step_duration_seconds_sum{kind=\"mixed\"}"), 0.14, 1e-9);
  EXPECT_EQ(SeriesValue(text, "mkserve_step_duration_seconds_bucket{kind=\"mixed\",le=\"0.075\"}"),
            1);
  EXPECT_EQ(SeriesValue(text, "mkserve_step_duration_seconds_count{kind=\"decode\"}"), 0);
  EXPECT_NEAR(SeriesValue(text, "mkserve_step_backend_seconds_total{kind=\"mixed\"}"), 0.12, 1e-9);
  EXPECT_EQ(SeriesValue(text, "mkserve_step_prefill_tokens_total{kind=\"mixed\"}"), 900);
  EXPECT_EQ(SeriesValue(text, "mkserve_step_decode_rows_total{kind=\"mixed\"}"), 128);
  EXPECT_EQ(SeriesValue(text, "mkserve_step_decode_rows_total{kind=\"prefill\"}"), 0);
}

TEST(ServerMetricsTest, DecodeStepsAreCountedByPath) {
  EngineSnapshot engine;
  engine.decode_steps_by_path = {{"graph", 7}, {"megakernel", 3}};
  std::string text = RenderMetrics(engine, {});
  EXPECT_EQ(SeriesValue(text, "mkserve_decode_steps_total{path=\"graph\"}"), 7);
  EXPECT_EQ(SeriesValue(text, "mkserve_decode_steps_total{path=\"megakernel\"}"), 3);
  EXPECT_NE(text.find("# TYPE mkserve_decode_steps_total counter"), std::string::npos);
}

TEST(ServerMetricsTest, ResponseStoreGauges) {
  std::string text = RenderResponseStore(3, 4096, 1 << 20, 2);
  EXPECT_EQ(SeriesValue(text, "mkserve_response_store_responses"), 3);
  EXPECT_EQ(SeriesValue(text, "mkserve_response_store_bytes"), 4096);
  EXPECT_EQ(SeriesValue(text, "mkserve_response_store_capacity_bytes"), 1 << 20);
  EXPECT_EQ(SeriesValue(text, "mkserve_background_responses_running"), 2);
  EXPECT_NE(text.find("# TYPE mkserve_response_store_bytes gauge"), std::string::npos);
}

TEST(ServerMetricsTest, EveryLineIsCommentOrSample) {
  EngineSnapshot engine;
  engine.inter_token_latency_s.Observe(0.003);
  std::istringstream lines(RenderMetrics(engine, {{200, 1}}) + RenderResponseStore(1, 2, 3, 4));
  std::string line;
  int samples = 0;
  while (std::getline(lines, line)) {
    ASSERT_FALSE(line.empty());
    if (line[0] == '#') continue;
    size_t space = line.rfind(' ');
    ASSERT_NE(space, std::string::npos) << line;
    EXPECT_NO_THROW(std::stod(line.substr(space + 1))) << line;
    ++samples;
  }
  EXPECT_GT(samples, 20);
}

}  // namespace
}  // namespace mkserve::server
