// `mkserve serve`: the OpenAI-compatible HTTP server. The socket is bound first, so /health
// answers 503 while the weights load; then the model is published and the summary printed.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>
#include <csignal>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <future>
#include <thread>

#include "backends/cpu/load_cpu_backend.h"
#include "chat/command4_parser.h"
#include "chat/command4_template.h"
#include "cli/byte_progress.h"
#include "cli/command.h"
#include "cli/megakernel_policy_flag.h"
#include "common/args.h"
#include "common/error.h"
#include "engine/scripted_backend.h"
#include "server/grammar_vocabulary.h"
#include "server/http_server.h"
#include "server/output_grammar.h"
#include "server/output_parser_factory.h"
#include "server/routes.h"
#include "server/server_state.h"
#include "server/tokenizer_text_decoder.h"

#ifdef MKSERVE_HAS_CUDA
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/decode/decode_path_registry.h"
#include "megakernel/schedule/model_support.h"
#include "model/presets.h"
#endif

namespace mkserve::cli {
namespace {

namespace fs = std::filesystem;

struct ServeFlags {
  fs::path model_dir;
  std::string backend = "cpu";
  server::HttpOptions http;
  int64_t max_batch = 64;
  int64_t kv_bytes = int64_t{1} << 30;  // cpu and scripted backends
  int64_t max_step_tokens = 0;          // 0: the backend's default
  int64_t max_prefill_while_decoding = EngineOptions{}.max_prefill_tokens_while_decoding;
  int64_t prompt_chunk_tokens = -1;  // cuda: -1 = kCudaPromptChunkTokens; 0 = inside steps only
  double gpu_memory_fraction = 0.9;  // cuda: weights + scratch + KV cache
  // cuda: CudaBackendOptions::decode_path; empty: the megakernel where it can run the model
  // (ChooseDecodePath), else layered.
  std::string decode_path;
  std::string megakernel_policy;  // cuda: CudaBackendOptions::megakernel_policy (JSON)
  int64_t warmup_context = 8192;  // cuda: decode path prepared at start-up up to this context
  bool random_weights = false;    // cuda: --model's geometry and tokenizer, weights from --seed
  uint64_t seed = 0;
  int64_t max_model_len = 0;
  int64_t max_waiting = 0;
  double step_timeout_s = 60;         // a longer step is a wedged backend: fail and exit
  double first_step_timeout_s = 600;  // the first step also captures graphs, initialises
  DecodeLookahead decode_lookahead = DecodeLookahead::kOff;  // --decode-lookahead auto|on|off
  std::string served_model_name;
  bool reasoning = true;
  double drain_timeout_s = 30;      // SIGTERM: how long running requests may still take
  int64_t response_store_mb = 256;  // stored /v1/responses results (ResponseStore); 0: none
};

// Capped at 10^9 s (about 30 years): "inf" or 1e300 means "never", and converting a value past
// int64 milliseconds is undefined.
std::chrono::milliseconds Milliseconds(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(std::min(seconds, 1e9) * 1000));
}

// Raises the soft limit on open files to the hard one and returns it: every connection is a
// socket, and every running request holds a second descriptor that watches for its hang-up.
int64_t RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
    getrlimit(RLIMIT_NOFILE, &limit);
  }
  return limit.rlim_cur == RLIM_INFINITY ? int64_t{1} << 20 : static_cast<int64_t>(limit.rlim_cur);
}

// Descriptors kept free of connections: model files, the log, the engine's own.
constexpr int64_t kReservedFiles = 256;

// Steps of this many tokens keep the GPU's prefill GEMMs large; the CPU backend keeps the
// engine's smaller default so decode rows are not starved behind long prefill chunks.
constexpr int64_t kCudaStepTokens = 8192;

