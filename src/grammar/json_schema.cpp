#include "grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <set>
#include <string_view>
#include <vector>

#include "grammar/multiple_of.h"
#include "grammar/numeric_range.h"
#include "grammar/schema_merge.h"
#include "grammar/schema_one_of.h"
#include "grammar/schema_shape.h"
#include "grammar/schema_types.h"

namespace mkserve::grammar {
namespace {

using Seq = std::vector<Element>;

const std::set<std::string>& Keywords() {
  static const std::set<std::string> kKeywords = {"type",
                                                  "properties",
                                                  "required",
                                                  "additionalProperties",
                                                  "items",
                                                  "prefixItems",
                                                  "additionalItems",
                                                  "minItems",
                                                  "uniqueItems",
                                                  "maxItems",
                                                  "enum",
                                                  "const",
                                                  "anyOf",
                                                  "allOf",
                                                  "oneOf",
                                                  "$ref",
                                                  "$defs",
                                                  "definitions",
                                                  "format",
                                                  "pattern",
                                                  "minLength",
                                                  "maxLength",
                                                  "minimum",
                                                  "maximum",
                                                  "exclusiveMinimum",
                                                  "exclusiveMaximum",
                                                  "multipleOf"};
  return kKeywords;
}

std::string Quoted(const std::string& text) { return "'" + text + "'"; }

// Keywords beside enum or const that would be silently dropped.
void RefuseSiblings(const Json& schema, const std::string& keyword, const std::string& where) {
  for (const auto& [key, value] : schema.items()) {
    if (key == keyword || IsInert(key)) continue;
    if ((keyword == "enum" || keyword == "const") && key == "type") continue;  // redundant
    throw SchemaError(where, Quoted(keyword) + " together with " + Quoted(key) +
                                 " is not supported; move " + Quoted(key) + " into the " +
                                 Quoted(keyword) + " alternatives or drop it");
  }
}

int Count(const Json& schema, const char* key, const std::string& where, int fallback,
          int most = kMaxCountedItems) {
  const auto it = schema.find(key);
  if (it == schema.end()) return fallback;
  // JSON Schema's integers include numbers like 1e3 and 8.0 (a zero fraction).
  const double value = it->is_number() ? it->get<double>() : -1.0;
  if (value < 0 || value != std::floor(value)) {
    throw SchemaError(where + "." + key, "must be a non-negative integer");
  }
  if (value > most) {
    throw SchemaError(where + "." + key,
                      "values above " + std::to_string(most) + " are not supported");
  }
  return static_cast<int>(value);
}

struct BoundKeyword {
  const char* key;
  bool lower, exclusive;
};
constexpr BoundKeyword kBoundKeywords[] = {{"minimum", true, false},
                                           {"exclusiveMinimum", true, true},
                                           {"maximum", false, false},
                                           {"exclusiveMaximum", false, true}};

// The schema's numeric bounds for `type` ("integer" or "number"). An integer's fractional bound
// becomes the nearest integer inside it, inclusive (minimum 1.5 and exclusiveMinimum 1.5 are both
// minimum 2); a number's must be an integer. A bound past kMaxRangeBound on its loose side bounds
// nothing the grammar can spell.
NumericRange Bounds(const Json& schema, const std::string& type, const std::string& where) {
  NumericRange range;
  for (const BoundKeyword& keyword : kBoundKeywords) {
    const auto it = schema.find(keyword.key);
    if (it == schema.end()) continue;
    const std::string at = where + "." + keyword.key;
    if (!it->is_number()) {
      throw SchemaError(at, it->is_boolean() ? "must be a number (draft 4's boolean form is not "
                                               "supported: give the bound itself)"
                                             : "must be a number");
    }
    bool exclusive = keyword.exclusive;
    double value = it->get<double>();
    if (!it->is_number_integer() && value != std::floor(value)) {
      if (type == "number") {
        throw SchemaError(at,
                          "a fractional bound on a number is not supported; use an integer "
                          "bound or 'type': 'integer'");
      }
      value = keyword.lower ? std::ceil(value) : std::floor(value);
      exclusive = false;
    }
    // JSON integers exactly (as a double 999999999999999999 is 10^18; nlohmann reads a
    // non-negative one as unsigned), anything else as a double, exact up to 10^18 when integral.
    const bool integer =
        it->is_number_integer() && (!it->is_number_unsigned() || it->get<uint64_t>() <= INT64_MAX);
    const bool above =
        integer ? it->get<int64_t>() > kMaxRangeBound : value > static_cast<double>(kMaxRangeBound);
    const bool below = integer ? it->get<int64_t>() < -kMaxRangeBound
                               : value < -static_cast<double>(kMaxRangeBound);
    if (keyword.lower ? below : above) continue;  // bounds nothing the grammar can spell
    if (above || below) {
      throw SchemaError(at,
                        "a bound beyond +-" + std::to_string(kMaxRangeBound) + " is not supported");
    }
    const int64_t exact = integer ? it->get<int64_t>() : static_cast<int64_t>(value);
    const NumericBound bound{exact, exclusive};
    std::optional<NumericBound>& side = keyword.lower ? range.lower : range.upper;
    // Of two bounds on one side the tighter: the larger lower (smaller upper) one, or at the same
    // value the exclusive one.
    const bool tighter = !side ||
                         (keyword.lower ? bound.value > side->value : bound.value < side->value) ||
                         (bound.value == side->value && bound.exclusive);
    if (tighter) side = bound;
  }
  return range;
}

bool HasBounds(const Json& schema) {
  for (const BoundKeyword& keyword : kBoundKeywords) {
    if (schema.contains(keyword.key)) return true;
  }
  return false;
}

// The largest multipleOf power of ten taken: 10^17 (a quotient keeps some of the 20 digits).
constexpr int kMaxMultipleOfPower = 17;

// The exponent of `value` (> 0) when it is a power of ten (0.01: -2, 1: 0, 100: 2).
std::optional<int> PowerOfTen(double value) {
  const int power = static_cast<int>(std::lround(std::log10(value)));
  if (std::fabs(value / std::pow(10.0, power) - 1.0) > 1e-9) return std::nullopt;
  return power;
}

// multipleOf as the exponent of its power of ten; nullopt without one (other steps are
// NonPowerStep's, compiled before this is asked).
std::optional<int> MultipleOfPower(const Json& schema, const std::string& where) {
  const auto it = schema.find("multipleOf");
  if (it == schema.end()) return std::nullopt;
  const std::optional<int> power = PowerOfTen(it->get<double>());
  if (power && *power > kMaxMultipleOfPower) {
    throw SchemaError(
        where + ".multipleOf",
        "values above 1e" + std::to_string(kMaxMultipleOfPower) + " are not supported");
  }
  return power;
}

// multipleOf other than a power of ten (3, 25, 0.25, 0.3) as digits and an exponent; nullopt for
// a power of ten or no multipleOf.
std::optional<DecimalStep> NonPowerStep(const Json& schema, const std::string& where) {
  const auto it = schema.find("multipleOf");
  if (it == schema.end()) return std::nullopt;
  const std::string at = where + ".multipleOf";
  if (!it->is_number() || !(it->get<double>() > 0)) {
    throw SchemaError(at, "must be a number greater than 0");
  }
  if (PowerOfTen(it->get<double>())) return std::nullopt;
  const std::optional<DecimalStep> step = ParseDecimalStep(it->dump());
  if (!step) throw SchemaError(at, "has more than 18 significant digits: " + it->dump());
  return step;
}

// The integers among the multiples of `step`: a whole step itself; for a fraction, multiples of
// digits / gcd(digits, 10^fraction digits) (0.25: every integer; 0.3: multiples of 3).
int64_t IntegerStep(const DecimalStep& step, const std::string& where) {
  if (step.exponent >= 0) {
    __int128 value = step.digits;
    for (int i = 0; i < step.exponent && value <= kMaxRangeBound; ++i) value *= 10;
    if (value > kMaxRangeBound) {
      throw SchemaError(where + ".multipleOf", "values above 10^18 - 1 are not supported");
    }
    return static_cast<int64_t>(value);
  }
  int64_t scale = 1;
  for (int i = 0; i < -step.exponent && scale % step.digits != 0; ++i) scale *= 10;
  return step.digits / std::gcd(step.digits, scale);
}

}  // namespace

bool IsAnnotation(const std::string& key) {
  // discriminator is OpenAPI's (pydantic writes it beside a oneOf): a hint to validators.
  static const std::set<std::string> kAnnotations = {
      "title",    "description", "default",  "examples",  "$schema",      "$id",
      "$comment", "deprecated",  "readOnly", "writeOnly", "discriminator"};
  return kAnnotations.count(key) != 0;
}

bool IsInert(const std::string& key) {
  return IsAnnotation(key) || key == "$defs" || key == "definitions";
}

RefTarget ResolveRef(const Json& document, const std::string& document_where,
                     const std::string& ref, const std::string& where) {
  if (ref.empty() || ref[0] != '#') {
    throw SchemaError(
        where, "only references into this schema ('#...') are supported, got " + Quoted(ref));
  }
  RefTarget target{nullptr, document_where};
  try {
    target.schema = &document.at(Json::json_pointer(ref.substr(1)));
  } catch (const Json::exception&) {
    throw SchemaError(where, "the reference " + Quoted(ref) + " points to nothing in the schema");
  }
  for (char c : ref.substr(1)) target.where += c == '/' ? '.' : c;
  return target;
}

JsonGrammarBuilder::JsonGrammarBuilder() {
  const JsonPrelude& prelude = JsonPreludeGrammar();
  grammar_ = prelude.grammar;
  rules_ = prelude.rules;
}

int32_t JsonGrammarBuilder::AddSchema(const Json& schema, const std::string& where) {
  CheckSchemaShape(schema, where);  // a document that is no JSON Schema, before what is supported
  document_ = &schema;
  document_where_ = where;
  merged_parts_left_ = kMaxMergedParts;
  int32_t rule = Compile(schema, where);
  document_ = nullptr;
  return rule;
}

Grammar JsonGrammarBuilder::Finish(int32_t root) && {
  CheckLeftRecursion();
  KeepFiniteAlternatives(root);
  grammar_.set_root(root);
  return std::move(grammar_);
}

int32_t JsonGrammarBuilder::Compile(const Json& schema, const std::string& where) {
  if (schema.is_boolean()) {
    if (schema.get<bool>()) return rules_.value;
    throw SchemaError(where, "the schema 'false' matches nothing");
  }
  if (!schema.is_object()) throw SchemaError(where, "a schema must be an object or a boolean");
  for (const auto& [key, value] : schema.items()) {
    if (!Keywords().count(key) && !IsAnnotation(key)) {
      throw SchemaError(where, Quoted(key) + " is not supported");
    }
  }
  if (schema.contains("allOf") || (schema.contains("$ref") && HasSiblings(schema, "$ref"))) {
    return CompileRewritten(
        MergeConjunction(schema, *document_, document_where_, where, merged_parts_left_), where);
  }
  // Alternatives: a oneOf's must be shown exclusive first; then it is written as an anyOf (the
  // keywords beside either go into each alternative).
  const bool one_of = schema.contains("oneOf");
  if (one_of || schema.contains("anyOf")) {
    const std::string keyword = one_of ? "oneOf" : "anyOf";
    if (one_of && schema.contains("anyOf")) {
      throw SchemaError(where,
                        "'oneOf' together with 'anyOf' is not supported; put one inside "
                        "an allOf entry of its own");
    }
    const Json& options = schema[keyword];
    if (!options.is_array() || options.empty()) {
      throw SchemaError(where + "." + keyword, "must be a non-empty array of schemas");
    }
    if (one_of) CheckAlternativesExclusive(options, *document_, where + ".oneOf");
    if (HasSiblings(schema, keyword)) {
      Json distributed = DistributeAlternatives(schema, keyword, *document_, where + "." + keyword);
      if (one_of) distributed = Json{{"anyOf", distributed["oneOf"]}};  // exclusive, shown above
      return CompileRewritten(distributed, where);
    }
    int32_t rule = grammar_.NewRule();
    rule_where_[rule] = where + "." + keyword;
    for (size_t i = 0; i < options.size(); ++i) {
      int32_t option = Compile(options[i], where + "." + keyword + "[" + std::to_string(i) + "]");
      grammar_.AddAlternative(rule, {Element::Rule(option)});
    }
    return rule;
  }
  if (schema.contains("$ref")) {
    if (!schema["$ref"].is_string()) throw SchemaError(where + ".$ref", "must be a string");
    return CompileRef(schema["$ref"].get<std::string>(), where + ".$ref");
  }
  // const and enum: their values, of those a `type` beside them allows.
  const bool is_const = schema.contains("const");
  if (is_const || schema.contains("enum")) {
    const std::string keyword = is_const ? "const" : "enum";
    RefuseSiblings(schema, keyword, where);
    if (!is_const && (!schema["enum"].is_array() || schema["enum"].empty())) {
      throw SchemaError(where + ".enum", "must be a non-empty array");
    }
    const std::vector<Json> values = *ListedValues(schema);
    if (values.empty()) {
      throw SchemaError(where + "." + keyword,
                        "no value here has a type that 'type' beside it allows");
    }
    int32_t rule = grammar_.NewRule();
    for (const Json& value : values) {
      grammar_.AddAlternative(rule, {Element::Rule(LiteralRule(value))});
    }
    return rule;
  }
  const auto type = schema.find("type");
  if (type == schema.end()) {
    if (schema.contains("properties") || schema.contains("additionalProperties")) {
      return CompileObject(schema, where);
    }
    if (schema.contains("items") || schema.contains("prefixItems")) {
      return CompileArray(schema, where);
    }
    if (schema.contains("format") || schema.contains("pattern") || schema.contains("minLength") ||
        schema.contains("maxLength")) {
      // Without a type only strings are written: those are valid whatever the schema allows else.
      return CompileString(schema, where);
    }
    if (HasBounds(schema) || schema.contains("multipleOf")) {
      throw SchemaError(where,
                        "numeric bounds and 'multipleOf' need 'type': 'number' or "
                        "'integer' beside them");
    }
    return rules_.value;  // no constraint: any JSON value
  }
  if (type->is_string()) return CompileType(type->get<std::string>(), schema, where);
  if (!type->is_array() || type->empty()) {
    throw SchemaError(where + ".type", "must be a type name or a non-empty array of them");
  }
  int32_t rule = grammar_.NewRule();
  for (size_t i = 0; i < type->size(); ++i) {
    const Json& name = (*type)[i];
    if (!name.is_string()) {
      throw SchemaError(where + ".type[" + std::to_string(i) + "]", "must be a type name");
    }
    grammar_.AddAlternative(rule,
                            {Element::Rule(CompileType(name.get<std::string>(), schema, where))});
  }
  return rule;
}

int32_t JsonGrammarBuilder::CompileType(const std::string& type, const Json& schema,
                                        const std::string& where) {
  if (type == "object") return CompileObject(schema, where);
  if (type == "array") return CompileArray(schema, where);
  if (type == "string") return CompileString(schema, where);
  if (type == "number" || type == "integer") return CompileNumeric(type, schema, where);
  if (type == "boolean") return rules_.boolean;
  if (type == "null") return rules_.null;
  throw SchemaError(where + ".type", "unknown type " + Quoted(type) +
                                         "; expected object, array, string, number, integer, "
                                         "boolean or null");
}

// A multipleOf of 1 or more makes a number an integer (written without a fraction); one below 1
// limits a number's fraction digits (0.01: two) and asks nothing of an integer.
int32_t JsonGrammarBuilder::CompileNumeric(const std::string& type, const Json& schema,
                                           const std::string& where) {
  if (const std::optional<DecimalStep> step = NonPowerStep(schema, where)) {
    if (!HasBounds(schema)) {  // the remainder of the digits, kept by the rule
      const int64_t remainders = MultipleOfRemainders(*step);
      if (remainders > kMaxMultipleOfRemainders) {
        throw SchemaError(where + ".multipleOf",
                          "without bounds, the grammar keeps the remainder of a number's "
                          "digits, at most " +
                              std::to_string(kMaxMultipleOfRemainders) + " of them (" +
                              schema.at("multipleOf").dump() + " has " +
                              std::to_string(remainders) +
                              "); a whole-number step takes a lower and an upper bound instead");
      }
      return MultipleOfRule(grammar_, *step, type == "integer" || step->exponent >= 0);
    }
    const bool integers = type == "integer" || step->exponent >= 0;  // a whole step: integers
    const NumericRange range = Bounds(schema, integers ? "integer" : type, where);
    if (!range.lower || !range.upper) {
      throw SchemaError(where + ".multipleOf",
                        "a multipleOf other than a power of ten with bounds needs a lower and an "
                        "upper bound, the multiples between them spelled out (at most " +
                            std::to_string(kMaxSpelledMultiples) + ")");
    }
    const std::optional<int32_t> rule =
        integers ? MultiplesRule(grammar_, range, IntegerStep(*step, where))
                 : MultiplesRule(grammar_, range, step->digits, -step->exponent);
    if (!rule) {
      throw SchemaError(where + ".multipleOf",
                        "more than " + std::to_string(kMaxSpelledMultiples) +
                            " multiples lie between the bounds; narrow them");
    }
    if (*rule < 0)
      throw SchemaError(where, "no multiple of its 'multipleOf' lies between its bounds");
    return *rule;
  }
  const std::optional<int> power = MultipleOfPower(schema, where);
  const bool integral = type == "integer" || (power && *power >= 0);
  if (!HasBounds(schema) && (!power || (integral && *power <= 0))) {
    return integral ? rules_.integer : rules_.number;
  }
  const NumericRange range =
      HasBounds(schema) ? Bounds(schema, integral ? "integer" : type, where) : NumericRange{};
  int32_t rule;
  if (!integral) {
    rule = NumberRangeRule(grammar_, range,
                           power ? std::min(-*power, kMaxFractionDigits) : kMaxFractionDigits);
  } else if (power && *power > 0) {
    rule = ScaledIntegerRule(grammar_, range, *power);
  } else {
    rule = IntegerRangeRule(grammar_, range);
  }
  if (rule < 0) {
    throw SchemaError(where, "no " + type + (power ? " multiple of its 'multipleOf'" : "") +
                                 " lies between its bounds");
  }
  return rule;
}

// A rewritten schema is a temporary: its rule is kept by its text, so that a rewrite that meets
// itself again (through a recursive $ref) refers back to the rule instead of expanding forever.
int32_t JsonGrammarBuilder::CompileRewritten(const Json& schema, const std::string& where) {
  const std::string key = document_where_ + "\n" + schema.dump();
  if (auto it = rewritten_rules_.find(key); it != rewritten_rules_.end()) return it->second;
  if (rewrite_depth_ == kMaxRewriteDepth) {
    throw SchemaError(where, "allOf, or $ref beside other keywords, nest more than " +
                                 std::to_string(kMaxRewriteDepth) + " deep here");
  }
  int32_t rule = grammar_.NewRule();
  rewritten_rules_[key] = rule;
  rule_where_[rule] = where;
  ++rewrite_depth_;
  int32_t body = Compile(schema, where);
  --rewrite_depth_;
  grammar_.AddAlternative(rule, {Element::Rule(body)});
  return rule;
}

int32_t JsonGrammarBuilder::CompileRef(const std::string& ref, const std::string& where) {
  const std::string key = document_where_ + ref;
  if (auto it = ref_rules_.find(key); it != ref_rules_.end()) return it->second;
  const RefTarget target = ResolveRef(*document_, document_where_, ref, where);
  // The rule exists before its body is compiled, so the body may refer back to it.
  int32_t rule = grammar_.NewRule();
  ref_rules_[key] = rule;
  rule_where_[rule] = where;
  int32_t body = Compile(*target.schema, target.where);
  grammar_.AddAlternative(rule, {Element::Rule(body)});
  return rule;
}

int32_t JsonGrammarBuilder::CompileObject(const Json& schema, const std::string& where) {
  const Element ws = Element::Rule(rules_.ws);
  static const Json kEmpty = Json::object();
  const auto properties_it = schema.find("properties");
  const Json& properties = properties_it == schema.end() ? kEmpty : *properties_it;
  if (!properties.is_object()) throw SchemaError(where + ".properties", "must be an object");
  std::set<std::string> required;
  if (const auto it = schema.find("required"); it != schema.end()) {
    if (!it->is_array()) throw SchemaError(where + ".required", "must be an array of names");
    for (const Json& name : *it) {
      if (!name.is_string()) throw SchemaError(where + ".required", "must be an array of names");
      if (!properties.contains(name.get<std::string>())) {
        throw SchemaError(where + ".required", "names " + Quoted(name.get<std::string>()) +
                                                   ", which is not in 'properties'");
      }
      required.insert(name.get<std::string>());
    }
  }
  const auto additional_it = schema.find("additionalProperties");
  const bool closed =
      additional_it != schema.end() && additional_it->is_boolean() && !additional_it->get<bool>();
  if (properties.empty()) {
    if (closed) {
      int32_t rule = grammar_.NewRule();
      Seq empty = grammar_.Literal("{");
      empty.push_back(ws);
      Append(empty, grammar_.Literal("}"));
      grammar_.AddAlternative(rule, empty);
      return rule;
    }
    if (additional_it == schema.end() || additional_it->is_boolean()) return rules_.object;
    // A map: any keys, every value of the additionalProperties schema.
    int32_t value = Compile(*additional_it, where + ".additionalProperties");
    Seq member{Element::Rule(rules_.string), ws};
    Append(member, grammar_.Literal(":"));
    member.push_back(ws);
    member.push_back(Element::Rule(value));
    Seq more = grammar_.Literal(",");
    more.push_back(ws);
    Append(more, member);
    more.insert(more.begin(), ws);
    int32_t members = Repeat(grammar_, more, 0, -1);
    int32_t rule = grammar_.NewRule();
    Seq open = grammar_.Literal("{");
    open.push_back(ws);
    Seq empty = open;
    Append(empty, grammar_.Literal("}"));
    grammar_.AddAlternative(rule, empty);
    Seq full = open;
    Append(full, member);
    full.push_back(Element::Rule(members));
    full.push_back(ws);
    Append(full, grammar_.Literal("}"));
    grammar_.AddAlternative(rule, full);
    return rule;
  }
  // Properties in the schema's order; optional ones may be skipped. first[i]: the members from
  // property i on when none was written yet; rest[i]: the same after one was (so a comma leads).
  std::vector<std::pair<std::string, const Json*>> listed;
  for (const auto& [name, subschema] : properties.items()) listed.emplace_back(name, &subschema);
  const size_t n = listed.size();
  std::vector<int32_t> first(n + 1), rest(n + 1);
  first[n] = grammar_.NewRule();
  grammar_.AddAlternative(first[n], {});
  rest[n] = first[n];
  for (size_t i = n; i-- > 0;) {
    const auto& [name, subschema] = listed[i];
    int32_t value = Compile(*subschema, where + ".properties." + name);
    Seq member = grammar_.Literal(Json(name).dump());
    member.push_back(ws);
    Append(member, grammar_.Literal(":"));
    member.push_back(ws);
    member.push_back(Element::Rule(value));
    const bool optional = !required.count(name);
    rest[i] = grammar_.NewRule();
    Seq after{ws};
    Append(after, grammar_.Literal(","));
    after.push_back(ws);
    Append(after, member);
    after.push_back(Element::Rule(rest[i + 1]));
    grammar_.AddAlternative(rest[i], after);
    if (optional) grammar_.AddAlternative(rest[i], {Element::Rule(rest[i + 1])});
    first[i] = grammar_.NewRule();
    Seq lead = member;
    lead.push_back(Element::Rule(rest[i + 1]));
    grammar_.AddAlternative(first[i], lead);
    if (optional) grammar_.AddAlternative(first[i], {Element::Rule(first[i + 1])});
  }
  int32_t rule = grammar_.NewRule();
  Seq body = grammar_.Literal("{");
  body.push_back(ws);
  body.push_back(Element::Rule(first[0]));
  body.push_back(ws);
  Append(body, grammar_.Literal("}"));
  grammar_.AddAlternative(rule, body);
  return rule;
}

// An array: a prefix of positional schemas (2020-12's prefixItems, or the earlier drafts' tuple
// 'items'), then items of one schema (2020-12's 'items', the drafts' 'additionalItems'; absent:
// any value, false: none), minItems to maxItems in all. after[i] matches what follows the first i
// items: the closing bracket once minItems are there, or a comma and item i.
int32_t JsonGrammarBuilder::CompileArray(const Json& schema, const std::string& where) {
  const Element ws = Element::Rule(rules_.ws);
  const auto items_it = schema.find("items");
  const bool tuple_items = items_it != schema.end() && items_it->is_array();
  const auto prefix_it = schema.find(tuple_items ? "items" : "prefixItems");
  const std::string prefix_where = where + (tuple_items ? ".items" : ".prefixItems");
  if (tuple_items && schema.contains("prefixItems")) {
    throw SchemaError(where,
                      "'prefixItems' together with tuple 'items' (an array of schemas) "
                      "mixes two drafts; keep 'prefixItems'");
  }
  const char* rest_key = tuple_items ? "additionalItems" : "items";
  const auto rest_it = schema.find(rest_key);
  const bool no_rest = rest_it != schema.end() && rest_it->is_boolean() && !rest_it->get<bool>();
  const size_t n = prefix_it == schema.end() ? 0 : prefix_it->size();
  if (n > static_cast<size_t>(kMaxCountedItems)) {
    throw SchemaError(prefix_where, "more than " + std::to_string(kMaxCountedItems) +
                                        " positional schemas are not supported");
  }
  std::vector<int32_t> prefix;
  for (size_t i = 0; i < n; ++i) {
    prefix.push_back(Compile((*prefix_it)[i], prefix_where + "[" + std::to_string(i) + "]"));
  }
  const int min = Count(schema, "minItems", where, 0);
  int max = schema.contains("maxItems") ? Count(schema, "maxItems", where, 0) : -1;
  if (max >= 0 && max < min) throw SchemaError(where + ".maxItems", "is less than minItems");
  if (no_rest) {
    if (min > static_cast<int>(n)) {
      throw SchemaError(where + ".minItems", "asks for more items than the " + std::to_string(n) +
                                                 " positional schemas, and '" + rest_key +
                                                 "' is false");
    }
    max = max < 0 ? static_cast<int>(n) : std::min(max, static_cast<int>(n));
  }
  const auto unique_it = schema.find("uniqueItems");
  if (unique_it != schema.end() && unique_it->is_boolean() && unique_it->get<bool>() &&
      (max < 0 || max > 1)) {
    if (n > 0 || rest_it == schema.end()) {
      throw SchemaError(where + ".uniqueItems",
                        "is supported for items of one enum or const schema (or at most one "
                        "item), not beside positional schemas or without 'items'");
    }
    return CompileDistinctItems(*rest_it, min, max, where);
  }
  const int32_t rest =
      no_rest || rest_it == schema.end() ? rules_.value : Compile(*rest_it, where + "." + rest_key);
  Seq close{ws};
  Append(close, grammar_.Literal("]"));
  Seq more{ws};
  Append(more, grammar_.Literal(","));
  more.push_back(ws);
  // Past the prefix: items of `rest`, counted.
  const int past = std::max(static_cast<int>(n), 1);
  int32_t after = -1;  // after[past]: only when an item may follow the first `past`
  if (max < 0 || max >= past) {
    after = grammar_.NewRule();
    Seq item = more;
    item.push_back(Element::Rule(rest));
    Seq tail{
        Element::Rule(Repeat(grammar_, item, std::max(min - past, 0), max < 0 ? -1 : max - past))};
    Append(tail, close);
    grammar_.AddAlternative(after, tail);
  }
  for (int i = past - 1; i >= 1; --i) {  // within the prefix: item i is prefix[i]
    int32_t rule = grammar_.NewRule();
    if (i >= min) grammar_.AddAlternative(rule, close);
    if (max < 0 || i < max) {
      Seq item = more;
      item.push_back(Element::Rule(prefix[i]));
      item.push_back(Element::Rule(after));
      grammar_.AddAlternative(rule, item);
    }
    after = rule;
  }
  int32_t rule = grammar_.NewRule();
  Seq open = grammar_.Literal("[");
  open.push_back(ws);
  if (min == 0) {
    Seq empty = open;
    Append(empty, grammar_.Literal("]"));
    grammar_.AddAlternative(rule, empty);
  }
  if (max == 0) return rule;
  Seq full = open;
  full.push_back(Element::Rule(n > 0 ? prefix[0] : rest));
  full.push_back(Element::Rule(after));
  grammar_.AddAlternative(rule, full);
  return rule;
}

// uniqueItems over items that name their values (enum or const, through plain $refs): distinct
// values written in the enum's order, min to max of them. R(i, c), after c values chosen from
// the first i: the end once c >= min, or any later value j and R(j + 1, c + 1). Alternatives
// into rules that can no longer reach min are dropped by Finish (KeepFiniteAlternatives).
int32_t JsonGrammarBuilder::CompileDistinctItems(const Json& items, int min, int max,
                                                 const std::string& where) {
  const std::string at = where + ".uniqueItems";
  const Json& named = Dereferenced(items, *document_);
  if (!named.is_object() || (!named.contains("enum") && !named.contains("const"))) {
    throw SchemaError(at,
                      "is supported for items of one enum or const schema (their values "
                      "written once each), or at most one item");
  }
  for (const auto& [key, value] : named.items()) {
    if (key != "enum" && key != "const" && key != "type" && !IsAnnotation(key)) {
      throw SchemaError(at, "is supported for items that are only an enum or a const, not " +
                                Quoted(key) + " beside them");
    }
  }
  std::vector<Json> values;  // each once (JSON Schema's equality)
  std::set<std::string> seen;
  for (const Json& value : ListedValues(named).value_or(std::vector<Json>{})) {
    if (seen.insert(CanonicalValue(value)).second) values.push_back(value);
  }
  const int k = static_cast<int>(values.size());
  if (min > k) {
    throw SchemaError(at, "asks for " + std::to_string(min) + " distinct items of " +
                              std::to_string(k) + " values");
  }
  const int most = max < 0 ? k : std::min(max, k);
  if (static_cast<int64_t>(k) * k * (most + 1) > kMaxDistinctItemsWork) {
    throw SchemaError(at, "over " + std::to_string(k) + " values is more than this supports");
  }
  const Element ws = Element::Rule(rules_.ws);
  std::vector<int32_t> literal;
  for (const Json& value : values) literal.push_back(LiteralRule(value));
  // rules[i][c]; built from the last i back, so each refers to rules already made.
  std::vector<std::vector<int32_t>> rules(k + 1, std::vector<int32_t>(most + 1, -1));
  for (int i = k; i >= 0; --i) {
    for (int c = std::min(i, most); c >= 0; --c) {
      int32_t rule = grammar_.NewRule();
      if (c >= min) {
        Seq close;
        if (c > 0) close.push_back(ws);
        Append(close, grammar_.Literal("]"));
        grammar_.AddAlternative(rule, close);
      }
      for (int j = i; j < k && c < most; ++j) {  // too few values left: dropped by Finish
        Seq next;
        if (c > 0) {
          next.push_back(ws);
          Append(next, grammar_.Literal(","));
          next.push_back(ws);
        }
        next.push_back(Element::Rule(literal[j]));
        next.push_back(Element::Rule(rules[j + 1][c + 1]));
        grammar_.AddAlternative(rule, next);
      }
      rules[i][c] = rule;
    }
  }
  int32_t rule = grammar_.NewRule();
  Seq open = grammar_.Literal("[");
  open.push_back(ws);
  open.push_back(Element::Rule(rules[0][0]));
  grammar_.AddAlternative(rule, open);
  return rule;
}

int32_t JsonGrammarBuilder::CompileString(const Json& schema, const std::string& where) {
  // Lengths count code points (JSON Schema's characters) in a counted loop of the prelude's
  // code_points rule, whose token caches every request shares; a length of at most one without a
  // maximum is the plain string rules.
  const int min_length = Count(schema, "minLength", where, 0, kMaxLoopRounds - 1);
  const bool has_max = schema.contains("maxLength");
  const int max_length = Count(schema, "maxLength", where, -1, kMaxLoopRounds - 1);
  const bool counted = has_max || min_length > 1;
  if (has_max && max_length < min_length) {
    throw SchemaError(where + ".maxLength", "is less than minLength");
  }
  // A format says how long its strings are (they are never empty); a pattern takes the lengths
  // into its automaton (string_pattern.h says which patterns can).
  if (schema.contains("format") && counted) {
    throw SchemaError(where, std::string(has_max ? "'maxLength'" : "'minLength'") +
                                 " together with 'format' is not supported; let the format say "
                                 "how long the string is");
  }
  const bool pattern_lengths = counted || min_length == 1;
  if (counted && !schema.contains("pattern")) {
    // No maximum: the loop's largest count, which stops counting rather than ending the loop.
    Element characters;
    try {
      characters =
          grammar_.Counted(rules_.code_points, min_length, has_max ? max_length : kMaxLoopRounds);
    } catch (const Error& e) {  // more distinct lengths than a grammar counts
      throw SchemaError(where, e.what());
    }
    Seq string = grammar_.Literal("\"");
    string.push_back(characters);
    Append(string, grammar_.Literal("\""));
    return grammar_.RuleOf({string});
  }
  if (const auto pattern = schema.find("pattern"); pattern != schema.end()) {
    if (!pattern->is_string()) throw SchemaError(where + ".pattern", "must be a string");
    if (schema.contains("format")) {
      throw SchemaError(where, "'pattern' together with 'format' is not supported");
    }
    std::optional<PatternLengths> lengths;
    if (pattern_lengths) lengths = PatternLengths{min_length, has_max ? max_length : -1};
    try {
      return StringPatternRule(grammar_, rules_, pattern->get<std::string>(),
                               wide_pattern_positions_left_, lengths);
    } catch (const PatternError& e) {
      throw SchemaError(where + ".pattern", e.what());
    }
  }
  const auto format = schema.find("format");
  if (format == schema.end()) return min_length == 1 ? rules_.nonempty_string : rules_.string;
  const std::string name = format->is_string() ? format->get<std::string>() : format->dump();
  if (name == "date-time") return rules_.date_time;
  if (name == "date") return rules_.date;
  if (name == "time") return rules_.time;
  if (name == "email") return rules_.email;
  if (name == "hostname") return rules_.hostname;
  if (name == "uuid") return rules_.uuid;
  if (name == "ipv4") return rules_.ipv4;
  if (name == "ipv6") return rules_.ipv6;
  if (name == "duration") return rules_.duration;
  throw SchemaError(where + ".format", "format " + Quoted(name) +
                                           " is not supported (supported: date-time, date, "
                                           "time, duration, email, hostname, ipv4, ipv6, "
                                           "uuid)");
}

int32_t JsonGrammarBuilder::LiteralRule(const Json& value) {
  int32_t rule = grammar_.NewRule();
  grammar_.AddAlternative(rule, grammar_.Literal(value.dump()));
  return rule;
}

// A rule whose alternative starts with a rule reference, following such first references back to
// itself, would expand forever without matching a byte.
void JsonGrammarBuilder::CheckLeftRecursion() const {
  const int32_t num_rules = grammar_.num_rules();
  std::vector<int> state(num_rules, 0);  // 0 unvisited, 1 on the path, 2 done
  std::function<void(int32_t)> visit = [&](int32_t rule) {
    state[rule] = 1;
    for (int32_t first : grammar_.alternatives(rule)) {
      const Element& element = grammar_.elements()[first];
      if (element.kind != Element::Kind::kRule) continue;
      if (state[element.value] == 1) {
        auto it = rule_where_.find(element.value);
        throw SchemaError(it != rule_where_.end() ? it->second : document_where_,
                          "the schema refers to itself without any text in between ($ref or "
                          "anyOf cycle)");
      }
      if (state[element.value] == 0) visit(element.value);
    }
    state[rule] = 2;
  };
  for (int32_t rule = 0; rule < num_rules; ++rule) {
    if (state[rule] == 0) visit(rule);
  }
}

// The rules that match some finite text, found by a fixpoint (a rule does when one of its
// alternatives holds only terminals and such rules; a counted loop with a minimum needs a round
// of them). The root must be one: a schema whose every value holds another value of it (a $ref
// cycle through a required property or a non-empty array) has none, and generation could only
// nest until the matcher's depth limit cut it off. Then every alternative that refers to a rule
// without finite text is dropped: a token mask judges a position by the rules above it only, so
// a reachable alternative that can never end (an anyOf entry that holds itself, a rule with no
// alternative left) would pass a token the matcher then refuses.
void JsonGrammarBuilder::KeepFiniteAlternatives(int32_t root) {
  const int32_t num_rules = grammar_.num_rules();
  std::vector<bool> finite(num_rules, false);
  auto alternative_finite = [&](int32_t first) {
    for (int32_t p = first; grammar_.elements()[p].kind != Element::Kind::kEnd; ++p) {
      const Element& element = grammar_.elements()[p];
      if (element.kind == Element::Kind::kRule && !finite[element.value]) return false;
      if (element.kind == Element::Kind::kCounted) {
        const CountedLoop& loop = grammar_.counted_loop(element.value);
        if (loop.min == 0) continue;
        bool round =
            false;  // a round whose bytes and rules are finite, the loop's own reference aside
        for (int32_t start : grammar_.alternatives(loop.rule)) {
          if (grammar_.elements()[start].kind == Element::Kind::kEnd) continue;
          bool all = true;
          for (int32_t q = start; all && grammar_.elements()[q].kind != Element::Kind::kEnd; ++q) {
            const Element& inner = grammar_.elements()[q];
            all = inner.kind != Element::Kind::kRule || inner.value == loop.rule ||
                  finite[inner.value];
          }
          round = round || all;
        }
        if (!round) return false;
      }
    }
    return true;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (int32_t rule = 0; rule < num_rules; ++rule) {
      if (finite[rule]) continue;
      for (int32_t first : grammar_.alternatives(rule)) {
        if (alternative_finite(first)) {
          finite[rule] = changed = true;
          break;
        }
      }
    }
  }
  if (!finite[root]) {
    auto it = rule_where_.find(root);
    throw SchemaError(it != rule_where_.end() ? it->second : document_where_,
                      "the schema has no finite value: every value of it must hold another "
                      "(a $ref cycle through a required property or a non-empty array)");
  }
  for (int32_t rule = 0; rule < num_rules; ++rule) {
    std::vector<int32_t> kept;
    for (int32_t first : grammar_.alternatives(rule)) {
      if (alternative_finite(first)) kept.push_back(first);
    }
    if (kept.size() != grammar_.alternatives(rule).size()) {
      grammar_.KeepAlternatives(rule, std::move(kept));
    }
  }
}

}  // namespace mkserve::grammar
