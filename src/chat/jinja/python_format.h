// Python's str() and repr() of template values, which is what `{{ x }}` and `x|string` print
// under transformers (e.g. True, None, 1.0, ['a', 'b'], {'k': 1}).
#pragma once

#include <string>

#include "chat/jinja/value.h"

namespace mkserve::chat::jinja {

std::string PythonStr(const Value& value);
std::string PythonRepr(const Value& value);
// repr(float): the shortest round-trip digits, exponent form outside 1e-4 <= |x| < 1e16.
std::string FormatPythonFloat(double value);

}  // namespace mkserve::chat::jinja
