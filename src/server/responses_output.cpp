#include "server/responses_output.h"

#include <utility>

#include "server/logprobs_json.h"
#include "server/sse.h"

namespace mkserve::server {
namespace {

// `base` with the fields of `extra` added.
Json With(Json base, const Json& extra) {
  base.update(extra);
  return base;
}

}  // namespace

ResponsesOutput::ResponsesOutput(ResponseMeta meta, Json echo, std::unique_ptr<OutputParser> parser,
                                 LogprobNames logprob_names, FinishedResponseSink on_finished)
    : meta_(std::move(meta)),
      echo_(std::move(echo)),
      parser_(std::move(parser)),
      logprob_names_(logprob_names),
      on_finished_(std::move(on_finished)) {
  if (!parser_) parser_ = std::make_unique<PlainOutputParser>();
  if (logprob_names_.tokenizer != nullptr) {
    for (std::string_view marker : parser_->markers()) {
      if (auto id = logprob_names_.tokenizer->TokenToId(marker)) marker_ids_.insert(*id);
    }
  }
}

std::string ResponsesOutput::Event(const std::string& type, Json payload) {
  payload["type"] = type;
  payload["sequence_number"] = sequence_++;
  return NamedSseEvent(type, payload);
}

Json ResponsesOutput::ItemJson(const Item& item) const {
  switch (item.kind) {
    case Kind::kReasoning:
      return {{"id", item.id},
              {"type", "reasoning"},
              {"summary", Json::array()},
              {"content", Json::array({{{"type", "reasoning_text"}, {"text", item.text}}})}};
    case Kind::kMessage:
      return {{"id", item.id},
              {"type", "message"},
              {"status", item.status},
              {"role", "assistant"},
              {"content", Json::array({{{"type", "output_text"},
                                        {"text", item.text},
                                        {"annotations", Json::array()},
                                        {"logprobs", item.logprobs}}})}};
    case Kind::kFunctionCall:
      return {{"id", item.id},           {"type", "function_call"}, {"status", item.status},
              {"call_id", item.call_id}, {"name", item.name},       {"arguments", item.text}};
  }
  return nullptr;
}

Json ResponsesOutput::Snapshot(const std::string& status, const Usage* usage) const {
  Json response = {{"id", meta_.id},
                   {"object", "response"},
                   {"created_at", meta_.created_unix_s},
                   {"status", status},
                   {"error", nullptr},
                   {"incomplete_details", incomplete_details_},
                   {"model", meta_.model},
                   {"output", Json::array()},
                   {"previous_response_id", nullptr},
                   {"store", false},  // echo has the request's
                   {"truncation", "disabled"},
                   {"usage", nullptr}};
  response.update(echo_);
  if (status == "in_progress") return response;
  for (const Item& item : items_) response["output"].push_back(ItemJson(item));
  if (usage != nullptr) {
    response["usage"] = {{"input_tokens", usage->prompt_tokens},
                         {"input_tokens_details", {{"cached_tokens", usage->cached_tokens}}},
                         {"output_tokens", usage->completion_tokens},
                         {"output_tokens_details", {{"reasoning_tokens", reasoning_tokens_}}},
                         {"total_tokens", usage->prompt_tokens + usage->completion_tokens}};
  }
  return response;
}

std::string ResponsesOutput::StreamStart() {
  std::string events = Event("response.created", {{"response", Snapshot("in_progress", nullptr)}});
  events += Event("response.in_progress", {{"response", Snapshot("in_progress", nullptr)}});
  return events;
}

std::string ResponsesOutput::CloseOpenItem(const std::string& status) {
  if (!item_open_) return "";
  item_open_ = false;
  Item& item = items_.back();
  item.status = status;
  const int64_t index = static_cast<int64_t>(items_.size()) - 1;
  Json at = {{"item_id", item.id}, {"output_index", index}};
  std::string events;
  switch (item.kind) {
    case Kind::kReasoning: {
      Json part = {{"type", "reasoning_text"}, {"text", item.text}};
      events += Event("response.reasoning_text.done",
                      With(at, {{"content_index", 0}, {"text", item.text}}));
      events +=
          Event("response.content_part.done", With(at, {{"content_index", 0}, {"part", part}}));
      break;
    }
    case Kind::kMessage: {
      Json part = ItemJson(item)["content"][0];
      events +=
          Event("response.output_text.done",
                With(at, {{"content_index", 0}, {"text", item.text}, {"logprobs", item.logprobs}}));
      events +=
          Event("response.content_part.done", With(at, {{"content_index", 0}, {"part", part}}));
      break;
    }
    case Kind::kFunctionCall:
      events += Event("response.function_call_arguments.done",
                      With(at, {{"name", item.name}, {"arguments", item.text}}));
      break;
  }
  events += Event("response.output_item.done", {{"output_index", index}, {"item", ItemJson(item)}});
  return events;
}

std::string ResponsesOutput::Append(Kind kind, const std::string& text, const ToolCallDelta* call,
                                    Json logprobs) {
  std::string events;
  const bool new_call = call != nullptr && call->index != open_call_;
  if (!item_open_ || items_.back().kind != kind || new_call) {
    events += CloseOpenItem("completed");
    const std::string suffix =
        meta_.id.substr(meta_.id.find('_') + 1) + "_" + std::to_string(items_.size());
    Item item;
    item.kind = kind;
    if (kind == Kind::kReasoning) item.id = "rs_" + suffix;
    if (kind == Kind::kMessage) item.id = "msg_" + suffix;
    if (kind == Kind::kFunctionCall) {
      item.id = "fc_" + suffix;
      item.call_id = !call->id.empty() ? call->id : "call_" + suffix;
      item.name = call->name;
      open_call_ = call->index;
    }
    items_.push_back(std::move(item));
    item_open_ = true;
    if (kind != Kind::kReasoning) answered_ = true;
    const int64_t index = static_cast<int64_t>(items_.size()) - 1;
    Json added = ItemJson(items_.back());
    if (kind == Kind::kReasoning) added["content"] = Json::array();
    if (kind == Kind::kMessage) added["content"] = Json::array();
    events += Event("response.output_item.added", {{"output_index", index}, {"item", added}});
    if (kind != Kind::kFunctionCall) {
      Json part = kind == Kind::kReasoning
                      ? Json{{"type", "reasoning_text"}, {"text", ""}}
                      : Json{{"type", "output_text"}, {"text", ""}, {"annotations", Json::array()}};
      events += Event("response.content_part.added", {{"item_id", items_.back().id},
                                                      {"output_index", index},
                                                      {"content_index", 0},
                                                      {"part", part}});
    }
  }
  if (text.empty()) return events;
  Item& item = items_.back();
  item.text += text;
  for (const Json& entry : logprobs) item.logprobs.push_back(entry);
  Json at = {{"item_id", item.id},
             {"output_index", static_cast<int64_t>(items_.size()) - 1},
             {"delta", text}};
  switch (kind) {
    case Kind::kReasoning:
      events += Event("response.reasoning_text.delta", With(at, {{"content_index", 0}}));
      break;
    case Kind::kMessage:
      events += Event("response.output_text.delta",
                      With(at, {{"content_index", 0}, {"logprobs", std::move(logprobs)}}));
      break;
    case Kind::kFunctionCall:
      events += Event("response.function_call_arguments.delta", at);
      break;
  }
  return events;
}

std::string ResponsesOutput::Apply(const ParsedDelta& delta, Json logprobs, bool text_fed) {
  std::string events;
  if (!delta.reasoning.empty()) events += Append(Kind::kReasoning, delta.reasoning);
  // A message's logprobs are those of the tokens that wrote its text: with text, this event's
  // and the held ones'; with none while a message is open, while the parser holds text that may
  // become the answer, or while the detokenizer holds a character's first bytes (no text fed),
  // held for its next text; else (the reasoning's tokens, a call's) none. Held text that turned
  // out to be reasoning takes its logprobs along. Markers' tokens never come here.
  if (!delta.reasoning.empty()) pending_logprobs_ = Json::array();
  for (const Json& entry : logprobs) pending_logprobs_.push_back(entry);
  if (!delta.content.empty()) {
    events += Append(Kind::kMessage, delta.content, nullptr,
                     std::exchange(pending_logprobs_, Json::array()));
  } else if (text_fed && !parser_->holding() &&
             (!item_open_ || items_.back().kind != Kind::kMessage)) {
    pending_logprobs_ = Json::array();
  }
  for (const ToolCallDelta& call : delta.tool_calls) {
    events += Append(Kind::kFunctionCall, call.arguments, &call);
  }
  return events;
}

std::string ResponsesOutput::StreamEvent(const ChoiceEvent& event) {
  if (const auto* tokens = std::get_if<TokensEvent>(&event.event)) {
    const bool answered_before = answered_;
    Json logprobs = Json::array();
    if (logprob_names_.tokenizer != nullptr) {
      for (const PositionLogprobs& position : tokens->logprobs) {
        if (marker_ids_.contains(position.chosen.token_id)) continue;
        logprobs.push_back(ChatLogprobEntry(logprob_names_, position));
      }
    }
    std::string events =
        Apply(parser_->Feed(tokens->text), std::move(logprobs), !tokens->text.empty());
    // Tokens before the answer began: the reasoning's, when there is reasoning.
    if (!answered_before && !answered_) {
      reasoning_tokens_ += static_cast<int64_t>(tokens->token_ids.size());
    }
    return events;
  }
  const auto& finished = std::get<FinishedEvent>(event.event);
  std::string events = FinishParsing();
  if (finished.reason == FinishReason::kStop) {
    status_ = "completed";
  } else {
    // The length limit (max_output_tokens or the context), or the server stopping the request.
    status_ = "incomplete";
    incomplete_details_ = {
        {"reason", finished.reason == FinishReason::kLength ? "max_output_tokens" : "interrupted"}};
  }
  events += CloseOpenItem(status_ == "completed" ? "completed" : "incomplete");
  return events;
}

std::string ResponsesOutput::StreamEnd(const Usage& usage) {
  Json response = Snapshot(status_, &usage);
  if (on_finished_) on_finished_(response);
  return Event(status_ == "completed" ? "response.completed" : "response.incomplete",
               {{"response", std::move(response)}});
}

Json ResponsesOutput::FinalResponse(const Usage& usage) const {
  Json response = Snapshot(status_, &usage);
  if (on_finished_) on_finished_(response);
  return response;
}

std::string ResponsesOutput::FinishParsing() {
  if (std::exchange(parsing_finished_, true)) return "";
  std::string events = Apply(parser_->Finish(), Json::array(), true);
  if (items_.empty() || items_.front().kind != Kind::kReasoning) reasoning_tokens_ = 0;
  return events;
}

std::string ResponsesOutput::EndedEarly(const std::string& status, const Usage& usage, Json error) {
  // What the parser held back (text before any marker) was written too: it goes out as it would
  // at the end, and the tokens count as reasoning only where the output began with reasoning.
  std::string events = FinishParsing();
  events += CloseOpenItem("incomplete");
  Json response = Snapshot(status, &usage);
  response["error"] = error;
  if (on_finished_) on_finished_(response);
  if (status == "failed") return events + Event("response.failed", {{"response", response}});
  return events + Event("error", {{"code", status},
                                  {"message", "response '" + meta_.id + "' was " + status},
                                  {"param", nullptr}});
}

}  // namespace mkserve::server
