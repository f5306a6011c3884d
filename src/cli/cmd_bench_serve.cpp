// `mkserve bench-serve`: load-tests a running `mkserve serve` (or any OpenAI-compatible server)
// with concurrent streaming chat requests; prints output tok/s and TTFT / ITL percentiles.
#include <cstdio>

#include "cli/command.h"
#include "common/args.h"
#include "common/error.h"
#include "server/load_generator.h"

namespace mkserve::cli {
namespace {

int RunBenchServe(std::span<const std::string> argv) {
  Args args(argv);
  server::LoadOptions options;
  options.url = args.String("url", options.url);
  options.concurrency = static_cast<int>(args.Int("concurrency", options.concurrency));
  options.num_requests = static_cast<int>(args.Int("requests", options.num_requests));
  options.max_tokens = static_cast<int>(args.Int("max-tokens", options.max_tokens));
  options.api_key = args.String("api-key", "");
  options.model = args.String("model", "");
  options.prompt = args.String("prompt", options.prompt);
  // Constrained decoding's cost: e.g. json_object against the same run without it.
  options.response_format = args.String("response-format", "");
  args.Finish();
  if (options.concurrency < 1) throw Error("--concurrency must be at least 1");
  if (options.num_requests < 1) throw Error("--requests must be at least 1");
  if (options.max_tokens < 1) throw Error("--max-tokens must be at least 1");
  std::fprintf(stderr, "bench-serve: %d requests, %d at a time, max_tokens %d, against %s\n",
               options.num_requests, options.concurrency, options.max_tokens, options.url.c_str());
  server::LoadReport report = server::RunLoad(options);
  std::printf("%s", server::FormatReport(report).c_str());
  return report.num_failed == 0 ? 0 : 1;
}

CommandRegistration registration({"bench-serve", "load generator for a running server",
                                  RunBenchServe});

}  // namespace
}  // namespace mkserve::cli
