#include "tokenizer/tiny_tokenizer.h"

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "tokenizer/bpe_trainer.h"

namespace mkserve::tokenizer {

namespace {

using nlohmann::json;
constexpr int32_t kNumReserved = kTinyVocabSize - kTinyFirstReservedId;

std::vector<TinySpecialToken> AllAddedTokens(std::vector<std::string>& reserved_names) {
  std::vector<TinySpecialToken> tokens(kTinySpecialTokens.begin(), kTinySpecialTokens.end());
  for (int32_t i = 0; i < kNumReserved; ++i) {
    reserved_names.push_back("<|RESERVED_" + std::to_string(i) + "|>");
  }
  for (int32_t i = 0; i < kNumReserved; ++i) {
    tokens.push_back({kTinyFirstReservedId + i, reserved_names[i], true});
  }
  return tokens;
}

json AddedTokenJson(const TinySpecialToken& token) {
  return {{"id", token.id},          {"content", std::string(token.content)},
          {"single_word", false},    {"lstrip", false},
          {"rstrip", false},         {"normalized", false},
          {"special", token.special}};
}

json ModelJson(const TrainedBpe& bpe, const std::vector<TinySpecialToken>& added) {
  json vocab = json::object();
  for (const TinySpecialToken& token : added) vocab[std::string(token.content)] = token.id;
  for (size_t i = 0; i < bpe.tokens.size(); ++i) {
    vocab[bpe.tokens[i]] = kTinyFirstByteId + static_cast<int32_t>(i);
  }
  if (vocab.size() != static_cast<size_t>(kTinyVocabSize)) {
    throw Error("tiny tokenizer: vocabulary has " + std::to_string(vocab.size()) + " entries, " +
                "expected " + std::to_string(kTinyVocabSize));
  }
  json merges = json::array();
  for (const auto& [left, right] : bpe.merges) merges.push_back({left, right});
  return {{"type", "BPE"},
          {"dropout", nullptr},
          {"unk_token", nullptr},
          {"continuing_subword_prefix", nullptr},
          {"end_of_word_suffix", nullptr},
          {"fuse_unk", false},
          {"byte_fallback", false},
          {"ignore_merges", false},
          {"vocab", vocab},
          {"merges", merges}};
}

json PostProcessorJson() {
  json bos = {{"SpecialToken", {{"id", "<BOS_TOKEN>"}, {"type_id", 0}}}};
  json a = {{"Sequence", {{"id", "A"}, {"type_id", 0}}}};
  json b = {{"Sequence", {{"id", "B"}, {"type_id", 1}}}};
  return {{"type", "TemplateProcessing"},
          {"single", {bos, a}},
          {"pair", {bos, a, b}},
          {"special_tokens",
           {{"<BOS_TOKEN>",
             {{"id", "<BOS_TOKEN>"}, {"ids", {kTinyBosId}}, {"tokens", {"<BOS_TOKEN>"}}}}}}};
}

json TokenizerJson(const TrainedBpe& bpe) {
  std::vector<std::string> reserved_names;
  std::vector<TinySpecialToken> added = AllAddedTokens(reserved_names);
  json added_json = json::array();
  for (const TinySpecialToken& token : added) added_json.push_back(AddedTokenJson(token));
  json split = {{"type", "Split"},
                {"pattern", {{"Regex", std::string(kTinySplitRegex)}}},
                {"behavior", "Isolated"},
                {"invert", false}};
  json byte_level = {{"type", "ByteLevel"},
                     {"add_prefix_space", false},
                     {"trim_offsets", true},
                     {"use_regex", false}};
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", added_json},
          {"normalizer", nullptr},
          {"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", {split, byte_level}}}},
          {"post_processor", PostProcessorJson()},
          {"decoder",
           {{"type", "ByteLevel"},
            {"add_prefix_space", true},
            {"trim_offsets", true},
            {"use_regex", true}}},
          {"model", ModelJson(bpe, added)}};
}

json ConfigJson() {
  return {{"tokenizer_class", "PreTrainedTokenizerFast"},
          {"bos_token", "<BOS_TOKEN>"},
          {"eos_token", "<|END_OF_TURN_TOKEN|>"},
          {"pad_token", "<PAD>"},
          {"unk_token", "<UNK>"},
          {"add_bos_token", true},
          {"add_eos_token", false},
          {"add_prefix_space", false},
          {"legacy", true},
          {"clean_up_tokenization_spaces", false},
          {"spaces_between_special_tokens", false},
          {"model_max_length", 1 << 20}};
}

void WriteJson(const std::filesystem::path& path, const json& value) {
  std::ofstream out(path, std::ios::binary);
  out << value.dump(2) << '\n';
  if (!out) throw Error("cannot write " + path.string());
}

}  // namespace

void WriteTinyTokenizer(const std::filesystem::path& dir) {
  TrainedBpe bpe = TrainByteLevelBpe(TinyTrainingText(), kTinyNumMerges, kTinySplitRegex);
  std::filesystem::create_directories(dir);
  WriteJson(dir / "tokenizer.json", TokenizerJson(bpe));
  WriteJson(dir / "tokenizer_config.json", ConfigJson());
}

}  // namespace mkserve::tokenizer
