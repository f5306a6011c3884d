// Python semantics of the operators, subscripts and iteration the templates use.
#pragma once

#include <string>
#include <vector>

#include "chat/jinja/value.h"

namespace mkserve::chat::jinja {

// op is one of + - * / // % ** ~ ; throws TemplateError on unsupported operand types.
Value BinaryOp(const std::string& op, const Value& left, const Value& right);
// op is one of == != < > <= >= in "not in".
bool CompareOp(const std::string& op, const Value& left, const Value& right);
bool Contains(const Value& container, const Value& item);
// Python ordering for sort/min/max and comparisons; throws if the types do not order.
int CompareValues(const Value& left, const Value& right);

// The items a `for` loop visits: list items, dict keys, string characters; Undefined is empty.
std::vector<Value> Iterate(const Value& value);
// len(); Undefined has length 0.
int64_t Length(const Value& value);
// obj[key]: a missing key or index gives Undefined, as jinja2's getitem does.
Value GetItem(const Value& object, const Value& key);
// obj[start:stop:step] on strings and lists; absent parts are Undefined values.
Value Slice(const Value& object, const Value& start, const Value& stop, const Value& step);

}  // namespace mkserve::chat::jinja
