#include "server/chat_response.h"

#include "server/logprobs_json.h"
#include "server/sse.h"

namespace mkserve::server {

ChatChoices::ChatChoices(int32_t num_choices, ResponseMeta meta, ChatOutputOptions options)
    : meta_(std::move(meta)), options_(std::move(options)), choices_(num_choices) {
  for (Choice& choice : choices_) {
    choice.parser =
        options_.make_parser ? options_.make_parser() : std::make_unique<PlainOutputParser>();
  }
}

Json ChatChoices::Chunk(int32_t index, Json delta, Json logprobs, Json finish_reason) const {
  Json chunk = ResponseJson(meta_, "chat.completion.chunk",
                            {{{"index", index},
                              {"delta", std::move(delta)},
                              {"logprobs", std::move(logprobs)},
                              {"finish_reason", std::move(finish_reason)}}});
  if (options_.include_usage) chunk["usage"] = nullptr;
  return chunk;
}

Json ChatChoices::LogprobsOf(const TokensEvent& tokens) const {
  if (!options_.logprobs || options_.logprob_names.tokenizer == nullptr ||
      tokens.logprobs.empty()) {
    return nullptr;
  }
  Json content = Json::array();
  for (const PositionLogprobs& position : tokens.logprobs) {
    content.push_back(ChatLogprobEntry(options_.logprob_names, position));
  }
  return {{"content", content}};
}

Json ChatChoices::ApplyDelta(int32_t index, const ParsedDelta& parsed) {
  Choice& choice = choices_[index];
  Json delta = Json::object();
  if (!parsed.reasoning.empty()) {
    choice.reasoning += parsed.reasoning;
    delta["reasoning_content"] = parsed.reasoning;
  }
  if (!parsed.content.empty()) {
    choice.content += parsed.content;
    delta["content"] = parsed.content;
  }
  for (const ToolCallDelta& call : parsed.tool_calls) {
    Json entry = {{"index", call.index}};
    if (call.index >= static_cast<int32_t>(choice.tool_calls.size())) {
      choice.tool_calls.resize(call.index + 1);
      ToolCallState& state = choice.tool_calls[call.index];
      state.id = !call.id.empty() ? call.id
                                  : "call_" + meta_.id.substr(meta_.id.find('-') + 1) + "_" +
                                        std::to_string(index) + "_" + std::to_string(call.index);
      state.name = call.name;
      entry["id"] = state.id;
      entry["type"] = "function";
      entry["function"] = {{"name", call.name}, {"arguments", call.arguments}};
    } else {
      entry["function"] = {{"arguments", call.arguments}};
    }
    choice.tool_calls[call.index].arguments += call.arguments;
    Json& calls = delta["tool_calls"];
    // Pieces of the same call within one delta become one entry.
    if (!calls.empty() && calls.back()["index"] == call.index) {
      std::string arguments = calls.back()["function"]["arguments"].get<std::string>();
      calls.back()["function"]["arguments"] = arguments + call.arguments;
    } else {
      calls.push_back(std::move(entry));
    }
  }
  return delta;
}

std::string ChatChoices::StreamStart() const {
  std::string events;
  for (size_t i = 0; i < choices_.size(); ++i) {
    events += SseEvent(
        Chunk(static_cast<int32_t>(i), {{"role", "assistant"}, {"content", ""}}, nullptr, nullptr));
  }
  return events;
}

std::string ChatChoices::StreamEvent(const ChoiceEvent& event) {
  int32_t index = event.choice_index;
  Choice& choice = choices_[index];
  if (const auto* tokens = std::get_if<TokensEvent>(&event.event)) {
    Json delta = ApplyDelta(index, choice.parser->Feed(tokens->text));
    Json logprobs = LogprobsOf(*tokens);
    if (delta.empty() && logprobs.is_null()) return "";
    return SseEvent(Chunk(index, std::move(delta), std::move(logprobs), nullptr));
  }
  const auto& finished = std::get<FinishedEvent>(event.event);
  std::string events;
  Json tail = ApplyDelta(index, choice.parser->Finish());
  if (!tail.empty()) events += SseEvent(Chunk(index, std::move(tail), nullptr, nullptr));
  // "tool_calls" only for a choice that ended on its own after a call; a call cut short by the
  // length limit or an abort keeps that reason.
  choice.finish_reason = !choice.tool_calls.empty() && finished.reason == FinishReason::kStop
                             ? "tool_calls"
                             : FinishReasonName(finished.reason);
  events += SseEvent(Chunk(index, Json::object(), nullptr, choice.finish_reason));
  return events;
}

std::string ChatChoices::StreamEnd(const Usage& usage) const {
  return StreamEndEvents(meta_, "chat.completion.chunk", options_.include_usage, usage);
}

void ChatChoices::Accumulate(const ChoiceEvent& event) {
  // The streaming path keeps all the state; the chunks are simply not sent.
  Choice& choice = choices_[event.choice_index];
  if (const auto* tokens = std::get_if<TokensEvent>(&event.event)) {
    Json logprobs = LogprobsOf(*tokens);
    if (!logprobs.is_null()) {
      for (auto& entry : logprobs["content"]) choice.logprobs.push_back(std::move(entry));
    }
  }
  StreamEvent(event);
}

Json ChatChoices::FinalResponse(const Usage& usage) const {
  Json choices = Json::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    const Choice& choice = choices_[i];
    Json message = {
        {"role", "assistant"},
        {"content", choice.content.empty() && !choice.tool_calls.empty() ? Json(nullptr)
                                                                         : Json(choice.content)}};
    if (!choice.reasoning.empty()) message["reasoning_content"] = choice.reasoning;
    if (!choice.tool_calls.empty()) {
      message["tool_calls"] = Json::array();
      for (const ToolCallState& call : choice.tool_calls) {
        message["tool_calls"].push_back(
            {{"id", call.id},
             {"type", "function"},
             {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
      }
    }
    choices.push_back(
        {{"index", i},
         {"message", message},
         {"logprobs", options_.logprobs ? Json{{"content", choice.logprobs}} : Json()},
         {"finish_reason", choice.finish_reason}});
  }
  Json body = ResponseJson(meta_, "chat.completion", std::move(choices));
  body["usage"] = UsageJson(usage);
  return body;
}

bool ChatChoices::made_tool_calls() const {
  for (const Choice& choice : choices_) {
    if (!choice.tool_calls.empty()) return true;
  }
  return false;
}

}  // namespace mkserve::server