// The flags in short; docs/api.md has each in full (a test keeps the two lists the same).
constexpr char kUsage[] =
    "usage: mkserve serve --model DIR [flags]\n"
    "\n"
    "OpenAI-compatible HTTP server (chat, completions, responses; docs/api.md).\n"
    "  --model DIR                 checkpoint folder: config.json, safetensors, tokenizer.json\n"
    "  --backend cpu|cuda|scripted:FILE   default cpu (fp32 reference); cuda on H100/H200\n"
    "  --host ADDR                 address to bind (default 127.0.0.1)\n"
    "  --port N                    port (default 8000; 0 picks a free one)\n"
    "  --api-key KEY               require it on /v1/ routes, /tokenize and /detokenize\n"
    "  --served-model-name NAME    the model id clients send (default: the folder's name)\n"
    "  --reasoning on|off          thinking when a request does not say (default on)\n"
    "  --max-batch N               sequences decoded together (default 64)\n"
    "  --max-model-len N           context limit in tokens (default: the model's, at most what\n"
    "                              the KV cache holds for one sequence)\n"
    "  --max-waiting N             queued requests past this answer 503 (default 0: no limit)\n"
    "  --max-step-tokens N         tokens per engine step (default 2048 cpu, 8192 cuda)\n"
    "  --max-prefill-tokens-while-decoding N   prompt tokens a step while others decode\n"
    "                              (default 1024)\n"
    "  --prompt-chunk-tokens N     cuda: long prompts in chunks of N beside decoding streams\n"
    "                              (default 32768; 0: inside steps only)\n"
    "  --kv-bytes N                cpu, scripted: KV cache bytes (default 1073741824)\n"
    "  --gpu-memory-fraction F     cuda: share of GPU memory to use (default 0.9)\n"
    "  --decode NAME               cuda: megakernel (default where it runs the model), layered,\n"
    "                              graph or eager\n"
    "  --cuda-graphs on|off        cuda: off is --decode eager (default on)\n"
    "  --megakernel-policy FILE    cuda, megakernel: its schedule policy (JSON)\n"
    "  --warmup-context N          cuda: decode path prepared at start-up up to N tokens\n"
    "                              (default 8192)\n"
    "  --decode-lookahead auto|on|off   start each decode step before the previous one's\n"
    "                              tokens are read (default off)\n"
    "  --random-weights            cuda: --model's geometry, weights generated from --seed\n"
    "  --seed N                    the weight seed (default 0)\n"
    "  --step-timeout S            seconds a step may take before the backend counts as wedged\n"
    "                              (default 60)\n"
    "  --first-step-timeout S      the same for the first step (default 600)\n"
    "  --max-body-bytes N          larger request bodies answer 413 (default 16777216)\n"
    "  --max-connections N         open connections at most (default 16 x --max-batch, at\n"
    "                              least 1024)\n"
    "  --header-timeout S          seconds to a request's end of head (default 10)\n"
    "  --body-timeout S            seconds from the head to the end of the body (default 60)\n"
    "  --drain-timeout S           seconds running requests get after SIGTERM (default 30)\n"
    "  --response-store-mb N       memory for stored responses and conversations (default 256)\n";

// Tokens per engine step: --max-step-tokens, else the backend's default.
int64_t StepTokens(const ServeFlags& flags) {
  if (flags.max_step_tokens > 0) return flags.max_step_tokens;
  return flags.backend == "cuda" ? kCudaStepTokens : EngineOptions{}.max_step_tokens;
}

