#include "grammar/schema_merge.h"

#include <algorithm>
#include <optional>
#include <unordered_set>
#include <vector>

#include "grammar/schema_types.h"

namespace mkserve::grammar {
namespace {

// allOf inside allOf, or $ref to $ref, this deep is a cycle in all likelihood (a schema that
// holds itself beside something else matches no finite text anyway).
constexpr int kMaxMergeDepth = 64;
// Parts one conjunction may flatten into: allOf of references to allOf doubles them per level.
constexpr size_t kMaxMembers = 1024;

struct Member {
  const Json* schema;
  std::string where;
};

std::string Quoted(const std::string& text) { return "'" + text + "'"; }

// Keywords a member contributes nothing through: what Flatten expands, and what only names.
bool Skipped(const std::string& key) { return IsInert(key) || key == "allOf" || key == "$ref"; }

void Flatten(const Json& schema, const std::string& where, const Json& document,
             const std::string& document_where, int depth, std::vector<Member>& members) {
  if (depth > kMaxMergeDepth) {
    throw SchemaError(where, "allOf and $ref nest more than " + std::to_string(kMaxMergeDepth) +
                                 " deep here (or a schema refers to itself beside other keywords)");
  }
  if (schema.is_boolean()) {
    if (!schema.get<bool>()) throw SchemaError(where, "the schema 'false' matches nothing");
    return;
  }
  if (!schema.is_object()) throw SchemaError(where, "a schema must be an object or a boolean");
  if (members.size() == kMaxMembers) {
    throw SchemaError(where, "more than " + std::to_string(kMaxMembers) +
                                 " schemas joined by allOf and $ref here are not supported");
  }
  members.push_back({&schema, where});
  if (const auto ref = schema.find("$ref"); ref != schema.end()) {
    if (!ref->is_string()) throw SchemaError(where + ".$ref", "must be a string");
    const RefTarget target =
        ResolveRef(document, document_where, ref->get<std::string>(), where + ".$ref");
    Flatten(*target.schema, target.where, document, document_where, depth + 1, members);
  }
  if (const auto all = schema.find("allOf"); all != schema.end()) {
    if (!all->is_array() || all->empty()) {
      throw SchemaError(where + ".allOf", "must be a non-empty array of schemas");
    }
    for (size_t i = 0; i < all->size(); ++i) {
      Flatten((*all)[i], where + ".allOf[" + std::to_string(i) + "]", document, document_where,
              depth + 1, members);
    }
  }
}

Json AllOf(const Json& a, const Json& b) { return Json{{"allOf", Json::array({a, b})}}; }

// `target` and `b` both hold, in place: a third schema for the same name joins the list (no
// deeper nesting, no copy of the list).
void JoinInto(Json& target, const Json& b) {
  if (target.is_object() && target.size() == 1 && target.contains("allOf") &&
      target["allOf"].is_array()) {
    target["allOf"].push_back(b);
  } else {
    target = AllOf(target, b);
  }
}

// A type bit set as the "type" keyword spells it (integer and fraction together: "number").
Json TypeKeyword(unsigned types) {
  Json names = Json::array();
  for (const auto& [bit, name] : {std::pair{kNullType, "null"},
                                  {kBooleanType, "boolean"},
                                  {kObjectType, "object"},
                                  {kArrayType, "array"},
                                  {kStringType, "string"}}) {
    if (types & bit) names.push_back(name);
  }
  if ((types & (kIntegerType | kFractionType)) == (kIntegerType | kFractionType)) {
    names.push_back("number");
  } else if (types & kIntegerType) {
    names.push_back("integer");
  }
  return names.size() == 1 ? names[0] : names;
}

// The values of `a` that `b` lists too (JSON Schema's equality: 1 equals 1.0).
Json CommonValues(const Json& a, const Json& b) {
  std::unordered_set<std::string> listed;
  for (const Json& value : b) listed.insert(CanonicalValue(value));
  Json common = Json::array();
  for (const Json& value : a) {
    if (listed.count(CanonicalValue(value))) common.push_back(value);
  }
  return common;
}

// Keywords whose larger (smaller) value is the tighter one, each an assertion of its own.
bool IsLowerBound(const std::string& key) {
  return key == "minimum" || key == "exclusiveMinimum" || key == "minLength" || key == "minItems" ||
         key == "minProperties";
}
bool IsUpperBound(const std::string& key) {
  return key == "maximum" || key == "exclusiveMaximum" || key == "maxLength" || key == "maxItems" ||
         key == "maxProperties";
}

bool HasPositionalItems(const Json& schema) {
  const auto items = schema.find("items");
  return schema.contains("prefixItems") || (items != schema.end() && items->is_array());
}

}  // namespace

bool HasSiblings(const Json& schema, const std::string& keyword) {
  for (const auto& [key, value] : schema.items()) {
    if (key != keyword && !IsInert(key)) return true;
  }
  return false;
}

Json MergeConjunction(const Json& schema, const Json& document, const std::string& document_where,
                      const std::string& where, size_t& parts_left) {
  std::vector<Member> members;
  Flatten(schema, where, document, document_where, 0, members);
  if (members.size() > parts_left) {
    throw SchemaError(where, "merges more than " + std::to_string(kMaxMergedParts) +
                                 " parts of allOf and $ref in one schema; not supported");
  }
  parts_left -= members.size();
  const bool positional = std::any_of(members.begin(), members.end(), [](const Member& m) {
    return HasPositionalItems(*m.schema);
  });
  Json merged = Json::object();
  Json properties = Json::object();
  std::vector<std::string> required;
  unsigned types = kAnyType;  // the types every part allows (the shape check named them)
  bool typed = false;
  std::optional<Json> values;          // const and enum: the values every part allows
  std::vector<const Member*> closers;  // members with additionalProperties
  for (const Member& member : members) {
    for (const auto& [key, value] : member.schema->items()) {
      if (Skipped(key)) continue;
      const std::string at = member.where + "." + key;
      if (key == "properties") {
        if (!value.is_object()) throw SchemaError(at, "must be an object");
        for (const auto& [name, subschema] : value.items()) {
          if (properties.contains(name)) {
            JoinInto(properties[name], subschema);
          } else {
            properties[name] = subschema;
          }
        }
      } else if (key == "required") {
        if (!value.is_array()) throw SchemaError(at, "must be an array of names");
        for (const Json& name : value) {
          if (!name.is_string()) throw SchemaError(at, "must be an array of names");
          const std::string text = name.get<std::string>();
          if (std::find(required.begin(), required.end(), text) == required.end()) {
            required.push_back(text);
          }
        }
      } else if (key == "additionalProperties") {
        closers.push_back(&member);
      } else if (key == "type") {
        types &= TypesNamed(value);
        typed = true;
        if (types == 0) {
          throw SchemaError(at, "leaves no type that every part allows");
        }
      } else if ((IsLowerBound(key) || IsUpperBound(key)) && value.is_number() &&
                 merged.contains(key) && merged[key].is_number()) {
        const bool larger = value.get<double>() > merged[key].get<double>();
        if (larger == IsLowerBound(key)) merged[key] = value;
      } else if (key == "const" || key == "enum") {
        if (key == "enum" && (!value.is_array() || value.empty())) {
          throw SchemaError(at, "must be a non-empty array");
        }
        const Json listed = key == "const" ? Json::array({value}) : value;
        values = values ? CommonValues(*values, listed) : listed;
        if (values->empty()) throw SchemaError(at, "leaves no value that every part allows");
      } else if (key == "items" && !positional && merged.contains(key)) {
        JoinInto(merged[key], value);
      } else if (merged.contains(key) && merged[key] != value) {
        throw SchemaError(at, "differs from another part's " + Quoted(key) +
                                  " (parts of an allOf, or a $ref and the keywords beside it, "
                                  "may share it only when equal); write it once");
      } else {
        merged[key] = value;
      }
    }
  }
  // A member's additionalProperties holds for the properties the others add.
  std::vector<Json> open_values;  // its schemas, for a map
  bool closed = false;
  for (const Member* closer : closers) {
    const Json& extra = closer->schema->at("additionalProperties");
    const auto own_it = closer->schema->find("properties");
    const bool has_own = own_it != closer->schema->end() && own_it->is_object();
    std::vector<std::string> names;
    for (const auto& [name, subschema] : properties.items()) {
      if (!has_own || !own_it->contains(name)) names.push_back(name);
    }
    if (extra.is_boolean()) {
      if (extra.get<bool>()) continue;
      closed = true;
      for (const std::string& name : names) {
        if (std::find(required.begin(), required.end(), name) != required.end()) {
          throw SchemaError(closer->where + ".additionalProperties",
                            "is false, yet another part requires " + Quoted(name) +
                                ", which this part's properties do not list");
        }
        properties.erase(name);
      }
    } else {
      for (const std::string& name : names) JoinInto(properties[name], extra);
      open_values.push_back(extra);
    }
  }
  if (typed) merged["type"] = TypeKeyword(types);
  if (values) {
    if (values->size() == 1) {
      merged["const"] = (*values)[0];
    } else {
      merged["enum"] = *values;
    }
  }
  if (!properties.empty() || std::any_of(members.begin(), members.end(), [](const Member& m) {
        return m.schema->contains("properties");
      })) {
    merged["properties"] = properties;
  }
  if (!required.empty()) merged["required"] = required;
  if (closed) {
    merged["additionalProperties"] = false;
  } else if (!open_values.empty()) {
    Json all = open_values[0];
    for (size_t i = 1; i < open_values.size(); ++i) JoinInto(all, open_values[i]);
    merged["additionalProperties"] = all;
  }
  return merged;
}

Json DistributeAlternatives(const Json& schema, const std::string& keyword, const Json& document,
                            const std::string& where) {
  Json siblings = Json::object();
  for (const auto& [key, value] : schema.items()) {
    if (key != keyword && !IsInert(key)) siblings[key] = value;
  }
  const unsigned sibling_types = AcceptedTypes(siblings, document);
  Json alternatives = Json::array();
  for (const Json& alternative : schema.at(keyword)) {
    if ((AcceptedTypes(alternative, document) & sibling_types) == 0) continue;
    alternatives.push_back(AllOf(alternative, siblings));
  }
  if (alternatives.empty()) {
    throw SchemaError(where, "no alternative of " + Quoted(keyword) +
                                 " allows a JSON type the keywords beside it allow");
  }
  return Json{{keyword, alternatives}};
}

}  // namespace mkserve::grammar
