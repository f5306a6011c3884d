// GenerationRun against a real engine on the scripted backend: a client that hangs up (or a server
// that stops) is noticed while tokens are still flowing (a non-streaming request never sees a
// quiet engine), and the run's requests are cancelled before they finish.
#include "server/generation_run.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>

#include "engine/scripted_backend.h"
#include "model/presets.h"

namespace mkserve::server {
namespace {

constexpr int32_t kScriptTokens = 20000;

// Each step sleeps a little, so the script takes seconds while events arrive every millisecond:
// faster than the run's poll wait, as with a fast model.
class PacedBackend : public Backend {
 public:
  explicit PacedBackend(std::unique_ptr<ScriptedBackend> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return "paced"; }
  const ModelConfig& config() const override { return inner_->config(); }
  const KvLayout& kv_layout() const override { return inner_->kv_layout(); }
  StepOutputs Step(const StepInputs& inputs) override {
    std::this_thread::sleep_for(std::chrono::microseconds(300));
    return inner_->Step(inputs);
  }

 private:
  std::unique_ptr<ScriptedBackend> inner_;
};

std::unique_ptr<Engine> MakePacedEngine() {
  ModelConfig config = TinyPreset();
  config.max_position_embeddings = 2 * kScriptTokens;
  Script script{{ScriptRule{{}, std::vector<int32_t>(kScriptTokens, 42)}}};
  return std::make_unique<Engine>(std::make_unique<PacedBackend>(MakeScriptedBackend(
                                      config, std::move(script), 4 * kScriptTokens, 4)),
                                  EngineOptions{});
}

std::vector<RequestHandle> SubmitLong(Engine& engine, int32_t n) {
  EngineRequest request;
  request.prompt_token_ids = {5, 6, 7};
  request.sampling.max_tokens = kScriptTokens;
  request.n = n;
  std::vector<RequestHandle> handles;
  handles.push_back(engine.Submit(std::move(request)));
  return handles;
}

TEST(GenerationRunTest, HangUpIsSeenWhileTokensKeepFlowing) {
  std::unique_ptr<Engine> engine = MakePacedEngine();
  std::vector<RequestHandle> handles = SubmitLong(*engine, 1);
  std::atomic<bool> closed{false};
  GenerationRun run(std::move(handles), 1, [&closed] { return closed.load(); });

  int64_t tokens = 0;
  while (std::optional<ChoiceEvent> event = run.Next()) {
    if (auto* t = std::get_if<TokensEvent>(&event->event)) tokens += t->token_ids.size();
    if (tokens >= 50) closed = true;  // the client hangs up mid-generation
  }
  EXPECT_TRUE(run.aborted());
  EXPECT_LT(tokens, kScriptTokens / 2) << "the hang-up was noticed only near the end";
}

// A completions request of many prompts: most wait in the queue and send nothing while a few
// stream. The hang-up must still be seen within a poll interval or so (not after a wait on every
// quiet prompt in turn), and cancelling them all must empty the queue at once.
TEST(GenerationRunTest, HangUpIsSeenPromptlyAmongManyQuietPrompts) {
  constexpr int kPrompts = 2000;
  std::unique_ptr<Engine> engine = MakePacedEngine();
  std::vector<RequestHandle> handles;
  for (int i = 0; i < kPrompts; ++i) {
    EngineRequest request;
    request.prompt_token_ids = {5, 6, 7};
    request.sampling.max_tokens = kScriptTokens;
    handles.push_back(engine->Submit(std::move(request)));
  }
  std::atomic<bool> closed{false};
  GenerationRun run(std::move(handles), 1, [&closed] { return closed.load(); });
  int64_t events = 0;
  std::chrono::steady_clock::time_point hung_up;
  while (std::optional<ChoiceEvent> event = run.Next()) {
    if (++events == 20) {
      closed = true;
      hung_up = std::chrono::steady_clock::now();
    }
  }
  ASSERT_TRUE(run.aborted());
  const auto noticed = std::chrono::steady_clock::now() - hung_up;
  EXPECT_LT(noticed, std::chrono::milliseconds(500)) << "the hang-up was seen late";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (engine->Snapshot().num_waiting > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(engine->Snapshot().num_waiting, 0) << "cancelled prompts still wait";
}

// A server stop ends every unfinished choice with an "abort" finish carrying the tokens it got,
// so a stream can still send its final chunks and [DONE].
TEST(GenerationRunTest, ServerStopEndsEachChoiceWithAbort) {
  std::unique_ptr<Engine> engine = MakePacedEngine();
  auto stop = std::make_shared<std::atomic<bool>>(false);
  GenerationRun run(SubmitLong(*engine, 2), 2, ConnectionWatch([] { return false; }, stop));

  std::vector<int64_t> tokens(2, 0);
  std::vector<FinishedEvent> finished;
  while (std::optional<ChoiceEvent> event = run.Next()) {
    if (auto* t = std::get_if<TokensEvent>(&event->event)) {
      tokens[event->choice_index] += t->token_ids.size();
    } else {
      finished.push_back(std::get<FinishedEvent>(event->event));
      EXPECT_EQ(finished.back().index, event->choice_index);
    }
    if (tokens[0] + tokens[1] >= 50) *stop = true;
  }
  EXPECT_FALSE(run.aborted());
  EXPECT_TRUE(run.stopped_by_server());
  ASSERT_EQ(finished.size(), 2u);
  for (const FinishedEvent& event : finished) {
    EXPECT_EQ(event.reason, FinishReason::kAbort);
    EXPECT_STREQ(FinishReasonName(event.reason), "abort");
    EXPECT_EQ(event.usage.completion_tokens, tokens[event.index]);
  }
  EXPECT_LT(tokens[0], kScriptTokens / 2) << "the stop was noticed only near the end";
  EXPECT_EQ(run.TotalUsage().completion_tokens, tokens[0] + tokens[1]);
}

// A run cut short reports its prompt's cached tokens too (a cancelled background response said 0):
// the engine sends them with every token, not only when a choice finishes.
TEST(GenerationRunTest, AChoiceCutShortKeepsItsPromptUsage) {
  std::unique_ptr<Engine> engine = MakePacedEngine();
  EngineRequest warm;
  warm.prompt_token_ids.assign(130, 9);  // two whole blocks for the prefix cache
  warm.sampling.max_tokens = 1;
  RequestHandle first = engine->Submit(warm);
  while (!first.is_done()) first.Next(std::chrono::milliseconds(100));

  warm.sampling.max_tokens = kScriptTokens;
  std::vector<RequestHandle> handles;
  handles.push_back(engine->Submit(std::move(warm)));
  auto stop = std::make_shared<std::atomic<bool>>(false);
  GenerationRun run(std::move(handles), 1, ConnectionWatch([] { return false; }, stop));
  std::optional<FinishedEvent> finished;
  while (std::optional<ChoiceEvent> event = run.Next()) {
    if (auto* done = std::get_if<FinishedEvent>(&event->event)) finished = *done;
    *stop = true;
  }
  ASSERT_TRUE(finished.has_value());
  EXPECT_EQ(finished->reason, FinishReason::kAbort);
  EXPECT_EQ(finished->usage.prompt_tokens, 130);
  EXPECT_EQ(finished->usage.cached_tokens, 128);
  EXPECT_EQ(run.TotalUsage().cached_tokens, 128);
}

// A stop that comes after every choice finished ends nothing: the answer is whole.
TEST(GenerationRunTest, ServerStopAfterTheLastFinishIsNoAbort) {
  std::unique_ptr<Engine> engine = MakePacedEngine();
  EngineRequest request;
  request.prompt_token_ids = {5, 6, 7};
  request.sampling.max_tokens = 3;
  std::vector<RequestHandle> handles;
  handles.push_back(engine->Submit(std::move(request)));
  auto stop = std::make_shared<std::atomic<bool>>(false);
  GenerationRun run(std::move(handles), 1, ConnectionWatch([] { return false; }, stop));

  bool finished = false;
  while (!finished) {
    std::optional<ChoiceEvent> event = run.Next();
    ASSERT_TRUE(event.has_value());
    finished = std::holds_alternative<FinishedEvent>(event->event);
  }
  *stop = true;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // past the run's poll interval
  EXPECT_FALSE(run.Next().has_value());
  EXPECT_FALSE(run.stopped_by_server());
  EXPECT_FALSE(run.aborted());
}

}  // namespace
}  // namespace mkserve::server
