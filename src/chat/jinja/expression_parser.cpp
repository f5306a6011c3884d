#include "chat/jinja/expression_parser.h"

#include "chat/jinja/template_error.h"

namespace mkserve::chat::jinja {

const Token& ExpressionParser::Peek(size_t ahead) const {
  size_t index = pos_ + ahead;
  return tokens_[index < tokens_.size() ? index : tokens_.size() - 1];
}

bool ExpressionParser::IsOperator(const char* op, size_t ahead) const {
  return Peek(ahead).kind == TokenKind::kOperator && Peek(ahead).text == op;
}

bool ExpressionParser::IsName(const char* name, size_t ahead) const {
  return Peek(ahead).kind == TokenKind::kName && Peek(ahead).text == name;
}

void ExpressionParser::Fail(const std::string& message) const {
  const Token& token = Peek();
  std::string near = token.kind == TokenKind::kEnd           ? "end of template"
                     : token.kind == TokenKind::kBlockEnd    ? "'%}'"
                     : token.kind == TokenKind::kVariableEnd ? "'}}'"
                                                             : "'" + token.text + "'";
  throw TemplateError(message + " (found " + near + ")", token.line);
}

const Token& ExpressionParser::ExpectName() {
  if (Peek().kind != TokenKind::kName) Fail("expected a name");
  return tokens_[pos_++];
}

void ExpressionParser::Expect(TokenKind kind, const char* what) {
  if (Peek().kind != kind) Fail(std::string("expected '") + what + "'");
  ++pos_;
}

void ExpressionParser::ExpectOperator(const char* op) {
  if (!SkipOperator(op)) Fail(std::string("expected '") + op + "'");
}

bool ExpressionParser::SkipOperator(const char* op) {
  if (!IsOperator(op)) return false;
  ++pos_;
  return true;
}

bool ExpressionParser::SkipName(const char* name) {
  if (!IsName(name)) return false;
  ++pos_;
  return true;
}

ExprPtr ExpressionParser::ParseExpression(bool allow_conditional) {
  ExprPtr expr = ParseOr();
  while (allow_conditional && IsName("if")) {
    int line = Peek().line;
    ++pos_;
    auto conditional = std::make_unique<ConditionalExpr>(line);
    conditional->then_expr = std::move(expr);
    conditional->condition = ParseOr();
    if (SkipName("else")) conditional->else_expr = ParseExpression();
    expr = std::move(conditional);
  }
  return expr;
}

ExprPtr ExpressionParser::ParseTupleOrExpression() {
  int line = Peek().line;
  ExprPtr first = ParseExpression();
  if (!IsOperator(",")) return first;
  auto tuple = std::make_unique<ListExpr>(line, true);
  tuple->items.push_back(std::move(first));
  while (SkipOperator(",")) tuple->items.push_back(ParseExpression());
  return tuple;
}

ExprPtr ExpressionParser::ParseOr() {
  ExprPtr left = ParseAnd();
  while (IsName("or")) {
    int line = tokens_[pos_++].line;
    left = std::make_unique<BinaryExpr>(line, "or", std::move(left), ParseAnd());
  }
  return left;
}

ExprPtr ExpressionParser::ParseAnd() {
  ExprPtr left = ParseNot();
  while (IsName("and")) {
    int line = tokens_[pos_++].line;
    left = std::make_unique<BinaryExpr>(line, "and", std::move(left), ParseNot());
  }
  return left;
}

ExprPtr ExpressionParser::ParseNot() {
  if (IsName("not")) {
    int line = tokens_[pos_++].line;
    return std::make_unique<UnaryExpr>(line, "not", ParseNot());
  }
  return ParseCompare();
}

ExprPtr ExpressionParser::ParseCompare() {
  int line = Peek().line;
  ExprPtr first = ParseAdditive();
  std::unique_ptr<CompareExpr> compare;
  while (true) {
    std::string op;
    if (Peek().kind == TokenKind::kOperator &&
        (Peek().text == "==" || Peek().text == "!=" || Peek().text == "<" || Peek().text == ">" ||
         Peek().text == "<=" || Peek().text == ">=")) {
      op = tokens_[pos_++].text;
    } else if (IsName("in")) {
      op = "in";
      ++pos_;
    } else if (IsName("not") && IsName("in", 1)) {
      op = "not in";
      pos_ += 2;
    } else {
      break;
    }
    if (!compare) compare = std::make_unique<CompareExpr>(line, std::move(first));
    compare->rest.emplace_back(op, ParseAdditive());
  }
  if (compare) return compare;
  return first;
}

ExprPtr ExpressionParser::ParseAdditive() {
  ExprPtr left = ParseConcat();
  while (IsOperator("+") || IsOperator("-")) {
    const Token& op = tokens_[pos_++];
    left = std::make_unique<BinaryExpr>(op.line, op.text, std::move(left), ParseConcat());
  }
  return left;
}

ExprPtr ExpressionParser::ParseConcat() {
  ExprPtr left = ParseMultiplicative();
  while (IsOperator("~")) {
    int line = tokens_[pos_++].line;
    left = std::make_unique<BinaryExpr>(line, "~", std::move(left), ParseMultiplicative());
  }
  return left;
}

ExprPtr ExpressionParser::ParseMultiplicative() {
  ExprPtr left = ParsePower();
  while (IsOperator("*") || IsOperator("/") || IsOperator("//") || IsOperator("%")) {
    const Token& op = tokens_[pos_++];
    left = std::make_unique<BinaryExpr>(op.line, op.text, std::move(left), ParsePower());
  }
  return left;
}

ExprPtr ExpressionParser::ParsePower() {
  ExprPtr left = ParseUnary(true);
  while (IsOperator("**")) {
    int line = tokens_[pos_++].line;
    left = std::make_unique<BinaryExpr>(line, "**", std::move(left), ParseUnary(true));
  }
  return left;
}

ExprPtr ExpressionParser::ParseUnary(bool with_filters) {
  // Deeper than any real template; deep enough recursion would overflow the stack.
  constexpr int kMaxNesting = 200;
  struct DepthGuard {
    int& depth;
    ~DepthGuard() { --depth; }
  } guard{++depth_};
  if (depth_ > kMaxNesting) Fail("expression nested too deeply");
  ExprPtr expr;
  if (IsOperator("-") || IsOperator("+")) {
    const Token& op = tokens_[pos_++];
    expr = std::make_unique<UnaryExpr>(op.line, op.text, ParseUnary(false));
  } else {
    expr = ParsePostfix(ParsePrimary());
  }
  return with_filters ? ParseFiltersAndTests(std::move(expr)) : std::move(expr);
}

}  // namespace mkserve::chat::jinja