ServeFlags ParseFlags(std::span<const std::string> argv) {
  Args args(argv);
  ServeFlags flags;
  flags.model_dir = args.RequiredString("model");
  flags.backend = args.String("backend", "cpu");
  flags.http.host = args.String("host", "127.0.0.1");
  // Checked before narrowing: 4294975296 would otherwise wrap to port 8000.
  flags.http.port = static_cast<int>(args.Int("port", 8000, 0, 65535));
  const std::optional<std::string> api_key = args.Value("api-key");
  if (api_key && api_key->empty()) {
    throw Error("--api-key must not be empty (leave the flag out to serve without a key)");
  }
  flags.http.api_key = api_key.value_or("");
  flags.http.max_body_bytes = args.Int("max-body-bytes", 16 << 20);
  flags.max_batch = args.Int("max-batch", 64);
  // Every running or queued stream holds a connection; clients keep idle ones in their pools.
  const int64_t open_files = RaiseOpenFileLimit();
  const int64_t file_bound = (open_files - kReservedFiles) / 2;
  const int64_t max_connections = args.Int(
      "max-connections", std::min(std::max<int64_t>(1024, 16 * flags.max_batch), file_bound));
  const double header_timeout_s = args.Double("header-timeout", 10);
  const double body_timeout_s = args.Double("body-timeout", 60);
  flags.drain_timeout_s = args.Double("drain-timeout", flags.drain_timeout_s);
  flags.kv_bytes = args.Int("kv-bytes", flags.kv_bytes);
  flags.max_model_len = args.Int("max-model-len", 0);
  flags.max_waiting = args.Int("max-waiting", 0);
  if (flags.max_waiting < 0) throw Error("--max-waiting must be at least 0 (0: no limit)");
  flags.step_timeout_s = args.Double("step-timeout", flags.step_timeout_s);
  flags.first_step_timeout_s = args.Double("first-step-timeout", flags.first_step_timeout_s);
  const std::string lookahead = args.String("decode-lookahead", "off");
  if (lookahead == "auto" || lookahead == "on" || lookahead == "off") {
    flags.decode_lookahead = lookahead == "auto" ? DecodeLookahead::kAuto
                             : lookahead == "on" ? DecodeLookahead::kOn
                                                 : DecodeLookahead::kOff;
  } else {
    throw Error("--decode-lookahead must be auto, on or off, got '" + lookahead + "'");
  }
  flags.max_step_tokens = args.Int("max-step-tokens", 0);
  flags.max_prefill_while_decoding =
      args.Int("max-prefill-tokens-while-decoding", flags.max_prefill_while_decoding);
  flags.prompt_chunk_tokens = args.Int("prompt-chunk-tokens", flags.prompt_chunk_tokens);
  flags.gpu_memory_fraction = args.Double("gpu-memory-fraction", flags.gpu_memory_fraction);
  const std::string graphs = args.String("cuda-graphs", "on");
  if (graphs != "on" && graphs != "off") throw Error("--cuda-graphs must be on or off");
  if (const std::optional<std::string> decode = args.Value("decode")) {
    if (decode->empty()) throw Error("--decode needs a path name");
    flags.decode_path = *decode;
  }
  const std::string policy_file = MegakernelPolicyPath(args);
  flags.warmup_context = args.Int("warmup-context", flags.warmup_context);
  flags.random_weights = args.Switch("random-weights");
  flags.seed = static_cast<uint64_t>(args.Int("seed", 0));
  flags.served_model_name = args.String("served-model-name", "");
  flags.response_store_mb = args.Int("response-store-mb", flags.response_store_mb);
  std::string reasoning = args.String("reasoning", "on");
  if (reasoning != "on" && reasoning != "off") throw Error("--reasoning must be on or off");
  flags.reasoning = reasoning == "on";
  args.Finish();
  if (flags.max_batch < 1) throw Error("--max-batch must be at least 1");
  if (flags.response_store_mb < 0 || flags.response_store_mb > (int64_t{1} << 20)) {
    throw Error("--response-store-mb must be 0..1048576 (0: responses are not stored)");
  }
  if (flags.http.max_body_bytes < 1024) throw Error("--max-body-bytes must be at least 1024");
  if (max_connections < 1 || max_connections > file_bound) {
    throw Error("--max-connections must be 1.." + std::to_string(file_bound) +
                " (two open files per connection under the limit of " + std::to_string(open_files) +
                "; raise it with ulimit -n)");
  }
  flags.http.max_connections = static_cast<int>(max_connections);
  if (!(header_timeout_s > 0) || !(body_timeout_s > 0)) {
    throw Error("--header-timeout and --body-timeout must be positive (seconds)");
  }
  flags.http.header_timeout = Milliseconds(header_timeout_s);
  flags.http.body_timeout = Milliseconds(body_timeout_s);
  if (!(flags.drain_timeout_s >= 0)) throw Error("--drain-timeout must be at least 0 (seconds)");
  if (flags.kv_bytes < 1) throw Error("--kv-bytes must be at least 1");
  if (StepTokens(flags) < flags.max_batch) {
    throw Error("--max-step-tokens (" + std::to_string(StepTokens(flags)) +
                (flags.max_step_tokens == 0 ? ", the default" : "") +
                ") must be at least --max-batch (" + std::to_string(flags.max_batch) + ")");
  }
  if (flags.max_prefill_while_decoding < 1) {
    throw Error(
        "--max-prefill-tokens-while-decoding must be at least 1 (set it to "
        "--max-step-tokens to let prompts take whole steps)");
  }
  if (flags.prompt_chunk_tokens < -1 || (flags.backend == "cpu" && flags.prompt_chunk_tokens > 0)) {
    throw Error(
        "--prompt-chunk-tokens must be 0 (prompts inside steps only) or, with --backend cuda (or "
        "scripted:FILE), a positive number of tokens");
  }
  if (!(flags.step_timeout_s >= 0.001) || !(flags.first_step_timeout_s >= 0.001)) {
    throw Error("--step-timeout and --first-step-timeout must be positive numbers of seconds");
  }
  if (!(flags.gpu_memory_fraction > 0.0 && flags.gpu_memory_fraction < 1.0)) {
    throw Error("--gpu-memory-fraction must be in (0, 1)");
  }
  if (graphs == "off") {
    if (!flags.decode_path.empty() && flags.decode_path != "layered" &&
        flags.decode_path != "eager") {
      throw Error("--cuda-graphs off contradicts --decode " + flags.decode_path);
    }
    flags.decode_path = "eager";
  }
  if (!policy_file.empty()) {  // read and checked now, before any weight is loaded
    if (flags.backend != "cuda" ||
        (!flags.decode_path.empty() && flags.decode_path != "megakernel")) {
      throw Error("--megakernel-policy needs --backend cuda and the megakernel decode path");
    }
    flags.decode_path = "megakernel";
    if (flags.warmup_context == 0) {
      throw Error(
          "--megakernel-policy needs the decode warm-up (--warmup-context > 0), which "
          "builds and checks the policy's schedules before serving");
    }
    flags.megakernel_policy = MegakernelPolicyJson(policy_file);
  }
  if (flags.warmup_context < 0) throw Error("--warmup-context must be >= 0 (0: no warm-up)");
  if (flags.random_weights && flags.backend != "cuda") {
    throw Error("--random-weights needs --backend cuda");
  }
  if (!fs::is_directory(flags.model_dir)) {
    throw Error("--model " + flags.model_dir.string() + " is not a directory");
  }
  return flags;
}

