// `mkserve bench-serve`: load-tests a running `mkserve serve` (or any OpenAI-compatible server)
// with concurrent streaming chat requests; prints output tok/s, per-request decode tok/s, TTFT
// and ITL percentiles and the first failures, as text or JSON.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <optional>

#include "cli/command.h"
#include "cli/report_path_flag.h"
#include "common/args.h"
#include "common/error.h"
#include "common/utf8.h"
#include "server/load_generator.h"
#include "server/prompt_set.h"

namespace mkserve::cli {
namespace {

constexpr int64_t kMaxConcurrency = 4096;
constexpr const char* kDefaultPrompt = "Write a short story about a robot learning to paint.";

constexpr char kUsage[] =
    "usage: mkserve bench-serve [--url URL] [--concurrency N] [--requests N] [--max-tokens N]\n"
    "                           [--prompt TEXT | --prompts FILE] [--temperature T] [--ignore-eos]\n"
    "                           [--response-format TYPE] [--model NAME] [--api-key KEY]\n"
    "                           [--json FILE]\n"
    "\n"
    "Load-tests a running OpenAI-compatible server with concurrent streaming chat requests;\n"
    "prints output tok/s, per-request decode tok/s, TTFT and ITL percentiles and the first\n"
    "failures (a stream the server aborts counts as failed).\n"
    "  --url URL              the server's base URL (default http://127.0.0.1:8000/v1)\n"
    "  --concurrency N        requests in flight, 1..4096 (default 8)\n"
    "  --requests N           requests in all (default 64)\n"
    "  --max-tokens N         max_tokens of each request (default 128)\n"
    "  --prompt TEXT          the user message (default: a short-story prompt)\n"
    "  --prompts FILE         prompts sent in turn: JSON Lines of {\"prompt\": \"...\"}\n"
    "  --temperature T        sent with each request (default: the server's)\n"
    "  --ignore-eos           generate max_tokens every time\n"
    "  --response-format TYPE a response_format type, e.g. json_object\n"
    "  --model NAME           the model to ask for (default: the server's)\n"
    "  --api-key KEY          sent as Authorization: Bearer KEY\n"
    "  --json FILE            also write the report as JSON\n";

int RunBenchServe(std::span<const std::string> argv) {
  Args args(argv);
  server::LoadOptions options;
  options.url = server::ParseBaseUrl(args.String("url", "http://127.0.0.1:8000/v1"));
  // One client thread each, so concurrency is bounded (50,000 threads aborted the process).
  options.concurrency =
      static_cast<int>(args.Int("concurrency", options.concurrency, 1, kMaxConcurrency));
  options.num_requests = static_cast<int>(args.Int("requests", options.num_requests, 1, INT32_MAX));
  options.max_tokens = static_cast<int>(args.Int("max-tokens", options.max_tokens, 1, INT32_MAX));
  options.ignore_eos = args.Switch("ignore-eos");
  options.api_key = args.String("api-key", "");
  options.model = args.String("model", "");
  const std::string prompt = args.String("prompt", "");
  const std::string prompts_file = args.String("prompts", "");
  const std::string json_path = args.String("json", "");
  // Constrained decoding's cost: e.g. json_object against the same run without it.
  options.response_format = args.String("response-format", "");
  // Greedy (0) against sampled steps: what the sampler costs at a batch.
  std::optional<double> temperature;
  if (args.Value("temperature")) temperature = args.Double("temperature", 0.0);
  args.Finish();
  if (json_path != "-") CheckReportPath("--json", json_path);
  if (temperature) {
    if (!(*temperature >= 0.0) || !std::isfinite(*temperature)) {
      throw Error("--temperature must be a finite number of at least 0");
    }
    options.temperature = *temperature;
  }
  // Text flags go into JSON request bodies, which must be UTF-8 (they aborted the run before).
  for (const auto& [flag, value] : {std::pair<const char*, const std::string&>{"prompt", prompt},
                                    {"model", options.model},
                                    {"response-format", options.response_format},
                                    {"api-key", options.api_key}}) {
    if (!IsValidUtf8(value)) throw Error(std::string("--") + flag + " is not valid UTF-8");
  }
  if (!prompt.empty() && !prompts_file.empty()) throw Error("give --prompt or --prompts, not both");
  options.prompts = !prompts_file.empty() ? server::LoadPromptSet(prompts_file)
                    : !prompt.empty()     ? std::vector<std::string>{prompt}
                                          : std::vector<std::string>{kDefaultPrompt};
  std::fprintf(stderr,
               "bench-serve: %d requests, %d at a time, max_tokens %d%s, %zu prompt(s), against "
               "%s%s\n",
               options.num_requests, options.concurrency, options.max_tokens,
               options.ignore_eos ? " (ignore_eos)" : "", options.prompts.size(),
               options.url.origin.c_str(), options.url.api_path.c_str());
  server::LoadReport report = server::RunLoad(options);
  if (json_path == "-") {
    std::printf("%s\n", server::ReportJson(report).dump(2).c_str());
  } else {
    std::printf("%s", server::FormatReport(report).c_str());
    if (!json_path.empty()) {
      std::ofstream out(json_path);
      if (!(out << server::ReportJson(report).dump(2) << "\n")) {
        throw Error("cannot write the JSON report to " + json_path);
      }
    }
  }
  return report.num_failed == 0 ? 0 : 1;
}

CommandRegistration registration({"bench-serve", "load generator for a running server", kUsage,
                                  RunBenchServe});

}  // namespace
}  // namespace mkserve::cli
