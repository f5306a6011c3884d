// Parses jinja2 expressions from a token stream shared with the statement parser.
#pragma once

#include <string>
#include <vector>

#include "chat/jinja/ast.h"
#include "chat/jinja/lexer.h"

namespace mkserve::chat::jinja {

class ExpressionParser {
 public:
  // `tokens` and `pos` are owned by the caller; the parser advances `pos`.
  ExpressionParser(const std::vector<Token>& tokens, size_t& pos) : tokens_(tokens), pos_(pos) {}

  // `allow_conditional` is false where a trailing `if` belongs to the statement (for-loop filter).
  ExprPtr ParseExpression(bool allow_conditional = true);
  // `a, b` without parentheses becomes a tuple (right side of `set`).
  ExprPtr ParseTupleOrExpression();

  const Token& ExpectName();
  void Expect(TokenKind kind, const char* what);
  void ExpectOperator(const char* op);
  bool SkipOperator(const char* op);
  bool SkipName(const char* name);

 private:
  const Token& Peek(size_t ahead = 0) const;
  bool IsOperator(const char* op, size_t ahead = 0) const;
  bool IsName(const char* name, size_t ahead = 0) const;
  [[noreturn]] void Fail(const std::string& message) const;

  ExprPtr ParseOr();
  ExprPtr ParseAnd();
  ExprPtr ParseNot();
  ExprPtr ParseCompare();
  ExprPtr ParseAdditive();
  ExprPtr ParseConcat();
  ExprPtr ParseMultiplicative();
  ExprPtr ParsePower();
  ExprPtr ParseUnary(bool with_filters);
  ExprPtr ParsePrimary();
  ExprPtr ParsePostfix(ExprPtr expr);
  ExprPtr ParseFiltersAndTests(ExprPtr expr);
  ExprPtr ParseSubscript(ExprPtr object, int line);
  ExprPtr ParseTest(ExprPtr operand, int line);
  ExprPtr ParseParenthesized(int line);
  ExprPtr ParseListLiteral(int line);
  ExprPtr ParseDictLiteral(int line);
  ArgExprs ParseCallArgs();  // after "("; consumes ")"

  const std::vector<Token>& tokens_;
  size_t& pos_;
  int depth_ = 0;  // nesting of ParseUnary, bounded to protect the stack
};

}  // namespace mkserve::chat::jinja
