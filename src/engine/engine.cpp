#include "engine/engine.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <random>
#include <string>

#include "common/error.h"
#include "engine/backend_error.h"
#include "engine/request_validation.h"
#include "engine/step_inputs.h"
#include "engine/stop_checker.h"

namespace mkserve {
namespace {

using Clock = Engine::Clock;

constexpr int64_t kIdleWaitMs = 60'000;  // any command wakes the loop earlier
// With only a prompt chunk to wait for, the loop waits for it this long at a time, so commands
// (a new request, a cancel) still apply promptly.
constexpr std::chrono::microseconds kChunkWait(2'000);

double SecondsBetween(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// The context: max_model_len when given, else the model's, and never more than one sequence can
// hold in the KV cache alone (past it a request would end early with "length" for want of
// memory, not context). A max_model_len given past that is refused.
int64_t ResolveMaxModelLen(const EngineOptions& options, const ModelConfig& config,
                           const KvLayout& kv_layout) {
  int64_t model = config.max_position_embeddings;
  if (options.max_model_len < 0) throw Error("max_model_len must be >= 0");
  if (options.max_model_len > 0 && model > 0 && options.max_model_len > model) {
    throw Error("max_model_len " + std::to_string(options.max_model_len) +
                " exceeds the model's max_position_embeddings " + std::to_string(model));
  }
  const int64_t kv_longest = LongestSequenceTokens(kv_layout);
  if (options.max_model_len > kv_longest) {
    throw Error("max_model_len " + std::to_string(options.max_model_len) +
                " is more than the KV cache can hold for one sequence (" +
                std::to_string(kv_longest) + " tokens); lower it or give the KV cache more memory");
  }
  if (options.max_model_len > 0) return options.max_model_len;
  return std::min(model > 0 ? model : std::numeric_limits<int32_t>::max(), kv_longest);
}

SchedulerOptions CheckedSchedulerOptions(const EngineOptions& options, const Backend& backend) {
  if (options.max_batch < 1) throw Error("max_batch must be >= 1");
  if (options.max_step_tokens < options.max_batch) {
    throw Error("max_step_tokens (" + std::to_string(options.max_step_tokens) +
                ") must be at least max_batch (" + std::to_string(options.max_batch) + ")");
  }
  if (options.max_prefill_tokens_while_decoding < 1) {
    throw Error("max_prefill_tokens_while_decoding must be >= 1, got " +
                std::to_string(options.max_prefill_tokens_while_decoding));
  }
  if (options.prompt_chunk_tokens < 0 ||
      options.prompt_chunk_tokens > backend.max_prompt_chunk_tokens()) {
    throw Error("prompt_chunk_tokens must be 0.." +
                std::to_string(backend.max_prompt_chunk_tokens()) + " (what " + backend.name() +
                " runs beside a step), got " + std::to_string(options.prompt_chunk_tokens));
  }
  return {options.max_batch, options.max_step_tokens, options.max_prefill_tokens_while_decoding,
          options.prompt_chunk_tokens};
}

}  // namespace

struct Engine::Generation {
  Sequence seq;
  std::unique_ptr<StopChecker> stop;
  // Constrained output: where the sibling is in its grammar (it may end where stop's
  // stop_token_ids are allowed).
  std::optional<grammar::GrammarMatcher> matcher;
  Request* request = nullptr;
  bool done = false;
  bool has_token = false;
  Clock::time_point last_token_time;
};

struct Engine::Request {
  int64_t id = 0;
  std::shared_ptr<RequestChannel> channel;
  std::vector<std::unique_ptr<Generation>> generations;
  std::shared_ptr<bool> prompt_ready;  // siblings wait for sibling 0's prompt blocks
  int32_t num_live = 0;
  bool has_first_token = false;
  Clock::time_point submitted = Clock::now();
};

// The only state HTTP threads (and the watchdog) touch: a command queue, the id counter, the
// channels of the requests in flight, and the fatal state.
class Engine::Commands : public CancelSink {
 public:
  void Push(Command command) {
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(std::move(command));
    }
    wake_.notify_one();
  }
  // Queues a new request, or refuses it at once when the engine has stopped after a fatal error.
  void Submit(SubmitCommand command) {
    std::shared_ptr<RequestChannel> channel = command.channel;
    std::optional<std::string> fatal;
    {
      std::lock_guard lock(mutex_);
      fatal = fatal_error_;
      if (!fatal) {
        live_[command.id] = channel;
        queue_.push_back(std::move(command));
      }
    }
    if (!fatal) {
      wake_.notify_one();
      return;
    }
    channel->Push(ErrorEvent{EngineErrorKind::kShutdown,
                             "the server stopped serving after a fatal backend error (" + *fatal +
                                 "); retry once it has been restarted"});
    channel->Close();
  }
  void Forget(int64_t request_id) {
    std::lock_guard lock(mutex_);
    live_.erase(request_id);
  }
  // The fatal path: fails every request in flight (queued or running) and refuses new ones. Any
  // thread may call it; the engine thread leaves its loop at the next check.
  void FailAll(const std::string& message) {
    std::unordered_map<int64_t, std::weak_ptr<RequestChannel>> live;
    {
      std::lock_guard lock(mutex_);
      if (fatal_error_) return;
      fatal_error_ = message;
      live.swap(live_);
    }
    wake_.notify_one();
    for (auto& [id, weak_channel] : live) {
      if (std::shared_ptr<RequestChannel> channel = weak_channel.lock()) {
        channel->Push(
            ErrorEvent{EngineErrorKind::kBackend,
                       message + "; the server stops serving so that it can be restarted"});
        channel->Close();
      }
    }
  }
  std::optional<std::string> fatal_error() const {
    std::lock_guard lock(mutex_);
    return fatal_error_;
  }
  void CancelRequest(int64_t request_id) override { Push(CancelCommand{request_id}); }
  // Waits up to `max_wait` for a command; false once Stop() or FailAll() was called.
  bool Take(std::chrono::milliseconds max_wait, std::deque<Command>& out) {
    std::unique_lock lock(mutex_);
    wake_.wait_for(lock, max_wait, [&] { return stopping_ || fatal_error_ || !queue_.empty(); });
    out.swap(queue_);
    return !stopping_ && !fatal_error_;
  }
  void Stop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_one();
  }
  int64_t NextId() { return next_id_++; }

