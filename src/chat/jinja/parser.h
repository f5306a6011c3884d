// Recursive-descent parser from tokens to the syntax tree, with jinja2's operator precedence:
// conditional < or < and < not < comparison < + - < ~ < * / // % < ** < unary < filter/test <
// postfix (attribute, subscript, call).
#pragma once

#include <string_view>

#include "chat/jinja/ast.h"

namespace mkserve::chat::jinja {

// Throws TemplateError naming the line for syntax errors and unsupported tags.
Body ParseTemplate(std::string_view source);

}  // namespace mkserve::chat::jinja