// How long /health and new requests answer 503 after a fatal backend error before the HTTP
// shutdown, and how long that shutdown drains (it gets twice that before the process exits).
constexpr std::chrono::seconds kFatalDrain(2);
constexpr int kExitBackendFatal = 3;

// While streams decode, a long prompt runs beside their steps in chunks of this many tokens (in
// pieces of a step's size): the stream for chunks idles only between chunks, up to a step's time
// each (H200, 8 streams, three 32K prompts arriving: docs/performance.md).
constexpr int64_t kCudaPromptChunkTokens = 32768;

#ifdef MKSERVE_HAS_CUDA
// Prepares the decode path before the first request (graphs, or the megakernel's schedules), with
// progress and the cost on stderr. A failure is reported and the step prepares on first use,
// unless it came from the operator's --megakernel-policy: then serving stops here.
void WarmUpCuda(cuda::CudaBackend& backend, bool custom_policy) {
  int last_tenth = -1;
  const cuda::WarmUpReport report = backend.WarmUp([&last_tenth](int64_t done, int64_t total) {
    const int tenth = static_cast<int>(10 * done / std::max<int64_t>(total, 1));
    if (tenth == last_tenth) return;
    last_tenth = tenth;
    std::fprintf(stderr, "decode warm-up: %lld/%lld\n", static_cast<long long>(done),
                 static_cast<long long>(total));
  });
  std::fprintf(
      stderr,
      "decode warm-up (--decode %s): %lld graphs or schedules prepared in %.1f s, %lld MiB "
      "of GPU memory%s\n",
      backend.decode_path().c_str(), static_cast<long long>(report.prepared), report.seconds,
      static_cast<long long>(report.device_bytes >> 20),
      report.stopped_early ? " (stopped early: the rest is prepared on first use)" : "");
  if (report.error.empty()) return;
  // A custom policy's schedules must pass here: serving on would fail requests one by one.
  if (custom_policy) throw Error("decode warm-up with --megakernel-policy: " + report.error);
  std::fprintf(stderr, "decode warm-up: %s\n", report.error.c_str());
}
#endif

