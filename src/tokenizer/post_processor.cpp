#include "tokenizer/post_processor.h"

#include <string>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "tokenizer/json_util.h"

namespace mkserve::tokenizer {

namespace {

// One template: fixed ids before and after the sequence.
class TemplateProcessor final : public PostProcessor {
 public:
  TemplateProcessor(std::vector<int32_t> prefix, std::vector<int32_t> suffix)
      : prefix_(std::move(prefix)), suffix_(std::move(suffix)) {}
  void Process(std::vector<int32_t>& ids, bool add_special_tokens) const override {
    if (!add_special_tokens) return;
    ids.insert(ids.begin(), prefix_.begin(), prefix_.end());
    ids.insert(ids.end(), suffix_.begin(), suffix_.end());
  }

 private:
  std::vector<int32_t> prefix_, suffix_;
};

class NoOpProcessor final : public PostProcessor {
 public:
  void Process(std::vector<int32_t>&, bool) const override {}
};

class SequenceProcessor final : public PostProcessor {
 public:
  explicit SequenceProcessor(std::vector<std::unique_ptr<PostProcessor>> steps)
      : steps_(std::move(steps)) {}
  void Process(std::vector<int32_t>& ids, bool add_special_tokens) const override {
    for (const auto& step : steps_) step->Process(ids, add_special_tokens);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> steps_;
};

std::vector<int32_t> SpecialTokenIds(const nlohmann::json& json, const std::string& name) {
  const std::string what = "TemplateProcessing post_processor";
  if (!json.contains("special_tokens") || !json["special_tokens"].contains(name)) {
    throw Error(what + ": template uses '" + name + "', which is not in special_tokens");
  }
  std::vector<int32_t> ids;
  for (const nlohmann::json& id : RequireArray(json["special_tokens"][name], "ids", what)) {
    ids.push_back(RequireTokenId(id, what + ": special token '" + name + "'"));
  }
  return ids;
}

std::unique_ptr<PostProcessor> MakeTemplate(const nlohmann::json& json) {
  const std::string what = "TemplateProcessing post_processor";
  std::vector<int32_t> prefix, suffix;
  bool seen_sequence = false;
  for (const nlohmann::json& piece : RequireArray(json, "single", what)) {
    if (piece.contains("Sequence")) {
      if (seen_sequence) throw Error(what + ": the single template names the sequence twice");
      seen_sequence = true;
    } else if (piece.contains("SpecialToken")) {
      std::vector<int32_t> ids =
          SpecialTokenIds(json, RequireString(piece["SpecialToken"], "id", what));
      auto& target = seen_sequence ? suffix : prefix;
      target.insert(target.end(), ids.begin(), ids.end());
    } else {
      throw Error(what + ": unknown template piece " + piece.dump());
    }
  }
  if (!seen_sequence) throw Error(what + ": the single template has no $A sequence");
  return std::make_unique<TemplateProcessor>(std::move(prefix), std::move(suffix));
}

std::unique_ptr<PostProcessor> MakeWrapping(const nlohmann::json& json, const std::string& what,
                                            const char* open, const char* close) {
  auto id_of = [&](const char* field) {
    if (!json.contains(field) || !json[field].is_array() || json[field].size() != 2) {
      throw Error(what + ": field \"" + field + "\" must be [token, id]");
    }
    return RequireTokenId(json[field][1], what + ": field \"" + field + "\"");
  };
  return std::make_unique<TemplateProcessor>(std::vector<int32_t>{id_of(open)},
                                             std::vector<int32_t>{id_of(close)});
}

}  // namespace

std::unique_ptr<PostProcessor> MakePostProcessor(const nlohmann::json& json) {
  if (json.is_null()) return nullptr;
  std::string type = RequireType(json, "post_processor");
  if (type == "TemplateProcessing") return MakeTemplate(json);
  if (type == "ByteLevel") return std::make_unique<NoOpProcessor>();
  if (type == "BertProcessing") return MakeWrapping(json, "BertProcessing", "cls", "sep");
  if (type == "RobertaProcessing") return MakeWrapping(json, "RobertaProcessing", "cls", "sep");
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PostProcessor>> steps;
    for (const nlohmann::json& step : RequireArray(json, "processors", "Sequence post_processor")) {
      if (auto processor = MakePostProcessor(step)) steps.push_back(std::move(processor));
    }
    return std::make_unique<SequenceProcessor>(std::move(steps));
  }
  throw Error("unsupported post_processor type '" + type + "'");
}

std::unique_ptr<PostProcessor> MakeBosEosProcessor(std::optional<int32_t> bos_id,
                                                   std::optional<int32_t> eos_id) {
  std::vector<int32_t> prefix, suffix;
  if (bos_id) prefix.push_back(*bos_id);
  if (eos_id) suffix.push_back(*eos_id);
  return std::make_unique<TemplateProcessor>(std::move(prefix), std::move(suffix));
}

}  // namespace mkserve::tokenizer
