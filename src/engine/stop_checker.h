// StopChecker: decides, token by token, whether a sequence is done and which text may be shown.
//
//  - EOS ids (unless ignore_eos) and stop_token_ids end with "stop"; the token is not emitted.
//  - Stop strings end with "stop"; the text after the match is never emitted, nor the match
//    itself unless include_stop_str_in_output. A whole token's text (a special token, a chat
//    marker) is matched whole or not at all. Text that could still be the start of a stop
//    string is withheld until the next tokens decide it. Every piece of text released is
//    checked, including what the decoder held back (e.g. an incomplete UTF-8 sequence, released
//    as U+FFFD) and lets go only at the end.
//  - max_tokens and the context limit (max_model_len) end with "length" (or "stop" when the
//    released tail holds a stop string); withheld text is released.
//  - Until min_tokens tokens exist nothing stops the sequence except the length limits (the
//    sampler also masks EOS/stop tokens then), and no text is withheld.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/sampling_params.h"
#include "engine/text_decoder.h"

namespace mkserve {

// kAbort is never produced by the engine: the server ends a request with it when it shuts down.
enum class FinishReason { kNone, kStop, kLength, kAbort };

struct StopOutcome {
  std::string text;  // newly released text
  FinishReason finish = FinishReason::kNone;
  bool emit_token = true;   // false for EOS / stop_token_ids
  std::string stop_string;  // the stop string that matched, if any
};

class StopChecker {
 public:
  // `text` may be null when the request has no stop strings and wants no text.
  StopChecker(const SamplingParams& params, std::span<const int32_t> eos_token_ids,
              int64_t max_model_len, std::unique_ptr<TokenTextStream> text);

  // Called once per sampled token, with the sequence's counts including that token.
  StopOutcome Append(int32_t token_id, int64_t num_output_tokens, int64_t num_tokens);
  // Ends the sequence (a stop token, the length limit or an outside reason): releases withheld
  // text, up to a stop string if one is in it (then named in `matched_stop` when given).
  std::string Flush(std::string* matched_stop = nullptr);
  // The tokens that end the sequence: stop_token_ids, and EOS unless ignore_eos.
  std::span<const int32_t> stop_token_ids() const { return stop_token_ids_; }

 private:
  bool IsStopToken(int32_t token_id) const;
  // Releases pending text except its longest suffix that starts some stop string.
  std::string ReleaseUndecided();
  // When a stop string is in the pending text: the text before it (pending is cleared) and the
  // string in `matched`.
  std::optional<std::string> CutAtStopString(std::string& matched);
  // Whether a stop string may start at `begin` of pending_ and end at `end` (past pending_'s end
  // while undecided): it must not cut a whole token's text in two.
  bool MatchKeepsWholeTokens(size_t begin, size_t end) const;
  void AddPending(TokenText piece);
  std::string TakePending();  // all of pending_

  const SamplingParams& params_;
  std::vector<int32_t> stop_token_ids_;
  int64_t max_model_len_;
  std::unique_ptr<TokenTextStream> text_;
  std::string pending_;
  // [begin, end) of each whole token's text in pending_ (TokenText::whole_bytes).
  std::vector<std::pair<size_t, size_t>> pending_whole_;
  bool stop_strings_apply_ = false;  // min_tokens reached as of the last token
};

}  // namespace mkserve
