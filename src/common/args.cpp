#include "common/args.h"

#include <charconv>

#include "common/error.h"

namespace mkserve {
namespace {

int64_t ParseInt(const std::string& name, const std::string& text) {
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    throw Error("--" + name + " expects an integer, got '" + text + "'");
  }
  return value;
}

}  // namespace

Args::Args(std::span<const std::string> argv) {
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& word = argv[i];
    if (word.size() < 3 || word.rfind("--", 0) != 0) {
      throw Error("unexpected argument '" + word + "' (flags look like --name value)");
    }
    Flag flag{word.substr(2), std::nullopt};
    if (auto eq = flag.name.find('='); eq != std::string::npos) {
      flag.value = flag.name.substr(eq + 1);
      flag.name.resize(eq);
    } else if (i + 1 < argv.size() && argv[i + 1].rfind("--", 0) != 0) {
      flag.value = argv[++i];
    }
    flags_.push_back(std::move(flag));
  }
}

Args::Flag* Args::Find(const std::string& name) {
  Flag* found = nullptr;
  for (Flag& flag : flags_) {
    if (flag.name != name) continue;
    if (found) throw Error("--" + name + " is given more than once");
    found = &flag;
  }
  if (found) found->used = true;
  return found;
}

std::optional<std::string> Args::Value(const std::string& name) {
  Flag* flag = Find(name);
  if (!flag) return std::nullopt;
  if (!flag->value) throw Error("--" + name + " needs a value");
  return flag->value;
}

std::string Args::String(const std::string& name, const std::string& fallback) {
  return Value(name).value_or(fallback);
}

std::string Args::RequiredString(const std::string& name) {
  auto value = Value(name);
  if (!value) throw Error("missing required flag --" + name);
  return *value;
}

int64_t Args::Int(const std::string& name, int64_t fallback) {
  auto value = Value(name);
  return value ? ParseInt(name, *value) : fallback;
}

int64_t Args::Int(const std::string& name, int64_t fallback, int64_t min, int64_t max) {
  const int64_t value = Int(name, fallback);
  if (value < min || value > max) {
    throw Error("--" + name + " must be " + std::to_string(min) + ".." + std::to_string(max) +
                ", got " + std::to_string(value));
  }
  return value;
}

double Args::Double(const std::string& name, double fallback) {
  auto value = Value(name);
  if (!value) return fallback;
  try {
    size_t used = 0;
    double result = std::stod(*value, &used);
    if (used == value->size()) return result;
  } catch (const std::exception&) {
  }
  throw Error("--" + name + " expects a number, got '" + *value + "'");
}

std::vector<std::string> Args::StringList(const std::string& name,
                                          std::vector<std::string> fallback) {
  auto value = Value(name);
  if (!value) return fallback;
  std::vector<std::string> result;
  size_t start = 0;
  while (start <= value->size()) {
    size_t comma = value->find(',', start);
    if (comma == std::string::npos) comma = value->size();
    result.push_back(value->substr(start, comma - start));
    start = comma + 1;
  }
  return result;
}

std::vector<int64_t> Args::IntList(const std::string& name, std::vector<int64_t> fallback) {
  if (!Value(name)) return fallback;
  std::vector<int64_t> result;
  for (const std::string& item : StringList(name, {})) result.push_back(ParseInt(name, item));
  return result;
}

bool Args::Switch(const std::string& name) {
  Flag* flag = Find(name);
  if (!flag) return false;
  if (flag->value) throw Error("--" + name + " takes no value (got '" + *flag->value + "')");
  return true;
}

void Args::Finish() const {
  for (const Flag& flag : flags_) {
    if (!flag.used) throw Error("unknown flag --" + flag.name);
  }
}

}  // namespace mkserve
