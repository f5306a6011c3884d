// The CPU sampler. Every step below follows the order documented in sampler.h; GPU samplers are
// tested against this file.
#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>
#include <vector>

namespace mkserve {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr uint64_t kGoldenGamma = 0x9e3779b97f4a7c15ull;  // splitmix64's increment
constexpr uint64_t kUnseededStream = 0x5851f42d4c957f2dull;

// splitmix64's finaliser: a bijection on 64 bits with full avalanche.
uint64_t Mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

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

// Temperature, top-k, top-p, min-p, then the inverse-CDF draw over the survivors sorted by
// (probability desc, id asc).
int32_t DrawToken(std::vector<float>& logits, const SamplingParams& params, double u) {
  for (float& l : logits) l /= params.temperature;
  int32_t vocab = static_cast<int32_t>(logits.size());
  std::vector<int32_t> order(vocab);
  for (int32_t i = 0; i < vocab; ++i) order[i] = i;
  int32_t keep = (params.top_k > 0 && params.top_k < vocab) ? params.top_k : vocab;
  auto before = [&](int32_t a, int32_t b) { return Before(logits, a, b); };
  std::partial_sort(order.begin(), order.begin() + keep, order.end(), before);
  order.resize(keep);
  float max_logit = logits[order[0]];
  if (max_logit == kNegInf) return order[0];  // everything masked: the lowest id
  std::vector<double> probs(keep);
  double total = 0.0;
  for (int32_t i = 0; i < keep; ++i) {
    probs[i] = std::exp(static_cast<double>(logits[order[i]]) - max_logit);
    total += probs[i];
  }
  int32_t kept = keep;
  if (params.top_p < 1.0f) {  // smallest prefix whose mass reaches top_p, at least one token
    double cumulative = 0.0;
    for (kept = 0; kept < keep;) {
      cumulative += probs[kept++] / total;
      if (cumulative >= params.top_p) break;
    }
  }
  if (params.min_p > 0.0f) {  // probs are sorted, so the survivors are a prefix
    double floor = params.min_p * probs[0];
    while (kept > 1 && probs[kept - 1] < floor) --kept;
  }
  double kept_total = 0.0;
  for (int32_t i = 0; i < kept; ++i) kept_total += probs[i];
  double target = u * kept_total, cumulative = 0.0;
  for (int32_t i = 0; i < kept; ++i) {
    cumulative += probs[i];
    if (target < cumulative) return order[i];
  }
  return order[kept - 1];
}

}  // namespace

double SampleUniform(uint64_t seed, int64_t sample_index) {
  uint64_t stream = Mix64(seed + kGoldenGamma);
  uint64_t bits = Mix64(stream ^ Mix64(static_cast<uint64_t>(sample_index) * kGoldenGamma + 1));
  return static_cast<double>(bits >> 11) * 0x1.0p-53;  // the top 53 bits: exact doubles in [0,1)
}

SequenceResult SampleFromLogits(std::span<const float> logits, const SequenceStep& step) {
  static const SamplingParams kDefaults;
  const SamplingParams& params = step.sampling ? *step.sampling : kDefaults;
  SequenceResult result;
  if (logits.empty()) return result;
  std::vector<float> work(logits.begin(), logits.end());
  ApplyPenalties(work, step, params);
  if (params.is_greedy()) {
    result.token_id = Argmax(work);
  } else {
    // Unseeded requests still get a stream that depends only on the sequence, never the slot.
    uint64_t seed =
        params.seed.value_or(Mix64(static_cast<uint64_t>(step.sequence_id)) ^ kUnseededStream);
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
