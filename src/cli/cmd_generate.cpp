// `mkserve generate`: one prompt through the real Engine on the CPU reference backend, so a
// generation here takes the same path (scheduler, block manager, sampler, stop checks, text
// decoding) as a request to the server. Prompts are token ids (printed back as ids) or text
// (tokenized with the checkpoint's tokenizer, and the output streamed as text); --chat renders the
// text as a user turn with the chat template and splits the output with the Command-4 parser.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/cpu/load_cpu_backend.h"
#include "chat/command4_parser.h"
#include "chat/command4_template.h"
#include "cli/command.h"
#include "common/args.h"
#include "common/error.h"
#include "engine/engine.h"
#include "server/tokenizer_text_decoder.h"
#include "tokenizer/tokenizer.h"

namespace mkserve::cli {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kDefaultMaxTokens = 16;
constexpr int64_t kMaxThreads = 1024;

constexpr char kUsage[] =
    "usage: mkserve generate --model DIR (--prompt-ids 1,2,3 | --prompt TEXT [--chat]\n"
    "                        [--system TEXT] [--no-reasoning] [--raw] [--print-prompt])\n"
    "                        [--max-tokens N] [--temperature T] [--top-p P] [--top-k K]\n"
    "                        [--seed S] [--stop STR] [--ignore-eos] [--threads N]\n"
    "\n"
    "Runs one prompt through the engine on the CPU reference backend.\n"
    "  --prompt-ids   prints the generated ids on one line, separated by single spaces. An\n"
    "                 end-of-sequence token is not printed (as the server does not return it).\n"
    "  --prompt       tokenizes TEXT with DIR/tokenizer.json (special tokens as its config says)\n"
    "                 and streams the generated text to stdout, then a newline.\n"
    "  --chat         TEXT becomes one user message (after --system, if given) rendered with the\n"
    "                 checkpoint's chat template, or the built-in Command-4 one. The output goes\n"
    "                 through the Command-4 parser: content and tool calls to stdout, reasoning\n"
    "                 to stderr (dimmed on a terminal). --no-reasoning renders with reasoning\n"
    "                 off; --raw prints the generated text unparsed, markers included;\n"
    "                 --print-prompt prints the rendered prompt and exits.\n"
    "Greedy unless --temperature > 0; --seed makes sampling repeatable. Stops at the config's\n"
    "eos_token_id unless --ignore-eos, at --stop STR (text prompts; STR is not printed), and\n"
    "after --max-tokens (default 16).\n";

struct GenerateOptions {
  fs::path model_dir;
  std::vector<int32_t> prompt_ids;
  std::optional<std::string> prompt_text;
  bool chat = false;
  std::optional<std::string> system;
  bool reasoning = true;
  bool raw = false;
  bool print_prompt = false;
  SamplingParams sampling;
  int num_threads = 0;
};

std::vector<int32_t> ToTokenIds(const std::vector<int64_t>& values) {
  std::vector<int32_t> ids;
  for (int64_t value : values) {
    if (value < 0 || value > std::numeric_limits<int32_t>::max()) {
      throw Error("--prompt-ids: " + std::to_string(value) + " is not a token id");
    }
    ids.push_back(static_cast<int32_t>(value));
  }
  return ids;
}

SamplingParams ParseSampling(Args& args) {
  SamplingParams sampling;
  const int64_t max_tokens =
      args.Int("max-tokens", kDefaultMaxTokens, 1, std::numeric_limits<int32_t>::max());
  sampling.temperature = static_cast<float>(args.Double("temperature", 0.0));
  sampling.top_p = static_cast<float>(args.Double("top-p", 1.0));
  int64_t top_k = args.Int("top-k", 0);
  if (args.Value("seed")) sampling.seed = args.Int("seed", 0);
  if (auto stop = args.Value("stop")) sampling.stop.push_back(*stop);
  sampling.ignore_eos = args.Switch("ignore-eos");
  if (sampling.temperature < 0.0f) throw Error("--temperature must be >= 0");
  if (!(sampling.top_p > 0.0f && sampling.top_p <= 1.0f)) throw Error("--top-p must be in (0, 1]");
  if (top_k < 0 || top_k > std::numeric_limits<int32_t>::max()) {
    throw Error("--top-k must be >= 0 (0: off)");
  }
  if (!sampling.stop.empty() && sampling.stop[0].empty()) throw Error("--stop must not be empty");
  sampling.max_tokens = static_cast<int32_t>(max_tokens);
  sampling.top_k = static_cast<int32_t>(top_k);
  return sampling;
}

// Flags that only make sense with a text prompt, or only with --chat.
void CheckPromptFlags(const GenerateOptions& options) {
  const bool has_ids = !options.prompt_ids.empty();
  if (has_ids && options.prompt_text) {
    throw Error("--prompt and --prompt-ids are alternatives; pass one of them");
  }
  if (!has_ids && !options.prompt_text)
    throw Error("missing required flag --prompt-ids or --prompt");
  if (options.prompt_text && options.prompt_text->empty())
    throw Error("--prompt must not be empty");
  if (options.chat && !options.prompt_text) throw Error("--chat needs --prompt TEXT");
  if (!options.chat && (options.system || !options.reasoning || options.raw)) {
    throw Error("--system, --no-reasoning and --raw need --chat");
  }
  if (options.print_prompt && !options.prompt_text) throw Error("--print-prompt needs --prompt");
  if (has_ids && !options.sampling.stop.empty()) {
    throw Error("--stop needs a text prompt (--prompt); with --prompt-ids the output is ids");
  }
}

GenerateOptions ParseOptions(Args& args) {
  GenerateOptions options;
  options.model_dir = args.RequiredString("model");
  options.prompt_ids = ToTokenIds(args.IntList("prompt-ids", {}));
  options.prompt_text = args.Value("prompt");
  options.chat = args.Switch("chat");
  options.system = args.Value("system");
  options.reasoning = !args.Switch("no-reasoning");
  options.raw = args.Switch("raw");
  options.print_prompt = args.Switch("print-prompt");
  options.sampling = ParseSampling(args);
  // A thread each (0: the default), so bounded: 100,000 grew past 4 GB.
  options.num_threads = static_cast<int>(args.Int("threads", 0, 0, kMaxThreads));
  args.Finish();
  CheckPromptFlags(options);
  return options;
}

std::shared_ptr<const tokenizer::Tokenizer> LoadTokenizer(const fs::path& model_dir) {
  if (!fs::is_regular_file(model_dir / "tokenizer.json")) {
    throw Error("--prompt needs the model's tokenizer, but " +
                (model_dir / "tokenizer.json").string() +
                " does not exist; pass token ids with --prompt-ids instead");
  }
  return std::make_shared<const tokenizer::Tokenizer>(tokenizer::Tokenizer::Load(model_dir));
}

std::string TokenText(const std::optional<tokenizer::NamedToken>& token) {
  return token ? token->text : "";
}

// The chat prompt as the server builds it: the template writes BOS itself.
std::string RenderChat(const GenerateOptions& options, const tokenizer::Tokenizer& tokenizer) {
  const auto& source = tokenizer.chat_template();
  chat::ChatTemplate chat_template =
      source ? chat::ChatTemplate::Parse(*source) : chat::Command4Template();
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  if (options.system) messages.push_back({{"role", "system"}, {"content", *options.system}});
  messages.push_back({{"role", "user"}, {"content", *options.prompt_text}});
  nlohmann::ordered_json context = {{"messages", messages},
                                    {"add_generation_prompt", true},
                                    {"bos_token", TokenText(tokenizer.bos())},
                                    {"eos_token", TokenText(tokenizer.eos())},
                                    {"reasoning", options.reasoning},
                                    {"enable_thinking", options.reasoning}};
  return chat_template.Render(context);
}

// Receives the engine's output as it arrives.
class OutputSink {
 public:
  virtual ~OutputSink() = default;
  virtual void OnTokens(const TokensEvent& event) = 0;
  virtual void OnFinished() = 0;
};

// --prompt-ids: the ids on one line once generation ends.
class IdsSink : public OutputSink {
 public:
  void OnTokens(const TokensEvent& event) override {
    ids_.insert(ids_.end(), event.token_ids.begin(), event.token_ids.end());
  }
  void OnFinished() override {
    std::string line;
    for (size_t i = 0; i < ids_.size(); ++i) {
      if (i > 0) line += ' ';
      line += std::to_string(ids_[i]);
    }
    std::printf("%s\n", line.c_str());
  }

