// The filters and tests templates use. Each builtin is a plain function of (input, arguments);
// the tables are filled by the filters_*.cpp and tests.cpp files.
#pragma once

#include <string>
#include <unordered_map>

#include "chat/jinja/arg_reader.h"
#include "chat/jinja/value.h"

namespace mkserve::chat::jinja {

using FilterFunction = Value (*)(const Value& input, const ArgReader& args);
using TestFunction = bool (*)(const Value& input, const ArgReader& args);
using FilterTable = std::unordered_map<std::string, FilterFunction>;

// Throws TemplateError naming an unknown filter or test.
Value ApplyFilter(const std::string& name, const Value& input, const CallArgs& args);
bool ApplyTest(const std::string& name, const Value& input, const CallArgs& args);

// Table fillers, one per file.
void AddStringFilters(FilterTable& table);
void AddSequenceFilters(FilterTable& table);

// A dotted attribute path ("function.name", "0") as jinja2's attribute filters resolve it.
Value ResolveAttributePath(const Value& object, const std::string& path);

}  // namespace mkserve::chat::jinja
