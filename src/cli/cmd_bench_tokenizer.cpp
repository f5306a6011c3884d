// `mkserve bench-tokenizer --tokenizer PATH --input FILE [--iterations N]`: single-threaded encode
// throughput in MB/s. The first pass runs on a fresh tokenizer (empty word cache); the reported
// figure is the median of the following passes, as a server sees after warm-up.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "cli/command.h"
#include "common/args.h"
#include "common/error.h"
#include "tokenizer/tokenizer.h"

namespace mkserve::cli {
namespace {

constexpr double kBytesPerMegabyte = 1e6;

std::string ReadInput(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read --input " + path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Seconds to encode `text` once.
double TimeEncode(const tokenizer::Tokenizer& tokenizer, const std::string& text,
                  size_t& num_tokens) {
  auto start = std::chrono::steady_clock::now();
  num_tokens = tokenizer.Encode(text, false).size();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int RunBenchTokenizer(std::span<const std::string> argv) {
  Args args(argv);
  std::string path = args.RequiredString("tokenizer");
  std::string input = ReadInput(args.RequiredString("input"));
  int64_t iterations = args.Int("iterations", 10);
  args.Finish();
  if (iterations < 1) throw Error("--iterations must be at least 1");
  auto load_start = std::chrono::steady_clock::now();
  tokenizer::Tokenizer tokenizer = tokenizer::Tokenizer::Load(path);
  double load_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
  size_t num_tokens = 0;
  double cold_s = TimeEncode(tokenizer, input, num_tokens);
  std::vector<double> warm_s;
  for (int64_t i = 0; i < iterations; ++i)
    warm_s.push_back(TimeEncode(tokenizer, input, num_tokens));
  std::sort(warm_s.begin(), warm_s.end());
  double median_s = warm_s[warm_s.size() / 2];
  double megabytes = static_cast<double>(input.size()) / kBytesPerMegabyte;
  std::printf("input: %zu bytes, %zu tokens; load %.2f s\n", input.size(), num_tokens, load_s);
  std::printf("encode cold (empty cache): %.2f MB/s\n", megabytes / cold_s);
  std::printf("encode warm (median of %lld): %.2f MB/s\n", static_cast<long long>(iterations),
              megabytes / median_s);
  return 0;
}

const CommandRegistration kRegistration({"bench-tokenizer", "encode throughput (MB/s, 1 thread)",
                                         RunBenchTokenizer});

}  // namespace
}  // namespace mkserve::cli
