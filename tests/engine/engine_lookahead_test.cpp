// The engine's decode lookahead over the scripted backend (forced on: the scripted backend runs
// steps whole, so each lookahead runs inside StartStep, before the step it follows is
// postprocessed). Outputs must be exactly those without it, every KV write and read must pass
// the checking backend, and the lookahead must stay away from the rows it cannot serve.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "engine/engine_test_util.h"

namespace mkserve::testing {
namespace {

EngineSetup LookaheadSetup(Script script, DecodeLookahead lookahead) {
  EngineSetup setup;
  setup.script = std::move(script);
  setup.options.text_decoder = LetterDecoder();
  setup.options.decode_lookahead = lookahead;
  return setup;
}

Script AnyPrompt(const std::string& letters) { return Script{{ScriptRule{{}, Letters(letters)}}}; }

struct Outcome {
  std::vector<Collected> outputs;
  EngineSnapshot snapshot;
};

// `requests` submitted together, drained, then the engine's counters once every block is free.
Outcome RunAll(DecodeLookahead lookahead, const std::vector<EngineRequest>& requests,
               const std::string& script = "abcdefghijklmnopqrstuvwxyz") {
  Harness h = MakeEngine(LookaheadSetup(AnyPrompt(script), lookahead));
  std::vector<RequestHandle> handles;
  for (const EngineRequest& request : requests) handles.push_back(h.engine->Submit(request));
  Outcome run;
  for (RequestHandle& handle : handles) run.outputs.push_back(Drain(handle));
  EXPECT_TRUE(h.checker->violations().empty()) << h.checker->violations()[0];
  EXPECT_TRUE(WaitForSnapshot(*h.engine, [](const EngineSnapshot& s) {
    return s.num_running == 0 && s.kv_groups[0].used_blocks == 0;
  }));
  run.snapshot = h.engine->Snapshot();
  return run;
}

TEST(EngineLookaheadTest, DecodesExactlyWhatWholeStepsDecodeAndDropsTheStepAfterTheEnd) {
  // 26 letters then EOS: crosses a 64-token block, so some lookaheads wait for an allocation.
  std::vector<int32_t> prompt(50, 5);
  const Outcome off = RunAll(DecodeLookahead::kOff, {MakeRequest(prompt, 100)});
  const Outcome on = RunAll(DecodeLookahead::kOn, {MakeRequest(prompt, 100)});
  EXPECT_EQ(on.outputs[0].token_ids, off.outputs[0].token_ids);
  EXPECT_EQ(on.outputs[0].text.at(0), "abcdefghijklmnopqrstuvwxyz");
  EXPECT_EQ(on.outputs[0].finished.at(0).reason, FinishReason::kStop);
  EXPECT_EQ(on.snapshot.steps_total, off.snapshot.steps_total);
  EXPECT_EQ(off.snapshot.steps_ahead_total, 0);
  // Every decode step but the first after the prompt and the one at the block boundary was
  // started ahead; the one after the EOS was dropped.
  EXPECT_GE(on.snapshot.steps_ahead_total, 20);
  EXPECT_EQ(on.snapshot.steps_ahead_dropped_total, 1);
}

TEST(EngineLookaheadTest, NoStepAheadOfTheLastTokenMaxTokensAllows) {
  const Outcome on = RunAll(DecodeLookahead::kOn, {MakeRequest({3, 4, 5}, 6)});
  EXPECT_EQ(on.outputs[0].text.at(0), "abcdef");
  EXPECT_EQ(on.outputs[0].finished.at(0).reason, FinishReason::kLength);
  EXPECT_GT(on.snapshot.steps_ahead_total, 0);
  EXPECT_EQ(on.snapshot.steps_ahead_dropped_total, 0);
}

TEST(EngineLookaheadTest, ConcurrentRequestsWithStopsAndSamplingMatchWholeSteps) {
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 6; ++i) {
    EngineRequest request = MakeRequest({static_cast<int32_t>(3 + i), 4, 5}, 8 + 3 * i);
    if (i == 1) request.sampling.stop = {"ghi"};
    if (i == 2) request.sampling.num_logprobs = 2;
    if (i == 3) request.sampling.min_tokens = 5;
    if (i == 4) request.n = 2;
    requests.push_back(request);
  }
  const Outcome off = RunAll(DecodeLookahead::kOff, requests);
  const Outcome on = RunAll(DecodeLookahead::kOn, requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(on.outputs[i].token_ids, off.outputs[i].token_ids) << "request " << i;
    EXPECT_EQ(on.outputs[i].text, off.outputs[i].text) << "request " << i;
    for (const auto& [index, finished] : off.outputs[i].finished) {
      EXPECT_EQ(on.outputs[i].finished.at(index).reason, finished.reason) << "request " << i;
    }
    ASSERT_EQ(on.outputs[i].logprobs.size(), off.outputs[i].logprobs.size());
  }
  EXPECT_EQ(on.outputs[1].text.at(0), "abcdef");
  EXPECT_GT(on.snapshot.steps_ahead_total, 0);
  // A row that ends leaves the step started ahead to the others: none is dropped (the last
  // rows end by length, with no step started past them).
  EXPECT_EQ(on.snapshot.steps_ahead_dropped_total, 0);
}

TEST(EngineLookaheadTest, RowsWhoseNextStepDependsOnTheTokenAreNeverStartedAhead) {
  EngineRequest penalised = MakeRequest({3, 4}, 10);
  penalised.sampling.frequency_penalty = 0.5f;
  EXPECT_EQ(RunAll(DecodeLookahead::kOn, {penalised}).snapshot.steps_ahead_total, 0);
  EngineRequest early_stop_barred = MakeRequest({3, 4}, 20);
  early_stop_barred.sampling.min_tokens = 12;  // lookahead only from the 11th token on
  const Outcome run = RunAll(DecodeLookahead::kOn, {early_stop_barred}, "abcdefghijklmnopq");
  EXPECT_EQ(run.outputs[0].text.at(0), "abcdefghijklmnopq");
  EXPECT_GT(run.snapshot.steps_ahead_total, 0);
  EXPECT_LE(run.snapshot.steps_ahead_total, 7);
}

TEST(EngineLookaheadTest, CancellingWhileAStepRunsAheadFreesEveryBlock) {
  Harness h =
      MakeEngine(LookaheadSetup(AnyPrompt("abcdefghijklmnopqrstuvwxyz"), DecodeLookahead::kOn),
                 [](int64_t) { std::this_thread::sleep_for(std::chrono::milliseconds(2)); });
  RequestHandle handle = h.engine->Submit(MakeRequest({3, 4, 5}, 100));
  int64_t tokens = 0;
  while (tokens < 5) {
    std::optional<EngineEvent> event = handle.Next(std::chrono::seconds(5));
    ASSERT_TRUE(event.has_value());
    if (auto* t = std::get_if<TokensEvent>(&*event)) tokens += t->token_ids.size();
  }
  handle.Cancel();
  ASSERT_TRUE(WaitForSnapshot(*h.engine, [](const EngineSnapshot& s) {
    return s.requests_cancelled == 1 && s.kv_groups[0].used_blocks == 0;
  }));
  // The engine goes on: the next request decodes in full.
  RequestHandle next = h.engine->Submit(MakeRequest({3, 4, 5}, 4));
  EXPECT_EQ(Drain(next).text.at(0), "abcd");
  EXPECT_TRUE(h.checker->violations().empty()) << h.checker->violations()[0];
}

}  // namespace
}  // namespace mkserve::testing
