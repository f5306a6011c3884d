// The CPU sampler. Every step below follows the order documented in sampler.h; GPU samplers are
// tested against this file.
#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>
#include <vector>

#include "common/mix64.h"
#include "grammar/grammar_matcher.h"
namespace mkserve {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr uint64_t kGoldenGamma = 0x9e3779b97f4a7c15ull;  // splitmix64's increment
constexpr uint64_t kUnseededStream = 0x5851f42d4c957f2dull;

// Highest logit first; equal logits by lowest id, so ties never depend on memory order.
bool Before(std::span<const float> logits, int32_t a, int32_t b) {
  return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
}

int32_t Argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (int32_t i = 1; i < static_cast<int32_t>(logits.size()); ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  return best;
}

bool ValidId(int32_t id, size_t vocab) { return id >= 0 && static_cast<size_t>(id) < vocab; }

// Repetition (HF/vLLM: every token seen in prompt or output), then frequency/presence (OpenAI:
// output tokens only), then logit_bias, then the min_tokens suppression of stop tokens.
void ApplyPenalties(std::vector<float>& logits, const SequenceStep& step,
                    const SamplingParams& params) {
  if (params.repetition_penalty != 1.0f) {
    std::vector<bool> seen(logits.size(), false);
    for (auto ids : {step.prompt_token_ids, step.output_token_ids}) {
      for (int32_t id : ids) {
        if (!ValidId(id, logits.size()) || seen[id]) continue;
        seen[id] = true;
        float& l = logits[id];
        l = l > 0 ? l / params.repetition_penalty : l * params.repetition_penalty;
      }
    }
  }
  if (params.frequency_penalty != 0.0f || params.presence_penalty != 0.0f) {
    std::unordered_map<int32_t, int32_t> counts;
    for (int32_t id : step.output_token_ids) {
      if (ValidId(id, logits.size())) ++counts[id];
    }
    for (auto [id, count] : counts) {
      logits[id] -= params.frequency_penalty * count + params.presence_penalty;
    }
  }
  for (auto [id, bias] : params.logit_bias) {
    if (ValidId(id, logits.size())) logits[id] += bias;
  }
  if (static_cast<int64_t>(step.output_token_ids.size()) < params.min_tokens) {
    for (int32_t id : params.min_tokens_suppressed_ids) {
      if (ValidId(id, logits.size())) logits[id] = kNegInf;
    }
  }
}

// Constrained decoding: tokens outside the step's allowed set (and ids past its end) get -inf.
void ApplyAllowedTokens(std::vector<float>& logits, std::span<const uint32_t> allowed) {
  if (allowed.empty()) return;
  const size_t allowed_ids = allowed.size() * 32;
  for (size_t id = 0; id < logits.size(); ++id) {
    if (id >= allowed_ids || !grammar::MaskAllows(allowed, static_cast<int32_t>(id))) {
      logits[id] = kNegInf;
    }
  }
}

// Candidate ids in (logit desc, id asc) order, sorted lazily: sampling usually stops within the
// first few dozen, so a 256k vocabulary is not fully sorted for every token.
class SortedCandidates {
 public:
  SortedCandidates(std::span<const float> logits, int32_t top_k) : logits_(logits) {
    int32_t vocab = static_cast<int32_t>(logits.size());
    order_.resize(vocab);
    for (int32_t i = 0; i < vocab; ++i) order_[i] = i;
    limit_ = (top_k > 0 && top_k < vocab) ? top_k : vocab;
    if (limit_ < vocab) {  // the top-k set, unordered inside
      std::nth_element(order_.begin(), order_.begin() + limit_ - 1, order_.end(), Less());
    }
  }
  int32_t size() const { return limit_; }
  std::span<const int32_t> unsorted() const { return {order_.data(), size_t(limit_)}; }
  int32_t at(int32_t rank) {
    if (rank >= sorted_end_) {
      int32_t end = std::min(limit_, std::max({rank + 1, 2 * sorted_end_, kFirstSortedChunk}));
      std::partial_sort(order_.begin() + sorted_end_, order_.begin() + end, order_.begin() + limit_,
                        Less());
      sorted_end_ = end;
    }
    return order_[rank];
  }

