// Global functions available to templates, as transformers defines them.
#include <ctime>

#include "chat/jinja/arg_reader.h"
#include "chat/jinja/evaluator.h"
#include "chat/jinja/python_format.h"

namespace mkserve::chat::jinja {

namespace {

// Bounds range() so a template cannot exhaust memory.
constexpr int64_t kMaxRangeItems = 1 << 20;

Value Range(CallArgs& call) {
  ArgReader args("range", call);
  int64_t start = 0, stop = 0, step = 1;
  if (call.positional.size() == 1) {
    stop = args.Int(0, "stop", 0);
  } else {
    start = args.Int(0, "start", 0);
    stop = args.Int(1, "stop", 0);
    step = args.Int(2, "step", 1);
  }
  if (step == 0) throw TemplateError("range() arg 3 must not be zero");
  Array items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
    if (static_cast<int64_t>(items.size()) >= kMaxRangeItems)
      throw TemplateError("range() is too large");
    items.emplace_back(i);
    if (__builtin_add_overflow(i, step, &i)) break;  // the next one would be past `stop` too
  }
  return Value(std::move(items));
}

Value Namespace(CallArgs& call) {
  auto object = std::make_shared<Object>();
  object->is_namespace = true;
  for (const Value& initial : call.positional) {
    if (!initial.IsObject()) throw TemplateError("namespace() takes a dict or keyword arguments");
    for (const auto& [key, value] : initial.AsObject().entries) object->Set(key, value);
  }
  for (const auto& [key, value] : call.keyword) object->Set(key, value);
  return Value(std::move(object));
}

Value Dict(CallArgs& call) {
  auto object = std::make_shared<Object>();
  for (const auto& [key, value] : call.keyword) object->Set(key, value);
  return Value(std::move(object));
}

Value RaiseException(CallArgs& call) {
  std::string message = call.positional.empty() ? "" : PythonStr(call.positional[0]);
  throw TemplateError("raise_exception: " + message);
}

Value StrftimeNow(CallArgs& call) {
  std::string format = ArgReader("strftime_now", call).String(0, "format", "");
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buffer[256];
  size_t written = std::strftime(buffer, sizeof(buffer), format.c_str(), &local);
  return Value(std::string(buffer, written));
}

}  // namespace

void AddGlobalFunctions(Evaluator::Frame& globals) {
  globals["range"] = Value(Function(Range));
  globals["namespace"] = Value(Function(Namespace));
  globals["dict"] = Value(Function(Dict));
  globals["raise_exception"] = Value(Function(RaiseException));
  globals["strftime_now"] = Value(Function(StrftimeNow));
}

}  // namespace mkserve::chat::jinja
