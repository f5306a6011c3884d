#include "chat/jinja/evaluator.h"

#include "chat/jinja/python_format.h"
#include "chat/jinja/template_error.h"
#include "chat/jinja/value_ops.h"

namespace mkserve::chat::jinja {

namespace {

// Deep enough for any real template, shallow enough to fail before the C++ stack does.
constexpr int kMaxMacroDepth = 64;
// A render that loops more than this is runaway (nested range() loops), not a chat prompt. North's
// template scans every earlier call id for each tool result: a 128K-token agent conversation of
// about 2,600 tool rounds makes 7M iterations (2^21 refused 1,450 rounds); 2^23 bounds a hostile
// render to a few seconds.
constexpr int64_t kMaxLoopIterations = int64_t{1} << 23;

template <typename Fn>
auto WithLine(int line, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const TemplateError& error) {
    if (error.line() == 0) throw error.WithLine(line);
    throw;
  }
}

// The `loop` object of one iteration. Its keys are distinct, so the entries are filled in place
// without Set's search: a long agent conversation makes millions of these (21 % of a 2,500-round
// render went to the searches).
Value MakeLoopObject(size_t index, const std::vector<Value>& items) {
  static const std::string kKeys[] = {"index",  "index0",   "revindex", "revindex0",
                                      "first",  "last",     "length",   "depth",
                                      "depth0", "previtem", "nextitem", "cycle"};
  auto loop = std::make_shared<Object>();
  int64_t i = static_cast<int64_t>(index), n = static_cast<int64_t>(items.size());
  const Value values[] = {Value(i + 1),
                          Value(i),
                          Value(n - i),
                          Value(n - i - 1),
                          Value(i == 0),
                          Value(i == n - 1),
                          Value(n),
                          Value(1),
                          Value(0),
                          i > 0 ? items[index - 1] : Value::MakeUndefined("previtem"),
                          i + 1 < n ? items[index + 1] : Value::MakeUndefined("nextitem"),
                          Value(Function([i](CallArgs& args) {
                            if (args.positional.empty())
                              throw TemplateError("loop.cycle() needs at least one value");
                            return args.positional[i % args.positional.size()];
                          }))};
  loop->entries.resize(std::size(kKeys));
  for (size_t k = 0; k < std::size(kKeys); ++k) loop->entries[k] = {kKeys[k], values[k]};
  return Value(std::move(loop));
}

}  // namespace

Evaluator::Evaluator(Frame globals) {
  frames_.push_back(std::make_shared<Frame>(std::move(globals)));
}

std::string Evaluator::Render(const Body& body) {
  std::string out;
  Execute(body, out);
  return out;
}

Value Evaluator::Lookup(const std::string& name) const {
  for (auto it = frames_.rbegin(); it != frames_.rend(); ++it) {
    auto found = (*it)->find(name);
    if (found != (*it)->end()) return found->second;
  }
  return Value::MakeUndefined(name);
}

void Evaluator::Assign(const std::string& name, Value value) {
  (*frames_.back())[name] = std::move(value);
}

