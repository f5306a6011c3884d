#include <optional>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/utf8.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/decoder.h"
#include "tokenizer/json_util.h"
#include "tokenizer/split_pattern.h"

namespace mkserve::tokenizer {

namespace {

class ByteLevelDecoder final : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    const ByteLevelMap& map = ByteLevelMap::Get();
    for (const std::string& token : tokens) {
      // A token with characters outside the byte map (an added token) passes through as is.
      std::optional<std::string> decoded = map.Decode(token);
      bytes += decoded ? *decoded : token;
    }
    std::string text;
    AppendUtf8Lossy(text, bytes);
    tokens.assign(1, std::move(text));
  }
  std::optional<std::string> TokenBytes(const std::string& token) const override {
    return ByteLevelMap::Get().Decode(token);
  }
};

class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, bool strip_first)
      : replacement_(std::move(replacement)), strip_first_(strip_first) {}
  void DecodeChain(std::vector<std::string>& tokens) const override {
    Pattern marker = Pattern::Literal(replacement_);
    for (size_t i = 0; i < tokens.size(); ++i) {
      // HF drops every marker of the first token, not only a leading one.
      tokens[i] = ReplaceAll(marker, tokens[i], i == 0 && strip_first_ ? "" : " ");
    }
  }

 private:
  std::string replacement_;
  bool strip_first_;
};

std::optional<unsigned char> ParseByteToken(const std::string& token) {
  // "<0xAB>": exactly six characters, two upper- or lower-case hex digits.
  if (token.size() != 6 || !token.starts_with("<0x") || token[5] != '>') return std::nullopt;
  unsigned value = 0;
  for (int i = 3; i < 5; ++i) {
    char c = token[i];
    int digit = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                       : -1;
    if (digit < 0) return std::nullopt;
    value = value * 16 + static_cast<unsigned>(digit);
  }
  return static_cast<unsigned char>(value);
}

class ByteFallbackDecoder final : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string pending;
    auto flush = [&] {
      if (pending.empty()) return;
      if (IsValidUtf8(pending)) {
        out.push_back(pending);
      } else {
        // One U+FFFD per byte when the byte run is not valid UTF-8, as HF does.
        for (size_t i = 0; i < pending.size(); ++i) out.push_back("\xEF\xBF\xBD");
      }
      pending.clear();
    };
    for (std::string& token : tokens) {
      if (auto byte = ParseByteToken(token)) {
        pending.push_back(static_cast<char>(*byte));
        continue;
      }
      flush();
      out.push_back(std::move(token));
    }
    flush();
    tokens = std::move(out);
  }
  std::optional<std::string> TokenBytes(const std::string& token) const override {
    const std::optional<unsigned char> byte = ParseByteToken(token);
    if (!byte) return std::nullopt;
    return std::string(1, static_cast<char>(*byte));
  }
};

class FuseDecoder final : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>& tokens) const override {
    std::string joined;
    for (const std::string& token : tokens) joined += token;
    tokens.assign(1, std::move(joined));
  }
};

class StripDecoder final : public Decoder {
 public:
  StripDecoder(char32_t content, size_t start, size_t stop)
      : content_(content), start_(start), stop_(stop) {}
  void DecodeChain(std::vector<std::string>& tokens) const override {
    for (std::string& token : tokens) token = Strip(token);
  }

 private:
  std::string Strip(const std::string& token) const {
    std::vector<size_t> starts;  // byte offset of each code point
    for (size_t pos = 0; pos < token.size(); NextCodePoint(token, pos)) starts.push_back(pos);
    auto code_point_at = [&](size_t i) {
      size_t pos = starts[i];
      return NextCodePoint(token, pos);
    };
    size_t begin = 0, end = starts.size();
    while (begin < std::min(start_, starts.size()) && code_point_at(begin) == content_) ++begin;
    size_t stripped = 0;
    while (end > begin && stripped < stop_ && code_point_at(end - 1) == content_) --end, ++stripped;
    size_t begin_byte = begin < starts.size() ? starts[begin] : token.size();
    size_t end_byte = end < starts.size() ? starts[end] : token.size();
    return token.substr(begin_byte, end_byte - begin_byte);
  }

  char32_t content_;
  size_t start_, stop_;
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(Pattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void DecodeChain(std::vector<std::string>& tokens) const override {
    for (std::string& token : tokens) token = ReplaceAll(pattern_, token, content_);
  }

 private:
  Pattern pattern_;
  std::string content_;
};

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> steps)
      : steps_(std::move(steps)) {}
  void DecodeChain(std::vector<std::string>& tokens) const override {
    for (const auto& step : steps_) step->DecodeChain(tokens);
  }
  std::optional<std::string> TokenBytes(const std::string& token) const override {
    for (const auto& step : steps_) {
      if (std::optional<std::string> bytes = step->TokenBytes(token)) return bytes;
    }
    return std::nullopt;
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

std::unique_ptr<Decoder> MakeMetaspace(const nlohmann::json& json) {
  const std::string what = "Metaspace decoder";
  bool strip_first = OptionalBool(json, "add_prefix_space", true, what);
  if (json.contains("prepend_scheme"))
    strip_first = RequireString(json, "prepend_scheme", what) != "never";
  return std::make_unique<MetaspaceDecoder>(RequireString(json, "replacement", what), strip_first);
}

std::unique_ptr<Decoder> MakeStrip(const nlohmann::json& json) {
  std::string content = RequireString(json, "content", "Strip decoder");
  size_t pos = 0;
  if (content.empty() || (NextCodePoint(content, pos), pos != content.size())) {
    throw Error("Strip decoder: content must be one character, got '" + content + "'");
  }
  pos = 0;
  return std::make_unique<StripDecoder>(NextCodePoint(content, pos),
                                        OptionalCount(json, "start", 0, "Strip decoder"),
                                        OptionalCount(json, "stop", 0, "Strip decoder"));
}

}  // namespace

std::unique_ptr<Decoder> MakeDecoder(const nlohmann::json& json) {
  if (json.is_null()) return nullptr;
  std::string type = RequireType(json, "decoder");
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "Metaspace") return MakeMetaspace(json);
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") return MakeStrip(json);
  if (type == "Replace") {
    return std::make_unique<ReplaceDecoder>(
        Pattern::FromJson(json.value("pattern", nlohmann::json()), "Replace decoder"),
        RequireString(json, "content", "Replace decoder"));
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Decoder>> steps;
    for (const nlohmann::json& step : RequireArray(json, "decoders", "Sequence decoder")) {
      if (auto decoder = MakeDecoder(step)) steps.push_back(std::move(decoder));
    }
    return std::make_unique<SequenceDecoder>(std::move(steps));
  }
  throw Error("unsupported decoder type '" + type + "'");
}

}  // namespace mkserve::tokenizer
