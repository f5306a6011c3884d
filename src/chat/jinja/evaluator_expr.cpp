// Expression evaluation: one small function per expression kind.
#include <limits>

#include "chat/jinja/builtins.h"
#include "chat/jinja/evaluator.h"
#include "chat/jinja/methods.h"
#include "chat/jinja/template_error.h"
#include "chat/jinja/value_ops.h"

namespace mkserve::chat::jinja {
namespace {

// Enough for any chat that fits a context (a 128K-token conversation holds well under 10,000 tool
// calls: 50M item copies for the call list), few enough to bound a hostile render to about a
// second.
constexpr int64_t kMaxCopiedItems = int64_t{1} << 26;

}  // namespace

Value Evaluator::Eval(const Expr& expr) {
  try {
    return EvalExpr(expr);
  } catch (const TemplateError& error) {
    if (error.line() == 0) throw error.WithLine(expr.line);
    throw;
  }
}

Value Evaluator::EvalExpr(const Expr& expr) {
  switch (expr.kind) {
    case ExprKind::kLiteral:
      return static_cast<const LiteralExpr&>(expr).value;
    case ExprKind::kName:
      return EvalName(static_cast<const NameExpr&>(expr));
    case ExprKind::kList:
      return EvalList(static_cast<const ListExpr&>(expr));
    case ExprKind::kDict:
      return EvalDict(static_cast<const DictExpr&>(expr));
    case ExprKind::kGetAttr: {
      const auto& get = static_cast<const GetAttrExpr&>(expr);
      return GetAttribute(Eval(*get.object), get.name);
    }
    case ExprKind::kGetItem: {
      const auto& get = static_cast<const GetItemExpr&>(expr);
      Value object = Eval(*get.object);
      return GetItem(object, Eval(*get.index));
    }
    case ExprKind::kSlice:
      return EvalSlice(static_cast<const SliceExpr&>(expr));
    case ExprKind::kCall:
      return EvalCall(static_cast<const CallExpr&>(expr));
    case ExprKind::kFilter:
      return EvalFilter(static_cast<const FilterExpr&>(expr));
    case ExprKind::kTest:
      return EvalTest(static_cast<const TestExpr&>(expr));
    case ExprKind::kUnary:
      return EvalUnary(static_cast<const UnaryExpr&>(expr));
    case ExprKind::kBinary:
      return EvalBinary(static_cast<const BinaryExpr&>(expr));
    case ExprKind::kCompare:
      return EvalCompare(static_cast<const CompareExpr&>(expr));
    case ExprKind::kConditional:
      return EvalConditional(static_cast<const ConditionalExpr&>(expr));
  }
  throw TemplateError("unknown expression");
}

Value Evaluator::EvalName(const NameExpr& expr) { return Lookup(expr.name); }

Value Evaluator::EvalList(const ListExpr& expr) {
  Array items;
  for (const ExprPtr& item : expr.items) items.push_back(Eval(*item));
  return expr.is_tuple ? Value::MakeTuple(std::move(items)) : Value(std::move(items));
}

Value Evaluator::EvalDict(const DictExpr& expr) {
  auto object = std::make_shared<Object>();
  for (const auto& [key_expr, value_expr] : expr.entries) {
    Value key = Eval(*key_expr);
    if (!key.IsString()) throw TemplateError("dict keys must be strings, not " + key.TypeName());
    object->Set(key.AsString(), Eval(*value_expr));
  }
  return Value(std::move(object));
}

Value Evaluator::EvalSlice(const SliceExpr& expr) {
  Value object = Eval(*expr.object);
  Value start = expr.start ? Eval(*expr.start) : Value();
  Value stop = expr.stop ? Eval(*expr.stop) : Value();
  Value step = expr.step ? Eval(*expr.step) : Value();
  return Slice(object, start, stop, step);
}

CallArgs Evaluator::EvalArgs(const ArgExprs& args) {
  CallArgs values;
  for (const ExprPtr& arg : args.positional) values.positional.push_back(Eval(*arg));
  for (const auto& [name, arg] : args.keyword) values.keyword.emplace_back(name, Eval(*arg));
  return values;
}

Value Evaluator::EvalCall(const CallExpr& expr) {
  Value callee = Eval(*expr.callee);
  CallArgs args = EvalArgs(expr.args);
  if (callee.IsUndefined())
    throw TemplateError("'" + callee.UndefinedName() + "' is undefined (called as a function)");
  if (!callee.IsFunction())
    throw TemplateError("'" + callee.TypeName() + "' object is not callable");
  return callee.AsFunction()(args);
}

Value Evaluator::EvalFilter(const FilterExpr& expr) {
  Value input = Eval(*expr.operand);
  return ApplyFilter(expr.name, input, EvalArgs(expr.args));
}

Value Evaluator::EvalTest(const TestExpr& expr) {
  Value input = Eval(*expr.operand);
  bool result = ApplyTest(expr.name, input, EvalArgs(expr.args));
  return Value(result != expr.negated);
}

Value Evaluator::EvalUnary(const UnaryExpr& expr) {
  Value operand = Eval(*expr.operand);
  if (expr.op == "not") return Value(!operand.Truthy());
  if (!operand.IsNumber())
    throw TemplateError("bad operand type for unary " + expr.op + ": '" + operand.TypeName() + "'");
  if (expr.op == "+") return operand.IsBool() ? Value(operand.AsInt()) : operand;
  if (operand.IsFloat()) return Value(-operand.AsDouble());
  if (operand.AsInt() == std::numeric_limits<int64_t>::min())
    throw TemplateError("integer overflow in unary - (64-bit integers)");
  return Value(-operand.AsInt());
}

Value Evaluator::EvalBinary(const BinaryExpr& expr) {
  Value left = Eval(*expr.left);
  if (expr.op == "and") return left.Truthy() ? Eval(*expr.right) : left;
  if (expr.op == "or") return left.Truthy() ? left : Eval(*expr.right);
  Value result = BinaryOp(expr.op, left, Eval(*expr.right));
  // Each `+` copies its operands: `ns.ids = ns.ids + [id]` over n calls copies n^2 / 2 items,
  // which no loop count sees (40,000 tool calls in one request took minutes of CPU).
  if (result.IsArray() || result.IsString()) {
    CountCopied(result.IsArray() ? static_cast<int64_t>(result.AsArray().size())
                                 : static_cast<int64_t>(result.AsString().size()) / 16);
  }
  return result;
}

void Evaluator::CountCopied(int64_t items) {
  copied_items_ += items;
  if (copied_items_ > kMaxCopiedItems)
    throw TemplateError("the template copies too much data (list or string concatenations)");
}

Value Evaluator::EvalCompare(const CompareExpr& expr) {
  Value left = Eval(*expr.first);
  for (const auto& [op, right_expr] : expr.rest) {
    Value right = Eval(*right_expr);
    if (!CompareOp(op, left, right)) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

Value Evaluator::EvalConditional(const ConditionalExpr& expr) {
  if (Eval(*expr.condition).Truthy()) return Eval(*expr.then_expr);
  return expr.else_expr ? Eval(*expr.else_expr) : Value::MakeUndefined("else");
}

}  // namespace mkserve::chat::jinja