Evaluator::Flow Evaluator::Execute(const Body& body, std::string& out) {
  for (const StmtPtr& stmt : body) {
    Flow flow = WithLine(stmt->line, [&] { return ExecuteStmt(*stmt, out); });
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Evaluator::Flow Evaluator::ExecuteStmt(const Stmt& stmt, std::string& out) {
  switch (stmt.kind) {
    case StmtKind::kText:
      out += static_cast<const TextStmt&>(stmt).text;
      return Flow::kNormal;
    case StmtKind::kOutput: {
      Value value = Eval(*static_cast<const OutputStmt&>(stmt).expr);
      out += PythonStr(value);
      return Flow::kNormal;
    }
    case StmtKind::kIf:
      return ExecuteIf(static_cast<const IfStmt&>(stmt), out);
    case StmtKind::kFor:
      return ExecuteFor(static_cast<const ForStmt&>(stmt), out);
    case StmtKind::kSet:
      ExecuteSet(static_cast<const SetStmt&>(stmt));
      return Flow::kNormal;
    case StmtKind::kSetBlock:
      ExecuteSetBlock(static_cast<const SetBlockStmt&>(stmt));
      return Flow::kNormal;
    case StmtKind::kMacro:
      ExecuteMacro(static_cast<const MacroStmt&>(stmt));
      return Flow::kNormal;
    case StmtKind::kBreak:
      return Flow::kBreak;
    case StmtKind::kContinue:
      return Flow::kContinue;
    case StmtKind::kGeneration:
      return Execute(static_cast<const GenerationStmt&>(stmt).body, out);
  }
  return Flow::kNormal;
}

Evaluator::Flow Evaluator::ExecuteIf(const IfStmt& stmt, std::string& out) {
  for (const auto& [condition, body] : stmt.branches) {
    if (Eval(*condition).Truthy()) return Execute(body, out);
  }
  return Execute(stmt.else_body, out);
}

void Evaluator::BindLoopTargets(const ForStmt& stmt, const Value& item) {
  if (stmt.targets.size() == 1) {
    Assign(stmt.targets[0], item);
    return;
  }
  std::vector<Value> parts = Iterate(item);
  if (parts.size() != stmt.targets.size()) {
    throw TemplateError("cannot unpack " + std::to_string(parts.size()) + " values into " +
                        std::to_string(stmt.targets.size()) + " loop variables");
  }
  for (size_t i = 0; i < parts.size(); ++i) Assign(stmt.targets[i], parts[i]);
}

Evaluator::Flow Evaluator::ExecuteFor(const ForStmt& stmt, std::string& out) {
  std::vector<Value> all = Iterate(Eval(*stmt.iterable));
  frames_.push_back(std::make_shared<Frame>());
  std::vector<Value> items;
  for (const Value& item : all) {  // `for x in xs if cond` filters before loop.* is counted
    BindLoopTargets(stmt, item);
    if (!stmt.filter || Eval(*stmt.filter).Truthy()) items.push_back(item);
  }
  for (size_t i = 0; i < items.size(); ++i) {
    if (++loop_iterations_ > kMaxLoopIterations)
      throw TemplateError("the template runs too many loop iterations");
    BindLoopTargets(stmt, items[i]);
    Assign("loop", MakeLoopObject(i, items));
    if (Execute(stmt.body, out) == Flow::kBreak) break;
  }
  frames_.pop_back();
  if (items.empty()) return Execute(stmt.else_body, out);
  return Flow::kNormal;
}

void Evaluator::ExecuteSet(const SetStmt& stmt) {
  Value value = Eval(*stmt.value);
  if (!stmt.attribute.empty()) {
    Value target = Lookup(stmt.targets[0]);
    if (!target.IsObject() || !target.AsObject().is_namespace) {
      throw TemplateError("cannot assign attribute '" + stmt.attribute + "' on '" +
                          stmt.targets[0] +
                          "': only namespace() objects accept attribute assignment");
    }
    target.AsObject().Set(stmt.attribute, std::move(value));
    return;
  }
  if (stmt.targets.size() == 1) {
    Assign(stmt.targets[0], std::move(value));
    return;
  }
  std::vector<Value> parts = Iterate(value);
  if (parts.size() != stmt.targets.size()) throw TemplateError("cannot unpack value in set");
  for (size_t i = 0; i < parts.size(); ++i) Assign(stmt.targets[i], parts[i]);
}

void Evaluator::ExecuteSetBlock(const SetBlockStmt& stmt) {
  std::string captured;
  Execute(stmt.body, captured);
  Assign(stmt.target, Value(std::move(captured)));
}

void Evaluator::ExecuteMacro(const MacroStmt& stmt) {
  const MacroStmt* macro = &stmt;
  Assign(stmt.name,
         Value(Function([this, macro](CallArgs& args) { return CallMacro(*macro, args); })));
}

Value Evaluator::CallMacro(const MacroStmt& macro, const CallArgs& args) {
  if (macro_depth_ >= kMaxMacroDepth)
    throw TemplateError("macro '" + macro.name + "' recursed too deeply");
  if (args.positional.size() > macro.params.size()) {
    throw TemplateError("macro '" + macro.name + "' takes " + std::to_string(macro.params.size()) +
                        " arguments");
  }
  auto frame = std::make_shared<Frame>();
  std::vector<std::shared_ptr<Frame>> saved = frames_;
  frames_ = {saved.front(), frame};
  for (size_t i = 0; i < macro.params.size(); ++i) {
    const auto& [name, default_expr] = macro.params[i];
    Value value = Value::MakeUndefined(name);
    if (i < args.positional.size()) {
      value = args.positional[i];
    } else if (auto it = std::find_if(args.keyword.begin(), args.keyword.end(),
                                      [&](auto& kw) { return kw.first == name; });
               it != args.keyword.end()) {
      value = it->second;
    } else if (default_expr) {
      value = Eval(*default_expr);
    }
    (*frame)[name] = value;
  }
  std::string out;
  ++macro_depth_;
  try {
    Execute(macro.body, out);
  } catch (...) {
    --macro_depth_;
    frames_ = std::move(saved);
    throw;
  }
  --macro_depth_;
  frames_ = std::move(saved);
  return Value(std::move(out));
}

}  // namespace mkserve::chat::jinja
