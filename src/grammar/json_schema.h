// Compiles JSON Schema into grammar rules: the subset OpenAI's structured outputs accept, and
// what pydantic and zod write beside it.
//
// Supported: type (one or a list, e.g. ["string", "null"]); object with properties, required
// (other properties may be left out) and additionalProperties (a schema without properties makes
// a map; with properties, only the listed ones are generated, which every additionalProperties
// value allows); array with items, prefixItems (or the drafts' tuple items and additionalItems),
// minItems, maxItems (up to kMaxCountedItems); enum; const; anyOf; oneOf whose alternatives
// exclude each other (schema_one_of.h); allOf and $ref beside other keywords, merged
// (schema_merge.h); $ref into the document ("#", "#/$defs/x", any JSON pointer; recursion
// allowed); $defs/definitions; string formats date-time, date, time, email, uuid, pattern
// (string_pattern.h), minLength and maxLength (code points, a counted loop); number and integer,
// with minimum, maximum, exclusiveMinimum, exclusiveMaximum (numeric_range.h: a number's bounds
// must be integers) and multipleOf a power of ten (0.01: at most two fraction digits; 1, 10, ...:
// integers ending in the zeros) or a whole number between two bounds (its multiples spelled out);
// boolean, null. Annotations (title, description, default, examples, $schema, $id, $comment,
// deprecated, readOnly, writeOnly, OpenAPI's discriminator) are ignored. Any other keyword is
// refused by name.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "common/error.h"
#include "grammar/grammar.h"
#include "grammar/json_prelude.h"
#include "grammar/string_pattern.h"

namespace mkserve::grammar {

using Json = nlohmann::ordered_json;

inline constexpr int kMaxCountedItems = 256;
// uniqueItems over an enum of k values, at most m items: about k * k * m grammar elements.
inline constexpr int64_t kMaxDistinctItemsWork = 1 << 17;

// A schema the compiler refuses: `where` is the JSON path of the offending part (e.g.
// "response_format.json_schema.schema.properties.tags"), `message` says what is wrong there.
class SchemaError : public Error {
 public:
  SchemaError(std::string where, const std::string& message)
      : Error(where + ": " + message), where_(std::move(where)) {}
  const std::string& where() const { return where_; }

 private:
  std::string where_;
};

// Keywords that change no schema's meaning (title, description, examples, ...): ignored.
bool IsAnnotation(const std::string& key);
// An annotation, or $defs / definitions (reached only through a $ref): nothing a schema asserts.
bool IsInert(const std::string& key);

// The schema a local `$ref` ("#", "#/$defs/x", any JSON pointer) names in `document`, and its
// path for errors (`document_where` with the pointer's parts). Throws SchemaError at `where`.
struct RefTarget {
  const Json* schema;
  std::string where;
};
RefTarget ResolveRef(const Json& document, const std::string& document_where,
                     const std::string& ref, const std::string& where);

// Builds one grammar from the JSON prelude plus any number of compiled schemas.
class JsonGrammarBuilder {
 public:
  JsonGrammarBuilder();

  Grammar& grammar() { return grammar_; }
  const JsonRules& rules() const { return rules_; }
  // The rule matching `schema`; `where` names it in errors. Throws SchemaError.
  int32_t AddSchema(const Json& schema, const std::string& where);
  // The grammar with `root` as its root. Throws SchemaError(where of the culprit) when a rule
  // can reach itself without matching anything (a $ref or anyOf cycle), or when the root matches
  // no finite text (every value holds another).
  Grammar Finish(int32_t root) &&;

 private:
  int32_t Compile(const Json& schema, const std::string& where);
  int32_t CompileRef(const std::string& ref, const std::string& where);
  int32_t CompileRewritten(const Json& schema, const std::string& where);
  int32_t CompileType(const std::string& type, const Json& schema, const std::string& where);
  int32_t CompileNumeric(const std::string& type, const Json& schema, const std::string& where);
  int32_t CompileObject(const Json& schema, const std::string& where);
  int32_t CompileArray(const Json& schema, const std::string& where);
  int32_t CompileDistinctItems(const Json& items, int min, int max, const std::string& where);
  int32_t CompileString(const Json& schema, const std::string& where);
  int32_t LiteralRule(const Json& value);
  void CheckLeftRecursion() const;
  void KeepFiniteAlternatives(int32_t root);

  Grammar grammar_;
  JsonRules rules_;
  const Json* document_ = nullptr;  // the schema being added: $ref targets live in it
  std::string document_where_;
  std::map<std::string, int32_t> ref_rules_;        // by document path + pointer
  std::map<std::string, int32_t> rewritten_rules_;  // by document path + text
  static constexpr int kMaxRewriteDepth = 64;
  int rewrite_depth_ = 0;         // rewritten schemas being compiled inside one another
  size_t merged_parts_left_ = 0;  // allOf and $ref parts the document's merges may still take
  std::map<int32_t, std::string> rule_where_;                   // for cycle errors
  int wide_pattern_positions_left_ = kMaxWidePatternPositions;  // shared by every pattern
};

}  // namespace mkserve::grammar
