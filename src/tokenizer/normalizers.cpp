#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "common/error.h"
#include "common/utf8.h"
#include "tokenizer/json_util.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/split_pattern.h"
#include "tokenizer/unicode_properties.h"

namespace mkserve::tokenizer {

namespace {

enum class UnicodeForm { kNfc, kNfd, kNfkc, kNfkd };

class UnicodeNormalizer final : public Normalizer {
 public:
  explicit UnicodeNormalizer(UnicodeForm form) {
    UErrorCode status = U_ZERO_ERROR;
    switch (form) {
      case UnicodeForm::kNfc:
        icu_ = icu::Normalizer2::getNFCInstance(status);
        break;
      case UnicodeForm::kNfd:
        icu_ = icu::Normalizer2::getNFDInstance(status);
        break;
      case UnicodeForm::kNfkc:
        icu_ = icu::Normalizer2::getNFKCInstance(status);
        break;
      case UnicodeForm::kNfkd:
        icu_ = icu::Normalizer2::getNFKDInstance(status);
        break;
    }
    if (U_FAILURE(status)) throw Error(std::string("ICU normalizer: ") + u_errorName(status));
  }

  std::string Normalize(std::string_view text) const override {
    UErrorCode status = U_ZERO_ERROR;
    icu::StringPiece piece(text.data(), static_cast<int32_t>(text.size()));
    // Most text is already normalized; the quick check avoids a copy through ICU.
    if (icu_->isNormalizedUTF8(piece, status) && U_SUCCESS(status)) return std::string(text);
    status = U_ZERO_ERROR;
    std::string out;
    icu::StringByteSink<std::string> sink(&out);
    icu_->normalizeUTF8(0, piece, sink, nullptr, status);
    if (U_FAILURE(status)) throw Error(std::string("ICU normalize failed: ") + u_errorName(status));
    return out;
  }

 private:
  const icu::Normalizer2* icu_ = nullptr;
};

class LowercaseNormalizer final : public Normalizer {
 public:
  std::string Normalize(std::string_view text) const override {
    constexpr char32_t kCapitalIWithDot = 0x130;  // the one full mapping longer than a code point
    std::string out;
    out.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) {
      char32_t c = NextCodePoint(text, pos);
      if (c == kCapitalIWithDot) {
        out += "i\xCC\x87";
      } else {
        AppendUtf8(out, static_cast<char32_t>(u_tolower(static_cast<UChar32>(c))));
      }
    }
    return out;
  }
};

class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(Pattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  std::string Normalize(std::string_view text) const override {
    return ReplaceAll(pattern_, text, content_);
  }

 private:
  Pattern pattern_;
  std::string content_;
};

class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  std::string Normalize(std::string_view text) const override {
    if (text.empty()) return {};
    return prefix_ + std::string(text);
  }

 private:
  std::string prefix_;
};

class StripNormalizer final : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  std::string Normalize(std::string_view text) const override {
    size_t begin = 0, end = text.size();
    if (left_) {
      for (size_t pos = 0; pos < end; begin = pos) {
        if (!IsWhitespace(NextCodePoint(text, pos))) break;
      }
    }
    if (right_) {
      while (end > begin) {
        size_t start = end - 1;
        while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
        size_t pos = start;
        if (!IsWhitespace(NextCodePoint(text, pos))) break;
        end = start;
      }
    }
    return std::string(text.substr(begin, end - begin));
  }

 private:
  bool left_, right_;
};

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps)
      : steps_(std::move(steps)) {}
  std::string Normalize(std::string_view text) const override {
    std::string current(text);
    for (const auto& step : steps_) current = step->Normalize(current);
    return current;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

std::unique_ptr<Normalizer> MakeSequence(const nlohmann::json& json) {
  std::vector<std::unique_ptr<Normalizer>> steps;
  for (const nlohmann::json& step : RequireArray(json, "normalizers", "Sequence normalizer")) {
    if (auto normalizer = MakeNormalizer(step)) steps.push_back(std::move(normalizer));
  }
  return std::make_unique<SequenceNormalizer>(std::move(steps));
}

}  // namespace

std::unique_ptr<Normalizer> MakeNormalizer(const nlohmann::json& json) {
  if (json.is_null()) return nullptr;
  std::string type = RequireType(json, "normalizer");
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(UnicodeForm::kNfc);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(UnicodeForm::kNfd);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(UnicodeForm::kNfkc);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(UnicodeForm::kNfkd);
  if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
  if (type == "Sequence") return MakeSequence(json);
  if (type == "Replace") {
    return std::make_unique<ReplaceNormalizer>(
        Pattern::FromJson(json.value("pattern", nlohmann::json()), "Replace normalizer"),
        RequireString(json, "content", "Replace normalizer"));
  }
  if (type == "Prepend") {
    return std::make_unique<PrependNormalizer>(
        RequireString(json, "prepend", "Prepend normalizer"));
  }
  if (type == "Strip") {
    return std::make_unique<StripNormalizer>(json.value("strip_left", false),
                                             json.value("strip_right", false));
  }
  throw Error("unsupported normalizer type '" + type + "'");
}

}  // namespace mkserve::tokenizer
