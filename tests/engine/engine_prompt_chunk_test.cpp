// Long prompts computed in chunks beside the steps while other streams decode (Scheduler,
// Backend::StartPromptChunk), over the checking backend's delayed chunks: the chunk's KV lands
// only when it finishes, so a sequence stepped during its chunk or a block reused too early
// shows up as a violation.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "common/error.h"
#include "engine/backend_error.h"
#include "engine/engine.h"
#include "engine/engine_test_util.h"

namespace mkserve::testing {
namespace {

using std::chrono::milliseconds;

constexpr int32_t kDecoderMark = 5;  // prompts holding it stream a long answer

// Decoders stream `decoder_tokens` tokens of 'c'; every other prompt answers "xyz".
EngineSetup ChunkSetup(int64_t decoder_tokens) {
  EngineSetup setup;
  setup.script.rules = {ScriptRule{{kDecoderMark}, std::vector<int32_t>(decoder_tokens, 12)},
                        ScriptRule{{}, Letters("xyz")}};
  setup.options.max_prefill_tokens_while_decoding = 16;
  setup.options.prompt_chunk_tokens = 64;
  setup.chunk_max_tokens = 64;
  return setup;
}

void Pace(int64_t) { std::this_thread::sleep_for(milliseconds(1)); }

// Returns once the request has streamed its first token.
void WaitForFirstToken(RequestHandle& handle, Collected& out) {
  while (out.token_ids[0].empty() && !handle.is_done()) {
    if (auto event = handle.Next(milliseconds(1000))) Record(out, *event);
  }
}

// A stream of `tokens` tokens, returned once its first token is in `decoded`.
RequestHandle StartDecoder(Harness& h, int32_t tokens, Collected& decoded) {
  RequestHandle decoder = h.engine->Submit(MakeRequest({3, kDecoderMark}, tokens));
  WaitForFirstToken(decoder, decoded);
  return decoder;
}

TEST(EnginePromptChunkTest, ALongPromptPrefillsBesideTheDecodingStreams) {
  EngineSetup setup = ChunkSetup(300);
  setup.chunk_steps = 3;  // each chunk runs beside three steps
  Harness h = MakeEngine(setup, Pace);
  Collected decoded;
  RequestHandle decoder = StartDecoder(h, 300, decoded);
  RequestHandle long_prompt = h.engine->Submit(MakeRequest(Prompt(300), 3));
  Collected answer = Drain(long_prompt);
  EXPECT_FALSE(answer.error.has_value());
  EXPECT_EQ(answer.token_ids[0], Letters("xyz"));
  EXPECT_EQ(answer.finished[0].usage.prompt_tokens, 300);
  // 64 x 4 beside the steps, then 43 (more than the cap of 16 were left), then the last token
  // samples inside a step.
  EXPECT_EQ(h.checker->num_chunks(), 5);
  EXPECT_LE(h.checker->max_prompt_tokens_beside_decode(), 16);
  Collected rest = Drain(decoder);
  EXPECT_EQ(decoded.token_ids[0].size() + rest.token_ids[0].size(), 300u);
  EXPECT_TRUE(WaitForSnapshot(*h.engine, [](const EngineSnapshot& s) {
    return s.prompt_chunk_tokens_total == 299 && s.kv_groups[0].used_blocks == 0;
  }));
  EXPECT_TRUE(h.checker->violations().empty()) << h.checker->violations().front();
}

// The cancelled prompt's blocks stay held while its chunk may still write them; a prompt that
// arrives meanwhile gets other blocks, and reads its own KV intact after the chunk lands.
TEST(EnginePromptChunkTest, CancellingDuringAChunkHoldsItsBlocksUntilTheChunkEnds) {
  EngineSetup setup = ChunkSetup(1000);
  setup.full_blocks = 8;
  Harness h = MakeEngine(setup, Pace);
  Collected decoded;
  RequestHandle decoder = StartDecoder(h, 1000, decoded);
  {
    RequestHandle long_prompt = h.engine->Submit(MakeRequest(Prompt(200), 3));
    ASSERT_TRUE(WaitForSnapshot(
        *h.engine, [](const EngineSnapshot& s) { return s.prompt_chunk_tokens_total == 64; }));
  }  // cancelled while its chunk runs (it only finishes once released)
  ASSERT_TRUE(WaitForSnapshot(*h.engine,
                              [](const EngineSnapshot& s) { return s.requests_cancelled == 1; }));
  RequestHandle short_prompt = h.engine->Submit(MakeRequest(Prompt(12, 41), 3));
  Collected first;
  WaitForFirstToken(short_prompt, first);
  h.checker->release_chunks();  // the chunk's KV lands now, in the blocks it was given
  Collected answer = Drain(short_prompt);
  EXPECT_EQ(first.token_ids[0].size() + answer.token_ids[0].size(), 3u);
  decoder.Cancel();
  EXPECT_TRUE(WaitForSnapshot(*h.engine, [](const EngineSnapshot& s) {
    return s.num_running == 0 && s.kv_groups[0].used_blocks == 0;
  }));
  EXPECT_TRUE(h.checker->violations().empty()) << h.checker->violations().front();
}

// A chunk that fails to start, or fails while it runs, fails only its request.
TEST(EnginePromptChunkTest, AFailedChunkFailsOnlyItsRequest) {
  using Phase = CheckingBackend::ChunkPhase;
  for (Phase failing : {Phase::kStart, Phase::kFinish}) {
    SCOPED_TRACE(failing == Phase::kStart ? "at the start" : "while running");
    EngineSetup setup = ChunkSetup(200);
    setup.chunk_steps = 1;
    setup.chunk_hook = [failing](Phase phase) {
      if (phase == failing) throw Error("chunk lost");
    };
    Harness h = MakeEngine(setup, Pace);
    Collected decoded;
    RequestHandle decoder = StartDecoder(h, 200, decoded);
    RequestHandle long_prompt = h.engine->Submit(MakeRequest(Prompt(100), 3));
    Collected failed = Drain(long_prompt);
    ASSERT_TRUE(failed.error.has_value());
    EXPECT_EQ(failed.error->kind, EngineErrorKind::kBackend);
    EXPECT_NE(failed.error->message.find("chunk lost"), std::string::npos) << failed.error->message;
    Collected rest = Drain(decoder);
    EXPECT_FALSE(rest.error.has_value());
    EXPECT_EQ(decoded.token_ids[0].size() + rest.token_ids[0].size(), 200u);
    EXPECT_FALSE(h.engine->fatal_error().has_value());
    EXPECT_TRUE(WaitForSnapshot(
        *h.engine, [](const EngineSnapshot& s) { return s.kv_groups[0].used_blocks == 0; }));
    EXPECT_TRUE(h.checker->violations().empty()) << h.checker->violations().front();
  }
}

// Hostile mix under KV pressure, with a sliding group: long and short prompts, n = 2, requests
// dropped at random moments, prompts that share a prefix; every finished request must have its
// script, the KV checker must see no violation, and the pool must empty.
TEST(EnginePromptChunkTest, AMixedLoadUnderKvPressureKeepsEveryInvariant) {
  EngineSetup setup = ChunkSetup(150);
  setup.full_blocks = 14;  // 896 tokens for up to 8 running sequences
  setup.sliding_blocks = 40;
  setup.window_tokens = 128;
  setup.options.max_batch = 8;
  setup.options.prompt_chunk_tokens = 96;
  setup.chunk_max_tokens = 96;
  setup.chunk_steps = 10;  // long enough that a dropped request's chunk is often still running
  Harness h = MakeEngine(setup, Pace);
  std::mt19937 rng(7);
  struct Sent {
    RequestHandle handle;
    bool decoder = false;
    int32_t n = 1;
    bool dropped = false;
  };
  std::vector<Sent> sent;
  for (int i = 0; i < 40; ++i) {
    Sent one;
    one.decoder = i % 3 == 0;
    const int64_t length = i % 4 == 1 ? 200 + rng() % 500 : 4 + rng() % 40;
    std::vector<int32_t> prompt = Prompt(length);
    prompt[length / 2] = static_cast<int32_t>(10 + i % 26);  // the first halves are shared
    if (one.decoder) prompt[0] = kDecoderMark;
    EngineRequest request = MakeRequest(prompt, one.decoder ? 150 : 3);
    one.n = i % 7 == 3 ? 2 : 1;
    request.n = one.n;
    one.handle = h.engine->Submit(std::move(request));
    one.dropped = i % 5 == 4;
    sent.push_back(std::move(one));
    if (sent.size() >= 3 && sent[sent.size() - 3].dropped) {
      sent[sent.size() - 3].handle.Cancel();  // a little after it was sent
    }
    std::this_thread::sleep_for(milliseconds(rng() % 2));
  }
  for (Sent& one : sent) {
    if (one.dropped) {
      one.handle.Cancel();
      continue;
    }
    Collected out = Drain(one.handle);
    ASSERT_FALSE(out.error.has_value()) << out.error->message;
    for (int32_t index = 0; index < one.n; ++index) {
      if (one.decoder) {
        EXPECT_EQ(out.token_ids[index], std::vector<int32_t>(150, 12));
      } else {
        EXPECT_EQ(out.token_ids[index], Letters("xyz"));
      }
    }
  }
  EXPECT_TRUE(WaitForSnapshot(*h.engine, [](const EngineSnapshot& s) {
    return s.num_running == 0 && s.num_waiting == 0 && s.kv_groups[0].used_blocks == 0 &&
           s.kv_groups[1].used_blocks == 0;
  }));
  const EngineSnapshot done = h.engine->Snapshot();
  EXPECT_GT(done.prompt_chunk_tokens_total, 0);
  EXPECT_GT(done.preemptions_total, 0) << "the load did not press on the KV cache";
  EXPECT_TRUE(h.checker->violations().empty()) << h.checker->violations().front();
}

// With a stream decoding, a long prompt arrives; the engine must stop serving with `message`,
// failing both requests.
void ExpectFatalWithAStreamDecoding(EngineSetup setup, const std::string& message) {
  Harness h = MakeEngine(setup, Pace);
  Collected decoded;
  RequestHandle decoder = StartDecoder(h, 100000, decoded);
  RequestHandle long_prompt = h.engine->Submit(MakeRequest(Prompt(100), 3));
  for (RequestHandle* handle : {&decoder, &long_prompt}) {
    Collected out = Drain(*handle);
    ASSERT_TRUE(out.error.has_value());
    EXPECT_NE(out.error->message.find(message), std::string::npos) << out.error->message;
  }
  ASSERT_TRUE(h.engine->fatal_error().has_value());
}

TEST(EnginePromptChunkTest, AFatalChunkFailureStopsTheEngine) {
  EngineSetup setup = ChunkSetup(100000);
  setup.chunk_steps = 1;
  setup.chunk_hook = [](CheckingBackend::ChunkPhase phase) {
    if (phase == CheckingBackend::ChunkPhase::kFinish) {
      throw BackendFatalError("illegal address in the chunk");
    }
  };
  ExpectFatalWithAStreamDecoding(setup, "illegal address in the chunk");
}

// A chunk that never finishes is a wedged backend, like a step past its timeout.
TEST(EnginePromptChunkTest, AChunkPastItsTimeoutIsFatal) {
  EngineSetup setup = ChunkSetup(100000);
  setup.options.step_timeout = milliseconds(100);  // 64-token chunks: 100 ms each
  ExpectFatalWithAStreamDecoding(setup, "a prompt chunk has not finished within 100 ms");
}

TEST(EnginePromptChunkTest, ChunksNeedABackendThatRunsThem) {
  EngineSetup setup = ChunkSetup(10);
  setup.chunk_max_tokens = 0;
  EXPECT_THROW(MakeEngine(setup), Error);
  setup.chunk_max_tokens = 32;  // smaller than the engine's chunks
  EXPECT_THROW(MakeEngine(setup), Error);
  setup.options.prompt_chunk_tokens = -1;
  EXPECT_THROW(MakeEngine(setup), Error);
}

}  // namespace
}  // namespace mkserve::testing
