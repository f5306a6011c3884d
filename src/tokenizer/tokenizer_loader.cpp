// Tokenizer::Load: reads tokenizer.json and its companion files and builds the pipeline.
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/regular_file.h"
#include "tokenizer/json_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"

namespace mkserve::tokenizer {

namespace {

namespace fs = std::filesystem;

std::string ReadFile(const fs::path& path) {
  RequireRegularFile(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

nlohmann::json ParseJson(std::string_view text, const std::string& name) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& error) {
    throw Error(name + " is not valid JSON: " + error.what());
  }
}

AddedToken ParseAddedToken(const nlohmann::json& json) {
  const std::string what = "added_tokens entry";
  if (!json.is_object() || !json.contains("id")) {
    throw Error(what + " needs an integer \"id\": " + json.dump().substr(0, 200));
  }
  AddedToken token;
  token.id = RequireTokenId(json["id"], what + " " + json.dump().substr(0, 200));
  token.content = RequireString(json, "content", what);
  token.special = OptionalBool(json, "special", false, what);
  token.single_word = OptionalBool(json, "single_word", false, what);
  token.lstrip = OptionalBool(json, "lstrip", false, what);
  token.rstrip = OptionalBool(json, "rstrip", false, what);
  token.normalized = OptionalBool(json, "normalized", !token.special, what);
  return token;
}

// tokenizer_config.json names tokens as a string or as an AddedToken object.
std::optional<std::string> TokenName(const nlohmann::json& config, const std::string& field) {
  if (!config.contains(field) || config[field].is_null()) return std::nullopt;
  const nlohmann::json& value = config[field];
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value["content"].is_string()) {
    return value["content"].get<std::string>();
  }
  throw Error("tokenizer_config.json: \"" + field + "\" must be a string or {\"content\": ...}");
}

std::optional<std::string> ChatTemplate(const nlohmann::json& config) {
  if (!config.contains("chat_template") || config["chat_template"].is_null()) return std::nullopt;
  const nlohmann::json& value = config["chat_template"];
  if (value.is_string()) return value.get<std::string>();
  // A list of {"name", "template"}: the one named "default" (else the first) is the chat template.
  if (value.is_array() && !value.empty()) {
    for (const nlohmann::json& entry : value) {
      if (entry.value("name", std::string()) == "default") return entry.value("template", "");
    }
    return value[0].value("template", std::string());
  }
  throw Error("tokenizer_config.json: \"chat_template\" must be a string or a list of templates");
}

struct Companions {
  nlohmann::json config = nlohmann::json::object();
  nlohmann::json special_tokens_map = nlohmann::json::object();
  std::optional<std::string> chat_template_file;
};

void BuildPipeline(const nlohmann::json& json, Tokenizer::Impl& impl) {
  if (!json.is_object()) throw Error("tokenizer.json must be a JSON object");
  if (!json.contains("model")) throw Error("tokenizer.json has no \"model\"");
  impl.normalizer = MakeNormalizer(json.value("normalizer", nlohmann::json()));
  impl.pre_tokenizer = MakePreTokenizer(json.value("pre_tokenizer", nlohmann::json()));
  impl.model = BpeModel::FromJson(json["model"]);
  impl.post_processor = MakePostProcessor(json.value("post_processor", nlohmann::json()));
  impl.decoder = MakeDecoder(json.value("decoder", nlohmann::json()));
  std::vector<AddedToken> added;
  int32_t vocab_size = impl.model->id_limit();
  if (json.contains("added_tokens") && !json["added_tokens"].is_null()) {
    if (!json["added_tokens"].is_array()) throw Error("\"added_tokens\" must be an array");
    for (const nlohmann::json& entry : json["added_tokens"]) {
      added.push_back(ParseAddedToken(entry));
      vocab_size = std::max(vocab_size, added.back().id + 1);
    }
  }
  // The ids the post-processor adds must be tokens: one past the vocabulary would reach past the
  // model's embedding table.
  if (impl.post_processor) {
    std::vector<int32_t> special_ids;
    impl.post_processor->Process(special_ids, /*add_special_tokens=*/true);
    for (int32_t id : special_ids) {
      if (id >= vocab_size) {
        throw Error("post_processor adds token id " + std::to_string(id) +
                    ", outside the vocabulary of " + std::to_string(vocab_size));
      }
    }
  }
  impl.added = AddedVocabulary(std::move(added), impl.normalizer.get());
  impl.vocab_size = vocab_size;
}

void ApplyConfig(const Companions& files, const TokenizerOptions& options, Tokenizer& tokenizer,
                 Tokenizer::Impl& impl) {
  auto named = [&](const std::string& field) -> std::optional<NamedToken> {
    std::optional<std::string> name = TokenName(files.config, field);
    if (!name) name = TokenName(files.special_tokens_map, field);
    if (!name) return std::nullopt;
    return NamedToken{*name, tokenizer.TokenToId(*name)};
  };
  impl.bos = named("bos_token");
  impl.eos = named("eos_token");
  impl.pad = named("pad_token");
  impl.chat_template =
      files.chat_template_file ? files.chat_template_file : ChatTemplate(files.config);
  const nlohmann::json& config = files.config;
  bool has_flags = config.contains("add_bos_token") || config.contains("add_eos_token");
  if (!options.apply_config_bos_eos || !has_flags) return;
  bool add_bos = OptionalBool(config, "add_bos_token", false, "tokenizer_config.json");
  bool add_eos = OptionalBool(config, "add_eos_token", false, "tokenizer_config.json");
  auto id_of = [](const std::optional<NamedToken>& token, const char* flag) {
    if (!token || !token->id) {
      throw Error(std::string("tokenizer_config.json sets ") + flag +
                  " but its token is missing from the vocabulary");
    }
    return *token->id;
  };
  impl.post_processor = MakeBosEosProcessor(
      add_bos ? std::optional<int32_t>(id_of(impl.bos, "add_bos_token")) : std::nullopt,
      add_eos ? std::optional<int32_t>(id_of(impl.eos, "add_eos_token")) : std::nullopt);
}

}  // namespace

