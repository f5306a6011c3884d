#include "server/load_generator.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <sstream>
#include <thread>

#include "common/error.h"
#include "server/json.h"

namespace mkserve::server {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxReportedErrors = 3;
constexpr size_t kMaxErrorChars = 400;

double Seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

struct RequestTiming {
  bool ok = false;
  std::string error;
  double ttft_s = -1;
  double last_token_s = -1;  // since the request was sent
  std::vector<double> itl_s;
  int64_t output_tokens = 0;  // the usage chunk's count
  int64_t num_deltas = 0;     // deltas with output: the count when there is no usage chunk
  bool done = false;          // the stream ended with [DONE]
};

// The stream ends with an error event when the server failed after the headers went out.
std::string StreamError(const Json& chunk) {
  if (!chunk.contains("error")) return {};
  const Json& error = chunk["error"];
  if (error.is_object() && error.contains("message") && error["message"].is_string()) {
    return error["message"].get<std::string>();
  }
  return error.dump();
}

// Reads complete SSE events out of `buffer` and updates `timing` for each.
void ConsumeEvents(std::string& buffer, Clock::time_point start, Clock::time_point& last,
                   RequestTiming& timing) {
  size_t end;
  while ((end = buffer.find("\n\n")) != std::string::npos) {
    std::string event = buffer.substr(0, end);
    buffer.erase(0, end + 2);
    if (event == "data: [DONE]") timing.done = true;
    if (event.rfind("data: ", 0) != 0 || timing.done) continue;
    Json chunk = Json::parse(event.substr(6), nullptr, false);
    if (chunk.is_discarded()) continue;
    if (std::string error = StreamError(chunk); !error.empty()) {
      timing.error = "error event in the stream: " + error;
      continue;
    }
    if (chunk.contains("usage") && chunk["usage"].is_object()) {
      timing.output_tokens = chunk["usage"].value("completion_tokens", int64_t{0});
    }
    if (!chunk.contains("choices") || chunk["choices"].empty()) continue;
    // A stream the server cut short (a drain's end) still ends with [DONE]: not a success.
    const Json& finish = chunk["choices"][0]["finish_reason"];
    if (finish.is_string() && finish.get<std::string>() == "abort") {
      timing.error = "the server aborted the request (finish_reason \"abort\")";
    }
    const Json& delta = chunk["choices"][0]["delta"];
    bool has_text = (delta.contains("content") && delta["content"].is_string() &&
                     !delta["content"].get<std::string>().empty()) ||
                    delta.contains("reasoning_content") || delta.contains("tool_calls");
    if (!has_text) continue;
    Clock::time_point now = Clock::now();
    if (timing.ttft_s < 0) {
      timing.ttft_s = Seconds(start, now);
    } else {
      timing.itl_s.push_back(Seconds(last, now));
    }
    timing.last_token_s = Seconds(start, now);
    ++timing.num_deltas;
    last = now;
  }
}

RequestTiming RunOne(httplib::Client& client, const LoadOptions& options,
                     const std::string& prompt) {
  Json body = {{"messages", {{{"role", "user"}, {"content", prompt}}}},
               {"max_tokens", options.max_tokens},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  if (!options.model.empty()) body["model"] = options.model;
  if (options.ignore_eos) body["ignore_eos"] = true;
  if (options.temperature) body["temperature"] = *options.temperature;
  if (!options.response_format.empty()) {
    body["response_format"] = {{"type", options.response_format}};
  }
  RequestTiming timing;
  std::string buffer;
  Clock::time_point start = Clock::now(), last = start;
  httplib::Request request;
  request.method = "POST";
  request.path = options.url.api_path + "/chat/completions";
  request.body = body.dump();
  request.set_header("Content-Type", "application/json");
  if (!options.api_key.empty()) request.set_header("Authorization", "Bearer " + options.api_key);
  size_t received_bytes = 0;
  request.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    received_bytes += size;
    buffer.append(data, size);
    ConsumeEvents(buffer, start, last, timing);
    return true;
  };
  httplib::Response response;
  httplib::Error error = httplib::Error::Success;
  bool sent = client.send(request, response, error);
  if (timing.output_tokens == 0) timing.output_tokens = timing.num_deltas;
  // A finished stream may hold no visible text (random weights: tokens the output parser keeps).
  timing.ok = sent && response.status == 200 && timing.done && timing.error.empty();
  if (!sent) {
    timing.error = "connection failed: " + httplib::to_string(error);
  } else if (response.status != 200) {
    timing.error = "HTTP " + std::to_string(response.status) + ": " + buffer;
  } else if (!timing.ok && timing.error.empty()) {
    timing.error = "HTTP 200, but the stream broke off after " + std::to_string(received_bytes) +
                   " bytes, before [DONE]" + (buffer.empty() ? "" : ": " + buffer);
  }
  if (timing.error.size() > kMaxErrorChars) timing.error.resize(kMaxErrorChars);
  return timing;
}

void Record(const RequestTiming& timing, LoadReport& report) {
  if (!timing.ok) {
    ++report.num_failed;
    bool known =
        std::find(report.errors.begin(), report.errors.end(), timing.error) != report.errors.end();
    if (!known && report.errors.size() < kMaxReportedErrors) report.errors.push_back(timing.error);
    return;
  }
  ++report.num_succeeded;
  report.output_tokens += timing.output_tokens;
  if (timing.ttft_s < 0) return;  // no visible output: no latency to report
  report.ttft_s.push_back(timing.ttft_s);
  report.itl_s.insert(report.itl_s.end(), timing.itl_s.begin(), timing.itl_s.end());
  double decode_s = timing.last_token_s - timing.ttft_s;
  if (timing.output_tokens >= 2 && decode_s > 0) {
    report.decode_tok_s.push_back(static_cast<double>(timing.output_tokens - 1) / decode_s);
  }
}

}  // namespace