 private:
  std::vector<int32_t> ids_;
};

void Write(FILE* stream, const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stream);
  std::fflush(stream);
}

// --prompt (and --chat --raw): the text deltas as they come.
class TextSink : public OutputSink {
 public:
  void OnTokens(const TokensEvent& event) override { Write(stdout, event.text); }
  void OnFinished() override { Write(stdout, "\n"); }
};

// --chat: Command-4 output split into reasoning (stderr), content and tool calls (stdout).
class ChatSink : public OutputSink {
 public:
  explicit ChatSink(bool starts_in_reasoning) : dim_(isatty(STDERR_FILENO)) {
    chat::Command4ParserOptions options;
    options.start =
        starts_in_reasoning ? chat::Command4Start::kReasoning : chat::Command4Start::kAnswer;
    options.make_tool_call_id = [](int index) { return "call_" + std::to_string(index); };
    parser_ = chat::Command4Parser(std::move(options));
  }
  void OnTokens(const TokensEvent& event) override { Print(parser_.Feed(event.text)); }
  void OnFinished() override {
    Print(parser_.Finish());
    Write(stdout, "\n");
  }

 private:
  void Print(const std::vector<chat::Command4Event>& events) {
    using Kind = chat::Command4Event::Kind;
    for (const chat::Command4Event& event : events) {
      switch (event.kind) {
        case Kind::kReasoning:
          Write(stderr, dim_ ? "\x1b[2m" + event.text + "\x1b[0m" : event.text);
          break;
        case Kind::kContent:
        case Kind::kToolCallArguments:
          Write(stdout, event.text);
          break;
        case Kind::kToolCallBegin:
          Write(stdout, "\n[tool call " + event.tool_call_id + "] " + event.tool_name + " ");
          break;
        case Kind::kError:
          Write(stderr, "\nwarning: " + event.text + "\n");
          break;
        case Kind::kFinish:
          break;
      }
    }
  }

