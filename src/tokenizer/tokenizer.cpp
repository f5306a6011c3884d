#include "tokenizer/tokenizer.h"

#include "common/error.h"
#include "common/utf8.h"
#include "tokenizer/tokenizer_impl.h"

namespace mkserve::tokenizer {

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_special_tokens) const {
  size_t valid = ValidUtf8PrefixLength(text);
  if (valid != text.size()) {
    throw Error("text to encode is not valid UTF-8 (bad byte at offset " + std::to_string(valid) +
                ")");
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  std::vector<PreToken> pieces;
  for (Segment& segment : impl_->added.Split(text, impl_->normalizer.get())) {
    if (segment.added_id >= 0) {
      ids.push_back(segment.added_id);
      continue;
    }
    pieces.clear();
    pieces.push_back({std::move(segment.text), segment.at_start});
    if (impl_->pre_tokenizer) impl_->pre_tokenizer->PreTokenize(pieces);
    for (const PreToken& piece : pieces) impl_->model->Tokenize(piece.text, ids);
  }
  if (impl_->post_processor) impl_->post_processor->Process(ids, add_special_tokens);
  return ids;
}

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || id >= impl_->vocab_size) {
      throw Error("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                  std::to_string(impl_->vocab_size) + ")");
    }
    if (const AddedToken* added = impl_->added.FindById(id)) {
      if (!(skip_special_tokens && added->special)) tokens.push_back(added->content);
      continue;
    }
    const std::string& token = impl_->model->IdToToken(id);
    if (!token.empty()) tokens.push_back(token);  // HF drops ids that name no token
  }
  std::string text;
  if (!impl_->decoder) {
    for (size_t i = 0; i < tokens.size(); ++i) text += (i ? " " : "") + tokens[i];
    return text;
  }
  impl_->decoder->DecodeChain(tokens);
  for (const std::string& token : tokens) text += token;
  return text;
}

std::string Tokenizer::TokenBytes(int32_t id) const {
  if (id >= 0 && id < impl_->vocab_size && impl_->decoder && !impl_->added.FindById(id)) {
    std::optional<std::string> bytes = impl_->decoder->TokenBytes(impl_->model->IdToToken(id));
    if (bytes) return *bytes;
  }
  return Decode(std::span<const int32_t>(&id, 1), /*skip_special_tokens=*/false);
}

std::optional<int32_t> Tokenizer::TokenToId(std::string_view token) const {
  if (const AddedToken* added = impl_->added.FindByContent(token)) return added->id;
  return impl_->model->TokenToId(token);
}

std::string Tokenizer::IdToToken(int32_t id) const {
  if (const AddedToken* added = impl_->added.FindById(id)) return added->content;
  return impl_->model->IdToToken(id);
}

bool Tokenizer::IsSpecial(int32_t id) const {
  const AddedToken* added = impl_->added.FindById(id);
  return added != nullptr && added->special;
}

int32_t Tokenizer::vocab_size() const { return impl_->vocab_size; }
const std::optional<NamedToken>& Tokenizer::bos() const { return impl_->bos; }
const std::optional<NamedToken>& Tokenizer::eos() const { return impl_->eos; }
const std::optional<NamedToken>& Tokenizer::pad() const { return impl_->pad; }
const std::optional<std::string>& Tokenizer::chat_template() const { return impl_->chat_template; }

}  // namespace mkserve::tokenizer
