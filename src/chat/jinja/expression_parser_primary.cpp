// Primary expressions (literals, names, brackets), postfix operators, filters and tests.
#include "chat/jinja/expression_parser.h"
#include "chat/jinja/template_error.h"

namespace mkserve::chat::jinja {

ExprPtr ExpressionParser::ParsePrimary() {
  const Token& token = Peek();
  int line = token.line;
  switch (token.kind) {
    case TokenKind::kString: {
      std::string text = tokens_[pos_++].text;
      while (Peek().kind == TokenKind::kString) text += tokens_[pos_++].text;  // "a" "b"
      return std::make_unique<LiteralExpr>(line, Value(std::move(text)));
    }
    case TokenKind::kInteger:
      ++pos_;
      return std::make_unique<LiteralExpr>(line, Value(token.int_value));
    case TokenKind::kFloat:
      ++pos_;
      return std::make_unique<LiteralExpr>(line, Value(token.float_value));
    case TokenKind::kName: {
      ++pos_;
      const std::string& name = token.text;
      if (name == "true" || name == "True") return std::make_unique<LiteralExpr>(line, Value(true));
      if (name == "false" || name == "False")
        return std::make_unique<LiteralExpr>(line, Value(false));
      if (name == "none" || name == "None")
        return std::make_unique<LiteralExpr>(line, Value(nullptr));
      return std::make_unique<NameExpr>(line, name);
    }
    case TokenKind::kOperator:
      if (SkipOperator("(")) return ParseParenthesized(line);
      if (SkipOperator("[")) return ParseListLiteral(line);
      if (SkipOperator("{")) return ParseDictLiteral(line);
      break;
    default:
      break;
  }
  Fail("expected an expression");
}

ExprPtr ExpressionParser::ParseParenthesized(int line) {
  if (SkipOperator(")")) return std::make_unique<ListExpr>(line, true);  // empty tuple
  ExprPtr first = ParseExpression();
  if (SkipOperator(")")) return first;
  auto tuple = std::make_unique<ListExpr>(line, true);
  tuple->items.push_back(std::move(first));
  while (SkipOperator(",")) {
    if (IsOperator(")")) break;
    tuple->items.push_back(ParseExpression());
  }
  ExpectOperator(")");
  return tuple;
}

ExprPtr ExpressionParser::ParseListLiteral(int line) {
  auto list = std::make_unique<ListExpr>(line);
  while (!SkipOperator("]")) {
    list->items.push_back(ParseExpression());
    if (!SkipOperator(",")) {
      ExpectOperator("]");
      break;
    }
  }
  return list;
}

ExprPtr ExpressionParser::ParseDictLiteral(int line) {
  auto dict = std::make_unique<DictExpr>(line);
  while (!SkipOperator("}")) {
    ExprPtr key = ParseExpression();
    ExpectOperator(":");
    dict->entries.emplace_back(std::move(key), ParseExpression());
    if (!SkipOperator(",")) {
      ExpectOperator("}");
      break;
    }
  }
  return dict;
}

ExprPtr ExpressionParser::ParsePostfix(ExprPtr expr) {
  while (true) {
    int line = Peek().line;
    if (SkipOperator(".")) {
      const Token& name = Peek();
      if (name.kind != TokenKind::kName && name.kind != TokenKind::kInteger)
        Fail("expected an attribute name");
      ++pos_;
      if (name.kind == TokenKind::kInteger) {  // x.0 is x[0] in jinja2
        auto index = std::make_unique<LiteralExpr>(line, Value(name.int_value));
        expr = std::make_unique<GetItemExpr>(line, std::move(expr), std::move(index));
      } else {
        expr = std::make_unique<GetAttrExpr>(line, std::move(expr), name.text);
      }
    } else if (SkipOperator("[")) {
      expr = ParseSubscript(std::move(expr), line);
    } else if (SkipOperator("(")) {
      auto call = std::make_unique<CallExpr>(line, std::move(expr));
      call->args = ParseCallArgs();
      expr = std::move(call);
    } else {
      return expr;
    }
  }
}

ExprPtr ExpressionParser::ParseSubscript(ExprPtr object, int line) {
  ExprPtr start;
  if (!IsOperator(":")) start = ParseExpression();
  if (SkipOperator("]"))
    return std::make_unique<GetItemExpr>(line, std::move(object), std::move(start));
  auto slice = std::make_unique<SliceExpr>(line);
  slice->object = std::move(object);
  slice->start = std::move(start);
  ExpectOperator(":");
  if (!IsOperator(":") && !IsOperator("]")) slice->stop = ParseExpression();
  if (SkipOperator(":") && !IsOperator("]")) slice->step = ParseExpression();
  ExpectOperator("]");
  return slice;
}

ArgExprs ExpressionParser::ParseCallArgs() {
  ArgExprs args;
  while (!SkipOperator(")")) {
    if (Peek().kind == TokenKind::kName && IsOperator("=", 1)) {
      std::string name = tokens_[pos_].text;
      pos_ += 2;
      args.keyword.emplace_back(std::move(name), ParseExpression());
    } else {
      if (!args.keyword.empty()) Fail("positional argument after keyword argument");
      args.positional.push_back(ParseExpression());
    }
    if (!SkipOperator(",")) {
      ExpectOperator(")");
      break;
    }
  }
  return args;
}

ExprPtr ExpressionParser::ParseFiltersAndTests(ExprPtr expr) {
  while (true) {
    int line = Peek().line;
    if (SkipOperator("|")) {
      std::string name = ExpectName().text;
      auto filter = std::make_unique<FilterExpr>(line, std::move(expr), std::move(name));
      if (SkipOperator("(")) filter->args = ParseCallArgs();
      expr = std::move(filter);
    } else if (SkipName("is")) {
      expr = ParseTest(std::move(expr), line);
    } else {
      return expr;
    }
  }
}

ExprPtr ExpressionParser::ParseTest(ExprPtr operand, int line) {
  bool negated = SkipName("not");
  const Token& name = Peek();
  std::string test_name;
  if (name.kind == TokenKind::kName) {
    test_name = name.text;
  } else if (name.kind == TokenKind::kOperator &&
             (name.text == "==" || name.text == "!=" || name.text == "<" || name.text == ">" ||
              name.text == "<=" || name.text == ">=")) {
    test_name = name.text;
  } else {
    Fail("expected a test name after 'is'");
  }
  ++pos_;
  auto test = std::make_unique<TestExpr>(line, std::move(operand), std::move(test_name));
  test->negated = negated;
  if (SkipOperator("(")) {
    test->args = ParseCallArgs();
  } else {
    // `x is divisibleby 3`: one argument without parentheses, as jinja2 allows.
    const Token& next = Peek();
    bool starts_argument = next.kind == TokenKind::kString || next.kind == TokenKind::kInteger ||
                           next.kind == TokenKind::kFloat || IsOperator("[") || IsOperator("{") ||
                           (next.kind == TokenKind::kName && next.text != "and" &&
                            next.text != "or" && next.text != "else" && next.text != "if" &&
                            next.text != "in" && next.text != "not" && next.text != "is");
    if (starts_argument) test->args.positional.push_back(ParsePostfix(ParsePrimary()));
  }
  return test;
}

}  // namespace mkserve::chat::jinja
