#include "spec/logit_rules.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <unordered_map>

#include "core/check.h"

namespace dscale {
namespace {

std::string Number(float x) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", static_cast<double>(x));
  return text;
}

Status CheckPenalty(float value, const char* field) {
  if (std::isfinite(value) && value >= -kMaxPenalty && value <= kMaxPenalty) return Status::Ok();
  return InvalidArgument(std::string(field) + ": expected a number from -2 to 2, got " +
                         Number(value));
}

// A token's terms: whether it occurs in the prompt, and its count in the output so far.
struct Seen {
  bool in_prompt = false;
  int32_t count = 0;
};

}  // namespace

Status CheckLogitRules(const LogitRules& rules, int64_t vocab, int32_t max_tokens) {
  if (rules.min_tokens < 0 || rules.min_tokens > max_tokens) {
    return InvalidArgument("min_tokens: expected 0 to max_tokens (" + std::to_string(max_tokens) +
                           "), got " + std::to_string(rules.min_tokens));
  }
  DSCALE_RETURN_IF_ERROR(CheckPenalty(rules.presence_penalty, "presence_penalty"));
  DSCALE_RETURN_IF_ERROR(CheckPenalty(rules.frequency_penalty, "frequency_penalty"));
  if (!(rules.repetition_penalty >= kMinRepetitionPenalty &&
        rules.repetition_penalty <= kMaxRepetitionPenalty)) {
    return InvalidArgument("repetition_penalty: expected a number from 0.01 to 100 (1: off), got " +
                           Number(rules.repetition_penalty));
  }
  if (rules.logit_bias.size() > static_cast<size_t>(kMaxLogitBiasTokens)) {
    return InvalidArgument("logit_bias: at most " + std::to_string(kMaxLogitBiasTokens) +
                           " tokens, got " + std::to_string(rules.logit_bias.size()));
  }
  for (size_t i = 0; i < rules.logit_bias.size(); ++i) {
    const auto [token, bias] = rules.logit_bias[i];
    if (token < 0 || token >= vocab) {
      return InvalidArgument("logit_bias: token " + std::to_string(token) +
                             " is not in the vocabulary (ids 0 to " + std::to_string(vocab - 1) +
                             ")");
    }
    if (i > 0 && token <= rules.logit_bias[i - 1].first) {
      return InvalidArgument("logit_bias: tokens must be ascending and distinct (" +
                             std::to_string(token) + " after " +
                             std::to_string(rules.logit_bias[i - 1].first) + ")");
    }
    if (!(std::isfinite(bias) && bias >= -kMaxLogitBias && bias <= kMaxLogitBias)) {
      return InvalidArgument("logit_bias: the bias of token " + std::to_string(token) +
                             " must be from -100 to 100, got " + Number(bias));
    }
  }
  if (rules.reasoning_budget >= 0 &&
      (rules.reasoning_close_token < 0 || rules.reasoning_close_token >= vocab)) {
    return InvalidArgument(
        "thinking_token_budget: needs a reasoning block that closes with one token (thinking on, "
        "in a chat format that has one)");
  }
  return Status::Ok();
}

void ApplyLogitRules(const LogitRules& rules, std::span<const int32_t> prompt,
                     std::span<const int32_t> output, std::span<const int32_t> drafts,
                     std::span<float> rows, int64_t vocab) {
  DSCALE_CHECK(vocab > 0 && rows.size() % static_cast<size_t>(vocab) == 0);
  const auto k = static_cast<int64_t>(rows.size()) / vocab;
  DSCALE_CHECK(static_cast<int64_t>(drafts.size()) + 1 >= k);
  const float r = rules.repetition_penalty;
  const bool repetition = r != 1.0f;
  const bool counted = rules.presence_penalty != 0.0f || rules.frequency_penalty != 0.0f;
  // Only tokens in the prompt or output are penalised: the terms are kept for those alone.
  std::unordered_map<int32_t, Seen> seen;
  if (repetition) {
    for (const int32_t t : prompt) seen[t].in_prompt = true;
  }
  if (repetition || counted) {
    for (const int32_t t : output) ++seen[t].count;
  }
  for (int64_t j = 0; j < k; ++j) {
    float* x = rows.data() + j * vocab;
    for (const auto& [token, bias] : rules.logit_bias) x[token] += bias;
    for (const auto& [token, terms] : seen) {
      float v = x[token];
      if (repetition) v = v > 0.0f ? v / r : v * r;
      if (terms.count > 0) {
        const float by_count = static_cast<float>(terms.count) * rules.frequency_penalty;
        v -= by_count + rules.presence_penalty;
      }
      x[token] = v;
    }
    if (j + 1 < k && (repetition || counted)) ++seen[drafts[static_cast<size_t>(j)]].count;
  }
}

void HoldBackStopIds(const LogitRules& rules, int64_t output_len, std::span<const int64_t> stop_ids,
                     std::span<float> rows, int64_t vocab) {
  DSCALE_CHECK(vocab > 0 && rows.size() % static_cast<size_t>(vocab) == 0);
  const auto k = static_cast<int64_t>(rows.size()) / vocab;
  for (int64_t j = 0; j < k && output_len + j < rules.min_tokens; ++j) {
    for (const int64_t id : stop_ids) {
      if (id >= 0 && id < vocab) rows[j * vocab + id] = std::numeric_limits<float>::lowest();
    }
  }
}

void CloseReasoningAtBudget(const LogitRules& rules, std::span<const int32_t> output,
                            std::span<const int32_t> drafts, std::span<float> rows, int64_t vocab) {
  if (rules.reasoning_budget < 0) return;
  DSCALE_CHECK(vocab > 0 && rows.size() % static_cast<size_t>(vocab) == 0);
  // Only the row that follows exactly reasoning_budget tokens can be forced: before it the block
  // may go on, and after it the block has closed (by then, or at that row).
  const int64_t j = rules.reasoning_budget - static_cast<int64_t>(output.size());
  if (j < 0 || j >= static_cast<int64_t>(rows.size()) / vocab) return;
  const int32_t close = rules.reasoning_close_token;
  const std::span<const int32_t> before = drafts.first(static_cast<size_t>(j));
  if (std::ranges::find(output, close) != output.end() ||
      std::ranges::find(before, close) != before.end()) {
    return;
  }
  const std::span<float> row = rows.subspan(static_cast<size_t>(j * vocab), vocab);
  const float kept = row[close];
  std::ranges::fill(row, std::numeric_limits<float>::lowest());
  row[close] = kept;
}

}  // namespace dscale
