// oneOf: exactly one alternative holds. The grammar writes a value of one alternative (as for
// anyOf), which is a valid oneOf value only if no other alternative accepts it too. That is
// shown here before a oneOf is compiled, for the two ways schemas say it:
//   - the alternatives accept no JSON type in common ({"type": "string"} and {"type": "null"};
//     an integer is a number);
//   - objects told apart by a required property whose values differ (pydantic's discriminated
//     unions: "pet_type" with const "cat" in one alternative and "dog" in the other).
// Anything else is refused by name: an anyOf says the same without the promise.
#pragma once

#include <string>

#include "grammar/json_schema.h"

namespace mkserve::grammar {

// Throws SchemaError at `where` naming two alternatives of `alternatives` (oneOf's array) that
// may both accept one value. $refs resolve in `document`.
void CheckAlternativesExclusive(const Json& alternatives, const Json& document,
                                const std::string& where);

}  // namespace mkserve::grammar
