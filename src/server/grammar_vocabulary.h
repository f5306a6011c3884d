// The grammar matcher's view of the served tokenizer: each ordinary token's bytes and which ids are
// control tokens, matched only by id: the tokenizer's special tokens and every <|...|> marker.
// Built once when the model loads.
#pragma once

#include <memory>

#include "grammar/token_vocabulary.h"
#include "tokenizer/tokenizer.h"

namespace mkserve::server {

// Byte-level BPE tokens are mapped back to their raw bytes (GPT-2's byte alphabet); a token the
// byte alphabet cannot express (e.g. a non-special added token with a space) is decoded instead.
std::shared_ptr<const grammar::TokenVocabulary> BuildGrammarVocabulary(
    const tokenizer::Tokenizer& tokenizer);

// Computes the token caches of the shared JSON rules for `vocabulary` now (a few seconds at a
// 262K vocabulary), so the first constrained request does not pay for them.
void WarmJsonPreludeCaches(const grammar::TokenVocabulary& vocabulary);

}  // namespace mkserve::server
