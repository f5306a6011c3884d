// Splits template source into a token stream the way transformers configures jinja2
// (trim_blocks=True, lstrip_blocks=True): text, tag delimiters and expression tokens, with
// whitespace control ({%- -%}, {%+ +%}) already applied to the text tokens.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mkserve::chat::jinja {

enum class TokenKind {
  kText,
  kVariableBegin,  // {{
  kVariableEnd,    // }}
  kBlockBegin,     // {%
  kBlockEnd,       // %}
  kName,
  kString,
  kInteger,
  kFloat,
  kOperator,
  kEnd,
};

struct Token {
  TokenKind kind;
  std::string text;  // text, name, decoded string or operator
  int line = 1;
  int64_t int_value = 0;
  double float_value = 0.0;
};

// Throws TemplateError (naming the line) on an unterminated tag, comment or string.
std::vector<Token> Tokenize(std::string_view source);

}  // namespace mkserve::chat::jinja
