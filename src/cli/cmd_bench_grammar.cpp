// `mkserve bench-grammar [--tokenizer PATH | --vocab N] [--schema FILE] [--tokens N] [--seed S]`:
// the CPU cost of constrained decoding per generated token: the allowed-token mask (FillMask)
// and the advance (Accept), along random walks through the grammar that sample uniformly among
// the allowed tokens. Without --tokenizer the vocabulary is synthetic, N entries shaped like a
// byte-level BPE vocabulary (words with and without a leading space, code punctuation, digits,
// whitespace runs, multi-byte UTF-8 cut anywhere). The grammar is response_format json_object,
// or the JSON schema in --schema. The caches of the shared JSON rules are built first, as the
// server does at start-up; the first mask (the schema's own positions still cold) is reported
// apart. Last, one request's masks along one walk, its grammar compiled anew against kept from
// an earlier request with the same constraint (GrammarCache, as the server does).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "cli/command.h"
#include "common/args.h"
#include "common/error.h"
#include "common/regular_file.h"
#include "grammar/grammar_cache.h"
#include "grammar/grammar_matcher.h"
#include "grammar/json_schema.h"
#include "server/grammar_vocabulary.h"
#include "server/load_generator.h"
#include "server/output_grammar.h"
#include "tokenizer/tokenizer.h"

