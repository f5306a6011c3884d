#include "engine/backend.h"

namespace mkserve {

void CheckPromptChunk(const SequenceStep& chunk, int64_t max_tokens) {
  if (chunk.sample || chunk.return_logits || !chunk.next_token_ids.empty()) {
    throw Error(
        "a prompt chunk beside the steps computes KV only: no sampling, logits or logprobs");
  }
  if (static_cast<int64_t>(chunk.token_ids.size()) > max_tokens) {
    throw Error("a prompt chunk of " + std::to_string(chunk.token_ids.size()) +
                " tokens is longer than the " + std::to_string(max_tokens) + " this backend takes");
  }
}

}  // namespace mkserve