#ifdef MKSERVE_HAS_CUDA
// --decode as given, else the megakernel when its op bodies are written for the model's shapes
// (it is faster at every batch of 1..64 on the H200: docs/performance.md), else layered. Reads
// only config.json, before the weights load.
std::string ChooseDecodePath(const ServeFlags& flags) {
  if (!flags.decode_path.empty()) return flags.decode_path;
  const ModelConfig config =
      flags.model_dir.empty() ? NmcPreset() : ModelConfig::LoadDir(flags.model_dir);
  const std::optional<std::string> unsupported = megakernel::MegakernelUnsupportedReason(config);
  if (!unsupported) {
    std::fprintf(stderr, "decode path: megakernel (--decode layered for the layered path)\n");
    return "megakernel";
  }
  std::fprintf(stderr, "decode path: layered (the megakernel cannot run this model: %s)\n",
               unsupported->c_str());
  return std::string(cuda::kLayeredDecode);
}
#endif

std::unique_ptr<Backend> LoadCuda(const ServeFlags& flags) {
#ifdef MKSERVE_HAS_CUDA
  const std::string decode_path = ChooseDecodePath(flags);
  cuda::CheckDecodePathChoice(decode_path);  // before minutes of weight upload
  cuda::CudaBackendOptions options;
  options.gpu_memory_fraction = flags.gpu_memory_fraction;
  options.max_batch = flags.max_batch;
  options.max_num_tokens = StepTokens(flags);
  options.max_prompt_chunk_tokens =
      flags.prompt_chunk_tokens < 0 ? kCudaPromptChunkTokens : flags.prompt_chunk_tokens;
  options.decode_path = decode_path;
  options.megakernel_policy = flags.megakernel_policy;
  cuda::CheckPromptChunks(options);  // before minutes of weight upload
  options.random_weights = flags.random_weights;
  options.seed = flags.seed;
  options.warmup_context_tokens = flags.max_model_len > 0
                                      ? std::min(flags.warmup_context, flags.max_model_len)
                                      : flags.warmup_context;
  std::unique_ptr<cuda::CudaBackend> backend;
  {
    ByteProgress progress("uploading weights");
    options.progress = [&progress](int64_t done, int64_t total) { progress.Update(done, total); };
    backend = cuda::LoadCudaBackend(flags.model_dir, options);
  }
  if (flags.warmup_context > 0) WarmUpCuda(*backend, !flags.megakernel_policy.empty());
  return backend;
#else
  (void)flags;
  throw Error(
      "--backend cuda: this mkserve was built without the CUDA backend (configure with "
      "-DMKSERVE_CUDA=ON on a machine with the CUDA toolkit)");
#endif
}

