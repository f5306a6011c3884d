// Builds engines over the scripted backend, wrapped in the KV-checking backend, and drains events.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/checking_backend.h"
#include "engine/engine.h"
#include "engine/fake_text_decoder.h"
#include "engine/scripted_backend.h"

namespace mkserve::testing {

inline constexpr int32_t kEos = 1;
inline constexpr int64_t kVocab = 100;

// Token ids 10..35 decode to 'a'..'z'; everything else to nothing.
inline std::shared_ptr<const TextDecoder> LetterDecoder() {
  std::vector<std::string> pieces(kVocab);
  for (int i = 0; i < 26; ++i) pieces[10 + i] = std::string(1, static_cast<char>('a' + i));
  return std::make_shared<FakeTextDecoder>(pieces);
}

inline std::vector<int32_t> Letters(const std::string& text) {
  std::vector<int32_t> ids;
  for (char c : text) ids.push_back(10 + (c - 'a'));
  return ids;
}

struct EngineSetup {
  Script script;
  int64_t full_blocks = 64;
  int64_t sliding_blocks = 0;  // > 0 adds a sliding group
  int64_t window_tokens = 128;
  int64_t max_position_embeddings = 4096;
  std::optional<KvLayout> layout;  // replaces the groups above when set
  EngineOptions options;
  // Prompt chunks beside the steps in the checking backend (CheckingBackend::enable_prompt_chunks)
  int64_t chunk_max_tokens = 0;  // 0: the backend runs none
  int64_t chunk_steps = -1;
  std::function<void(CheckingBackend::ChunkPhase)> chunk_hook;
};

struct Harness {
  CheckingBackend* checker = nullptr;  // owned by the engine
  std::unique_ptr<Engine> engine;
};

inline Harness MakeEngine(EngineSetup setup, std::function<void(int64_t)> step_hook = {}) {
  ModelConfig config;
  config.vocab_size = kVocab;
  config.eos_token_ids = {kEos};
  config.max_position_embeddings = setup.max_position_embeddings;
  KvLayout layout;
  layout.groups.push_back({AttentionKind::kFull, 0, {0}, setup.full_blocks});
  if (setup.sliding_blocks > 0) {
    layout.groups.push_back(
        {AttentionKind::kSliding, setup.window_tokens, {1}, setup.sliding_blocks});
  }
  if (setup.layout) layout = *setup.layout;
  auto scripted = std::make_unique<ScriptedBackend>(config, layout, setup.script);
  auto checker = std::make_unique<CheckingBackend>(std::move(scripted));
  checker->set_step_hook(std::move(step_hook));
  if (setup.chunk_max_tokens > 0) {
    checker->enable_prompt_chunks(setup.chunk_max_tokens, setup.chunk_steps, setup.chunk_hook);
  }
  Harness harness;
  harness.checker = checker.get();
  harness.engine = std::make_unique<Engine>(std::move(checker), setup.options);
  return harness;
}

struct Collected {
  std::map<int32_t, std::vector<int32_t>> token_ids;
  std::map<int32_t, std::string> text;
  std::map<int32_t, std::vector<PositionLogprobs>> logprobs;
  std::vector<PositionLogprobs> prompt_logprobs;
  std::map<int32_t, FinishedEvent> finished;
  std::optional<ErrorEvent> error;
  int64_t num_events = 0;
};

inline void Record(Collected& out, EngineEvent& event) {
  ++out.num_events;
  if (auto* tokens = std::get_if<TokensEvent>(&event)) {
    auto& ids = out.token_ids[tokens->index];
    ids.insert(ids.end(), tokens->token_ids.begin(), tokens->token_ids.end());
    out.text[tokens->index] += tokens->text;
    auto& lp = out.logprobs[tokens->index];
    lp.insert(lp.end(), tokens->logprobs.begin(), tokens->logprobs.end());
    out.prompt_logprobs.insert(out.prompt_logprobs.end(), tokens->prompt_logprobs.begin(),
                               tokens->prompt_logprobs.end());
  } else if (auto* finished = std::get_if<FinishedEvent>(&event)) {
    EXPECT_FALSE(out.finished.count(finished->index)) << "finished twice";
    out.finished[finished->index] = *finished;
  } else {
    out.error = std::get<ErrorEvent>(event);
  }
}

// Reads events until the request is done; fails the test after `timeout` instead of hanging.
inline Collected Drain(RequestHandle& handle,
                       std::chrono::seconds timeout = std::chrono::seconds(20)) {
  Collected out;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!handle.is_done()) {
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "request did not finish";
      break;
    }
    if (auto event = handle.Next(std::chrono::milliseconds(50))) Record(out, *event);
  }
  return out;
}

inline std::vector<int32_t> Prompt(int64_t length, int32_t first = 40) {
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < length; ++i) ids.push_back(first + (i * 7) % 60);
  return ids;
}

inline EngineRequest MakeRequest(std::vector<int32_t> prompt, int32_t max_tokens = 16) {
  EngineRequest request;
  request.prompt_token_ids = std::move(prompt);
  request.sampling.max_tokens = max_tokens;
  return request;
}

// Waits until the snapshot satisfies `done` (the engine publishes after each step).
template <typename Pred>
bool WaitForSnapshot(const Engine& engine, Pred done) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    if (done(engine.Snapshot())) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

}  // namespace mkserve::testing
