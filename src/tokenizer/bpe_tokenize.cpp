// BpeModel::Tokenize: a word's characters become symbols, then the lowest-ranked adjacent pair is
// merged repeatedly (leftmost first on ties) until no pair has a merge, exactly as HF's Word.
#include <algorithm>

#include "common/error.h"
#include "common/utf8.h"
#include "tokenizer/bpe_model.h"

namespace mkserve::tokenizer {

namespace {

constexpr int32_t kNoId = -1;

// A candidate merge of the symbol at `pos` with its right neighbour.
struct Candidate {
  int32_t rank;
  int32_t pos;
  int32_t new_id;
  // std heap is a max-heap: the "largest" candidate is the lowest rank, then the leftmost.
  bool operator<(const Candidate& other) const {
    return rank != other.rank ? rank > other.rank : pos > other.pos;
  }
};

struct Symbols {
  std::vector<int32_t> ids, prev, next;
  std::vector<bool> alive;
  std::vector<Candidate> heap;
};

}  // namespace

void BpeModel::Tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (auto id = TokenToId(word)) {
      out.push_back(*id);
      return;
    }
  }
  if (cache_.Lookup(word, out)) return;
  thread_local std::vector<int32_t> ids;
  ids.clear();
  InitialSymbols(word, ids);
  MergeSymbols(ids);
  out.insert(out.end(), ids.begin(), ids.end());
  cache_.Insert(word, ids);
}

int32_t BpeModel::SymbolId(std::string_view word, size_t begin, size_t end) const {
  bool plain = continuing_subword_prefix_.empty() && end_of_word_suffix_.empty();
  if (plain) {
    size_t pos = begin;
    char32_t c = NextCodePoint(word, pos);
    if (c < char_ids_.size()) return char_ids_[c];
    auto id = TokenToId(word.substr(begin, end - begin));
    return id ? *id : kNoId;
  }
  std::string symbol;
  if (begin > 0) symbol += continuing_subword_prefix_;
  symbol.append(word.substr(begin, end - begin));
  if (end == word.size()) symbol += end_of_word_suffix_;
  auto id = TokenToId(symbol);
  return id ? *id : kNoId;
}

void BpeModel::InitialSymbols(std::string_view word, std::vector<int32_t>& ids) const {
  bool pending_unk = false;
  auto flush_unk = [&] {
    if (pending_unk) ids.push_back(UnkId());
    pending_unk = false;
  };
  for (size_t pos = 0; pos < word.size();) {
    size_t begin = pos;
    pos += Utf8SequenceLength(static_cast<unsigned char>(word[pos]));
    int32_t id = SymbolId(word, begin, pos);
    if (id != kNoId) {
      flush_unk();
      ids.push_back(id);
      continue;
    }
    if (byte_fallback_ && std::all_of(word.begin() + begin, word.begin() + pos, [&](char byte) {
          return byte_ids_[static_cast<unsigned char>(byte)] != kNoId;
        })) {
      flush_unk();
      for (size_t i = begin; i < pos; ++i)
        ids.push_back(byte_ids_[static_cast<unsigned char>(word[i])]);
      continue;
    }
    if (!unk_token_) continue;  // HF drops a character it cannot represent when there is no unk
    if (!fuse_unk_) flush_unk();
    pending_unk = true;
  }
  flush_unk();
}

void BpeModel::MergeSymbols(std::vector<int32_t>& ids) const {
  if (ids.size() < 2) return;
  thread_local Symbols s;
  auto n = static_cast<int32_t>(ids.size());
  s.ids = ids;
  s.prev.resize(n);
  s.next.resize(n);
  s.alive.assign(n, true);
  s.heap.clear();
  for (int32_t i = 0; i < n; ++i) {
    s.prev[i] = i - 1;
    s.next[i] = i + 1 < n ? i + 1 : kNoId;
    if (i + 1 < n) {
      if (const MergeTarget* merge = merges_->Find(s.ids[i], s.ids[i + 1])) {
        s.heap.push_back({merge->rank, i, merge->new_id});
      }
    }
  }
  std::make_heap(s.heap.begin(), s.heap.end());
  auto push = [&](int32_t pos) {
    if (pos < 0 || s.next[pos] == kNoId) return;
    if (const MergeTarget* merge = merges_->Find(s.ids[pos], s.ids[s.next[pos]])) {
      s.heap.push_back({merge->rank, pos, merge->new_id});
      std::push_heap(s.heap.begin(), s.heap.end());
    }
  };
  while (!s.heap.empty()) {
    std::pop_heap(s.heap.begin(), s.heap.end());
    Candidate top = s.heap.back();
    s.heap.pop_back();
    int32_t right = s.next[top.pos];
    if (!s.alive[top.pos] || right == kNoId) continue;
    const MergeTarget* merge = merges_->Find(s.ids[top.pos], s.ids[right]);
    if (merge == nullptr || merge->new_id != top.new_id) continue;  // stale entry
    s.ids[top.pos] = top.new_id;
    s.alive[right] = false;
    s.next[top.pos] = s.next[right];
    if (s.next[right] != kNoId) s.prev[s.next[right]] = top.pos;
    push(s.prev[top.pos]);
    push(top.pos);
  }
  ids.clear();
  for (int32_t i = 0; i != kNoId; i = s.next[i]) ids.push_back(s.ids[i]);
}

}  // namespace mkserve::tokenizer