 private:
  static constexpr int32_t kFirstSortedChunk = 64;
  struct Ranker {
    std::span<const float> logits;
    bool operator()(int32_t a, int32_t b) const { return Before(logits, a, b); }
  };
  Ranker Less() const { return Ranker{logits_}; }
  std::span<const float> logits_;
  std::vector<int32_t> order_;
  int32_t limit_ = 0;
  int32_t sorted_end_ = 0;
};

// Temperature, top-k, top-p, min-p, then the inverse-CDF draw over the survivors sorted by
// (probability desc, id asc). probs[id] is unnormalised; masses are sums of it.
int32_t DrawToken(std::vector<float>& logits, const SamplingParams& params, double u) {
  for (float& l : logits) l /= params.temperature;
  SortedCandidates candidates(logits, params.top_k);
  float max_logit = logits[candidates.at(0)];
  if (max_logit == kNegInf) return candidates.at(0);  // everything masked: the lowest id
  std::vector<double> probs(logits.size(), 0.0);
  double mass = 0.0;
  for (int32_t id : candidates.unsorted()) {
    probs[id] = std::exp(static_cast<double>(logits[id]) - max_logit);
    mass += probs[id];
  }
  int32_t kept = candidates.size();
  double kept_mass = mass;
  if (params.top_p < 1.0f) {  // smallest prefix whose mass reaches top_p, at least one token
    kept_mass = 0.0;
    for (kept = 0; kept < candidates.size();) {
      kept_mass += probs[candidates.at(kept++)];
      if (kept_mass / mass >= params.top_p) break;
    }
  }
  if (params.min_p > 0.0f) {  // survivors of min-p are a prefix of the sorted order
    double floor = params.min_p * probs[candidates.at(0)];
    int32_t num_above = 0;
    kept_mass = 0.0;
    // After top-p the first `kept` entries are sorted; without it they are all candidates.
    for (int32_t id : candidates.unsorted().first(kept)) {
      if (probs[id] >= floor) {
        ++num_above;
        kept_mass += probs[id];
      }
    }
    kept = std::max(num_above, 1);
  }
  double target = u * kept_mass, cumulative = 0.0;
  for (int32_t rank = 0; rank < kept; ++rank) {
    cumulative += probs[candidates.at(rank)];
    if (target < cumulative) return candidates.at(rank);
  }
  return candidates.at(kept - 1);  // rounding left the target just past the end
}

}  // namespace

double SampleUniform(uint64_t seed, int64_t sample_index) {
  uint64_t stream = Mix64(seed + kGoldenGamma);
  uint64_t bits = Mix64(stream ^ Mix64(static_cast<uint64_t>(sample_index) * kGoldenGamma + 1));
  return static_cast<double>(bits >> 11) * 0x1.0p-53;  // the top 53 bits: exact doubles in [0,1)
}

uint64_t SamplingSeed(const SamplingParams& params, int64_t sequence_id) {
  return params.seed.value_or(Mix64(static_cast<uint64_t>(sequence_id)) ^ kUnseededStream);
}

SequenceResult SampleFromLogits(std::span<const float> logits, const SequenceStep& step) {
  static const SamplingParams kDefaults;
  const SamplingParams& params = step.sampling ? *step.sampling : kDefaults;
  SequenceResult result;
  if (logits.empty()) return result;
  std::vector<float> work(logits.begin(), logits.end());
  ApplyPenalties(work, step, params);
  step.WaitForAllowedTokens();
  ApplyAllowedTokens(work, step.allowed_tokens);
  if (params.is_greedy()) {
    result.token_id = Argmax(work);
  } else {
    const uint64_t seed = SamplingSeed(params, step.sequence_id);
    result.token_id = DrawToken(work, params, SampleUniform(seed, step.sample_index));
  }
  if (params.num_logprobs >= 0) {
    result.logprobs = ComputeLogprobs(logits, result.token_id, params.num_logprobs);
  }
  return result;
}

PositionLogprobs ComputeLogprobs(std::span<const float> logits, int32_t token_id, int32_t k) {
  PositionLogprobs out;
  if (logits.empty()) return out;
  float max_logit = logits[Argmax(logits)];
  double sum = 0.0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - max_logit);
  double log_z = max_logit + std::log(sum);
  auto logprob = [&](int32_t id) { return static_cast<float>(logits[id] - log_z); };
  if (ValidId(token_id, logits.size())) out.chosen = {token_id, logprob(token_id)};
  int32_t vocab = static_cast<int32_t>(logits.size());
  int32_t num_top = std::clamp(k, 0, vocab);
  std::vector<int32_t> order(vocab);
  for (int32_t i = 0; i < vocab; ++i) order[i] = i;
  std::partial_sort(order.begin(), order.begin() + num_top, order.end(),
                    [&](int32_t a, int32_t b) { return Before(logits, a, b); });
  for (int32_t i = 0; i < num_top; ++i) out.top.push_back({order[i], logprob(order[i])});
  return out;
}

}  // namespace mkserve
