// The client side of `mkserve bench-serve`: N concurrent streaming chat requests against a
// running server, timing every token as it arrives.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mkserve::server {

struct LoadOptions {
  std::string url = "http://127.0.0.1:8000";  // scheme, host and port; no path
  int concurrency = 8;
  int num_requests = 64;
  int max_tokens = 128;
  std::string api_key;
  std::string model;  // empty: the server's
  std::string prompt = "Write a short story about a robot learning to paint.";
  std::string response_format;  // a response_format type, e.g. json_object; empty: none
};

struct LoadReport {
  int num_succeeded = 0;
  int num_failed = 0;
  std::string first_error;
  double duration_s = 0.0;
  int64_t output_tokens = 0;   // from each stream's usage chunk
  std::vector<double> ttft_s;  // per request
  std::vector<double> itl_s;   // between consecutive streamed deltas
};

// Throws mkserve::Error for a malformed URL; request failures are counted, not thrown.
LoadReport RunLoad(const LoadOptions& options);

// The p-th percentile (0..100) by nearest rank; 0 for no samples.
double Percentile(std::vector<double> samples, double p);

std::string FormatReport(const LoadReport& report);

}  // namespace mkserve::server
