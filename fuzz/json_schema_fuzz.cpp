// libFuzzer target for the JSON Schema compiler and the token mask of its grammar, which a client
// reaches with response_format and tool schemas. Input: a schema's JSON text, a NUL byte, then
// bytes that steer a walk through the grammar. Checked: a schema is compiled or refused with
// mkserve::Error (never another exception, a crash or a hang); along the walk the mask equals
// trying each token, the walk never reaches a dead end, and a finished text is valid JSON whose
// values have types their schemas accept (schema_types.h, down plain properties and items).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "common/input_json.h"
#include "grammar/grammar_matcher.h"
#include "grammar/json_schema.h"
#include "grammar/schema_types.h"

namespace {

// Names the broken promise, then aborts (libFuzzer keeps the input).
[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "%s\n", what);
  std::abort();
}

using namespace mkserve::grammar;

constexpr int32_t kEnd = 0;  // the one special token: the end of the output
constexpr int kMaxSteps = 64;

// Every byte, and JSON pieces glued together as a real vocabulary has them.
std::shared_ptr<const TokenVocabulary> Vocabulary() {
  std::vector<std::string> bytes = {"<END>"};
  std::vector<bool> special = {true};
  for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
  for (const char* text :
       {"\"",    "\":",   "\": \"", "\",", "\"}", "{\"",        "[\"",         "\\u00",
        "true",  "false", "null",   "1.5", "-0",  "e+1",        "\n  ",        "\xc3\xa9",
        "abc\"", "},{",   "]}",     "[]",  "{}",  "2024-01-31", "T12:00:00Z\""}) {
    bytes.push_back(text);
  }
  special.resize(bytes.size(), false);
  return std::make_shared<TokenVocabulary>(bytes, special);
}

// Whether `value` has a type `schema` accepts, and so on down the properties and items of schemas
// that say nothing else about them (no $ref, allOf, anyOf or oneOf beside): a validator of types
// that shares nothing with the grammar.
bool TypesFit(const Json& value, const Json& schema, const Json& document) {
  if ((TypeOfValue(value) & AcceptedTypes(schema, document)) == 0) return false;
  if (!schema.is_object()) return true;
  for (const char* key : {"$ref", "allOf", "anyOf", "oneOf"}) {
    if (schema.contains(key)) return true;
  }
  if (value.is_object()) {
    const auto properties = schema.find("properties");
    if (properties == schema.end() || !properties->is_object()) return true;
    for (const auto& [name, item] : value.items()) {
      const auto subschema = properties->find(name);
      if (subschema != properties->end() && !TypesFit(item, *subschema, document)) return false;
    }
  }
  if (value.is_array() && !schema.contains("prefixItems")) {
    const auto items = schema.find("items");
    if (items == schema.end() || items->is_array()) return true;
    for (const Json& item : value) {
      if (!TypesFit(item, *items, document)) return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::shared_ptr<const TokenVocabulary> vocabulary = Vocabulary();
  const uint8_t* nul = std::find(data, data + size, 0);
  Json schema;
  try {  // bounded as a request body is (128 levels)
    schema = mkserve::ParseJsonBounded<Json>(
        std::string_view(reinterpret_cast<const char*>(data), nul - data), 128, false);
  } catch (const mkserve::JsonTooDeep&) {
    return 0;
  }
  if (schema.is_discarded()) return 0;
  std::shared_ptr<const CompiledGrammar> compiled;
  try {
    JsonGrammarBuilder builder;
    const int32_t root = builder.AddSchema(schema, "schema");
    compiled = std::make_shared<CompiledGrammar>(std::move(builder).Finish(root), vocabulary);
  } catch (const mkserve::Error&) {
    return 0;  // refused by name: the expected outcome for what it cannot enforce
  }

  GrammarMatcher matcher(compiled);
  std::vector<uint32_t> mask(MaskWords(vocabulary->size()));
  const std::vector<int32_t> end_ids = {kEnd};
  std::string text;
  const uint8_t* steer = nul == data + size ? nul : nul + 1;
  for (int step = 0; step < kMaxSteps; ++step) {
    matcher.FillMask(end_ids, mask);
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < vocabulary->size(); ++id) {
      GrammarMatcher trial = matcher;
      const bool expected = id == kEnd ? matcher.can_end() : trial.Accept(id);
      if (MaskAllows(mask, id) != expected) Fail("the mask differs from trying the token");
      if (expected) allowed.push_back(id);
    }
    if (allowed.empty()) Fail("a dead end: no token allowed, the text unfinished");
    // Steer bytes pick the tokens; when they run out the walk ends as soon as it may.
    const int32_t pick = steer < data + size ? allowed[*steer++ % allowed.size()]
                         : matcher.can_end() ? kEnd
                                             : allowed.back();
    if (pick == kEnd) {
      if (!Json::accept(text)) {
        std::fprintf(stderr, "text: %s\n", text.c_str());
        Fail("a finished text is not valid JSON");
      }
      if (!TypesFit(Json::parse(text), schema, schema)) {
        std::fprintf(stderr, "text: %s\n", text.c_str());
        Fail("a finished value has a type its schema does not accept");
      }
      return 0;
    }
    if (!matcher.Accept(pick)) Fail("an allowed token was not accepted");
    text += vocabulary->bytes(pick);
  }
  return 0;
}
