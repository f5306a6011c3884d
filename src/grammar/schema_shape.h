// Whether a document is a JSON Schema at all, apart from what the grammar compiler supports.
//
// A tool's parameters schema is only shown to the model (through the chat template) unless a
// call is forced or strict, when json_schema.h compiles it and refuses what it cannot generate.
// A schema that is not valid JSON Schema ("type": "strnig", "required": "city") is a client error
// in both cases: OpenAI refuses it up front, and a model shown it could only guess. This check
// follows the meta-schema's value types for the keywords of drafts 4 to 2020-12 that constrain
// values (a schema is an object or a boolean; "type" names JSON types; counts are non-negative
// integers; subschemas are schemas) and leaves annotations and unknown keywords alone.
#pragma once

#include <string>

#include "grammar/json_schema.h"

namespace mkserve::grammar {

// Throws SchemaError(path of the culprit below `where`, what is wrong there).
void CheckSchemaShape(const Json& schema, const std::string& where);

}  // namespace mkserve::grammar
