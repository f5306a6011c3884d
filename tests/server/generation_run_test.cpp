// GenerationRun against a real engine on the scripted backend: a client that hangs up is noticed
// while tokens are still flowing (a non-streaming request never sees a quiet engine), and the
// run's requests are cancelled before they finish.
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

TEST(GenerationRunTest, HangUpIsSeenWhileTokensKeepFlowing) {
  ModelConfig config = TinyPreset();
  config.max_position_embeddings = 2 * kScriptTokens;
  Script script{{ScriptRule{{}, std::vector<int32_t>(kScriptTokens, 42)}}};
  EngineOptions options;
  Engine engine(std::make_unique<PacedBackend>(
                    MakeScriptedBackend(config, std::move(script), 4 * kScriptTokens, 4)),
                options);
  EngineRequest request;
  request.prompt_token_ids = {5, 6, 7};
  request.sampling.max_tokens = kScriptTokens;
  std::vector<RequestHandle> handles;
  handles.push_back(engine.Submit(std::move(request)));
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

}  // namespace
}  // namespace mkserve::server
