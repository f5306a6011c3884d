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

double Seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

struct RequestTiming {
  bool ok = false;
  std::string error;
  double ttft_s = -1;
  std::vector<double> itl_s;
  int64_t output_tokens = 0;
};

// Reads complete SSE events out of `buffer` and updates `timing` for each.
void ConsumeEvents(std::string& buffer, Clock::time_point start, Clock::time_point& last,
                   RequestTiming& timing) {
  size_t end;
  while ((end = buffer.find("\n\n")) != std::string::npos) {
    std::string event = buffer.substr(0, end);
    buffer.erase(0, end + 2);
    if (event.rfind("data: ", 0) != 0 || event == "data: [DONE]") continue;
    Json chunk = Json::parse(event.substr(6), nullptr, false);
    if (chunk.is_discarded()) continue;
    if (chunk.contains("usage") && chunk["usage"].is_object()) {
      timing.output_tokens = chunk["usage"].value("completion_tokens", int64_t{0});
    }
    if (!chunk.contains("choices") || chunk["choices"].empty()) continue;
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
    last = now;
  }
}

RequestTiming RunOne(httplib::Client& client, const LoadOptions& options) {
  Json body = {{"messages", {{{"role", "user"}, {"content", options.prompt}}}},
               {"max_tokens", options.max_tokens},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  if (!options.model.empty()) body["model"] = options.model;
  if (!options.response_format.empty()) {
    body["response_format"] = {{"type", options.response_format}};
  }
  RequestTiming timing;
  std::string buffer;
  Clock::time_point start = Clock::now(), last = start;
  httplib::Request request;
  request.method = "POST";
  request.path = "/v1/chat/completions";
  request.body = body.dump();
  request.set_header("Content-Type", "application/json");
  if (!options.api_key.empty()) request.set_header("Authorization", "Bearer " + options.api_key);
  request.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    buffer.append(data, size);
    ConsumeEvents(buffer, start, last, timing);
    return true;
  };
  httplib::Response response;
  httplib::Error error = httplib::Error::Success;
  bool sent = client.send(request, response, error);
  timing.ok = sent && response.status == 200 && timing.ttft_s >= 0;
  if (!timing.ok) {
    timing.error = sent ? "HTTP " + std::to_string(response.status) + " " + buffer
                        : "connection failed: " + httplib::to_string(error);
  }
  return timing;
}

}  // namespace

LoadReport RunLoad(const LoadOptions& options) {
  if (options.url.rfind("http://", 0) != 0) {
    throw Error("--url must look like http://HOST:PORT, got '" + options.url + "'");
  }
  LoadReport report;
  std::mutex mutex;
  std::atomic<int> next{0};
  Clock::time_point start = Clock::now();
  std::vector<std::thread> workers;
  for (int w = 0; w < options.concurrency; ++w) {
    workers.emplace_back([&] {
      httplib::Client client(options.url);
      client.set_read_timeout(600, 0);
      while (next.fetch_add(1) < options.num_requests) {
        RequestTiming timing = RunOne(client, options);
        std::lock_guard lock(mutex);
        if (!timing.ok) {
          ++report.num_failed;
          if (report.first_error.empty()) report.first_error = timing.error;
          continue;
        }
        ++report.num_succeeded;
        report.output_tokens += timing.output_tokens;
        report.ttft_s.push_back(timing.ttft_s);
        report.itl_s.insert(report.itl_s.end(), timing.itl_s.begin(), timing.itl_s.end());
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

std::string FormatReport(const LoadReport& report) {
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(2);
  out << "requests      " << report.num_succeeded << " ok, " << report.num_failed << " failed\n"
      << "duration      " << report.duration_s << " s\n"
      << "output tokens " << report.output_tokens << "\n"
      << "output tok/s  " << (report.duration_s > 0 ? report.output_tokens / report.duration_s : 0)
      << "\n";
  auto row = [&](const char* name, const std::vector<double>& samples) {
    out << name << " p50 " << Percentile(samples, 50) * 1000 << "  p90 "
        << Percentile(samples, 90) * 1000 << "  p99 " << Percentile(samples, 99) * 1000
        << " (ms)\n";
  };
  row("TTFT         ", report.ttft_s);
  row("ITL          ", report.itl_s);
  if (!report.first_error.empty()) out << "first error   " << report.first_error << "\n";
  return out.str();
}

}  // namespace mkserve::server