namespace mkserve::cli {
namespace {

using Clock = std::chrono::steady_clock;

double MillisecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

std::shared_ptr<const grammar::TokenVocabulary> SyntheticVocabulary(int64_t size, uint32_t seed) {
  std::mt19937 random(seed);
  std::set<std::string> seen;
  std::vector<std::string> tokens;
  auto add = [&](std::string text) {
    if (static_cast<int64_t>(tokens.size()) < size && seen.insert(text).second) {
      tokens.push_back(std::move(text));
    }
  };
  for (int b = 0; b < 256; ++b) add(std::string(1, static_cast<char>(b)));
  const std::string letters = "etaoinshrdlcumwfgypbvkjxqzETAOINSHRDLCUMWFGYPBVKJXQZ";
  const std::string punctuation = "{}[]()<>\"':;,.=+-*/\\_!?#&|%$@^~`";
  const std::vector<std::string> wide = {"\xc3\xa9",     "\xc3\xbc",         "\xe4\xb8\xad",
                                         "\xe6\x96\x87", "\xf0\x9f\x98\x80", "\xd0\xb4",
                                         "\xce\xbb"};
  while (static_cast<int64_t>(tokens.size()) < size) {
    const int kind = static_cast<int>(random() % 100);
    std::string text;
    if (kind < 60) {  // a word piece, often with its leading space
      if (random() % 2) text += ' ';
      const int length = 1 + static_cast<int>(random() % 9);
      for (int i = 0; i < length; ++i) text += letters[random() % (i == 0 ? letters.size() : 26)];
    } else if (kind < 75) {  // code punctuation, possibly glued to a word
      const int length = 1 + static_cast<int>(random() % 4);
      for (int i = 0; i < length; ++i) text += punctuation[random() % punctuation.size()];
      if (random() % 2) text += letters[random() % 26];
    } else if (kind < 82) {  // numbers
      const int length = 1 + static_cast<int>(random() % 4);
      for (int i = 0; i < length; ++i) text += static_cast<char>('0' + random() % 10);
    } else if (kind < 88) {  // indentation
      if (random() % 2) text += '\n';
      text += std::string(1 + random() % 16, random() % 4 ? ' ' : '\t');
    } else {  // multi-byte characters, sometimes cut in the middle
      const int length = 1 + static_cast<int>(random() % 3);
      for (int i = 0; i < length; ++i) text += wide[random() % wide.size()];
      if (random() % 3 == 0) text.pop_back();
    }
    add(std::move(text));
  }
  return std::make_shared<grammar::TokenVocabulary>(tokens, std::vector<bool>(tokens.size()));
}

std::string ReadFile(const std::string& path) {
  RequireRegularFile(path);  // a folder read as an empty stream
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read --schema " + path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

grammar::Json ParseSchema(const std::string& text, const std::string& path) {
  grammar::Json schema = grammar::Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) throw Error("--schema " + path + ": not valid JSON");
  return schema;
}

constexpr char kUsage[] =
    "usage: mkserve bench-grammar [--tokenizer PATH | --vocab N] [--schema FILE] [--tokens N]\n"
    "                             [--seed S]\n"
    "\n"
    "The CPU cost of constrained decoding per generated token: the allowed-token mask and the\n"
    "advance, along random walks through the grammar.\n"
    "  --tokenizer PATH  a real vocabulary (tokenizer.json or a checkpoint folder)\n"
    "  --vocab N         else a synthetic byte-level vocabulary of N entries, 256..2^24\n"
    "                    (default 262144)\n"
    "  --schema FILE     a JSON schema (default: response_format json_object)\n"
    "  --tokens N        tokens to generate (default 2000)\n"
    "  --seed S          the walks' seed (default 1)\n";

int RunBenchGrammar(std::span<const std::string> argv) {
  Args args(argv);
  const std::string tokenizer_path = args.String("tokenizer", "");
  // As large as a tokenizer may be (2^24 ids); a synthetic entry takes about 40 bytes.
  const int64_t vocab = args.Int("vocab", 262144, 256, int64_t{1} << 24);
  const std::string schema_path = args.String("schema", "");
  const int64_t num_tokens = args.Int("tokens", 2000);
  const auto seed = static_cast<uint32_t>(args.Int("seed", 1));
  args.Finish();
  if (num_tokens < 1) throw Error("--tokens must be at least 1");

  Clock::time_point start = Clock::now();
  std::shared_ptr<const grammar::TokenVocabulary> vocabulary;
  if (tokenizer_path.empty()) {
    vocabulary = SyntheticVocabulary(vocab, seed);
  } else {
    vocabulary = server::BuildGrammarVocabulary(tokenizer::Tokenizer::Load(tokenizer_path));
  }
  std::printf("vocabulary: %d tokens (%s), built in %.0f ms\n", vocabulary->size(),
              tokenizer_path.empty() ? "synthetic" : tokenizer_path.c_str(),
              MillisecondsSince(start));
  start = Clock::now();
  server::WarmJsonPreludeCaches(*vocabulary);
  std::printf("JSON rule caches (once per server start): %.0f ms\n", MillisecondsSince(start));

  const std::string schema_text = schema_path.empty() ? "" : ReadFile(schema_path);
  auto compile = [&] {
    grammar::JsonGrammarBuilder builder;
    const int32_t root = schema_text.empty()
                             ? builder.rules().object
                             : builder.AddSchema(ParseSchema(schema_text, schema_path), "schema");
    return std::move(builder).Finish(root);
  };
  auto compiled = std::make_shared<grammar::CompiledGrammar>(compile(), vocabulary);

  const std::vector<int32_t> no_end_tokens;
  std::vector<uint32_t> mask(grammar::MaskWords(vocabulary->size()));
  std::vector<int32_t> allowed;
  // One walk of up to `steps` tokens through `grammar`, each sampled uniformly among the allowed
  // ones; `timed(mask_ms, accept_ms)` hears of each step. Ends early when the text is complete.
  auto walk = [&](const std::shared_ptr<const grammar::CompiledGrammar>& grammar,
                  std::mt19937& random, int steps, auto timed) {
    grammar::GrammarMatcher matcher(grammar);
    for (int step = 0; step < steps; ++step) {
      Clock::time_point begin = Clock::now();
      matcher.FillMask(no_end_tokens, mask);
      const double mask_ms = MillisecondsSince(begin);
      allowed.clear();
      for (int32_t id = 0; id < vocabulary->size(); ++id) {
        if (grammar::MaskAllows(mask, id)) allowed.push_back(id);
      }
      if (allowed.empty()) return;  // complete
      begin = Clock::now();
      if (!matcher.Accept(allowed[random() % allowed.size()])) {
        throw Error("internal: the mask allowed a token Accept refused");
      }
      timed(mask_ms, MillisecondsSince(begin));
    }
  };

  std::vector<double> mask_ms, accept_ms;
  std::mt19937 random(seed);
  double cold_ms = -1.0;
  int64_t walks = 0;
  while (static_cast<int64_t>(mask_ms.size()) < num_tokens) {
    ++walks;
    const int steps = static_cast<int>(
        std::min<int64_t>(256, num_tokens - static_cast<int64_t>(mask_ms.size()) + 1));
    walk(compiled, random, steps, [&](double mask_step, double accept_step) {
      if (cold_ms < 0) {
        cold_ms = mask_step;  // the first mask: the schema's own positions cold
      } else {
        mask_ms.push_back(mask_step);
      }
      accept_ms.push_back(accept_step);
    });
  }
  double total = 0.0;
  for (double ms : mask_ms) total += ms;
  std::printf("first mask (the schema's own positions cold): %.1f ms\n", cold_ms);
  std::printf(
      "mask per token over %zu tokens in %lld walks: mean %.3f ms, p50 %.3f ms, p99 %.3f "
      "ms, max %.3f ms\n",
      mask_ms.size(), static_cast<long long>(walks), total / mask_ms.size(),
      server::Percentile(mask_ms, 50), server::Percentile(mask_ms, 99),
      server::Percentile(mask_ms, 100));
  std::printf("accept per token: p50 %.4f ms, p99 %.4f ms\n", server::Percentile(accept_ms, 50),
              server::Percentile(accept_ms, 99));

  // One request's masks along a fixed walk: its grammar compiled anew (every position of its own
  // cold, as before GrammarCache) against kept from an earlier request with the same constraint.
  auto request_ms = [&](const std::shared_ptr<const grammar::CompiledGrammar>& grammar) {
    std::mt19937 request_random(seed + 1);
    double sum = 0.0;
    walk(grammar, request_random, 256, [&](double mask_step, double) { sum += mask_step; });
    return sum;
  };
  grammar::GrammarCache cache(vocabulary, server::kCachedGrammars, server::kCachedGrammarPositions);
  const double anew =
      request_ms(std::make_shared<const grammar::CompiledGrammar>(compile(), vocabulary));
  request_ms(cache.Get(compile()));  // an earlier request
  const double kept = request_ms(cache.Get(compile()));
  std::printf(
      "one request's masks along a walk of up to 256 tokens: %.1f ms with its grammar compiled "
      "anew, %.1f ms with it kept from an earlier request\n",
      anew, kept);
  return 0;
}

const CommandRegistration kRegistration(
    {"bench-grammar", "CPU cost of constrained decoding per token (mask + advance)", kUsage,
     RunBenchGrammar});

}  // namespace
}  // namespace mkserve::cli
