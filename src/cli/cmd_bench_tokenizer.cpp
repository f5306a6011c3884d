// `mkserve bench-tokenizer --tokenizer PATH --input FILE [--iterations N] [--lines]`:
// single-threaded encode throughput in MB/s, of the whole file as one text or (--lines) of each
// line on its own. The first pass runs on a fresh tokenizer (empty word cache); the reported figure
// is the median of the following passes, as a server sees after warm-up.
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
#include "common/regular_file.h"
#include "tokenizer/tokenizer.h"

namespace mkserve::cli {
namespace {

constexpr double kBytesPerMegabyte = 1e6;

std::string ReadInput(const std::string& path) {
  RequireRegularFile(path);  // a folder read as an empty stream
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read --input " + path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Splits after each newline, keeping it, so the pieces concatenate to `text`.
std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  for (size_t begin = 0; begin < text.size();) {
    size_t end = text.find('\n', begin);
    end = end == std::string::npos ? text.size() : end + 1;
    lines.push_back(text.substr(begin, end - begin));
    begin = end;
  }
  return lines;
}

// Seconds to encode every text once.
double TimeEncode(const tokenizer::Tokenizer& tokenizer, const std::vector<std::string>& texts,
                  size_t& num_tokens) {
  auto start = std::chrono::steady_clock::now();
  num_tokens = 0;
  for (const std::string& text : texts) num_tokens += tokenizer.Encode(text, false).size();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

constexpr char kUsage[] =
    "usage: mkserve bench-tokenizer --tokenizer PATH --input FILE [--iterations N] [--lines]\n"
    "\n"
    "Single-threaded encode throughput in MB/s: the median of --iterations passes (default\n"
    "10) after a first one on a fresh tokenizer, over the whole file as one text or, with\n"
    "--lines, each line on its own.\n";

int RunBenchTokenizer(std::span<const std::string> argv) {
  Args args(argv);
  std::string path = args.RequiredString("tokenizer");
  std::string input = ReadInput(args.RequiredString("input"));
  int64_t iterations = args.Int("iterations", 10);
  bool lines = args.Switch("lines");
  args.Finish();
  std::vector<std::string> texts = lines ? SplitLines(input) : std::vector<std::string>{input};
  if (iterations < 1) throw Error("--iterations must be at least 1");
  auto load_start = std::chrono::steady_clock::now();
  tokenizer::Tokenizer tokenizer = tokenizer::Tokenizer::Load(path);
  double load_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
  size_t num_tokens = 0;
  double cold_s = TimeEncode(tokenizer, texts, num_tokens);
  std::vector<double> warm_s;
  for (int64_t i = 0; i < iterations; ++i)
    warm_s.push_back(TimeEncode(tokenizer, texts, num_tokens));
  std::sort(warm_s.begin(), warm_s.end());
  double median_s = warm_s[warm_s.size() / 2];
  double megabytes = static_cast<double>(input.size()) / kBytesPerMegabyte;
  std::printf("input: %zu bytes in %zu texts, %zu tokens; load %.2f s\n", input.size(),
              texts.size(), num_tokens, load_s);
  std::printf("encode cold (empty cache): %.2f MB/s\n", megabytes / cold_s);
  std::printf("encode warm (median of %lld): %.2f MB/s\n", static_cast<long long>(iterations),
              megabytes / median_s);
  return 0;
}

const CommandRegistration kRegistration({"bench-tokenizer", "encode throughput (MB/s, 1 thread)",
                                         kUsage, RunBenchTokenizer});

}  // namespace
}  // namespace mkserve::cli
