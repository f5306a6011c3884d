// What the handlers share: the served model (set once loading is done) and the server's options.
// Until SetModel() is called every model route answers 503, /health included.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "chat/chat_template.h"
#include "engine/engine.h"
#include "grammar/grammar_cache.h"
#include "grammar/token_vocabulary.h"
#include "server/background_responses.h"
#include "server/conversation_store.h"
#include "server/response_store.h"
#include "tokenizer/tokenizer.h"

namespace mkserve::server {

struct ServerOptions {
  std::string model_id;                 // the name /v1/models lists and requests must use
  bool default_enable_thinking = true;  // reasoning on unless the request turns it off
  int64_t created_unix_s = 0;           // /v1/models `created`
  // ResponseStore's bound, and ConversationStore's; 0: responses and conversations are not kept
  int64_t response_store_bytes = 0;
};

// The loaded model: engine, tokenizer and chat template. Immutable once published.
struct ServedModel {
  std::unique_ptr<Engine> engine;
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer;
  std::optional<chat::ChatTemplate> chat_template;
  // The template speaks Command-4 (reasoning markers, tool actions): its output parser and
  // grammars apply. Set with the template (IsCommand4Template), not worked out per request.
  bool command4_format = false;
  // The tokenizer as the grammar matcher sees it (constrained output).
  std::shared_ptr<const grammar::TokenVocabulary> grammar_vocabulary;
  // Recent requests' compiled grammars (null: each request compiles its own).
  std::shared_ptr<grammar::GrammarCache> grammar_cache;
  // What skip_special_tokens leaves out of the text: every special token (completions), or all
  // but the markers the chat format's parser reads (chat and responses).
  std::shared_ptr<const HiddenTokens> hidden_special_tokens;
  std::shared_ptr<const HiddenTokens> chat_hidden_special_tokens;
};

class ServerState {
 public:
  explicit ServerState(ServerOptions options)
      : options_(std::move(options)),
        responses_(std::make_unique<ResponseStore>(options_.response_store_bytes)),
        conversations_(std::make_unique<ConversationStore>(options_.response_store_bytes)),
        background_(
            std::make_unique<BackgroundResponses>(*responses_, options_.response_store_bytes)) {}
  // The background responses go first: their runs hold the engine.
  ~ServerState() { background_.reset(); }

  const ServerOptions& options() const { return options_; }
  // The stored /v1/responses results (thread-safe; every handler shares it).
  ResponseStore& responses() const { return *responses_; }
  // The conversations of /v1/conversations and /v1/responses' `conversation` (thread-safe).
  ConversationStore& conversations() const { return *conversations_; }
  // The /v1/responses runs sent with background: true (thread-safe).
  BackgroundResponses& background() const { return *background_; }
  // Publishes the model; handlers see it from their next request on.
  void SetModel(std::unique_ptr<ServedModel> model) {
    model_ = std::move(model);
    ready_.store(true, std::memory_order_release);
  }
  // The model, or throws ApiError(kUnavailable) while it is still loading.
  const ServedModel& RequireModel() const;
  bool is_ready() const { return ready_.load(std::memory_order_acquire); }
  // Throws ApiError(kNotFound, param "model") unless `model` is empty or the served id.
  void CheckModelName(const std::string& model) const;

 private:
  ServerOptions options_;
  std::unique_ptr<ResponseStore> responses_;
  std::unique_ptr<ConversationStore> conversations_;
  std::unique_ptr<BackgroundResponses> background_;
  std::unique_ptr<ServedModel> model_;
  std::atomic<bool> ready_{false};
};

}  // namespace mkserve::server
