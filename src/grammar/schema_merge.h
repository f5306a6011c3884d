// Conjunctions of JSON Schemas rewritten as the one schema the compiler reads. Both `allOf` and a
// `$ref` with other keywords beside it say "every one of these holds" (a $ref's siblings apply in
// drafts 2019-09 and later; earlier drafts ignore them, and a value that meets them meets the
// target all the same). Where a merge would change which values are valid it is refused by name.
//
//   {"allOf": [{"$ref": "#/$defs/Pet"}, {"properties": {"age": {"type": "integer"}}}]}
//   -> Pet's keywords with "age" among its properties
//
// An anyOf (or a oneOf) beside other keywords is the same conjunction per alternative:
// DistributeAlternatives moves the keywords into each one.
#pragma once

#include <cstddef>
#include <string>

#include "grammar/json_schema.h"

namespace mkserve::grammar {

// `schema` (holding allOf, or $ref beside other keywords) as one schema with neither at its top:
// the keywords of `schema`, of each allOf entry and of each $ref's target in `document` (its
// path in errors: `document_where`), flattened, side by side. Where members share a keyword:
// properties are joined name by name (a name in several: an allOf of its schemas), required names
// joined, types intersected, the tighter bound or count taken, two `items` schemas an allOf;
// each member's additionalProperties applies to the others' properties (false drops the ones not
// required, a schema joins theirs). Another keyword two members give differently is refused.
// `parts_left` bounds the members all merges of one schema may flatten (kMaxMergedParts at its
// start): a property in a thousand parts merged again for each of a thousand names is refused.
inline constexpr size_t kMaxMergedParts = 1 << 16;
Json MergeConjunction(const Json& schema, const Json& document, const std::string& document_where,
                      const std::string& where, size_t& parts_left);

// `schema` with `keyword` ("anyOf" or "oneOf") and other keywords beside it, as {keyword: [...]}
// whose alternatives each hold one entry and those keywords (an allOf of the two). Alternatives
// that share no JSON type with those keywords are left out ({"type": "string", "anyOf":
// [{"maxLength": 3}, {"type": "null"}]}); throws SchemaError at `where` when none is left.
Json DistributeAlternatives(const Json& schema, const std::string& keyword, const Json& document,
                            const std::string& where);

// Whether `schema` has keywords beside `keyword` other than annotations and $defs/definitions.
bool HasSiblings(const Json& schema, const std::string& keyword);

}  // namespace mkserve::grammar
