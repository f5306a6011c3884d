// The Conversations API over the ConversationStore: POST /v1/conversations (items, metadata);
// GET, POST (metadata) and DELETE /v1/conversations/{id}; GET and POST
// /v1/conversations/{id}/items; GET and DELETE /v1/conversations/{id}/items/{item_id}. A
// /v1/responses request with `conversation` reads the items as its context and adds its input
// and output items when it finishes (responses_handler.cpp).
#include <algorithm>
#include <string_view>

#include "server/error.h"
#include "server/handlers.h"
#include "server/item_list.h"
#include "server/json_fields.h"
#include "server/response_meta.h"
#include "server/responses_request.h"
#include "server/sse.h"
#include "server/url_query.h"

namespace mkserve::server {
namespace {

[[noreturn]] void ThrowNoConversation(const std::string& id, const std::string& param) {
  throw ApiError(ErrorKind::kNotFound,
                 "no conversation '" + id +
                     "': it was deleted, evicted (the server keeps the most recent ones in "
                     "memory, --response-store-mb), made before a restart, or never made (POST "
                     "/v1/conversations makes one)",
                 param);
}

ConversationStore& EnabledStore(const ServerState& state) {
  ConversationStore& store = state.conversations();
  if (!store.enabled()) {
    throw ApiError(ErrorKind::kNotFound,
                   "this server keeps no conversations (--response-store-mb 0)");
  }
  return store;
}

Json ConversationJson(const Conversation& conversation) {
  return {{"id", conversation.id},
          {"object", "conversation"},
          {"created_at", conversation.created_at},
          {"metadata", conversation.metadata}};
}

// The body's `items` (checked as /v1/responses input items) added to `conversation`, each with
// an id (the client's, which must be new to it, else one the conversation makes); returns the
// added ones.
Json AddItems(Conversation& conversation, const Json& items) {
  const std::string suffix = conversation.id.substr(conversation.id.find('_') + 1);
  Json added = Json::array();
  for (size_t i = 0; i < items.size(); ++i) {
    const Json& item = items[i];
    if (const auto id = item.find("id"); id != item.end()) {
      for (const Json& kept : conversation.items) {
        if (kept.value("id", Json()) == *id) {
          ThrowInvalid("items[" + std::to_string(i) + "].id",
                       "the conversation already holds an item '" + id->get<std::string>() + "'");
        }
      }
    }
    const bool message = item.value("type", "message") == "message";
    added.push_back(ListedItem(item, (message ? "msg_" : "item_") + suffix + "_" +
                                         std::to_string(conversation.next_item++)));
    conversation.items.push_back(added.back());
  }
  return added;
}

// `before`: the items the conversation holds already, which a tool result may answer.
const Json& BodyItems(const Json& body, bool required, const Json& before = Json::array()) {
  static const Json kNone = Json::array();
  const auto it = body.find("items");
  if (it == body.end() || (!required && it->is_null())) {
    if (required) ThrowInvalid("items", "is required");
    return kNone;
  }
  CheckInputItems(*it, "items", before);
  return *it;
}

// {id}, "items" or "", and the item id of /v1/conversations/{id}[/items[/{item_id}]].
struct ConversationPath {
  std::string id, rest, item_id;
};

ConversationPath ParsePath(const std::string& path) {
  constexpr std::string_view kPrefix = "/v1/conversations/";
  const std::string tail = path.substr(kPrefix.size());
  ConversationPath parsed;
  const size_t slash = tail.find('/');
  parsed.id = PercentDecoded(tail.substr(0, slash));
  if (slash == std::string::npos) return parsed;
  const std::string rest = tail.substr(slash + 1);
  const size_t item_slash = rest.find('/');
  parsed.rest = rest.substr(0, item_slash);
  if (item_slash != std::string::npos) parsed.item_id = PercentDecoded(rest.substr(item_slash + 1));
  return parsed;
}

}  // namespace

Json ConversationItems(const ServerState& state, const std::string& id, const std::string& param) {
  std::optional<Conversation> found =
      state.conversations().enabled() ? state.conversations().Get(id) : std::nullopt;
  if (!found) ThrowNoConversation(id, param);
  return found->items;
}

HttpResponse HandleConversations(const ServerState& state, const HttpRequest& http) {
  ConversationStore& store = EnabledStore(state);
  const Json body = http.body.empty() ? Json::object() : ParseJsonBody(http.body);
  const ResponseMeta meta = NewResponseMeta("conv_", state.options().model_id);
  Conversation conversation;
  conversation.id = meta.id;
  conversation.created_at = meta.created_unix_s;
  conversation.metadata = JsonFields(body, "").Metadata("metadata");
  AddItems(conversation, BodyItems(body, /*required=*/false));
  if (!store.Put(conversation)) {
    ThrowInvalid("items", "the conversation is larger than the whole store (--response-store-mb)");
  }
  return JsonResponse(DumpJson(ConversationJson(conversation)));
}

HttpResponse HandleConversation(const ServerState& state, const HttpRequest& http) {
  ConversationStore& store = EnabledStore(state);
  const ConversationPath path = ParsePath(http.path);
  std::optional<Conversation> found = store.Get(path.id);
  if (!found) ThrowNoConversation(path.id, "conversation_id");
  const std::string& method = http.method;
  if (path.rest.empty()) {
    if (method == "GET") return JsonResponse(DumpJson(ConversationJson(*found)));
    if (method == "DELETE") {
      store.Erase(path.id);
      return JsonResponse(
          DumpJson({{"id", path.id}, {"object", "conversation.deleted"}, {"deleted", true}}));
    }
    if (method == "POST") {  // metadata, replaced whole
      const Json body = ParseJsonBody(http.body);
      if (!body.contains("metadata")) ThrowInvalid("metadata", "is required");
      const Json metadata = JsonFields(body, "").Metadata("metadata");
      Conversation updated;
      if (!store.Update(path.id, [&](Conversation& c) {
            c.metadata = metadata;
            updated = c;
          })) {
        ThrowNoConversation(path.id, "conversation_id");
      }
      return JsonResponse(DumpJson(ConversationJson(updated)));
    }
  } else if (path.rest == "items" && path.item_id.empty()) {
    if (method == "GET") return JsonResponse(DumpJson(ItemListPage(found->items, http.query)));
    if (method == "POST") {
      const Json body = ParseJsonBody(http.body);
      const Json& items = BodyItems(body, /*required=*/true, found->items);
      Json added;
      if (!store.Update(path.id, [&](Conversation& c) { added = AddItems(c, items); })) {
        ThrowInvalid("items",
                     "the conversation would be larger than the whole store "
                     "(--response-store-mb), or it is gone");
      }
      return JsonResponse(DumpJson({{"object", "list"},
                                    {"data", added},
                                    {"first_id", added.empty() ? Json(nullptr) : added[0]["id"]},
                                    {"last_id", added.empty() ? Json(nullptr) : added.back()["id"]},
                                    {"has_more", false}}));
    }
  } else if (path.rest == "items") {
    auto has_item = [&](const Json& item) { return item.value("id", "") == path.item_id; };
    const auto it = std::find_if(found->items.begin(), found->items.end(), has_item);
    if (it == found->items.end()) {
      throw ApiError(ErrorKind::kNotFound,
                     "no item '" + path.item_id + "' in conversation '" + path.id + "'", "item_id");
    }
    if (method == "GET") return JsonResponse(DumpJson(*it));
    if (method == "DELETE") {  // answers the conversation, as OpenAI does
      Conversation updated;
      store.Update(path.id, [&](Conversation& c) {
        Json kept = Json::array();
        for (const Json& item : c.items) {
          if (!has_item(item)) kept.push_back(item);
        }
        c.items = std::move(kept);
        updated = c;
      });
      return JsonResponse(DumpJson(ConversationJson(updated)));
    }
  }
  throw ApiError(ErrorKind::kNotFound, "no route for " + method + " " + http.path);
}

}  // namespace mkserve::server
