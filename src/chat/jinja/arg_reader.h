// Reads the arguments of a builtin (filter, test, method, global) by position or keyword,
// the way Python binds them, and names the builtin in errors.
#pragma once

#include <string>

#include "chat/jinja/template_error.h"
#include "chat/jinja/value.h"

namespace mkserve::chat::jinja {

class ArgReader {
 public:
  ArgReader(std::string callee, const CallArgs& args) : callee_(std::move(callee)), args_(args) {}

  bool Has(size_t index, const char* name) const { return Find(index, name) != nullptr; }

  Value Get(size_t index, const char* name, Value fallback = Value()) const {
    const Value* found = Find(index, name);
    return found ? *found : fallback;
  }

  Value Required(size_t index, const char* name) const {
    const Value* found = Find(index, name);
    if (!found) throw TemplateError(callee_ + "() is missing the argument '" + name + "'");
    return *found;
  }

  std::string String(size_t index, const char* name, std::string fallback) const {
    Value value = Get(index, name);
    if (value.IsUndefined() || value.IsNone()) return fallback;
    if (!value.IsString())
      throw TemplateError(callee_ + "(): '" + name + "' must be a string, not " + value.TypeName());
    return value.AsString();
  }

  int64_t Int(size_t index, const char* name, int64_t fallback) const {
    Value value = Get(index, name);
    if (value.IsUndefined() || value.IsNone()) return fallback;
    if (!value.IsInt() && !value.IsBool())
      throw TemplateError(callee_ + "(): '" + name + "' must be an integer, not " +
                          value.TypeName());
    return value.AsInt();
  }

  bool Bool(size_t index, const char* name, bool fallback) const {
    Value value = Get(index, name);
    return value.IsUndefined() ? fallback : value.Truthy();
  }

  const std::string& callee() const { return callee_; }
  const CallArgs& args() const { return args_; }

 private:
  const Value* Find(size_t index, const char* name) const {
    if (index < args_.positional.size()) return &args_.positional[index];
    for (const auto& [key, value] : args_.keyword) {
      if (key == name) return &value;
    }
    return nullptr;
  }

  std::string callee_;
  const CallArgs& args_;
};

}  // namespace mkserve::chat::jinja
