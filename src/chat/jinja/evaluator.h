// Renders a parsed template: executes statements, evaluates expressions, keeps the scopes.
// Scoping follows jinja2: a `for` body and a macro call get their own frame, so `set` inside
// them does not leak out (templates use namespace() for that); `if` does not open a frame.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "chat/jinja/ast.h"
#include "chat/jinja/value.h"

namespace mkserve::chat::jinja {

class Evaluator {
 public:
  using Frame = std::unordered_map<std::string, Value>;

  // `globals` holds the context variables and the global functions.
  explicit Evaluator(Frame globals);

  std::string Render(const Body& body);
  // Evaluates one expression; errors are tagged with the innermost failing node's line.
  Value Eval(const Expr& expr);

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Flow Execute(const Body& body, std::string& out);
  Flow ExecuteStmt(const Stmt& stmt, std::string& out);
  Flow ExecuteIf(const IfStmt& stmt, std::string& out);
  Flow ExecuteFor(const ForStmt& stmt, std::string& out);
  void ExecuteSet(const SetStmt& stmt);
  void ExecuteSetBlock(const SetBlockStmt& stmt);
  void ExecuteMacro(const MacroStmt& stmt);
  void BindLoopTargets(const ForStmt& stmt, const Value& item);
  Value CallMacro(const MacroStmt& macro, const CallArgs& args);

  Value EvalExpr(const Expr& expr);
  Value EvalName(const NameExpr& expr);
  Value EvalList(const ListExpr& expr);
  Value EvalDict(const DictExpr& expr);
  Value EvalSlice(const SliceExpr& expr);
  Value EvalCall(const CallExpr& expr);
  Value EvalFilter(const FilterExpr& expr);
  Value EvalTest(const TestExpr& expr);
  Value EvalUnary(const UnaryExpr& expr);
  Value EvalBinary(const BinaryExpr& expr);
  Value EvalCompare(const CompareExpr& expr);
  Value EvalConditional(const ConditionalExpr& expr);
  CallArgs EvalArgs(const ArgExprs& args);

  Value Lookup(const std::string& name) const;
  void Assign(const std::string& name, Value value);

  std::vector<std::shared_ptr<Frame>> frames_;
  // The budgets of one render (a hostile template fails by name, in seconds): loop iterations
  // and macro calls (a macro calling itself twice doubles its work each level); items and
  // string bytes / 16 copied by `+`, `~` and `*` results; bytes written to the output (and
  // written again by the macro or block that captured them).
  void CountStep();
  void CountCopied(int64_t items);
  void CountWritten(size_t bytes);
  int macro_depth_ = 0;
  int64_t steps_ = 0;
  int64_t copied_items_ = 0;
  size_t written_bytes_ = 0;
};

// The global functions transformers provides: raise_exception, strftime_now, range,
// namespace, dict.
void AddGlobalFunctions(Evaluator::Frame& globals);

}  // namespace mkserve::chat::jinja