LoadReport RunLoad(const LoadOptions& options) {
  if (options.prompts.empty()) throw Error("bench-serve needs at least one prompt");
  LoadReport report;
  std::mutex mutex;
  std::atomic<int> next{0};
  Clock::time_point start = Clock::now();
  std::vector<std::thread> workers;
  for (int w = 0; w < options.concurrency; ++w) {
    workers.emplace_back([&] {
      httplib::Client client(options.url.origin);
      client.set_read_timeout(600, 0);
      for (int i = next.fetch_add(1); i < options.num_requests; i = next.fetch_add(1)) {
        RequestTiming timing = RunOne(client, options, options.prompts[i % options.prompts.size()]);
        std::lock_guard lock(mutex);
        Record(timing, report);
      }
    });
  }
  for (std::thread& worker : workers) worker.join();
  report.duration_s = Seconds(start, Clock::now());
  return report;
}

double Percentile(std::vector<double> samples, double p) {
  if (samples.empty()) return 0.0;
  std::sort(samples.begin(), samples.end());
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * double(samples.size())));
  return samples[std::clamp<size_t>(rank, 1, samples.size()) - 1];
}

double OutputTokensPerSecond(const LoadReport& report) {
  return report.duration_s > 0 ? static_cast<double>(report.output_tokens) / report.duration_s : 0;
}

std::string FormatReport(const LoadReport& report) {
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(2);
  out << "requests       " << report.num_succeeded << " ok, " << report.num_failed << " failed\n"
      << "duration       " << report.duration_s << " s\n"
      << "output tokens  " << report.output_tokens << "\n"
      << "output tok/s   " << OutputTokensPerSecond(report) << "\n"
      << "decode tok/s   per request: p50 " << Percentile(report.decode_tok_s, 50) << ", slowest "
      << Percentile(report.decode_tok_s, 0) << "\n";
  auto row = [&](const char* name, const std::vector<double>& samples) {
    out << name << " p50 " << Percentile(samples, 50) * 1000 << "  p90 "
        << Percentile(samples, 90) * 1000 << "  p99 " << Percentile(samples, 99) * 1000
        << " (ms)\n";
  };
  row("TTFT          ", report.ttft_s);
  row("ITL           ", report.itl_s);
  for (const std::string& error : report.errors) out << "error          " << error << "\n";
  return out.str();
}

Json ReportJson(const LoadReport& report) {
  auto milliseconds = [](const std::vector<double>& samples) {
    return Json{{"p50", Percentile(samples, 50) * 1000},
                {"p90", Percentile(samples, 90) * 1000},
                {"p99", Percentile(samples, 99) * 1000}};
  };
  return Json{{"requests_ok", report.num_succeeded},
              {"requests_failed", report.num_failed},
              {"errors", report.errors},
              {"duration_s", report.duration_s},
              {"output_tokens", report.output_tokens},
              {"output_tok_s", OutputTokensPerSecond(report)},
              {"decode_tok_s_per_request",
               {{"p50", Percentile(report.decode_tok_s, 50)},
                {"slowest", Percentile(report.decode_tok_s, 0)}}},
              {"ttft_ms", milliseconds(report.ttft_s)},
              {"itl_ms", milliseconds(report.itl_s)}};
}

}  // namespace mkserve::server