Tokenizer Tokenizer::FromJsonText(std::string_view tokenizer_json, std::string_view config_json,
                                  const TokenizerOptions& options) {
  Companions files;
  if (!config_json.empty()) files.config = ParseJson(config_json, "tokenizer_config.json");
  auto impl = std::make_unique<Impl>();
  try {
    BuildPipeline(ParseJson(tokenizer_json, "tokenizer.json"), *impl);
    Tokenizer tokenizer(std::move(impl));
    ApplyConfig(files, options, tokenizer, *tokenizer.impl_);
    return tokenizer;
  } catch (const nlohmann::json::exception& error) {
    throw Error(std::string("tokenizer.json has a field of the wrong type: ") + error.what());
  }
}

Tokenizer Tokenizer::Load(const fs::path& path, const TokenizerOptions& options) {
  std::error_code not_a_directory;
  fs::path file = fs::is_directory(path, not_a_directory) ? path / "tokenizer.json" : path;
  if (!EntryExists(file)) throw Error("no tokenizer.json at " + file.string());
  fs::path dir = file.parent_path();
  Companions files;
  try {
    if (EntryExists(dir / "tokenizer_config.json")) {
      files.config = ParseJson(ReadFile(dir / "tokenizer_config.json"), "tokenizer_config.json");
    }
    if (EntryExists(dir / "special_tokens_map.json")) {
      files.special_tokens_map =
          ParseJson(ReadFile(dir / "special_tokens_map.json"), "special_tokens_map.json");
    }
    if (EntryExists(dir / "chat_template.jinja")) {
      files.chat_template_file = ReadFile(dir / "chat_template.jinja");
    }
    auto impl = std::make_unique<Impl>();
    BuildPipeline(ParseJson(ReadFile(file), file.string()), *impl);
    Tokenizer tokenizer(std::move(impl));
    ApplyConfig(files, options, tokenizer, *tokenizer.impl_);
    return tokenizer;
  } catch (const nlohmann::json::exception& error) {
    throw Error(file.string() + ": a field has the wrong type: " + error.what());
  } catch (const Error& error) {
    throw Error(file.string() + ": " + error.what());
  }
}

}  // namespace mkserve::tokenizer
