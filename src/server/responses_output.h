// Builds /v1/responses output from one choice's engine events: the text goes through the chat
// OutputParser and comes out as output items, in the order the model wrote them: a reasoning
// item (reasoning_text), message items (output_text, with their tokens' logprobs when asked) and
// function_call items. Streams as the
// Responses API's named SSE events (response.created ... response.completed), or as one response
// object. It has ChatChoices' interface, so StreamResponse / CompleteResponse run it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "server/generation_run.h"
#include "server/logprobs_json.h"
#include "server/output_parser.h"
#include "server/response_meta.h"

namespace mkserve::server {

// Called with the finished response object (the body, or response.completed's response) when
// the run ends as the client sees it; not when the client went away or the server stopped it.
using FinishedResponseSink = std::function<void(const Json& response)>;

class ResponsesOutput {
 public:
  // `echo`: the request's settings the response object repeats (ResponsesRequest::echo).
  // `logprob_names`: names the tokens of the answer's logprobs; its tokenizer null when none are
  // asked.
  // `on_finished` (may be null): e.g. the ResponseStore's keeper.
  ResponsesOutput(ResponseMeta meta, Json echo, std::unique_ptr<OutputParser> parser,
                  LogprobNames logprob_names = {}, FinishedResponseSink on_finished = nullptr);

  // Streaming: response.created and response.in_progress; then per event the item events; then
  // response.completed (or response.incomplete). No [DONE]: the Responses API ends without one.
  std::string StreamStart();
  std::string StreamEvent(const ChoiceEvent& event);
  std::string StreamEnd(const Usage& usage);

  // Non-streaming.
  void Accumulate(const ChoiceEvent& event) { StreamEvent(event); }
  Json FinalResponse(const Usage& usage) const;

  // Background responses: the object while it runs, and one that did not run to its end:
  // `status` "cancelled", or "failed" with `error` (OpenAI's {code, message}), with the output
  // written so far; handed to on_finished like a finished one. Returns the events a streamed one
  // ends with: its open item's, then response.failed, or for a cancelled one an error event
  // (OpenAI names no event for it; its SDKs raise an error event).
  Json InProgress() const { return Snapshot("in_progress", nullptr); }
  std::string EndedEarly(const std::string& status, const Usage& usage, Json error = nullptr);

 private:
  enum class Kind { kReasoning, kMessage, kFunctionCall };
  struct Item {
    Kind kind = Kind::kMessage;
    std::string id;
    std::string text;  // reasoning or answer text; a call's arguments
    std::string call_id, name;
    Json logprobs = Json::array();  // a message's tokens
    std::string status = "in_progress";
  };

  // The response object; `status` "in_progress" while streaming, without usage.
  Json Snapshot(const std::string& status, const Usage* usage) const;
  std::string Event(const std::string& type, Json payload);
  Json ItemJson(const Item& item) const;
  // Appends to the open item of `kind`, opening one (and closing the open item) when needed;
  // `logprobs` (a message's) go with the text.
  std::string Append(Kind kind, const std::string& text, const ToolCallDelta* call = nullptr,
                     Json logprobs = Json::array());
  // `logprobs`: the entries of the tokens that made the delta; `text_fed`: whether they made any
  // text (the detokenizer holds an incomplete character's bytes back).
  std::string Apply(const ParsedDelta& delta, Json logprobs, bool text_fed);
  std::string CloseOpenItem(const std::string& status);
  // The end of the text: what the parser held, and the reasoning count settled.
  std::string FinishParsing();

  ResponseMeta meta_;
  Json echo_;
  std::unique_ptr<OutputParser> parser_;
  LogprobNames logprob_names_;
  FinishedResponseSink on_finished_;
  // Logprobs of tokens that wrote nothing yet while a message is open (text the parser holds).
  Json pending_logprobs_ = Json::array();
  std::unordered_set<int32_t> marker_ids_;  // the parser's markers' tokens: in no part's text
  std::vector<Item> items_;
  bool item_open_ = false;  // items_.back() still takes text
  int32_t open_call_ = -1;  // the parser's index of the open function call
  int64_t sequence_ = 0;
  int64_t reasoning_tokens_ = 0;   // the tokens before the answer began
  bool parsing_finished_ = false;  // FinishParsing ran
  bool answered_ = false;  // a message or call item has begun: later tokens are not reasoning
  std::string status_ = "in_progress";
  Json incomplete_details_ = nullptr;
};

}  // namespace mkserve::server
