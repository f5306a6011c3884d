// Attribute access `x.name`: dict entries and the Python methods templates call on str,
// dict and list values (returned as bound functions).
#pragma once

#include <string>

#include "chat/jinja/value.h"

namespace mkserve::chat::jinja {

// jinja2 getattr: a method of the value's type first, then a dict entry; a missing attribute
// is Undefined; any attribute of Undefined is an error (jinja2's default Undefined).
Value GetAttribute(const Value& object, const std::string& name);

}  // namespace mkserve::chat::jinja