  bool dim_;
  chat::Command4Parser parser_;
};

std::unique_ptr<Engine> MakeEngine(const GenerateOptions& options, int64_t prompt_tokens,
                                   std::shared_ptr<const tokenizer::Tokenizer> tokenizer) {
  const int64_t total_tokens = prompt_tokens + options.sampling.max_tokens;
  CpuBackendOptions backend_options;
  // One spare block per group: the engine may reserve the next token's slot ahead.
  backend_options.num_blocks = (total_tokens + kBlockTokens - 1) / kBlockTokens + 1;
  backend_options.num_threads = options.num_threads;
  std::unique_ptr<Backend> backend = LoadCpuBackend(options.model_dir, backend_options);
  const int64_t max_positions = backend->config().max_position_embeddings;
  if (max_positions > 0 && total_tokens > max_positions) {
    throw Error("prompt (" + std::to_string(prompt_tokens) +
                " tokens) + --max-tokens = " + std::to_string(total_tokens) +
                " tokens exceeds max_position_embeddings " + std::to_string(max_positions));
  }
  EngineOptions engine_options;
  engine_options.max_batch = 1;
  if (tokenizer) {
    engine_options.text_decoder =
        std::make_shared<server::TokenizerTextDecoder>(tokenizer, chat::Command4Markers());
  }
  return std::make_unique<Engine>(std::move(backend), engine_options);
}

// Submits the request and feeds its events to `sink` until it is done.
void RunRequest(Engine& engine, EngineRequest request, OutputSink& sink) {
  RequestHandle handle = engine.Submit(std::move(request));
  while (!handle.is_done()) {
    std::optional<EngineEvent> event = handle.Next(std::chrono::milliseconds(200));
    if (!event) continue;
    if (const auto* tokens = std::get_if<TokensEvent>(&*event)) {
      sink.OnTokens(*tokens);
    } else if (const auto* error = std::get_if<ErrorEvent>(&*event)) {
      throw Error("generation failed: " + error->message);
    } else {
      sink.OnFinished();
    }
  }
}

std::unique_ptr<OutputSink> MakeSink(const GenerateOptions& options,
                                     const std::string& prompt_text) {
  if (!options.prompt_text) return std::make_unique<IdsSink>();
  if (!options.chat || options.raw) return std::make_unique<TextSink>();
  // The parser starts in reasoning exactly when the prompt leaves a thinking block open.
  constexpr std::string_view kStartThinking = "<|START_THINKING|>";
  return std::make_unique<ChatSink>(prompt_text.ends_with(kStartThinking));
}

int RunGenerate(std::span<const std::string> argv) {
  Args args(argv);
  GenerateOptions options = ParseOptions(args);
  EngineRequest request;
  request.sampling = options.sampling;
  request.prompt_token_ids = options.prompt_ids;
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer;
  std::string prompt_text;
  if (options.prompt_text) {
    tokenizer = LoadTokenizer(options.model_dir);
    prompt_text = options.chat ? RenderChat(options, *tokenizer) : *options.prompt_text;
    if (options.print_prompt) {
      Write(stdout, prompt_text);
      return 0;
    }
    request.prompt_token_ids = tokenizer->Encode(prompt_text, /*add_special_tokens=*/!options.chat);
  }
  std::unique_ptr<OutputSink> sink = MakeSink(options, prompt_text);
  std::unique_ptr<Engine> engine =
      MakeEngine(options, static_cast<int64_t>(request.prompt_token_ids.size()), tokenizer);
  RunRequest(*engine, std::move(request), *sink);
  return 0;
}

const CommandRegistration kRegistration(
    {"generate", "one generation on the CPU backend (--model DIR --prompt TEXT [--chat])", kUsage,
     RunGenerate});

}  // namespace
}  // namespace mkserve::cli
