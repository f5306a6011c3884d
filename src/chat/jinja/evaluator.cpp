#include "chat/jinja/evaluator.h"

#include "chat/jinja/python_format.h"
#include "chat/jinja/template_error.h"
#include "chat/jinja/value_ops.h"

namespace mkserve::chat::jinja {

namespace {

// Deep enough for any real template, shallow enough to fail before the C++ stack does.
constexpr int kMaxMacroDepth = 64;
// A render that loops (or calls macros) more than this is runaway (nested range() loops), not a
// chat prompt. North's template scans every earlier call id for each tool result: a 128K-token
// agent conversation of about 2,600 tool rounds makes 7M iterations (2^21 refused 1,450 rounds);
// 2^23 bounds a hostile render to a few seconds.
constexpr int64_t kMaxSteps = int64_t{1} << 23;

template <typename Fn>
auto WithLine(int line, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const TemplateError& error) {
    if (error.line() == 0) throw error.WithLine(line);
    throw;
  }
}

// The `loop` object of a for statement: one for all its iterations, as jinja2's LoopContext is,
// its values rewritten in place as the loop moves on. North's template scans every earlier call
// id for each tool result, so a long agent conversation runs millions of iterations: a new
// object each (12 entries and a cycle() closure) took 20 % of a 700-round render.
class LoopObject {
 public:
  explicit LoopObject(const std::vector<Value>& items)
      : items_(items), object_(std::make_shared<Object>()), index_(std::make_shared<int64_t>(0)) {
    static const std::string kKeys[] = {"index",  "index0",   "revindex", "revindex0",
                                        "first",  "last",     "length",   "depth",
                                        "depth0", "previtem", "nextitem", "cycle"};
    object_->entries.resize(std::size(kKeys));
    for (size_t k = 0; k < std::size(kKeys); ++k) object_->entries[k].first = kKeys[k];
    const int64_t n = static_cast<int64_t>(items.size());
    object_->entries[6].second = Value(n);
    object_->entries[7].second = Value(1);
    object_->entries[8].second = Value(0);
    object_->entries[11].second = Value(Function([index = index_](CallArgs& args) {
      if (args.positional.empty()) throw TemplateError("loop.cycle() needs at least one value");
      return args.positional[*index % args.positional.size()];
    }));
  }

  Value value() const { return Value(object_); }

  void MoveTo(size_t index) {
    const int64_t i = static_cast<int64_t>(index), n = static_cast<int64_t>(items_.size());
    *index_ = i;
    auto& entries = object_->entries;
    entries[0].second = Value(i + 1);
    entries[1].second = Value(i);
    entries[2].second = Value(n - i);
    entries[3].second = Value(n - i - 1);
    entries[4].second = Value(i == 0);
    entries[5].second = Value(i == n - 1);
    entries[9].second = i > 0 ? items_[index - 1] : Value::MakeUndefined("previtem");
    entries[10].second = i + 1 < n ? items_[index + 1] : Value::MakeUndefined("nextitem");
  }

 private:
  const std::vector<Value>& items_;
  std::shared_ptr<Object> object_;
  std::shared_ptr<int64_t> index_;  // cycle()'s: the closure must not own the object it sits in
};

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
      CountWritten(static_cast<const TextStmt&>(stmt).text.size());
      out += static_cast<const TextStmt&>(stmt).text;
      return Flow::kNormal;
    case StmtKind::kOutput: {
      const std::string text = PythonStr(Eval(*static_cast<const OutputStmt&>(stmt).expr));
      CountWritten(text.size());
      out += text;
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
  LoopObject loop(items);
  for (size_t i = 0; i < items.size(); ++i) {
    CountStep();
    BindLoopTargets(stmt, items[i]);
    loop.MoveTo(i);
    Assign("loop", loop.value());
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

void Evaluator::CountWritten(size_t bytes) {
  written_bytes_ += bytes;
  CheckTextBytes(written_bytes_, "the template writes");
}

void Evaluator::CountStep() {
  if (++steps_ > kMaxSteps)
    throw TemplateError("the template runs too many loop iterations and macro calls");
}

Value Evaluator::CallMacro(const MacroStmt& macro, const CallArgs& args) {
  CountStep();
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
                                      [&name = name](auto& kw) { return kw.first == name; });
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
