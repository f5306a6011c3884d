#include "chat/jinja/json_dump.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "chat/jinja/python_format.h"
#include "chat/jinja/template_error.h"
#include "common/utf8.h"

namespace mkserve::chat::jinja {

namespace {

void AppendEscape(char32_t unit, std::string& out) {
  char buffer[16];
  std::snprintf(buffer, sizeof(buffer), "\\u%04x", static_cast<unsigned>(unit));
  out += buffer;
}

void AppendJsonString(const std::string& text, bool ensure_ascii, std::string& out) {
  out += '"';
  for (char32_t cp : DecodeUtf8(text)) {
    switch (cp) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (cp < 0x20 || (ensure_ascii && cp == 0x7F)) {
          AppendEscape(cp, out);
        } else if (ensure_ascii && cp >= 0x10000) {
          AppendEscape(0xD800 + ((cp - 0x10000) >> 10), out);
          AppendEscape(0xDC00 + ((cp - 0x10000) & 0x3FF), out);
        } else if (ensure_ascii && cp >= 0x80) {
          AppendEscape(cp, out);
        } else {
          AppendUtf8(out, cp);
        }
    }
  }
  out += '"';
}

class JsonWriter {
 public:
  explicit JsonWriter(const JsonDumpOptions& options) : options_(options) {
    item_separator_ = options.item_separator.value_or(options.indent ? "," : ", ");
  }

  void Write(const Value& value, int level, std::string& out) const {
    constexpr int kMaxNesting = 200;  // a list that contains itself would recurse forever
    if (level > kMaxNesting) throw TemplateError("value nested too deeply for JSON");
    CheckTextBytes(out.size(), "a value's JSON is");
    switch (value.kind()) {
      case Value::Kind::kNone:
        out += "null";
        return;
      case Value::Kind::kBool:
        out += value.AsBool() ? "true" : "false";
        return;
      case Value::Kind::kInt:
        out += std::to_string(value.AsInt());
        return;
      case Value::Kind::kFloat:
        WriteFloat(value.AsDouble(), out);
        return;
      case Value::Kind::kString:
        AppendJsonString(value.AsString(), options_.ensure_ascii, out);
        return;
      case Value::Kind::kArray:
        WriteArray(value.AsArray(), level, out);
        return;
      case Value::Kind::kObject:
        WriteObject(value.AsObject(), level, out);
        return;
      default:
        throw TemplateError("Object of type " + value.TypeName() + " is not JSON serializable");
    }
  }

 private:
  static void WriteFloat(double value, std::string& out) {
    if (std::isnan(value)) {
      out += "NaN";
    } else if (std::isinf(value)) {
      out += value > 0 ? "Infinity" : "-Infinity";
    } else {
      out += FormatPythonFloat(value);
    }
  }

  // Writes the separator before item `index` of a container at `level`.
  void WriteLead(size_t index, int level, std::string& out) const {
    if (index > 0) out += item_separator_;
    if (options_.indent) {
      out += '\n';
      for (int i = 0; i <= level; ++i) out += *options_.indent;
    }
  }

  void WriteClose(char close, int level, std::string& out) const {
    if (options_.indent) {
      out += '\n';
      for (int i = 0; i < level; ++i) out += *options_.indent;
    }
    out += close;
  }

  void WriteArray(const Array& items, int level, std::string& out) const {
    out += '[';
    if (items.empty()) {
      out += ']';
      return;
    }
    for (size_t i = 0; i < items.size(); ++i) {
      WriteLead(i, level, out);
      Write(items[i], level + 1, out);
    }
    WriteClose(']', level, out);
  }

  void WriteObject(const Object& object, int level, std::string& out) const {
    out += '{';
    if (object.entries.empty()) {
      out += '}';
      return;
    }
    std::vector<const std::pair<std::string, Value>*> entries;
    for (const auto& entry : object.entries) entries.push_back(&entry);
    if (options_.sort_keys) {
      std::stable_sort(entries.begin(), entries.end(),
                       [](auto* a, auto* b) { return a->first < b->first; });
    }
    for (size_t i = 0; i < entries.size(); ++i) {
      WriteLead(i, level, out);
      AppendJsonString(entries[i]->first, options_.ensure_ascii, out);
      out += options_.key_separator;
      Write(entries[i]->second, level + 1, out);
    }
    WriteClose('}', level, out);
  }

  const JsonDumpOptions& options_;
  std::string item_separator_;
};

}  // namespace

std::string DumpJson(const Value& value, const JsonDumpOptions& options) {
  std::string out;
  JsonWriter(options).Write(value, 0, out);
  return out;
}

}  // namespace mkserve::chat::jinja
