#include "server/output_grammar.h"

#include <string>
#include <vector>

#include "grammar/json_schema.h"
#include "server/error.h"

namespace mkserve::server {
namespace {

using grammar::Append;
using grammar::Element;
using Seq = std::vector<Element>;

// Compiles a client schema, turning the compiler's refusal into a 400 that names the field.
int32_t AddSchema(grammar::JsonGrammarBuilder& builder, const Json& schema,
                  const std::string& where) {
  try {
    return builder.AddSchema(schema, where);
  } catch (const grammar::SchemaError& e) {
    throw ApiError(ErrorKind::kInvalidRequest, e.what(), e.where());
  }
}

int32_t SpecialToken(const ServedModel& model, const std::string& text) {
  std::optional<int32_t> id = model.tokenizer->TokenToId(text);
  if (!id || !model.grammar_vocabulary->is_special(*id)) {
    throw ApiError(ErrorKind::kInvalidRequest, "constrained output needs the special token " +
                                                   text + ", which this model's tokenizer lacks");
  }
  return *id;
}

// The answer's JSON value: any object, or the response_format schema.
int32_t AnswerRule(grammar::JsonGrammarBuilder& builder, const ResponseFormat& format) {
  if (format.type == ResponseFormat::Type::kJsonObject) return builder.rules().object;
  return AddSchema(builder, format.schema, format.schema_param);
}

// Writes the Command-4 blocks into one grammar.
class Command4Writer {
 public:
  Command4Writer(grammar::JsonGrammarBuilder& builder, const ServedModel& model)
      : builder_(builder), g_(builder.grammar()), model_(model) {}

  Element Token(const char* text) { return Element::Token(SpecialToken(model_, text)); }

  // <|START_TEXT|> json <|END_TEXT|>
  Seq TextBlock(int32_t answer) {
    return {Token("<|START_TEXT|>"), Element::Rule(answer), Token("<|END_TEXT|>")};
  }

  // <|START_ACTION|>[call, ...]<|END_ACTION|> over `tools` (indices into the request's tools).
  Seq ActionBlock(const std::vector<ToolDefinition>& tools, const std::vector<size_t>& offered,
                  bool single_call) {
    std::vector<Seq> calls;
    for (size_t index : offered) calls.push_back(ToolCall(tools[index]));
    const int32_t call = g_.RuleOf(calls);
    const Element ws = Element::Rule(builder_.rules().ws);
    Seq block{Token("<|START_ACTION|>")};
    Append(block, g_.Literal("["));
    block.push_back(ws);
    block.push_back(Element::Rule(call));
    if (!single_call) {
      Seq more{ws};
      Append(more, g_.Literal(","));
      more.push_back(ws);
      more.push_back(Element::Rule(call));
      block.push_back(Element::Rule(grammar::Repeat(g_, more, 0, -1)));
    }
    block.push_back(ws);
    Append(block, g_.Literal("]"));
    block.push_back(Token("<|END_ACTION|>"));
    return block;
  }

 private:
  // {"tool_call_id": "0", "tool_name": "f", "parameters": {...}}, spaced as the template writes it.
  Seq ToolCall(const ToolDefinition& tool) {
    const Json& schema = tool.parameters;
    const int32_t parameters = schema.is_object() && schema.empty()
                                   ? builder_.rules().object
                                   : AddSchema(builder_, schema, tool.parameters_param);
    grammar::ByteSet digits;
    for (char c = '0'; c <= '9'; ++c) digits.set(static_cast<unsigned char>(c));
    Seq call = g_.Literal("{\"tool_call_id\": \"");
    call.push_back(Element::Rule(grammar::Repeat(g_, {Element::Bytes(g_.Intern(digits))}, 1, 4)));
    Append(call, g_.Literal("\", \"tool_name\": " + Json(tool.name).dump() + ", \"parameters\": "));
    call.push_back(Element::Rule(parameters));
    Append(call, g_.Literal("}"));
    return call;
  }

  grammar::JsonGrammarBuilder& builder_;
  grammar::Grammar& g_;
  const ServedModel& model_;
};

// The Command-4 output: [reasoning <|END_THINKING|>] then a text or an action block.
int32_t Command4Root(grammar::JsonGrammarBuilder& builder, const ServedModel& model,
                     const ChatRequest& request, bool thinking) {
  Command4Writer writer(builder, model);
  grammar::Grammar& g = builder.grammar();
  const ToolChoice& choice = request.tool_choice;
  std::vector<size_t> offered;
  for (size_t i = 0; i < request.tools.size(); ++i) {
    if (choice.mode != ToolChoice::Mode::kNamed || request.tools[i].name == choice.name) {
      offered.push_back(i);
    }
  }
  std::vector<Seq> blocks;
  if (choice.mode == ToolChoice::Mode::kRequired || choice.mode == ToolChoice::Mode::kNamed) {
    const bool single = choice.mode == ToolChoice::Mode::kNamed || !request.parallel_tool_calls;
    blocks.push_back(writer.ActionBlock(request.tools, offered, single));
  } else {
    blocks.push_back(writer.TextBlock(AnswerRule(builder, request.response_format)));
    if (choice.mode == ToolChoice::Mode::kAuto && !offered.empty()) {
      blocks.push_back(writer.ActionBlock(request.tools, offered, !request.parallel_tool_calls));
    }
  }
  Seq root;
  if (thinking) root = {Element::Rule(builder.rules().text), writer.Token("<|END_THINKING|>")};
  root.push_back(Element::Rule(g.RuleOf(blocks)));
  return g.RuleOf({root});
}

}  // namespace

std::shared_ptr<const grammar::CompiledGrammar> ChatOutputGrammar(const ServedModel& model,
                                                                  const ChatRequest& request,
                                                                  const ChatPrompt& prompt) {
  const ToolChoice::Mode mode = request.tool_choice.mode;
  const bool forced_call = mode == ToolChoice::Mode::kRequired || mode == ToolChoice::Mode::kNamed;
  if (!forced_call && request.response_format.type == ResponseFormat::Type::kText) return nullptr;
  if (prompt.prefill) {
    throw ApiError(ErrorKind::kInvalidRequest,
                   "a constrained output (a JSON format, or tool_choice 'required' or named) "
                   "cannot continue an assistant prefill (a final assistant message); end with a "
                   "user or tool message",
                   "messages");
  }
  if (!model.grammar_vocabulary) {
    throw ApiError(ErrorKind::kInternal,
                   "the server has no token vocabulary for constrained output");
  }
  grammar::JsonGrammarBuilder builder;
  int32_t root;
  if (model.command4_format) {
    root = Command4Root(builder, model, request, prompt.thinking);
  } else if (forced_call) {
    throw ApiError(ErrorKind::kInvalidRequest,
                   "tool_choice 'required' or a named function needs the Command-4 chat format, "
                   "which this model's chat template does not use",
                   "tool_choice");
  } else {
    root = AnswerRule(builder, request.response_format);
  }
  try {
    grammar::Grammar compiled = std::move(builder).Finish(root);
    if (model.grammar_cache) return model.grammar_cache->Get(std::move(compiled));
    return std::make_shared<const grammar::CompiledGrammar>(std::move(compiled),
                                                            model.grammar_vocabulary);
  } catch (const grammar::SchemaError& e) {
    throw ApiError(ErrorKind::kInvalidRequest, e.what(), e.where());
  }
}

}  // namespace mkserve::server
