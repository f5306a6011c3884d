#include "chat/jinja/parser.h"

#include <initializer_list>
#include <set>

#include "chat/jinja/expression_parser.h"
#include "chat/jinja/lexer.h"
#include "chat/jinja/template_error.h"

namespace mkserve::chat::jinja {

namespace {

// Statement level: text, {{ }} and {% %} tags. Expressions are delegated to ExpressionParser.
class StatementParser {
 public:
  explicit StatementParser(std::vector<Token> tokens)
      : tokens_(std::move(tokens)), expr_(tokens_, pos_) {}

  Body ParseAll() {
    std::string end_tag;
    Body body = ParseBody({}, end_tag);
    return body;
  }

 private:
  const Token& Peek() const { return tokens_[pos_]; }

  // Parses until one of `end_tags` opens a block (consumed up to its name) or the input ends.
  Body ParseBody(std::set<std::string> end_tags, std::string& found) {
    Body body;
    while (true) {
      const Token& token = Peek();
      if (token.kind == TokenKind::kEnd) {
        if (!end_tags.empty()) {
          throw TemplateError(
              "missing {% " + *end_tags.rbegin() + " %} before the end of the template",
              token.line);
        }
        return body;
      }
      if (token.kind == TokenKind::kText) {
        body.push_back(std::make_unique<TextStmt>(token.line, token.text));
        ++pos_;
      } else if (token.kind == TokenKind::kVariableBegin) {
        ++pos_;
        ExprPtr expr = expr_.ParseExpression();
        expr_.Expect(TokenKind::kVariableEnd, "}}");
        body.push_back(std::make_unique<OutputStmt>(token.line, std::move(expr)));
      } else {
        ++pos_;  // {%
        const Token& name = expr_.ExpectName();
        if (end_tags.count(name.text)) {
          found = name.text;
          return body;
        }
        body.push_back(ParseStatement(name));
      }
    }
  }

  void EndTag() { expr_.Expect(TokenKind::kBlockEnd, "%}"); }

  StmtPtr ParseStatement(const Token& name) {
    // Deeper block nesting than any real template; unbounded recursion would overflow the stack.
    constexpr int kMaxBlockNesting = 100;
    struct DepthGuard {
      int& depth;
      ~DepthGuard() { --depth; }
    } guard{++block_depth_};
    if (block_depth_ > kMaxBlockNesting) throw TemplateError("blocks nested too deeply", name.line);
    return ParseTag(name);
  }

  StmtPtr ParseTag(const Token& name) {
    const std::string& tag = name.text;
    if (tag == "if") return ParseIf(name.line);
    if (tag == "for") return ParseFor(name.line);
    if (tag == "set") return ParseSet(name.line);
    if (tag == "macro") return ParseMacro(name.line);
    if (tag == "generation") return ParseGeneration(name.line);
    if (tag == "break" || tag == "continue") {
      EndTag();
      return std::make_unique<Stmt>(tag == "break" ? StmtKind::kBreak : StmtKind::kContinue,
                                    name.line);
    }
    throw TemplateError("unsupported tag '{% " + tag + " %}'", name.line);
  }

  StmtPtr ParseIf(int line) {
    auto stmt = std::make_unique<IfStmt>(line);
    std::string found = "elif";
    while (found == "elif") {
      ExprPtr condition = expr_.ParseExpression();
      EndTag();
      Body body = ParseBody({"elif", "else", "endif"}, found);
      stmt->branches.emplace_back(std::move(condition), std::move(body));
    }
    if (found == "else") {
      EndTag();
      stmt->else_body = ParseBody({"endif"}, found);
    }
    EndTag();
    return stmt;
  }

  StmtPtr ParseFor(int line) {
    auto stmt = std::make_unique<ForStmt>(line);
    do {
      stmt->targets.push_back(expr_.ExpectName().text);
    } while (expr_.SkipOperator(","));
    if (!expr_.SkipName("in")) throw TemplateError("expected 'in' in for loop", Peek().line);
    stmt->iterable = expr_.ParseExpression(/*allow_conditional=*/false);
    if (expr_.SkipName("if")) stmt->filter = expr_.ParseExpression(false);
    if (expr_.SkipName("recursive"))
      throw TemplateError("recursive for loops are not supported", line);
    EndTag();
    std::string found;
    stmt->body = ParseBody({"else", "endfor"}, found);
    if (found == "else") {
      EndTag();
      stmt->else_body = ParseBody({"endfor"}, found);
    }
    EndTag();
    return stmt;
  }

  StmtPtr ParseSet(int line) {
    std::vector<std::string> targets;
    std::string attribute;
    do {
      targets.push_back(expr_.ExpectName().text);
      if (targets.size() == 1 && expr_.SkipOperator(".")) attribute = expr_.ExpectName().text;
    } while (attribute.empty() && expr_.SkipOperator(","));
    if (Peek().kind == TokenKind::kBlockEnd && targets.size() == 1 && attribute.empty()) {
      EndTag();
      auto block = std::make_unique<SetBlockStmt>(line);
      block->target = targets[0];
      std::string found;
      block->body = ParseBody({"endset"}, found);
      EndTag();
      return block;
    }
    auto stmt = std::make_unique<SetStmt>(line);
    stmt->targets = std::move(targets);
    stmt->attribute = std::move(attribute);
    expr_.ExpectOperator("=");
    stmt->value = expr_.ParseTupleOrExpression();
    EndTag();
    return stmt;
  }

  StmtPtr ParseMacro(int line) {
    auto stmt = std::make_unique<MacroStmt>(line);
    stmt->name = expr_.ExpectName().text;
    expr_.ExpectOperator("(");
    while (!expr_.SkipOperator(")")) {
      std::string param = expr_.ExpectName().text;
      ExprPtr default_value;
      if (expr_.SkipOperator("=")) default_value = expr_.ParseExpression();
      stmt->params.emplace_back(std::move(param), std::move(default_value));
      if (!expr_.SkipOperator(",")) {
        expr_.ExpectOperator(")");
        break;
      }
    }
    EndTag();
    std::string found;
    stmt->body = ParseBody({"endmacro"}, found);
    if (Peek().kind == TokenKind::kName) ++pos_;  // {% endmacro name %}
    EndTag();
    return stmt;
  }

  StmtPtr ParseGeneration(int line) {
    EndTag();
    auto stmt = std::make_unique<GenerationStmt>(line);
    std::string found;
    stmt->body = ParseBody({"endgeneration"}, found);
    EndTag();
    return stmt;
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  ExpressionParser expr_;
  int block_depth_ = 0;
};

}  // namespace

Body ParseTemplate(std::string_view source) { return StatementParser(Tokenize(source)).ParseAll(); }

}  // namespace mkserve::chat::jinja
