// Syntax tree of a template: expressions and statements, each node carrying its source line.
// Nodes are plain structs tagged with a kind; the evaluator dispatches on the kind.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja/value.h"

namespace mkserve::chat::jinja {

enum class ExprKind {
  kLiteral,
  kName,
  kList,
  kDict,
  kGetAttr,
  kGetItem,
  kSlice,
  kCall,
  kFilter,
  kTest,
  kUnary,
  kBinary,
  kCompare,
  kConditional,
};

struct Expr {
  Expr(ExprKind kind_in, int line_in) : kind(kind_in), line(line_in) {}
  virtual ~Expr() = default;
  ExprKind kind;
  int line;
};
using ExprPtr = std::unique_ptr<Expr>;

struct ArgExprs {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
};

struct LiteralExpr : Expr {
  LiteralExpr(int l, Value v) : Expr(ExprKind::kLiteral, l), value(std::move(v)) {}
  Value value;
};
struct NameExpr : Expr {
  NameExpr(int l, std::string n) : Expr(ExprKind::kName, l), name(std::move(n)) {}
  std::string name;
};
struct ListExpr : Expr {  // list and tuple literals
  explicit ListExpr(int l, bool tuple = false) : Expr(ExprKind::kList, l), is_tuple(tuple) {}
  std::vector<ExprPtr> items;
  bool is_tuple;
};
struct DictExpr : Expr {
  explicit DictExpr(int l) : Expr(ExprKind::kDict, l) {}
  std::vector<std::pair<ExprPtr, ExprPtr>> entries;
};
struct GetAttrExpr : Expr {  // object.name
  GetAttrExpr(int l, ExprPtr o, std::string n)
      : Expr(ExprKind::kGetAttr, l), object(std::move(o)), name(std::move(n)) {}
  ExprPtr object;
  std::string name;
};
struct GetItemExpr : Expr {  // object[index]
  GetItemExpr(int l, ExprPtr o, ExprPtr i)
      : Expr(ExprKind::kGetItem, l), object(std::move(o)), index(std::move(i)) {}
  ExprPtr object;
  ExprPtr index;
};
struct SliceExpr : Expr {  // object[start:stop:step], each part optional
  explicit SliceExpr(int l) : Expr(ExprKind::kSlice, l) {}
  ExprPtr object, start, stop, step;
};
struct CallExpr : Expr {
  CallExpr(int l, ExprPtr c) : Expr(ExprKind::kCall, l), callee(std::move(c)) {}
  ExprPtr callee;
  ArgExprs args;
};
struct FilterExpr : Expr {  // operand | name(args)
  FilterExpr(int l, ExprPtr o, std::string n)
      : Expr(ExprKind::kFilter, l), operand(std::move(o)), name(std::move(n)) {}
  ExprPtr operand;
  std::string name;
  ArgExprs args;
};
struct TestExpr : Expr {  // operand is [not] name(args)
  TestExpr(int l, ExprPtr o, std::string n)
      : Expr(ExprKind::kTest, l), operand(std::move(o)), name(std::move(n)) {}
  ExprPtr operand;
  std::string name;
  ArgExprs args;
  bool negated = false;
};
struct UnaryExpr : Expr {  // "-", "+", "not"
  UnaryExpr(int l, std::string o, ExprPtr e)
      : Expr(ExprKind::kUnary, l), op(std::move(o)), operand(std::move(e)) {}
  std::string op;
  ExprPtr operand;
};
struct BinaryExpr : Expr {  // + - * / // % ** ~ and or
  BinaryExpr(int l, std::string o, ExprPtr a, ExprPtr b)
      : Expr(ExprKind::kBinary, l), op(std::move(o)), left(std::move(a)), right(std::move(b)) {}
  std::string op;
  ExprPtr left, right;
};
struct CompareExpr : Expr {  // chained: a < b <= c; ops == != < > <= >= in "not in"
  CompareExpr(int l, ExprPtr f) : Expr(ExprKind::kCompare, l), first(std::move(f)) {}
  ExprPtr first;
  std::vector<std::pair<std::string, ExprPtr>> rest;
};
struct ConditionalExpr : Expr {  // then_expr if condition else else_expr
  explicit ConditionalExpr(int l) : Expr(ExprKind::kConditional, l) {}
  ExprPtr condition, then_expr, else_expr;  // else_expr may be null (gives Undefined)
};

enum class StmtKind {
  kText,
  kOutput,
  kIf,
  kFor,
  kSet,
  kSetBlock,
  kMacro,
  kBreak,
  kContinue,
  kGeneration
};

struct Stmt {
  Stmt(StmtKind kind_in, int line_in) : kind(kind_in), line(line_in) {}
  virtual ~Stmt() = default;
  StmtKind kind;
  int line;
};
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct TextStmt : Stmt {
  TextStmt(int l, std::string t) : Stmt(StmtKind::kText, l), text(std::move(t)) {}
  std::string text;
};
struct OutputStmt : Stmt {
  OutputStmt(int l, ExprPtr e) : Stmt(StmtKind::kOutput, l), expr(std::move(e)) {}
  ExprPtr expr;
};
struct IfStmt : Stmt {
  explicit IfStmt(int l) : Stmt(StmtKind::kIf, l) {}
  std::vector<std::pair<ExprPtr, Body>> branches;  // if and elif
  Body else_body;
};
struct ForStmt : Stmt {
  explicit ForStmt(int l) : Stmt(StmtKind::kFor, l) {}
  std::vector<std::string> targets;  // one name, or several to unpack
  ExprPtr iterable;
  ExprPtr filter;  // `for x in xs if cond`, may be null
  Body body;
  Body else_body;
};
struct SetStmt : Stmt {  // set a = v | set a, b = v | set ns.attr = v
  explicit SetStmt(int l) : Stmt(StmtKind::kSet, l) {}
  std::vector<std::string> targets;
  std::string attribute;  // non-empty for `ns.attr`
  ExprPtr value;
};
struct SetBlockStmt : Stmt {  // {% set name %}body{% endset %}
  explicit SetBlockStmt(int l) : Stmt(StmtKind::kSetBlock, l) {}
  std::string target;
  Body body;
};
struct MacroStmt : Stmt {
  explicit MacroStmt(int l) : Stmt(StmtKind::kMacro, l) {}
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> params;  // default may be null
  Body body;
};
struct GenerationStmt
    : Stmt {  // transformers' {% generation %} marks assistant text; renders as is
  explicit GenerationStmt(int l) : Stmt(StmtKind::kGeneration, l) {}
  Body body;
};

}  // namespace mkserve::chat::jinja
