// The client side of `mkserve bench-serve`: N concurrent streaming chat requests against a
// running OpenAI-compatible server, timing every token as it arrives.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "server/base_url.h"
#include "server/json.h"

namespace mkserve::server {

struct LoadOptions {
  BaseUrl url{"http://127.0.0.1:8000", "/v1"};
  int concurrency = 8;
  int num_requests = 64;
  int max_tokens = 128;
  bool ignore_eos = false;  // generate max_tokens every time (random weights end early at random)
  std::string api_key;
  std::string model;                  // empty: the server's
  std::vector<std::string> prompts;   // request i sends prompts[i % size]; not empty
  std::string response_format;        // a response_format type, e.g. json_object; empty: none
  std::optional<double> temperature;  // sent when set; the server's default (1.0) otherwise
};

struct LoadReport {
  int num_succeeded = 0;
  int num_failed = 0;
  std::vector<std::string> errors;  // the first few distinct failure messages
  double duration_s = 0.0;
  int64_t output_tokens = 0;         // from each stream's usage chunk (or its deltas without one)
  std::vector<double> ttft_s;        // per request
  std::vector<double> itl_s;         // between consecutive streamed deltas
  std::vector<double> decode_tok_s;  // per request: tokens after the first / time after the first
};

// Request failures are counted and reported, not thrown.
LoadReport RunLoad(const LoadOptions& options);

// The p-th percentile (0..100) by nearest rank; 0 for no samples.
double Percentile(std::vector<double> samples, double p);

std::string FormatReport(const LoadReport& report);
Json ReportJson(const LoadReport& report);

}  // namespace mkserve::server
