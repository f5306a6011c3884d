// An exact implementation of HF tokenizer.json (BPE models) plus the bits of tokenizer_config.json
// that change encoding: add_bos_token / add_eos_token, the bos/eos/pad tokens and the chat
// template. Encode and Decode are const and safe to call from many threads at once.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mkserve::tokenizer {

struct TokenizerOptions {
  // As transformers does, let add_bos_token / add_eos_token in tokenizer_config.json decide the
  // special tokens Encode adds. False keeps tokenizer.json's post_processor alone, which is what
  // the Rust and JS `tokenizers` libraries do.
  bool apply_config_bos_eos = true;
};

// A special token named by tokenizer_config.json, with its id when the vocabulary has it.
struct NamedToken {
  std::string text;
  std::optional<int32_t> id;
};

class Tokenizer {
 public:
  // `path` is a tokenizer.json or a folder holding one; tokenizer_config.json,
  // special_tokens_map.json and chat_template.jinja are read from the same folder when present.
  // Throws mkserve::Error naming the file and the component that is malformed or unsupported.
  static Tokenizer Load(const std::filesystem::path& path, const TokenizerOptions& options = {});
  // The same from JSON text; `config_json` may be empty.
  static Tokenizer FromJsonText(std::string_view tokenizer_json, std::string_view config_json = {},
                                const TokenizerOptions& options = {});

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Throws mkserve::Error when `text` is not valid UTF-8.
  std::vector<int32_t> Encode(std::string_view text, bool add_special_tokens) const;
  // Throws mkserve::Error for an id outside [0, vocab_size()).
  std::string Decode(std::span<const int32_t> ids, bool skip_special_tokens) const;
  // The bytes token `id` stands for, which may be part of a UTF-8 sequence (a byte-level or
  // byte-fallback token): the bytes of consecutive tokens join into the text, where Decode of
  // one token would give U+FFFD for a partial character. Tokens a decoder does not map to bytes
  // give Decode of the one token. Throws mkserve::Error for an id outside [0, vocab_size()).
  std::string TokenBytes(int32_t id) const;

  std::optional<int32_t> TokenToId(std::string_view token) const;
  // The vocabulary string of `id` (byte-level form for byte-level models); empty if none.
  std::string IdToToken(int32_t id) const;
  bool IsSpecial(int32_t id) const;
  int32_t vocab_size() const;

  const std::optional<NamedToken>& bos() const;
  const std::optional<NamedToken>& eos() const;
  const std::optional<NamedToken>& pad() const;
  std::optional<int32_t> bos_id() const { return bos() ? bos()->id : std::nullopt; }
  std::optional<int32_t> eos_id() const { return eos() ? eos()->id : std::nullopt; }
  // From tokenizer_config.json, or chat_template.jinja next to it (which wins, as in transformers).
  const std::optional<std::string>& chat_template() const;

  struct Impl;

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mkserve::tokenizer
