// What a request sends in and gets back from the Engine. Events are typed values delivered in
// order on the request's RequestHandle.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "engine/backend.h"
#include "engine/sampling_params.h"
#include "engine/stop_checker.h"
#include "engine/text_decoder.h"
#include "grammar/grammar_matcher.h"

namespace mkserve {

struct EngineRequest {
  std::vector<int32_t> prompt_token_ids;
  SamplingParams sampling;
  // Sibling continuations of one prompt (OpenAI `n`). Sibling i samples with seed + i (so n = 1
  // keeps the client's seed); siblings after the first attach the first one's full prompt blocks
  // from the prefix cache and recompute only the partial last block. Prompt logprobs come once,
  // with sibling 0.
  int32_t n = 1;
  // What the output must match (each sibling runs its own matcher); null: unconstrained. EOS and
  // stop_token_ids are allowed only where the grammar's text is complete.
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
  // Token ids left out of the output text (TextDecoder::NewStream); null: every token's text.
  std::shared_ptr<const HiddenTokens> hidden_tokens;
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;  // every sampled token, including a final EOS / stop token
  int64_t cached_tokens = 0;      // prompt tokens taken from the prefix cache
};

// New output of one sibling. token_ids and logprobs are aligned; text is the newly released
// detokenized text, which may lag behind token_ids while a possible stop string is withheld.
// EOS / stop_token_ids are never in token_ids. prompt_logprobs (when requested) cover prompt
// tokens 1, 2, ... in order across events; prompt token 0 has none (OpenAI echo reports null).
struct TokensEvent {
  int32_t index = 0;
  std::vector<int32_t> token_ids;
  std::string text;
  std::vector<PositionLogprobs> logprobs;
  std::vector<PositionLogprobs> prompt_logprobs;
  // With each generated token: the prompt's size and how much of it came from the prefix cache,
  // so a choice cut short without a FinishedEvent (a cancel) still reports them.
  int64_t prompt_tokens = 0;
  int64_t cached_prompt_tokens = 0;
};

// One sibling is done; the request is done when all n are.
struct FinishedEvent {
  int32_t index = 0;
  FinishReason reason = FinishReason::kStop;  // "stop", "length" or (server) "abort"
  std::string stop_string;                    // the stop string that matched, if any
  Usage usage;
};

enum class EngineErrorKind {
  kInvalidRequest,  // bad input: say what (server: 400)
  kQueueFull,       // too many waiting requests (server: 503)
  kBackend,         // the forward pass failed (server: 500)
  kShutdown,        // the engine stopped before the request finished (server: 503)
};

// The whole request failed; no further events follow.
struct ErrorEvent {
  EngineErrorKind kind = EngineErrorKind::kInvalidRequest;
  std::string message;
};

using EngineEvent = std::variant<TokensEvent, FinishedEvent, ErrorEvent>;

inline const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAbort:
      return "abort";
    default:
      return "stop";
  }
}

}  // namespace mkserve