std::unique_ptr<Backend> LoadBackend(const ServeFlags& flags, const tokenizer::Tokenizer& tok) {
  if (flags.backend == "cpu") {
    CpuBackendOptions options;
    options.kv_bytes_budget = flags.kv_bytes;
    options.max_batch = flags.max_batch;
    return LoadCpuBackend(flags.model_dir, options);
  }
  if (flags.backend.rfind("scripted:", 0) == 0) {
    ModelConfig config = ModelConfig::LoadDir(flags.model_dir);
    Script script = LoadScript(flags.backend.substr(9), [&tok](const std::string& text) {
      return tok.Encode(text, /*add_special_tokens=*/false);
    });
    // The same KV budget the CPU backend would get, in tokens per layer.
    int64_t bytes_per_token = config.num_layers * 2 * config.kv_width() * int64_t{sizeof(float)};
    return MakeScriptedBackend(config, std::move(script), flags.kv_bytes / bytes_per_token,
                               flags.max_batch, std::max<int64_t>(flags.prompt_chunk_tokens, 0));
  }
  if (flags.backend == "cuda") return LoadCuda(flags);
  throw Error("--backend must be cpu, cuda or scripted:FILE, got '" + flags.backend + "'");
}

// Weight loading gives no byte count back, so the bar is an honest spinner with elapsed time.
// Redirected to a file it prints only the start and end lines.
template <typename Work>
auto WithProgress(const std::string& label, Work work) {
  std::atomic<bool> done{false}, failed{false};
  const bool is_terminal = isatty(STDERR_FILENO);
  if (!is_terminal) std::fprintf(stderr, "%s ...\n", label.c_str());
  std::thread ticker([&] {
    const char* frames = "|/-\\";
    auto start = std::chrono::steady_clock::now();
    for (int tick = 0; !done; ++tick) {
      if (!is_terminal) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::fprintf(stderr, "\r%s %c %.1fs", label.c_str(), frames[tick % 4], elapsed);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    std::fprintf(stderr, "\r%s %s in %.1fs\n", label.c_str(), failed ? "failed" : "done",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  });
  struct Join {
    std::atomic<bool>& done;
    std::thread& thread;
    ~Join() {
      done = true;
      thread.join();
    }
  } join{done, ticker};
  try {
    return work();
  } catch (...) {
    failed = true;  // before `join` ends the ticker, which then says so
    throw;
  }
}

int64_t KvCapacityTokens(const KvLayout& layout) {
  int64_t tokens = 0;
  for (const KvGroup& group : layout.groups) {
    if (group.attention == AttentionKind::kFull) tokens = group.num_blocks * kBlockTokens;
  }
  return tokens;
}

std::unique_ptr<server::ServedModel> LoadModel(const ServeFlags& flags) {
  auto model = std::make_unique<server::ServedModel>();
  model->tokenizer =
      std::make_shared<const tokenizer::Tokenizer>(tokenizer::Tokenizer::Load(flags.model_dir));
  // A token id past the model's rows could be sent (a prompt, a grammar mask) but never embedded
  // or sampled: such a pair is refused here, not request by request.
  const ModelConfig config = ModelConfig::LoadDir(flags.model_dir);
  if (model->tokenizer->vocab_size() > config.vocab_size) {
    throw Error("tokenizer.json has token ids up to " +
                std::to_string(model->tokenizer->vocab_size() - 1) + ", past config.json's " +
                "vocab_size " + std::to_string(config.vocab_size) +
                ": the tokenizer is not this model's");
  }
  // A checkpoint without a template (the tiny test model) speaks the built-in Command-4 one.
  const auto& source = model->tokenizer->chat_template();
  if (source && source->find_first_not_of(" \t\r\n") == std::string::npos) {
    throw Error("the checkpoint's chat template is empty: every chat prompt would be empty");
  }
  model->chat_template = source ? chat::ChatTemplate::Parse(*source) : chat::Command4Template();
  model->command4_format = server::IsCommand4Template(*model->chat_template);
  model->grammar_vocabulary = server::BuildGrammarVocabulary(*model->tokenizer);
  model->hidden_special_tokens = server::HiddenSpecialTokens(*model->tokenizer, {});
  model->chat_hidden_special_tokens =
      model->command4_format
          ? server::HiddenSpecialTokens(*model->tokenizer, chat::Command4Markers())
          : model->hidden_special_tokens;
  model->grammar_cache = std::make_shared<grammar::GrammarCache>(
      model->grammar_vocabulary, server::kCachedGrammars, server::kCachedGrammarPositions);
  // Seconds at a 262K vocabulary: done while the weights load.
  std::future<void> warm_grammar = std::async(
      std::launch::async, [&] { server::WarmJsonPreludeCaches(*model->grammar_vocabulary); });
  // The CUDA upload draws its own byte-counting bar; the others get a spinner.
  std::unique_ptr<Backend> backend =
      flags.backend == "cuda" ? LoadBackend(flags, *model->tokenizer)
                              : WithProgress("loading weights (" + flags.backend + ")",
                                             [&] { return LoadBackend(flags, *model->tokenizer); });
  EngineOptions options;
  options.max_batch = flags.max_batch;
  options.max_step_tokens = StepTokens(flags);
  options.max_prefill_tokens_while_decoding = flags.max_prefill_while_decoding;
  options.prompt_chunk_tokens =
      backend->max_prompt_chunk_tokens();  // what --prompt-chunk-tokens set up
  options.max_model_len = flags.max_model_len;
  options.max_waiting_requests = flags.max_waiting;
  options.step_timeout = Milliseconds(flags.step_timeout_s);
  options.first_step_timeout = Milliseconds(flags.first_step_timeout_s);
  options.decode_lookahead = flags.decode_lookahead;
  options.text_decoder =
      std::make_shared<server::TokenizerTextDecoder>(model->tokenizer, chat::Command4Markers());
  model->engine = std::make_unique<Engine>(std::move(backend), options);
  warm_grammar.get();
  return model;
}

void PrintSummary(const ServeFlags& flags, const server::ServedModel& model,
                  const std::string& model_id, int port) {
  const Engine& engine = *model.engine;
  std::fprintf(stderr,
               "mkserve serve\n  model        %s (%s)\n  backend      %s\n"
               "  KV capacity  %lld tokens\n  context      %lld tokens\n  max batch    %lld\n"
               "  reasoning    %s by default\n  chat format  %s\n  auth         %s\n"
               "  connections  up to %d\n  listening    http://%s:%d\n",
               model_id.c_str(), flags.model_dir.string().c_str(), engine.backend_name().c_str(),
               static_cast<long long>(KvCapacityTokens(engine.kv_layout())),
               static_cast<long long>(engine.max_model_len()),
               static_cast<long long>(flags.max_batch), flags.reasoning ? "on" : "off",
               model.tokenizer->chat_template() ? "checkpoint chat template" : "built-in Command-4",
               flags.http.api_key.empty() ? "none" : "Bearer API key", flags.http.max_connections,
               flags.http.host.c_str(), port);
}

// While the model loads (minutes of weight copies that cannot be cut short) nothing runs yet that a
// drain would wait for, so a stop signal then exits at once instead of after the load.
class StopDuringLoad {
 public:
  explicit StopDuringLoad(const sigset_t& stop_signals)
      : stop_signals_(stop_signals), watcher_([this] { Watch(); }) {}
  ~StopDuringLoad() {
    loaded_ = true;
    watcher_.join();
  }
  StopDuringLoad(const StopDuringLoad&) = delete;
  StopDuringLoad& operator=(const StopDuringLoad&) = delete;

 private:
  void Watch() {
    const timespec poll{0, 50'000'000};  // 50 ms
    while (!loaded_) {
      int signal_number = sigtimedwait(&stop_signals_, nullptr, &poll);
      if (signal_number > 0) {
        std::fprintf(stderr, "\nmkserve serve: signal %d during the load, stopped\n",
                     signal_number);
        std::fflush(stderr);
        std::_Exit(0);
      }
    }
  }

  const sigset_t stop_signals_;
  std::atomic<bool> loaded_{false};
  std::thread watcher_;  // last: it starts once the members above exist
};

// The stop signal that arrived, or 0 once the engine has failed fatally.
int WaitForSignalOrFatal(const sigset_t& stop_signals, const Engine& engine) {
  const timespec poll{0, 100'000'000};  // 100 ms
  while (!engine.fatal_error()) {
    int signal_number = sigtimedwait(&stop_signals, nullptr, &poll);
    if (signal_number > 0) return signal_number;
  }
  return 0;
}

// After a fatal backend error the engine has failed every request in flight and refuses new ones
// (503, /health too). Keep answering so for a moment, shut the HTTP server down so those responses
// go out, then exit non-zero so a supervisor restarts the server. The engine thread may be stuck
// inside the backend, so nothing here waits for it: the process ends with _Exit, and the HTTP
// shutdown runs on a thread of its own with a bounded wait.
[[noreturn]] void ExitAfterFatal(const std::string& message, server::HttpServer& http,
                                 const std::atomic<bool>& listener_done) {
  std::fprintf(stderr, "mkserve serve: fatal backend error: %s\nmkserve serve: exiting\n",
               message.c_str());
  std::this_thread::sleep_for(kFatalDrain);
  std::thread([&http] { http.Shutdown(kFatalDrain); }).detach();
  auto deadline = std::chrono::steady_clock::now() + 2 * kFatalDrain;
  while (!listener_done && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::fflush(stderr);
  std::_Exit(kExitBackendFatal);
}

int RunServe(std::span<const std::string> argv) {
  ServeFlags flags = ParseFlags(argv);
  // Block the stop signals in every thread; the main thread waits for them (sigtimedwait). A
  // hang-up of the controlling terminal stops the server as SIGTERM does (drained, not killed);
  // a closed stderr pipe (`serve 2>&1 | head`) must not kill it: writes then just fail.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  std::string model_id = flags.served_model_name.empty()
                             ? fs::absolute(flags.model_dir).lexically_normal().filename().string()
                             : flags.served_model_name;
  if (model_id.empty()) model_id = fs::absolute(flags.model_dir).parent_path().filename().string();
  server::ServerState state({model_id, flags.reasoning, static_cast<int64_t>(std::time(nullptr)),
                             flags.response_store_mb << 20});
  server::HttpCounters counters;
  server::HttpOptions http_options = flags.http;
  http_options.on_response = [&counters](int status) { counters.Record(status); };
  server::HttpServer http(http_options);
  server::RegisterRoutes(http, state, counters);
  int port = http.Bind();
  std::atomic<bool> listener_done{false};
  std::thread listener([&http, &listener_done] {
    http.Listen();
    listener_done = true;
  });
  std::fprintf(stderr, "mkserve serve: bound http://%s:%d, loading %s\n", flags.http.host.c_str(),
               port, flags.model_dir.string().c_str());
  try {
    StopDuringLoad stop_during_load(stop_signals);
    state.SetModel(LoadModel(flags));
  } catch (...) {
    http.Stop();
    listener.join();
    throw;
  }
  PrintSummary(flags, state.RequireModel(), model_id, port);
  int signal_number = WaitForSignalOrFatal(stop_signals, *state.RequireModel().engine);
  if (signal_number == 0) {
    ExitAfterFatal(*state.RequireModel().engine->fatal_error(), http, listener_done);
  }
  std::fprintf(stderr,
               "mkserve serve: signal %d, shutting down: no new connections, running requests "
               "have %.0f s to finish\n",
               signal_number, flags.drain_timeout_s);
  http.Shutdown(Milliseconds(flags.drain_timeout_s));
  listener.join();
  std::fprintf(stderr, "mkserve serve: stopped\n");
  return 0;
}

CommandRegistration registration({"serve", "OpenAI-compatible HTTP server", kUsage, RunServe});

}  // namespace
}  // namespace mkserve::cli
