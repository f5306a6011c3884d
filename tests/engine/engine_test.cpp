// The engine end to end over the scripted backend; every test also asserts that the KV-checking
// backend saw no block-table violation.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <thread>

#include "common/error.h"
#include "engine/engine_test_util.h"
#include "model/presets.h"

namespace mkserve::testing {
namespace {

Script AnyPrompt(std::vector<int32_t> output) {
  return Script{{ScriptRule{{}, std::move(output)}}};
}

EngineSetup ScriptSetup(Script script) {
  EngineSetup setup;
  setup.script = std::move(script);
  return setup;
}

EngineSetup WithDecoder(EngineSetup setup) {
  setup.options.text_decoder = LetterDecoder();
  return setup;
}

TEST(EngineTest, StreamsTheScriptThenStopsAtEos) {
  Harness h = MakeEngine(WithDecoder(ScriptSetup(AnyPrompt(Letters("abc")))));
  RequestHandle handle = h.engine->Submit(MakeRequest({5, 6, 7}));
  Collected out = Drain(handle);
  EXPECT_EQ(out.token_ids[0], Letters("abc"));
  EXPECT_EQ(out.text[0], "abc");
  ASSERT_TRUE(out.finished.count(0));
  EXPECT_EQ(out.finished[0].reason, FinishReason::kStop);
  EXPECT_EQ(out.finished[0].usage.prompt_tokens, 3);
  EXPECT_EQ(out.finished[0].usage.completion_tokens, 4);  // a, b, c and the EOS
  EXPECT_TRUE(h.checker->violations().empty()) << h.checker->violations()[0];
  ASSERT_TRUE(WaitForSnapshot(*h.engine, [](const EngineSnapshot& s) {
    return s.requests_stop == 1 && s.kv_groups[0].used_blocks == 0;
  }));
  EXPECT_EQ(h.engine->kv_capacity_tokens(), 64 * 64);
  EngineSnapshot snapshot = h.engine->Snapshot();
  EXPECT_EQ(snapshot.generation_tokens_total, 4);
  EXPECT_EQ(snapshot.prompt_tokens_total, 3);
  EXPECT_EQ(snapshot.time_to_first_token_s.count, 1u);
  EXPECT_EQ(snapshot.inter_token_latency_s.count, 3u);
  // One prefill step (3 prompt tokens, samples "a"), then three decode steps (b, c, EOS).
  const StepKindStats& prefill = snapshot.steps[static_cast<int>(StepKind::kPrefill)];
  const StepKindStats& decode = snapshot.steps[static_cast<int>(StepKind::kDecode)];
  EXPECT_EQ(prefill.duration_s.count, 1u);
  EXPECT_EQ(prefill.prefill_tokens, 3);
  EXPECT_EQ(decode.duration_s.count, 3u);
  EXPECT_EQ(decode.decode_rows, 3);
  EXPECT_EQ(snapshot.steps[static_cast<int>(StepKind::kMixed)].duration_s.count, 0u);
  EXPECT_LE(decode.backend_seconds, decode.duration_s.sum);
}

TEST(EngineTest, ChoosesTheRuleByPromptAndEndsWithLengthAtMaxTokens) {
  Script script{{ScriptRule{{8, 9}, Letters("xyz")}, ScriptRule{{}, Letters("abc")}}};
  Harness h = MakeEngine(WithDecoder(ScriptSetup(script)));
  RequestHandle first = h.engine->Submit(MakeRequest({7, 8, 9, 10}, 2));
  RequestHandle second = h.engine->Submit(MakeRequest({7, 9, 8}, 2));
  Collected a = Drain(first), b = Drain(second);
  EXPECT_EQ(a.text[0], "xy");
  EXPECT_EQ(b.text[0], "ab");
  EXPECT_EQ(a.finished[0].reason, FinishReason::kLength);
  EXPECT_EQ(a.finished[0].usage.completion_tokens, 2);
}

TEST(EngineTest, StopStringIsNeverEmitted) {
  Harness h = MakeEngine(WithDecoder(ScriptSetup(AnyPrompt(Letters("abcdef")))));
  EngineRequest request = MakeRequest({3, 4});
  request.sampling.stop = {"cd"};
  RequestHandle handle = h.engine->Submit(request);
  Collected out = Drain(handle);
  EXPECT_EQ(out.text[0], "ab");
  EXPECT_EQ(out.finished[0].reason, FinishReason::kStop);
  EXPECT_EQ(out.finished[0].stop_string, "cd");
}

// A request's hidden tokens (skip_special_tokens) keep their ids but leave the text, and a stop
// string matches the text without them.
TEST(EngineTest, HiddenTokensLeaveTheTextNotTheTokens) {
  Harness h = MakeEngine(WithDecoder(ScriptSetup(AnyPrompt(Letters("abxcdef")))));
  EngineRequest request = MakeRequest({3, 4});
  auto hidden = std::make_shared<HiddenTokens>(kVocab, false);
  (*hidden)[Letters("x")[0]] = true;
  request.hidden_tokens = hidden;
  request.sampling.stop = {"bc"};
  RequestHandle handle = h.engine->Submit(request);
  Collected out = Drain(handle);
  EXPECT_EQ(out.text[0], "a");  // "a" + "b" + (x hidden) + "c": the stop string "bc" ends it
  EXPECT_EQ(out.token_ids[0], Letters("abxc"));
  EXPECT_EQ(out.finished[0].reason, FinishReason::kStop);
  EXPECT_EQ(out.finished[0].stop_string, "bc");
}

TEST(EngineTest, LogprobsAlignWithTokens) {
  Harness h = MakeEngine(ScriptSetup(AnyPrompt(Letters("ab"))));
  EngineRequest request = MakeRequest({3, 4});
  request.sampling.num_logprobs = 2;
  RequestHandle handle = h.engine->Submit(request);
  Collected out = Drain(handle);
  ASSERT_EQ(out.logprobs[0].size(), 2u);
  EXPECT_EQ(out.logprobs[0][0].chosen.token_id, Letters("a")[0]);
  EXPECT_EQ(out.logprobs[0][1].top.size(), 2u);
  EXPECT_EQ(out.logprobs[0][1].top[0].token_id, Letters("b")[0]);
}

TEST(EngineTest, EchoReportsPromptLogprobsAcrossChunks) {
  EngineSetup setup = ScriptSetup(AnyPrompt(Letters("ab")));
  setup.options.max_batch = 4;
  setup.options.max_step_tokens = 32;
  Harness h = MakeEngine(setup);
  std::vector<int32_t> prompt = Prompt(70);
  EngineRequest request = MakeRequest(prompt, 0);
  request.sampling.num_prompt_logprobs = 1;
  RequestHandle handle = h.engine->Submit(request);
  Collected out = Drain(handle);
  ASSERT_EQ(out.prompt_logprobs.size(), prompt.size() - 1);
  for (size_t i = 0; i + 1 < prompt.size(); ++i) {
    EXPECT_EQ(out.prompt_logprobs[i].chosen.token_id, prompt[i + 1]) << i;
  }
  EXPECT_EQ(out.finished[0].reason, FinishReason::kLength);
  EXPECT_EQ(out.finished[0].usage.completion_tokens, 0);
  EXPECT_TRUE(out.token_ids[0].empty());
}

TEST(EngineTest, PrefixCacheIsReusedAcrossRequests) {
  Harness h = MakeEngine(ScriptSetup(AnyPrompt(Letters("ab"))));
  std::vector<int32_t> prompt = Prompt(200);
  RequestHandle first = h.engine->Submit(MakeRequest(prompt));
  EXPECT_EQ(Drain(first).finished[0].usage.cached_tokens, 0);
  prompt.push_back(5);
  RequestHandle second = h.engine->Submit(MakeRequest(prompt));
  Collected out = Drain(second);
  EXPECT_EQ(out.finished[0].usage.cached_tokens, 192);
  EXPECT_EQ(out.token_ids[0], Letters("ab"));
  EXPECT_TRUE(h.checker->violations().empty()) << h.checker->violations()[0];
  EXPECT_EQ(h.engine->Snapshot().prefix_cache_hit_tokens, 192);
}

TEST(EngineTest, SiblingsShareThePromptBlocks) {
  Harness h = MakeEngine(ScriptSetup(AnyPrompt(Letters("abcd"))));
  EngineRequest request = MakeRequest(Prompt(150));
  request.n = 3;
  RequestHandle handle = h.engine->Submit(request);
  Collected out = Drain(handle);
  ASSERT_EQ(out.finished.size(), 3u);
  EXPECT_EQ(out.finished[0].usage.cached_tokens, 0);
  for (int32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(out.token_ids[i], Letters("abcd")) << i;
    if (i > 0) {
      EXPECT_EQ(out.finished[i].usage.cached_tokens, 128) << i;
    }
  }
  EXPECT_TRUE(h.checker->violations().empty()) << h.checker->violations()[0];
}

// B shares A's prompt blocks and finishes while A runs; C then takes free blocks. A must still
// read its own KV: shared blocks are only freed with their last reference.
TEST(EngineTest, SharedBlocksSurviveTheFirstReleasingRequest) {
  Script script{{ScriptRule{{2}, std::vector<int32_t>(300, 12)}, ScriptRule{{}, Letters("ab")}}};
  auto pace = [](int64_t) { std::this_thread::sleep_for(std::chrono::milliseconds(1)); };
  EngineSetup setup = ScriptSetup(script);
  setup.full_blocks = 9;
  Harness h = MakeEngine(setup, pace);
  std::vector<int32_t> a_prompt = Prompt(150), b_prompt = Prompt(150);
  a_prompt.push_back(2);
  b_prompt.push_back(3);
  RequestHandle a = h.engine->Submit(MakeRequest(a_prompt, 300));
  while (!a.Next(std::chrono::milliseconds(1000))) {
  }
  RequestHandle b = h.engine->Submit(MakeRequest(b_prompt));
  EXPECT_EQ(Drain(b).finished[0].usage.cached_tokens, 128);
  RequestHandle c = h.engine->Submit(MakeRequest(Prompt(400, 39)));
  EXPECT_FALSE(Drain(c).error.has_value());
  Collected out = Drain(a);
  EXPECT_EQ(out.finished[0].usage.completion_tokens, 300);
  EXPECT_TRUE(h.checker->violations().empty()) << h.checker->violations()[0];
}

TEST(EngineTest, PreemptedRequestsContinueWithoutASeam) {
  std::vector<int32_t> output;
  for (int i = 0; i < 100; ++i) output.push_back(10 + i % 26);
  EngineSetup setup = ScriptSetup(AnyPrompt(output));
  setup.full_blocks = 7;
  Harness h = MakeEngine(setup);
  std::vector<RequestHandle> handles;
  for (int i = 0; i < 3; ++i) handles.push_back(h.engine->Submit(MakeRequest(Prompt(100, i), 100)));
  for (RequestHandle& handle : handles) {
    Collected out = Drain(handle);
    EXPECT_EQ(out.token_ids[0], output);
    EXPECT_EQ(out.finished[0].reason, FinishReason::kLength);
    EXPECT_EQ(out.finished[0].usage.completion_tokens, 100);
  }
  EXPECT_GT(h.engine->Snapshot().preemptions_total, 0);
  EXPECT_TRUE(h.checker->violations().empty()) << h.checker->violations()[0];
}

TEST(EngineTest, SlidingWindowFlowKeepsBlockInvariants) {
  EngineSetup setup = ScriptSetup(AnyPrompt(Letters("abcdefghij")));
  setup.sliding_blocks = 16;
  setup.options.max_batch = 4;
  setup.options.max_step_tokens = 64;
  Harness h = MakeEngine(setup);
  std::vector<int32_t> prompt = Prompt(400);
  RequestHandle first = h.engine->Submit(MakeRequest(prompt));
  EXPECT_EQ(Drain(first).token_ids[0], Letters("abcdefghij"));
  prompt.push_back(5);
  RequestHandle second = h.engine->Submit(MakeRequest(prompt));
  Collected out = Drain(second);
  EXPECT_EQ(out.token_ids[0], Letters("abcdefghij"));
  EXPECT_EQ(out.finished[0].usage.cached_tokens, 384);
  EXPECT_TRUE(h.checker->violations().empty()) << h.checker->violations()[0];
  EXPECT_TRUE(WaitForSnapshot(*h.engine, [](const EngineSnapshot& s) {
    return s.kv_groups[0].used_blocks == 0 && s.kv_groups[1].used_blocks == 0;
  }));
}

// North's layer pattern (sliding layers with one full layer in every four) with a 128-token window,
// as PlanKvLayout sizes it for `max_batch` sequences.
EngineSetup NorthPatternSetup(Script script, int64_t max_batch) {
  ModelConfig north = TinyPreset(8);
  for (LayerSpec& layer : north.layers) {
    if (layer.attention == AttentionKind::kSliding) layer.window_tokens = 128;
  }
  EngineSetup setup = ScriptSetup(std::move(script));
  setup.layout = PlanKvLayout(north, /*kv_bytes_budget=*/4096 * north.num_layers,
                              /*bytes_per_token_per_layer=*/1, max_batch);
  setup.options.max_batch = max_batch;
  setup.options.max_step_tokens = 256;
  return setup;
}

// Turn 2 of a chat is turn 1's prompt, the answer as the chat template renders it back (here not
// the sampled tokens) and a new message. Turn 1's prompt blocks come from the cache, though the
// sliding group released the ones the resumed position needs while turn 1 was decoding.
TEST(EngineTest, NextChatTurnReusesThePreviousPromptWithSlidingLayers) {
  std::vector<int32_t> answer(100, 12);
  Harness h = MakeEngine(NorthPatternSetup(AnyPrompt(answer), 4));
  ASSERT_EQ(h.engine->kv_layout().num_groups(), 2);
  std::vector<int32_t> turn = Prompt(600);
  RequestHandle first = h.engine->Submit(MakeRequest(turn, 100));
  EXPECT_EQ(Drain(first).token_ids[0], answer);
  std::vector<int32_t> rendered_answer(100, 13), message = Prompt(30, 39);
  turn.insert(turn.end(), rendered_answer.begin(), rendered_answer.end());
  turn.insert(turn.end(), message.begin(), message.end());
  RequestHandle second = h.engine->Submit(MakeRequest(turn, 100));
  Collected out = Drain(second);
  ASSERT_FALSE(out.error) << out.error->message;
  EXPECT_EQ(out.token_ids[0], answer);
  EXPECT_EQ(out.finished[0].usage.cached_tokens, 576);  // every full block of the 600 tokens
  EXPECT_TRUE(h.checker->violations().empty()) << h.checker->violations()[0];
}

// The answer moves the window past the blocks that the replay's last full block needs.
TEST(EngineTest, ExactReplayOfAPromptLongerThanTheWindowHitsTheCache) {
  std::vector<int32_t> answer(100, 12);
  Harness h = MakeEngine(NorthPatternSetup(AnyPrompt(answer), 4));
  std::vector<int32_t> prompt = Prompt(700);
  RequestHandle first = h.engine->Submit(MakeRequest(prompt, 100));
  EXPECT_EQ(Drain(first).finished[0].usage.cached_tokens, 0);
  RequestHandle replay = h.engine->Submit(MakeRequest(prompt, 100));
  Collected out = Drain(replay);
  EXPECT_EQ(out.finished[0].usage.cached_tokens, 640);  // all full blocks but the last token's
  EXPECT_EQ(out.token_ids[0], answer);
  EXPECT_TRUE(h.checker->violations().empty()) << h.checker->violations()[0];
}

TEST(EngineTest, CancellingFreesTheKvCache) {
  auto pace = [](int64_t) { std::this_thread::sleep_for(std::chrono::milliseconds(2)); };
  Harness h = MakeEngine(ScriptSetup(AnyPrompt(std::vector<int32_t>(1000, 12))), pace);
  {
    RequestHandle handle = h.engine->Submit(MakeRequest(Prompt(100), 1000));
    std::optional<EngineEvent> event;
    while (!(event = handle.Next(std::chrono::milliseconds(1000)))) {
    }
    ASSERT_TRUE(std::holds_alternative<TokensEvent>(*event));
  }  // the handle's destructor cancels
  EXPECT_TRUE(WaitForSnapshot(*h.engine, [](const EngineSnapshot& s) {
    return s.requests_cancelled == 1 && s.num_running == 0 && s.kv_groups[0].used_blocks == 0;
  }));
}

TEST(EngineTest, BackendFailureFailsTheBatchAndTheEngineKeepsServing) {
  auto fail_third = [](int64_t step) {
    if (step == 2) throw Error("device lost");
  };
  Harness h = MakeEngine(ScriptSetup(AnyPrompt(Letters("abcdef"))), fail_third);
  RequestHandle failing = h.engine->Submit(MakeRequest({3, 4}));
  Collected out = Drain(failing);
  ASSERT_TRUE(out.error.has_value());
  EXPECT_EQ(out.error->kind, EngineErrorKind::kBackend);
  EXPECT_NE(out.error->message.find("device lost"), std::string::npos);
  RequestHandle next = h.engine->Submit(MakeRequest({3, 4}));
  Collected ok = Drain(next);
  EXPECT_FALSE(ok.error.has_value()) << ok.error->message;
  EXPECT_EQ(ok.token_ids[0], Letters("abcdef"));
  EXPECT_TRUE(WaitForSnapshot(*h.engine, [](const EngineSnapshot& s) {
    return s.requests_error == 1 && s.kv_groups[0].used_blocks == 0;
  }));
}

// A running and a queued request are failed with the fatal one; new requests are refused at once.
TEST(EngineTest, FatalBackendErrorFailsEveryRequestAndRefusesNewOnes) {
  Script script{
      {ScriptRule{{2}, {}, ScriptFault::kFatal}, ScriptRule{{}, std::vector<int32_t>(1000, 12)}}};
  auto pace = [](int64_t) { std::this_thread::sleep_for(std::chrono::milliseconds(1)); };
  EngineSetup setup = ScriptSetup(script);
  setup.options.max_batch = 2;
  Harness h = MakeEngine(setup, pace);
  RequestHandle running = h.engine->Submit(MakeRequest(Prompt(10), 1000));
  while (!running.Next(std::chrono::milliseconds(1000))) {
  }
  RequestHandle fatal = h.engine->Submit(MakeRequest({3, 2}));
  RequestHandle queued = h.engine->Submit(MakeRequest(Prompt(10, 41), 1000));
  for (RequestHandle* handle : {&running, &fatal, &queued}) {
    Collected out = Drain(*handle);
    ASSERT_TRUE(out.error.has_value());
    EXPECT_EQ(out.error->kind, EngineErrorKind::kBackend);
    EXPECT_NE(out.error->message.find("scripted fatal backend error"), std::string::npos)
        << out.error->message;
  }
  ASSERT_TRUE(h.engine->fatal_error().has_value());
  EXPECT_NE(h.engine->fatal_error()->find("cannot continue"), std::string::npos);
  RequestHandle late = h.engine->Submit(MakeRequest({3, 4}));
  Collected refused = Drain(late);
  ASSERT_TRUE(refused.error.has_value());
  EXPECT_EQ(refused.error->kind, EngineErrorKind::kShutdown);
  EXPECT_NE(refused.error->message.find("fatal backend error"), std::string::npos);
}

TEST(EngineTest, TransientBackendErrorFailsOnlyItsStep) {
  Script script{{ScriptRule{{2}, {}, ScriptFault::kError}, ScriptRule{{}, Letters("abc")}}};
  Harness h = MakeEngine(ScriptSetup(script));
  RequestHandle failing = h.engine->Submit(MakeRequest({3, 2}));
  Collected out = Drain(failing);
  ASSERT_TRUE(out.error.has_value());
  EXPECT_EQ(out.error->kind, EngineErrorKind::kBackend);
  RequestHandle next = h.engine->Submit(MakeRequest({3, 4}));
  EXPECT_EQ(Drain(next).token_ids[0], Letters("abc"));
  EXPECT_FALSE(h.engine->fatal_error().has_value());
}

// The first step may take longer than the others; a later one that hangs past the timeout fails
// the requests while the backend is still stuck.
TEST(EngineTest, AStepPastTheTimeoutIsFatalWhileTheBackendStillHangs) {
  using std::chrono::milliseconds;
  Script script{{ScriptRule{{2}, {}, ScriptFault::kHang, milliseconds(2000)},
                 ScriptRule{{3}, {}, ScriptFault::kHang, milliseconds(300)},
                 ScriptRule{{}, Letters("abc")}}};
  EngineSetup setup = ScriptSetup(script);
  setup.options.first_step_timeout = milliseconds(1500);
  setup.options.step_timeout = milliseconds(100);
  Harness h = MakeEngine(setup);
  RequestHandle slow_first = h.engine->Submit(MakeRequest({3, 4}));
  EXPECT_FALSE(Drain(slow_first).error.has_value());
  EXPECT_FALSE(h.engine->fatal_error().has_value());
  auto start = std::chrono::steady_clock::now();
  RequestHandle wedged = h.engine->Submit(MakeRequest({5, 2}));
  Collected out = Drain(wedged);
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(1500));
  ASSERT_TRUE(out.error.has_value());
  EXPECT_EQ(out.error->kind, EngineErrorKind::kBackend);
  EXPECT_NE(out.error->message.find("did not return within 0.1 s"), std::string::npos)
      << out.error->message;
  RequestHandle late = h.engine->Submit(MakeRequest({5, 4}));
  EXPECT_EQ(Drain(late).error->kind, EngineErrorKind::kShutdown);
}  // the destructor waits for the hanging step to return

TEST(EngineTest, InvalidRequestsGetClearErrors) {
  EngineSetup setup = ScriptSetup(AnyPrompt({}));
  setup.full_blocks = 4;
  setup.max_position_embeddings = 512;
  Harness h = MakeEngine(setup);  // no text decoder
  auto error_of = [&](EngineRequest request) {
    RequestHandle handle = h.engine->Submit(std::move(request));
    Collected out = Drain(handle);
    EXPECT_TRUE(out.error.has_value());
    EXPECT_TRUE(out.finished.empty());
    return out.error ? out.error->message : std::string();
  };
  EXPECT_NE(error_of(MakeRequest({})).find("empty"), std::string::npos);
  EXPECT_NE(error_of(MakeRequest({3, 500})).find("500"), std::string::npos);
  // Four blocks hold 256 tokens: the context is that, not max_position_embeddings' 512, so a
  // longer request is refused up front instead of ending early with "length".
  EXPECT_EQ(h.engine->max_model_len(), 256);
  EXPECT_NE(error_of(MakeRequest(Prompt(300))).find("context limit is 256"), std::string::npos);
  EXPECT_NE(error_of(MakeRequest(Prompt(256))).find("leaving no room to generate"),
            std::string::npos);
  EngineRequest with_stop = MakeRequest({3});
  with_stop.sampling.stop = {"x"};
  EXPECT_NE(error_of(with_stop).find("text decoder"), std::string::npos);
  EngineRequest bad_top_p = MakeRequest({3});
  bad_top_p.sampling.top_p = 0.0f;
  EXPECT_NE(error_of(bad_top_p).find("top_p"), std::string::npos);
  EXPECT_TRUE(
      WaitForSnapshot(*h.engine, [](const EngineSnapshot& s) { return s.requests_rejected == 6; }));
}

TEST(EngineTest, FullWaitingQueueRejectsWithQueueFull) {
  auto pace = [](int64_t) { std::this_thread::sleep_for(std::chrono::milliseconds(2)); };
  EngineSetup setup = ScriptSetup(AnyPrompt(std::vector<int32_t>(1000, 12)));
  setup.options.max_batch = 1;
  setup.options.max_waiting_requests = 1;
  Harness h = MakeEngine(setup, pace);
  RequestHandle running = h.engine->Submit(MakeRequest(Prompt(10), 1000));
  ASSERT_TRUE(
      WaitForSnapshot(*h.engine, [](const EngineSnapshot& s) { return s.num_running == 1; }));
  RequestHandle waiting = h.engine->Submit(MakeRequest(Prompt(10), 1000));
  ASSERT_TRUE(
      WaitForSnapshot(*h.engine, [](const EngineSnapshot& s) { return s.num_waiting == 1; }));
  RequestHandle rejected = h.engine->Submit(MakeRequest(Prompt(10), 1000));
  Collected out = Drain(rejected);
  ASSERT_TRUE(out.error.has_value());
  EXPECT_EQ(out.error->kind, EngineErrorKind::kQueueFull);
  running.Cancel();
  waiting.Cancel();
  EXPECT_TRUE(WaitForSnapshot(*h.engine, [](const EngineSnapshot& s) {
    return s.requests_cancelled == 2 && s.num_running == 0 && s.num_waiting == 0;
  }));
}

TEST(EngineTest, ShutdownFailsUnfinishedRequestsAndHandlesMayOutliveTheEngine) {
  auto pace = [](int64_t) { std::this_thread::sleep_for(std::chrono::milliseconds(2)); };
  Harness h = MakeEngine(ScriptSetup(AnyPrompt(std::vector<int32_t>(1000, 12))), pace);
  RequestHandle handle = h.engine->Submit(MakeRequest(Prompt(10), 1000));
  h.engine.reset();
  Collected out = Drain(handle);
  ASSERT_TRUE(out.error.has_value());
  EXPECT_EQ(out.error->kind, EngineErrorKind::kShutdown);
}

TEST(EngineTest, RejectsInconsistentOptions) {
  EngineSetup setup = ScriptSetup(AnyPrompt({}));
  setup.options.max_step_tokens = 8;
  setup.options.max_batch = 64;
  EXPECT_THROW(MakeEngine(setup), Error);
  setup.options.max_step_tokens = 2048;
  setup.options.max_prefill_tokens_while_decoding = 0;
  EXPECT_THROW(MakeEngine(setup), Error);
}

}  // namespace
}  // namespace mkserve::testing
