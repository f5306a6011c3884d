// Engine: continuous-batching generation over a Backend.
//
// One engine thread owns every Sequence, the scheduler and the KV blocks. Callers (HTTP threads)
// only Submit requests, read events from their RequestHandle and read Snapshot(); Submit and
// cancellation are commands on a queue that the engine applies at step boundaries.
//
//   Engine engine(std::move(backend), options);
//   RequestHandle handle = engine.Submit(std::move(request));
//   while (!handle.is_done()) {
//     std::optional<EngineEvent> event = handle.Next(std::chrono::milliseconds(100));
//     if (!event) continue;  // a timeout: the moment to check that the client is still there
//     ...                    // TokensEvent / FinishedEvent / ErrorEvent
//   }
//
// Event contract, per request: for each sibling index, zero or more TokensEvent then exactly one
// FinishedEvent; the request is done when every sibling has finished. An invalid request gets a
// single ErrorEvent; a backend failure or shutdown ends a running request with one ErrorEvent
// (possibly after some TokensEvents). Cancel (or dropping the handle) ends the stream with no
// further event. Preemption is invisible: tokens are never re-emitted.
//
// Each step: schedule -> backend step -> postprocess (advance counters, cache full blocks,
// stop checks) -> emit events. A prompt chunk the scheduler starts beside the steps runs while
// they do; the loop polls it each step (waits for it when nothing else can run) and advances its
// sequence when it has finished. A Backend::Step that throws mkserve::Error fails the requests in
// that batch with an ErrorEvent; the loop keeps serving the others.
//
// Fatal failures: a BackendFatalError (engine/backend_error.h), or a step that has not returned
// within the step timeout (a watchdog thread checks), fails every request in flight, queued ones
// included, with an ErrorEvent; from then on Submit answers kShutdown at once and fatal_error()
// says why. The engine thread may still be stuck inside the backend, so the process should exit
// rather than destroy the Engine (whose destructor joins that thread).
//
// The Engine must be destroyed after the HTTP threads stop calling it; handles may outlive it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <thread>
#include <unordered_map>
#include <variant>

#include "engine/backend.h"
#include "engine/block_manager.h"
#include "engine/engine_events.h"
#include "engine/engine_stats.h"
#include "engine/mask_workers.h"
#include "engine/request_handle.h"
#include "engine/scheduler.h"
#include "engine/step_watchdog.h"
#include "engine/text_decoder.h"