 private:
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Command> queue_;
  std::unordered_map<int64_t, std::weak_ptr<RequestChannel>> live_;  // submitted, not yet closed
  std::optional<std::string> fatal_error_;
  bool stopping_ = false;
  std::atomic<int64_t> next_id_{1};
};

Engine::Engine(std::unique_ptr<Backend> backend, EngineOptions options)
    : backend_(std::move(backend)),
      backend_name_(backend_->name()),
      options_(std::move(options)),
      max_model_len_(ResolveMaxModelLen(options_, backend_->config(), backend_->kv_layout())),
      blocks_(backend_->kv_layout()),
      scheduler_(blocks_, CheckedSchedulerOptions(options_, *backend_)),
      commands_(std::make_shared<Commands>()),
      watchdog_(std::make_unique<StepWatchdog>(
          options_.first_step_timeout, options_.step_timeout,
          [commands = commands_](const std::string& message) { commands->FailAll(message); })),
      random_seeds_(std::random_device{}()),
      // A large constrained batch spreads over a few threads; the forward pass keeps the others.
      mask_workers_(
          std::clamp<int>(static_cast<int>(std::thread::hardware_concurrency()) / 2, 1, 8)) {
  PublishSnapshot();
  thread_ = std::thread([this] { Loop(); });
}

Engine::~Engine() {
  commands_->Stop();
  thread_.join();
}

RequestHandle Engine::Submit(EngineRequest request) {
  auto channel = std::make_shared<RequestChannel>();
  int64_t id = commands_->NextId();
  commands_->Submit(SubmitCommand{id, std::move(request), channel});
  return RequestHandle(id, channel, commands_);
}

std::optional<std::string> Engine::fatal_error() const { return commands_->fatal_error(); }

int64_t Engine::kv_capacity_tokens() const {
  int64_t blocks = 0;
  for (const KvGroup& group : kv_layout().groups) {
    if (group.attention == AttentionKind::kFull || blocks == 0) blocks = group.num_blocks;
  }
  return blocks * kBlockTokens;
}

EngineSnapshot Engine::Snapshot() const {
  std::lock_guard lock(snapshot_mutex_);
  return snapshot_;
}

void Engine::Loop() {
  std::deque<Command> commands;
  bool progressed = false;
  // Busy: poll without waiting. Work that could not be scheduled (waiting for KV or a sibling):
  // nap briefly rather than spin. Idle: sleep until a command comes.
  auto max_wait = [&] {
    using std::chrono::milliseconds;
    if (!scheduler_.has_work()) return milliseconds(kIdleWaitMs);
    return milliseconds(progressed ? 0 : 1);
  };
  while (commands_->Take(max_wait(), commands)) {
    for (Command& command : commands) std::visit([&](auto& c) { Apply(c); }, command);
    commands.clear();
    progressed = scheduler_.has_work() && Step();
    CollectDoneRequests();
    PublishSnapshot();
  }
  for (Command& command : commands) {  // submitted while stopping: never started
    if (auto* submit = std::get_if<SubmitCommand>(&command)) {
      submit->channel->Push(ErrorEvent{EngineErrorKind::kShutdown, "the engine is shutting down"});
      submit->channel->Close();
    }
  }
  for (auto& [id, request] : requests_) {
    FailRequest(*request, EngineErrorKind::kShutdown, "the engine is shutting down");
  }
}

void Engine::Apply(SubmitCommand& command) {
  RequestLimits limits{&config(), max_model_len_, options_.text_decoder != nullptr};
  std::optional<std::string> error = ValidateRequest(command.request, limits);
  EngineErrorKind kind = EngineErrorKind::kInvalidRequest;
  if (!error && options_.max_waiting_requests > 0 &&
      scheduler_.num_waiting() >= options_.max_waiting_requests) {
    kind = EngineErrorKind::kQueueFull;
    error = "the server is busy: " + std::to_string(scheduler_.num_waiting()) +
            " requests are already waiting; retry later";
  }
  if (error) {
    ++stats_.requests_rejected;
    command.channel->Push(ErrorEvent{kind, *error});
    command.channel->Close();
    commands_->Forget(command.id);
    return;
  }
  auto request = std::make_unique<Request>();
  request->id = command.id;
  request->channel = command.channel;
  const EngineRequest& in = command.request;
  // Siblings wait for sibling 0's prompt only when it has a full block to share.
  bool shares_blocks = (static_cast<int64_t>(in.prompt_token_ids.size()) - 1) / kBlockTokens > 0;
  if (in.n > 1 && shares_blocks) request->prompt_ready = std::make_shared<bool>(false);
  for (int32_t i = 0; i < in.n; ++i) AddGeneration(*request, in, i);
  request->num_live = in.n;
  stats_.prompt_tokens_total += static_cast<int64_t>(in.prompt_token_ids.size());
  requests_[request->id] = std::move(request);
}

void Engine::AddGeneration(Request& request, const EngineRequest& in, int32_t index) {
  auto gen = std::make_unique<Generation>();
  Sequence& seq = gen->seq;
  seq.id = next_sequence_id_++;
  seq.request_id = request.id;
  seq.index = index;
  seq.sampling = SiblingParams(in, index, random_seeds_(), config());
  seq.token_ids = in.prompt_token_ids;
  seq.num_prompt_tokens = static_cast<int64_t>(in.prompt_token_ids.size());
  seq.use_prefix_cache = seq.sampling.num_prompt_logprobs < 0;
  if (index > 0) seq.prompt_ready = request.prompt_ready;
  auto text = options_.text_decoder
                  ? options_.text_decoder->NewStream(in.prompt_token_ids, in.hidden_tokens)
                  : nullptr;
  gen->stop = std::make_unique<StopChecker>(seq.sampling, config().eos_token_ids, max_model_len_,
                                            std::move(text));
  if (in.grammar) {
    gen->matcher.emplace(in.grammar);
  }
  gen->request = &request;
  generations_[seq.id] = gen.get();
  scheduler_.Add(&seq);
  request.generations.push_back(std::move(gen));
}

void Engine::Apply(const CancelCommand& command) {
  auto it = requests_.find(command.id);
  if (it == requests_.end() || it->second->num_live == 0) return;
  Request& request = *it->second;
  for (auto& gen : request.generations) {
    if (!gen->done) scheduler_.Remove(&gen->seq);
    gen->done = true;
  }
  request.num_live = 0;
  ++stats_.requests_cancelled;
  CloseRequest(request);
}

// One step: schedule -> backend -> postprocess/emit. Errors fail the batch, not the loop.
// Returns whether anything changed.
bool Engine::Step() {
  const Clock::time_point started = Clock::now();
  bool progressed = PollChunk(std::chrono::microseconds(0));
  if (commands_->fatal_error()) return true;
  Batch batch;
  std::unique_ptr<PendingStep> pending;
  std::vector<size_t> pending_rows;  // each batch sequence's row in `pending`
  if (lookahead_) {                  // the step started ahead: this step when its rows still decode
    const std::vector<Sequence*> rows = AdoptableRows(*lookahead_);
    if (rows.empty()) {
      DropLookahead();
      if (commands_->fatal_error()) return true;
    } else {
      std::vector<Sequence*> live;
      for (size_t r = 0; r < rows.size(); ++r) {
        if (rows[r] == nullptr) continue;  // ended meanwhile: its row's result is dropped
        live.push_back(rows[r]);
        pending_rows.push_back(r);
      }
      batch = scheduler_.ScheduleAhead(live);
      pending = std::move(lookahead_->step);
      lookahead_.reset();
    }
  }
  if (pending == nullptr) {
    batch = scheduler_.Schedule();
    stats_.preemptions_total += static_cast<int64_t>(batch.preempted.size());
    DropOutOfMemory(batch);
    progressed = progressed || !batch.preempted.empty() || !batch.out_of_memory.empty();
    if (batch.chunk != nullptr) {  // before the step, so that the two run together
      StartChunk(*batch.chunk);
      if (commands_->fatal_error()) return true;
      // A chunk that failed to start failed its request, siblings in this batch included.
      std::erase_if(batch.sequences, [](const Sequence* seq) { return seq->is_finished(); });
      batch.num_tokens = 0;
      for (const Sequence* seq : batch.sequences) batch.num_tokens += seq->num_scheduled_tokens;
      progressed = true;
    }
    if (batch.empty()) {  // nothing to step: wait for the chunk, if that is all there is
      return PollChunk(progressed ? std::chrono::microseconds(0) : kChunkWait) || progressed;
    }
  }
  int64_t decode_rows = 0;  // counted now: sequences change in Postprocess
  for (const Sequence* seq : batch.sequences) decode_rows += seq->is_decoding() ? 1 : 0;
  StepInputs inputs = PrepareStepInputs(batch, next_token_scratch_);
  std::shared_future<void> masks = StartGrammarMasks(batch, inputs);
  StepOutputs outputs;
  const Clock::time_point backend_started = Clock::now();
  std::optional<StepFailure> failure =
      RunBackend(batch, inputs, std::move(pending), pending_rows, outputs);
  const Clock::time_point backend_finished = Clock::now();
  if (masks.valid()) {  // done before the matchers advance, even when the backend failed
    try {
      masks.get();
    } catch (const std::exception& e) {
      if (!failure) {
        failure = StepFailure{std::string("computing the output grammar's token mask failed: ") +
                              e.what()};
      }
    }
  }
  if (failure) {
    if (failure->fatal) {
      commands_->FailAll(failure->message);
    } else {
      FailBatch(batch, failure->message);
    }
    return true;
  }
  if (commands_->fatal_error()) return true;  // the watchdog gave up on this step meanwhile
  Postprocess(batch, inputs, outputs);
  if (lookahead_ && AdoptableRows(*lookahead_).empty()) DropLookahead();  // all rows ended
  ++stats_.steps_total;
  stats_.last_batch_size = static_cast<int64_t>(batch.sequences.size());
  stats_.last_batch_tokens = batch.num_tokens;
  stats_.batch_size.Observe(static_cast<double>(batch.sequences.size()));
  if (!outputs.decode_path.empty()) ++stats_.decode_steps_by_path[outputs.decode_path];
  RecordStepTime(decode_rows, batch.num_tokens - decode_rows, Clock::now() - started,
                 backend_finished - backend_started);
  return true;
}

void Engine::RecordStepTime(int64_t decode_rows, int64_t prefill_tokens, Clock::duration step,
                            Clock::duration backend) {
  const StepKind kind = prefill_tokens == 0 ? StepKind::kDecode
                        : decode_rows == 0  ? StepKind::kPrefill
                                            : StepKind::kMixed;
  StepKindStats& stats = stats_.steps[static_cast<int>(kind)];
  stats.duration_s.Observe(std::chrono::duration<double>(step).count());
  stats.backend_seconds += std::chrono::duration<double>(backend).count();
  stats.prefill_tokens += prefill_tokens;
  stats.decode_rows += decode_rows;
}

void Engine::StartChunk(Sequence& seq) {
  Batch chunk;
  chunk.sequences.push_back(&seq);
  const StepInputs inputs = PrepareStepInputs(chunk, next_token_scratch_);
  try {
    chunk_ = backend_->StartPromptChunk(inputs.sequences[0]);
    if (chunk_ == nullptr) throw Error("the backend started no prompt chunk");
    // A chunk is several steps' worth of tokens, at the lowest priority: it gets the step timeout
    // per step's worth, and one more.
    chunk_timeout_ =
        options_.step_timeout * (1 + seq.num_scheduled_tokens / options_.max_step_tokens);
    chunk_deadline_ = Clock::now() + chunk_timeout_;
    stats_.prompt_chunk_tokens_total += seq.num_scheduled_tokens;
    return;
  } catch (const BackendFatalError& e) {
    commands_->FailAll(std::string("the backend failed and cannot continue: ") + e.what());
  } catch (const std::exception& e) {
    scheduler_.FinishChunk();
    FailRequest(*generations_.at(seq.id)->request, EngineErrorKind::kBackend,
                std::string("starting a prompt chunk failed: ") + e.what());
  }
}

bool Engine::PollChunk(std::chrono::microseconds timeout) {
  if (chunk_ == nullptr) return false;
  std::optional<std::string> failure;
  try {
    if (!chunk_->Wait(timeout)) {
      if (Clock::now() <= chunk_deadline_) return false;
      commands_->FailAll("a prompt chunk has not finished within " +
                         std::to_string(chunk_timeout_.count()) + " ms");
      return true;
    }
  } catch (const BackendFatalError& e) {
    commands_->FailAll(std::string("the backend failed and cannot continue: ") + e.what());
    return true;
  } catch (const std::exception& e) {
    failure = std::string("prompt chunk failed: ") + e.what();
  }
  chunk_.reset();
  Sequence* seq = scheduler_.FinishChunk();
  if (seq == nullptr) return true;  // its request ended meanwhile; its blocks are free now
  if (failure) {
    FailRequest(*generations_.at(seq->id)->request, EngineErrorKind::kBackend, *failure);
    return true;
  }
  seq->num_computed_tokens += seq->num_scheduled_tokens;
  seq->num_scheduled_tokens = 0;
  blocks_.CacheFullBlocks(*seq);
  return true;
}

// How the backend failed, or nullopt when `outputs` is good.
std::optional<Engine::StepFailure> Engine::RunBackend(const Batch& batch, const StepInputs& inputs,
                                                      std::unique_ptr<PendingStep> pending,
                                                      const std::vector<size_t>& rows,
                                                      StepOutputs& outputs) {
  std::optional<StepFailure> failure;
  watchdog_->StepStarted();
  try {
    if (pending == nullptr) pending = backend_->StartStep(inputs);
    if (std::optional<StepInputs> ahead = LookaheadInputs(batch, inputs)) {
      Lookahead lookahead;
      lookahead.step = backend_->StartStep(*ahead, pending.get());
      for (const SequenceStep& step : ahead->sequences) {
        lookahead.sequence_ids.push_back(step.sequence_id);
        lookahead.positions.push_back(step.start_position);
      }
      lookahead_ = std::move(lookahead);
      ++stats_.steps_ahead_total;
    }
    outputs = pending->Wait();
    if (!rows.empty()) {
      std::vector<SequenceResult> results;
      for (size_t row : rows) results.push_back(std::move(outputs.results.at(row)));
      outputs.results = std::move(results);
    }
  } catch (const BackendFatalError& e) {
    failure = StepFailure{std::string("the backend failed and cannot continue: ") + e.what(), true};
  } catch (const std::exception& e) {
    failure = StepFailure{std::string("backend step failed: ") + e.what()};
  } catch (...) {
    failure = StepFailure{"backend step failed with a non-standard exception"};
  }
  watchdog_->StepFinished();
  if (!failure && outputs.results.size() != inputs.sequences.size()) {
    failure = StepFailure{"backend returned " + std::to_string(outputs.results.size()) +
                          " results for " + std::to_string(inputs.sequences.size()) + " sequences"};
  }
  // The lookahead decodes this step's tokens: without them it cannot be adopted.
  if (failure && lookahead_) DropLookahead();
  return failure;
}

// A lookahead row decodes the token this step samples, one position on, before the engine has
// seen it: only where nothing the engine does with that token could change the row's next step.
// So no grammar (its mask needs the token), no sampling that reads the output tokens, no row
// this step ends by length, no prompt waiting to be admitted or chunk beside (the next step
// would take them), and the next position's KV block already allocated.
std::optional<StepInputs> Engine::LookaheadInputs(const Batch& batch,
                                                  const StepInputs& inputs) const {
  const bool on = options_.decode_lookahead == DecodeLookahead::kOn ||
                  (options_.decode_lookahead == DecodeLookahead::kAuto && backend_->runs_ahead());
  if (!on || chunk_ != nullptr || scheduler_.num_waiting() > 0 || batch.empty()) {
    return std::nullopt;
  }
  static constexpr int32_t kSampledBefore[1] = {kTokenSampledBefore};
  StepInputs ahead;
  for (size_t i = 0; i < batch.sequences.size(); ++i) {
    const Sequence& seq = *batch.sequences[i];
    const Generation& gen = *generations_.at(seq.id);
    const SamplingParams& p = seq.sampling;
    const int64_t outputs_after = seq.num_output_tokens() + 1;  // this step's token included
    const int64_t next_position = seq.num_tokens();             // where that token goes
    if (!seq.is_decoding() || !inputs.sequences[i].sample || gen.matcher ||
        p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f || p.repetition_penalty != 1.0f ||
        outputs_after < p.min_tokens || outputs_after >= p.max_tokens ||
        next_position + 1 >= max_model_len_) {
      return std::nullopt;
    }
    for (const std::vector<int32_t>& table : seq.block_tables) {
      const int64_t block = next_position / kBlockTokens;
      if (block >= static_cast<int64_t>(table.size()) || table[block] < 0) return std::nullopt;
    }
    SequenceStep& step = ahead.sequences.emplace_back(inputs.sequences[i]);
    step.token_ids = kSampledBefore;
    step.start_position = next_position;
    step.sample_index = outputs_after;
    step.allowed_tokens = {};
    step.allowed_tokens_ready = {};
  }
  return ahead;
}

std::vector<Sequence*> Engine::AdoptableRows(const Lookahead& ahead) const {
  if (chunk_ != nullptr) return {};
  std::vector<Sequence*> rows;
  int64_t live = 0;
  for (size_t i = 0; i < ahead.sequence_ids.size(); ++i) {
    const auto found = generations_.find(ahead.sequence_ids[i]);
    if (found == generations_.end() || found->second->done) {
      rows.push_back(nullptr);
      continue;
    }
    Sequence& seq = found->second->seq;
    if (seq.status != SequenceStatus::kRunning || !seq.is_decoding() ||
        seq.num_computed_tokens != ahead.positions[i] || !blocks_.CanAllocate(seq, 1)) {
      return {};
    }
    rows.push_back(&seq);
    ++live;
  }
  // One row at least, and every running sequence among them (none was admitted since).
  if (live == 0 || scheduler_.num_running() != live) return {};
  return rows;
}

// Waits for a lookahead nobody adopts: its KV writes land before its rows' blocks are reused.
// What it computed is lost; only a fatal failure matters.
void Engine::DropLookahead() {
  ++stats_.steps_ahead_dropped_total;
  watchdog_->StepStarted();
  try {
    lookahead_->step->Wait();
  } catch (const BackendFatalError& e) {
    commands_->FailAll(std::string("the backend failed and cannot continue: ") + e.what());
  } catch (...) {
  }
  watchdog_->StepFinished();
  lookahead_.reset();
}

// The allowed-token masks of the constrained sequences that sample this step, computed on a worker
// thread while the backend runs the forward pass; samplers wait for them (SequenceStep::
// WaitForAllowedTokens). No future when no sequence needs one.
std::shared_future<void> Engine::StartGrammarMasks(const Batch& batch, StepInputs& inputs) {
  std::vector<MaskWorkers::Job> jobs;
  mask_scratch_.resize(batch.sequences.size());
  const int32_t words = grammar::MaskWords(static_cast<int32_t>(config().vocab_size));
  for (size_t i = 0; i < batch.sequences.size(); ++i) {
    const Generation& gen = *generations_.at(batch.sequences[i]->id);
    if (!gen.matcher || !inputs.sequences[i].sample) continue;
    mask_scratch_[i].resize(words);
    jobs.push_back({&*gen.matcher, gen.stop->stop_token_ids(), mask_scratch_[i]});
    inputs.sequences[i].allowed_tokens = mask_scratch_[i];
  }
  if (jobs.empty()) return {};
  std::shared_future<void> ready = mask_workers_.Start(std::move(jobs));
  for (SequenceStep& step : inputs.sequences) {
    if (!step.allowed_tokens.empty()) step.allowed_tokens_ready = ready;
  }
  return ready;
}

void Engine::FailBatch(const Batch& batch, const std::string& message) {
  for (Sequence* seq : batch.sequences) {
    Request& request = *generations_.at(seq->id)->request;
    if (request.num_live > 0) FailRequest(request, EngineErrorKind::kBackend, message);
  }
}

// The only place token state changes after a step.
void Engine::Postprocess(const Batch& batch, const StepInputs& inputs, const StepOutputs& outputs) {
  Clock::time_point now = Clock::now();
  for (size_t i = 0; i < batch.sequences.size(); ++i) {
    Generation& gen = *generations_.at(batch.sequences[i]->id);
    if (gen.done) continue;  // its request failed earlier in this loop
    Sequence& seq = gen.seq;
    EmitPromptLogprobs(gen, outputs.results[i]);
    seq.num_computed_tokens += seq.num_scheduled_tokens;
    seq.num_scheduled_tokens = 0;
    blocks_.CacheFullBlocks(seq);
    if (seq.num_computed_tokens >= seq.num_prompt_tokens) MarkPromptReady(gen);
    if (inputs.sequences[i].sample) {
      EmitToken(gen, outputs.results[i], inputs.sequences[i].allowed_tokens, now);
    } else if (seq.sampling.max_tokens == 0 && seq.num_computed_tokens >= seq.num_prompt_tokens) {
      FinishGeneration(gen, FinishReason::kLength);  // prompt-only (echo) request
    }
  }
}

void Engine::MarkPromptReady(Generation& gen) {
  if (gen.seq.index == 0 && gen.request->prompt_ready) *gen.request->prompt_ready = true;
}

void Engine::EmitPromptLogprobs(Generation& gen, const SequenceResult& result) {
  if (result.prompt_logprobs.empty()) return;
  gen.seq.num_prompt_logprobs_done += static_cast<int64_t>(result.prompt_logprobs.size());
  TokensEvent event;
  event.index = gen.seq.index;
  event.prompt_logprobs = result.prompt_logprobs;
  gen.request->channel->Push(std::move(event));
}

void Engine::EmitToken(Generation& gen, const SequenceResult& result,
                       std::span<const uint32_t> allowed, Clock::time_point now) {
  Sequence& seq = gen.seq;
  Request& request = *gen.request;
  const bool in_vocabulary = result.token_id >= 0 && result.token_id < config().vocab_size;
  bool allowed_there = true;
  if (in_vocabulary && gen.matcher) {
    const std::span<const int32_t> ends = gen.stop->stop_token_ids();
    const bool is_end = std::find(ends.begin(), ends.end(), result.token_id) != ends.end();
    allowed_there = is_end ? gen.matcher->can_end() : gen.matcher->Accept(result.token_id);
  }
  if (!in_vocabulary || !allowed_there) {
    // Looked at only on a refusal (not per token): a mask of no token means the grammar has no
    // way on here (a schema whose values nest past the matcher's depth limit on the path taken),
    // which is the request's fault, not the backend's.
    if (!allowed.empty() &&
        std::all_of(allowed.begin(), allowed.end(), [](uint32_t word) { return word == 0; })) {
      FailRequest(request, EngineErrorKind::kInvalidRequest,
                  "the output grammar allows no token here and the output cannot end: its values "
                  "nest deeper than the matcher follows (about 100 levels)");
    } else {
      FailRequest(request, EngineErrorKind::kBackend,
                  "backend sampled token id " + std::to_string(result.token_id) +
                      (in_vocabulary ? ", which the output grammar does not allow there"
                                     : ", outside the vocabulary"));
    }
    return;
  }
  seq.token_ids.push_back(result.token_id);
  ++stats_.generation_tokens_total;
  if (!request.has_first_token) {
    stats_.time_to_first_token_s.Observe(SecondsBetween(request.submitted, now));
  } else if (gen.has_token) {
    stats_.inter_token_latency_s.Observe(SecondsBetween(gen.last_token_time, now));
  }
  request.has_first_token = gen.has_token = true;
  gen.last_token_time = now;
  StopOutcome out = gen.stop->Append(result.token_id, seq.num_output_tokens(), seq.num_tokens());
  TokensEvent event;
  event.index = seq.index;
  event.prompt_tokens = seq.num_prompt_tokens;
  event.cached_prompt_tokens = seq.num_cached_tokens;
  if (out.emit_token) {
    event.token_ids.push_back(result.token_id);
    if (seq.sampling.num_logprobs >= 0) event.logprobs.push_back(result.logprobs);
  }
  event.text = std::move(out.text);
  if (!event.token_ids.empty() || !event.text.empty()) request.channel->Push(std::move(event));
  if (out.finish != FinishReason::kNone) FinishGeneration(gen, out.finish, out.stop_string);
}

// The KV cache cannot hold these even alone: they end as if the context were full.
void Engine::DropOutOfMemory(const Batch& batch) {
  for (Sequence* seq : batch.out_of_memory) {
    Generation& gen = *generations_.at(seq->id);
    TokensEvent event;
    event.index = seq->index;
    event.text = gen.stop->Flush();
    if (!event.text.empty()) gen.request->channel->Push(std::move(event));
    FinishGeneration(gen, FinishReason::kLength);
  }
}

void Engine::FinishGeneration(Generation& gen, FinishReason reason, std::string stop_string) {
  if (gen.done) return;
  gen.done = true;
  Sequence& seq = gen.seq;
  scheduler_.Remove(&seq);
  MarkPromptReady(gen);
  Request& request = *gen.request;
  Usage usage{seq.num_prompt_tokens, seq.num_output_tokens(), seq.num_cached_tokens};
  request.channel->Push(FinishedEvent{seq.index, reason, std::move(stop_string), usage});
  if (--request.num_live > 0) return;
  ++(reason == FinishReason::kLength ? stats_.requests_length : stats_.requests_stop);
  CloseRequest(request);
}

void Engine::FailRequest(Request& request, EngineErrorKind kind, const std::string& message) {
  for (auto& gen : request.generations) {
    if (!gen->done) scheduler_.Remove(&gen->seq);
    gen->done = true;
  }
  request.num_live = 0;
  ++stats_.requests_error;
  request.channel->Push(ErrorEvent{kind, message});
  CloseRequest(request);
}

void Engine::CloseRequest(Request& request) {
  request.channel->Close();
  done_requests_.push_back(request.id);
}

void Engine::CollectDoneRequests() {
  for (int64_t id : done_requests_) {
    auto it = requests_.find(id);
    if (it == requests_.end()) continue;
    for (auto& gen : it->second->generations) generations_.erase(gen->seq.id);
    requests_.erase(it);
    commands_->Forget(id);
  }
  done_requests_.clear();
}

void Engine::PublishSnapshot() {
  stats_.num_running = scheduler_.num_running();
  stats_.num_waiting = scheduler_.num_waiting();
  stats_.kv_groups.clear();
  for (int64_t g = 0; g < blocks_.num_groups(); ++g) {
    stats_.kv_groups.push_back({blocks_.num_used_blocks(g), blocks_.num_total_blocks(g)});
  }
  stats_.prefix_cache_query_tokens = blocks_.num_prefix_query_tokens();
  stats_.prefix_cache_hit_tokens = blocks_.num_prefix_hit_tokens();
  std::lock_guard lock(snapshot_mutex_);
  snapshot_ = stats_;
}

}  // namespace mkserve
