#include <nlohmann/json.hpp>

#include "common/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/json_util.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/split_pattern.h"
#include "tokenizer/unicode_properties.h"

namespace mkserve::tokenizer {

namespace {

// Replaces each piece by the spans `split` picks from its text.
template <typename SplitFn>
void SplitEach(std::vector<PreToken>& pieces, SplitFn&& split) {
  std::vector<PreToken> out;
  out.reserve(pieces.size());
  for (PreToken& piece : pieces) {
    bool first = true;
    for (Span span : split(piece)) {
      out.push_back({piece.text.substr(span.begin, span.end - span.begin),
                     piece.at_start && first && span.begin == 0});
      first = false;
    }
  }
  pieces = std::move(out);
}

class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(Pattern pattern, SplitBehavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  void PreTokenize(std::vector<PreToken>& pieces) const override {
    SplitEach(pieces, [&](const PreToken& piece) {
      return ApplySplitBehavior(pattern_.Cover(piece.text, invert_), behavior_);
    });
  }

 private:
  Pattern pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space) {
    if (use_regex) regex_.emplace(Pattern::FromRegex(kGpt2SplitRegex));
  }
  void PreTokenize(std::vector<PreToken>& pieces) const override {
    if (add_prefix_space_) {
      for (PreToken& piece : pieces) {
        if (!piece.text.starts_with(' ')) piece.text.insert(0, 1, ' ');
      }
    }
    if (regex_) {
      SplitEach(pieces, [&](const PreToken& piece) {
        return ApplySplitBehavior(regex_->Cover(piece.text, false), SplitBehavior::kIsolated);
      });
    }
    const ByteLevelMap& map = ByteLevelMap::Get();
    for (PreToken& piece : pieces) {
      std::string mapped;
      mapped.reserve(piece.text.size() * 2);
      map.Encode(piece.text, mapped);
      piece.text = std::move(mapped);
    }
  }

 private:
  bool add_prefix_space_;
  std::optional<Pattern> regex_;
};

enum class PrependScheme { kAlways, kFirst, kNever };

class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  MetaspacePreTokenizer(std::string replacement, PrependScheme scheme, bool split)
      : replacement_(std::move(replacement)), scheme_(scheme), split_(split) {}
  void PreTokenize(std::vector<PreToken>& pieces) const override {
    Pattern space = Pattern::Literal(" ");
    for (PreToken& piece : pieces) {
      piece.text = ReplaceAll(space, piece.text, replacement_);
      bool prepend =
          scheme_ == PrependScheme::kAlways || (scheme_ == PrependScheme::kFirst && piece.at_start);
      if (prepend && !piece.text.starts_with(replacement_)) piece.text.insert(0, replacement_);
    }
    if (!split_) return;
    Pattern marker = Pattern::Literal(replacement_);
    SplitEach(pieces, [&](const PreToken& piece) {
      return ApplySplitBehavior(marker.Cover(piece.text, false), SplitBehavior::kMergedWithNext);
    });
  }

 private:
  std::string replacement_;
  PrependScheme scheme_;
  bool split_;
};

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps)
      : steps_(std::move(steps)) {}
  void PreTokenize(std::vector<PreToken>& pieces) const override {
    for (const auto& step : steps_) step->PreTokenize(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

std::unique_ptr<PreTokenizer> MakeSplit(const nlohmann::json& json) {
  return std::make_unique<SplitPreTokenizer>(
      Pattern::FromJson(json.value("pattern", nlohmann::json()), "Split pre-tokenizer"),
      ParseSplitBehavior(RequireString(json, "behavior", "Split pre-tokenizer")),
      OptionalBool(json, "invert", false, "Split pre-tokenizer"));
}

std::unique_ptr<PreTokenizer> MakeMetaspace(const nlohmann::json& json) {
  const std::string what = "Metaspace pre-tokenizer";
  std::string replacement = RequireString(json, "replacement", what);
  PrependScheme scheme = OptionalBool(json, "add_prefix_space", true, what) ? PrependScheme::kAlways
                                                                            : PrependScheme::kNever;
  if (json.contains("prepend_scheme")) {
    std::string name = RequireString(json, "prepend_scheme", what);
    if (name == "always")
      scheme = PrependScheme::kAlways;
    else if (name == "first")
      scheme = PrependScheme::kFirst;
    else if (name == "never")
      scheme = PrependScheme::kNever;
    else
      throw Error(what + ": unknown prepend_scheme '" + name + "'");
  }
  return std::make_unique<MetaspacePreTokenizer>(replacement, scheme,
                                                 OptionalBool(json, "split", true, what));
}

std::unique_ptr<PreTokenizer> MakeSequence(const nlohmann::json& json) {
  std::vector<std::unique_ptr<PreTokenizer>> steps;
  for (const nlohmann::json& step : RequireArray(json, "pretokenizers", "Sequence pre-tokenizer")) {
    if (auto pre_tokenizer = MakePreTokenizer(step)) steps.push_back(std::move(pre_tokenizer));
  }
  return std::make_unique<SequencePreTokenizer>(std::move(steps));
}

std::unique_ptr<PreTokenizer> MakeCodePointSplit(bool (*predicate)(char32_t),
                                                 SplitBehavior behavior) {
  return std::make_unique<SplitPreTokenizer>(Pattern::CodePoints(predicate), behavior, false);
}

}  // namespace

std::unique_ptr<PreTokenizer> MakePreTokenizer(const nlohmann::json& json) {
  if (json.is_null()) return nullptr;
  std::string type = RequireType(json, "pre_tokenizer");
  if (type == "Split") return MakeSplit(json);
  if (type == "Sequence") return MakeSequence(json);
  if (type == "Metaspace") return MakeMetaspace(json);
  if (type == "ByteLevel") {
    return std::make_unique<ByteLevelPreTokenizer>(
        OptionalBool(json, "add_prefix_space", true, "ByteLevel pre-tokenizer"),
        OptionalBool(json, "use_regex", true, "ByteLevel pre-tokenizer"));
  }
  if (type == "Digits") {
    bool individual = OptionalBool(json, "individual_digits", false, "Digits pre-tokenizer");
    return MakeCodePointSplit(IsNumeric,
                              individual ? SplitBehavior::kIsolated : SplitBehavior::kContiguous);
  }
  if (type == "Whitespace") {
    return std::make_unique<SplitPreTokenizer>(Pattern::FromRegex(R"(\w+|[^\w\s]+)"),
                                               SplitBehavior::kRemoved, true);
  }
  if (type == "WhitespaceSplit") return MakeCodePointSplit(IsWhitespace, SplitBehavior::kRemoved);
  if (type == "Punctuation") {
    SplitBehavior behavior = ParseSplitBehavior(json.value("behavior", std::string("Isolated")));
    return MakeCodePointSplit(IsPunctuation, behavior);
  }
  throw Error("unsupported pre_tokenizer type '" + type + "'");
}

}  // namespace mkserve::tokenizer
