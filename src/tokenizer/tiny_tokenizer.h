// The tokenizer of the tiny built-in model: byte-level BPE trained by TrainByteLevelBpe on the
// text in data/tokenizer/ (compiled into the binary), with the Command-4 special tokens at fixed
// ids. The tiny model's config depends on these ids, so they are named here once.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <string_view>

namespace mkserve::tokenizer {

inline constexpr int32_t kTinyVocabSize = 1024;
inline constexpr int32_t kTinyPadId = 0;
inline constexpr int32_t kTinyMaskId = 1;
inline constexpr int32_t kTinyBosId = 2;
inline constexpr int32_t kTinyDocumentEosId = 3;  // <EOS_TOKEN>, not the chat end of turn
inline constexpr int32_t kTinyUnkId = 4;
inline constexpr int32_t kTinyFirstByteId = 5;  // 256 byte tokens, GPT-2 byte order
inline constexpr int32_t kTinyFirstMergeId = kTinyFirstByteId + 256;  // 261
inline constexpr int32_t kTinyFirstCommandId = 1005;
inline constexpr int32_t kTinyNumMerges = kTinyFirstCommandId - kTinyFirstMergeId;  // 744

inline constexpr int32_t kTinyStartOfTurnId = 1005;
inline constexpr int32_t kTinyEndOfTurnId = 1006;
inline constexpr int32_t kTinyUserId = 1007;
inline constexpr int32_t kTinyChatbotId = 1008;
inline constexpr int32_t kTinySystemId = 1009;
inline constexpr int32_t kTinyStartThinkingId = 1010;
inline constexpr int32_t kTinyEndThinkingId = 1011;
inline constexpr int32_t kTinyStartTextId = 1012;
inline constexpr int32_t kTinyEndTextId = 1013;
inline constexpr int32_t kTinyStartActionId = 1014;
inline constexpr int32_t kTinyEndActionId = 1015;
inline constexpr int32_t kTinyStartToolResultId = 1016;
inline constexpr int32_t kTinyEndToolResultId = 1017;
inline constexpr int32_t kTinyStartResponseId = 1018;
inline constexpr int32_t kTinyEndResponseId = 1019;
inline constexpr int32_t kTinyNewFileId = 1020;
inline constexpr int32_t kTinyFirstReservedId = 1021;    // <|RESERVED_0|> .. <|RESERVED_2|>
inline constexpr int32_t kTinyEosId = kTinyEndOfTurnId;  // the chat EOS, as in North

// Added tokens at 0..4 and 1005..1020, in id order. North marks the turn start and the text /
// action markers as not special (they must survive skip_special_tokens for the output parser).
struct TinySpecialToken {
  int32_t id;
  std::string_view content;
  bool special;
};
inline constexpr std::array<TinySpecialToken, 21> kTinySpecialTokens = {{
    {kTinyPadId, "<PAD>", true},
    {kTinyMaskId, "<MASK_TOKEN>", true},
    {kTinyBosId, "<BOS_TOKEN>", true},
    {kTinyDocumentEosId, "<EOS_TOKEN>", true},
    {kTinyUnkId, "<UNK>", true},
    {kTinyStartOfTurnId, "<|START_OF_TURN_TOKEN|>", false},
    {kTinyEndOfTurnId, "<|END_OF_TURN_TOKEN|>", true},
    {kTinyUserId, "<|USER_TOKEN|>", true},
    {kTinyChatbotId, "<|CHATBOT_TOKEN|>", true},
    {kTinySystemId, "<|SYSTEM_TOKEN|>", true},
    {kTinyStartThinkingId, "<|START_THINKING|>", true},
    {kTinyEndThinkingId, "<|END_THINKING|>", true},
    {kTinyStartTextId, "<|START_TEXT|>", false},
    {kTinyEndTextId, "<|END_TEXT|>", false},
    {kTinyStartActionId, "<|START_ACTION|>", false},
    {kTinyEndActionId, "<|END_ACTION|>", false},
    {kTinyStartToolResultId, "<|START_TOOL_RESULT|>", true},
    {kTinyEndToolResultId, "<|END_TOOL_RESULT|>", true},
    {kTinyStartResponseId, "<|START_RESPONSE|>", true},
    {kTinyEndResponseId, "<|END_RESPONSE|>", true},
    {kTinyNewFileId, "<|NEW_FILE|>", true},
}};

// The split regex of the tiny tokenizer (the Llama-3 / Qwen family pattern).
inline constexpr std::string_view kTinySplitRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// The training text from data/tokenizer/ (files in name order), compiled into the binary.
std::string_view TinyTrainingText();

// Trains the tiny tokenizer and writes dir/tokenizer.json and dir/tokenizer_config.json
// (no chat template: mkserve's built-in Command-4 template applies). Creates `dir` if needed.
void WriteTinyTokenizer(const std::filesystem::path& dir);

}  // namespace mkserve::tokenizer