namespace mkserve {

enum class DecodeLookahead { kAuto, kOn, kOff };

struct EngineOptions {
  int64_t max_batch = 64;          // --max-batch: running sequences
  int64_t max_step_tokens = 2048;  // tokens per step (prefill chunk budget); >= max_batch
  // Prompt tokens in a step that also decodes (keeps inter-token latency smooth); >= 1.
  int64_t max_prefill_tokens_while_decoding = 1024;
  // While streams decode, a longer prompt runs as chunks of up to this many tokens beside the
  // steps (Scheduler; Backend::StartPromptChunk), at most the backend's
  // max_prompt_chunk_tokens(). 0: prompts run inside steps only.
  int64_t prompt_chunk_tokens = 0;
  int64_t max_model_len = 0;         // context limit; 0 = the model's max_position_embeddings
  int64_t max_waiting_requests = 0;  // beyond this Submit fails with kQueueFull; 0 = unlimited
  // A step running longer than this is a wedged backend (fatal). The first step may take longer:
  // CUDA graph capture and lazy initialisation happen there. A prompt chunk beside the steps gets
  // step_timeout per max_step_tokens of its tokens, and one more.
  std::chrono::milliseconds step_timeout{60'000};
  std::chrono::milliseconds first_step_timeout{600'000};
  // Detokenizer for text deltas and stop strings; null = no text (stop strings are rejected).
  std::shared_ptr<const TextDecoder> text_decoder;
  // Decode lookahead (docs/request-flow.md): a step of plain decode rows starts the next one before
  // its own tokens are read. kAuto: where the backend runs ahead (Backend::runs_ahead); kOn also on
  // a backend that runs steps whole (no gain: the engine's tests run the lookahead that way).
  // Off by default until its GPU test passes on the H200 (docs/STATUS.md).
  DecodeLookahead decode_lookahead = DecodeLookahead::kOff;
};

class Engine {
 public:
  using Clock = std::chrono::steady_clock;

  // Throws mkserve::Error for inconsistent options.
  Engine(std::unique_ptr<Backend> backend, EngineOptions options);
  ~Engine();  // stops the thread; unfinished requests get ErrorEvent{kShutdown}
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Never throws for bad input: an invalid request gets one ErrorEvent on its handle.
  RequestHandle Submit(EngineRequest request);
  EngineSnapshot Snapshot() const;

  const ModelConfig& config() const { return backend_->config(); }
  const KvLayout& kv_layout() const { return backend_->kv_layout(); }
  int64_t max_model_len() const { return max_model_len_; }
  // Tokens of context the full-attention KV pool holds (for the start-up summary).
  int64_t kv_capacity_tokens() const;
  const std::string& backend_name() const { return backend_name_; }
  // Why the engine stopped serving after a fatal backend failure; nullopt while it is healthy.
  std::optional<std::string> fatal_error() const;

 private:
  struct Generation;
  struct Request;
  struct StepFailure {
    std::string message;
    bool fatal = false;
  };
  // The next step, started before this one's tokens were read: the same decode rows, each one
  // position on, decoding the token this step samples.
  struct Lookahead {
    std::unique_ptr<PendingStep> step;
    std::vector<int64_t> sequence_ids;
    std::vector<int64_t> positions;
  };
  struct SubmitCommand {
    int64_t id;
    EngineRequest request;
    std::shared_ptr<RequestChannel> channel;
  };
  struct CancelCommand {
    int64_t id;
  };
  using Command = std::variant<SubmitCommand, CancelCommand>;
  class Commands;  // the queue HTTP threads push to; also the handles' CancelSink

  void Loop();
  void Apply(SubmitCommand& command);
  void Apply(const CancelCommand& command);
  void AddGeneration(Request& request, const EngineRequest& in, int32_t index);
  bool Step();
  void StartChunk(Sequence& seq);
  // Finishes the chunk in flight if it has finished within `timeout`; returns whether it did.
  bool PollChunk(std::chrono::microseconds timeout);
  // Starts the step (unless the lookahead started it), then the lookahead, and waits for the
  // step. `rows` (empty: the identity) is each batch sequence's row in the pending step, which
  // may hold rows of sequences that have ended since it started.
  std::optional<StepFailure> RunBackend(const Batch& batch, const StepInputs& inputs,
                                        std::unique_ptr<PendingStep> pending,
                                        const std::vector<size_t>& rows, StepOutputs& outputs);
  // The lookahead's rows, or nullopt when this step's cannot all go on undisturbed.
  std::optional<StepInputs> LookaheadInputs(const Batch& batch, const StepInputs& inputs) const;
  // Per row of the lookahead: its sequence, still running and decoding at the row's position
  // with room for it, or null where the sequence has ended (its result is dropped). Empty when the
  // lookahead cannot be this step: no row left, or a row in any other state.
  std::vector<Sequence*> AdoptableRows(const Lookahead& ahead) const;
  // Waits for lookahead_ (its KV writes land before its rows' blocks are reused) and drops it.
  void DropLookahead();
  void FailBatch(const Batch& batch, const std::string& message);
  void Postprocess(const Batch& batch, const StepInputs& inputs, const StepOutputs& outputs);
  void RecordStepTime(int64_t decode_rows, int64_t prefill_tokens, Clock::duration step,
                      Clock::duration backend);
  void MarkPromptReady(Generation& gen);
  void EmitPromptLogprobs(Generation& gen, const SequenceResult& result);
  std::shared_future<void> StartGrammarMasks(const Batch& batch, StepInputs& inputs);
  // `allowed`: the row's grammar mask this step (empty without one).
  void EmitToken(Generation& gen, const SequenceResult& result, std::span<const uint32_t> allowed,
                 Clock::time_point now);
  void DropOutOfMemory(const Batch& batch);
  void FinishGeneration(Generation& gen, FinishReason reason, std::string stop_string = {});
  void FailRequest(Request& request, EngineErrorKind kind, const std::string& message);
  void CloseRequest(Request& request);
  void CollectDoneRequests();
  void PublishSnapshot();

  std::unique_ptr<Backend> backend_;
  std::string backend_name_;
  EngineOptions options_;
  int64_t max_model_len_ = 0;
  BlockManager blocks_;
  Scheduler scheduler_;
  std::shared_ptr<Commands> commands_;
  std::unique_ptr<StepWatchdog> watchdog_;  // after commands_: its callback uses them

  // Engine-thread state.
  std::unordered_map<int64_t, std::unique_ptr<Request>> requests_;
  std::unordered_map<int64_t, Generation*> generations_;  // by sequence id
  std::vector<int64_t> done_requests_;                    // erased after the step
  std::vector<std::vector<int32_t>> next_token_scratch_;  // backs SequenceStep::next_token_ids
  std::vector<std::vector<uint32_t>> mask_scratch_;       // backs SequenceStep::allowed_tokens
  // The prompt chunk beside the steps; declared after backend_, so destroyed (waiting for the
  // GPU) before the backend it runs on.
  std::unique_ptr<PendingChunk> chunk_;
  std::optional<Lookahead> lookahead_;  // destroyed (waited for) before the backend too
  std::chrono::milliseconds chunk_timeout_{0};
  Clock::time_point chunk_deadline_;
  int64_t next_sequence_id_ = 0;
  std::mt19937_64 random_seeds_;  // seeds for requests that bring none
  MaskWorkers mask_workers_;      // constrained outputs' allowed tokens, beside the forward pass
  EngineSnapshot stats_;

  mutable std::mutex snapshot_mutex_;
  EngineSnapshot snapshot_;
  std::thread thread_;
};

}  // namespace mkserve
