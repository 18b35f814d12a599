#include "planted_drafter.h"

#include <algorithm>

#include "model/greedy_decode.h"

namespace dscale::testing {
namespace {

uint64_t HashTokens(const std::vector<int32_t>& tokens, uint64_t salt) {
  uint64_t h = 1469598103934665603ull ^ salt;  // FNV-1a
  for (int32_t t : tokens) {
    h ^= static_cast<uint32_t>(t);
    h *= 1099511628211ull;
  }
  return h ^ (h >> 29);
}

}  // namespace

PlantedDrafter::PlantedDrafter(DecoderModel& target, int32_t block, uint64_t salt,
                               double error_free_share)
    : target_(target), block_(block), salt_(salt), error_free_share_(error_free_share) {}

int32_t PlantedDrafter::ErrorPosition(const std::vector<int32_t>& context) const {
  const uint64_t h = HashTokens(context, salt_);
  if (static_cast<double>(h % 1000) < error_free_share_ * 1000) return block_;
  return 1 + static_cast<int32_t>((h / 1000) % (block_ - 1));
}

const std::vector<int32_t>& PlantedDrafter::GreedyContinuation(
    const std::vector<int32_t>& context) {
  auto it = memo_.find(context);
  if (it == memo_.end()) {
    // At the end of the context the truth is as long as the context allows; the candidates
    // past it (staged, never committed) are filled with token 0.
    const int64_t room =
        target_.config().max_position_embeddings - static_cast<int64_t>(context.size());
    const auto length = static_cast<int32_t>(std::clamp<int64_t>(room, 0, block_ - 1));
    std::vector<int32_t> continuation =
        GreedyDecode(target_, context, {.max_new_tokens = length}).value();
    continuation.resize(static_cast<size_t>(block_ - 1), 0);
    it = memo_.emplace(context, std::move(continuation)).first;
  }
  return it->second;
}

Status PlantedDrafter::Draft(std::span<const DraftRequest> requests, const PagedKvCache&, int,
                             DraftOutput* out) {
  const int32_t candidates = block_ - 1;
  const int64_t vocab = target_.config().vocab_size;
  out->candidates = candidates;
  out->tokens.clear();
  out->logits.assign(requests.size() * candidates * vocab, 0.0f);
  out->hidden.assign(requests.size() * candidates * target_.config().hidden_size, 0.0f);
  for (size_t i = 0; i < requests.size(); ++i) {
    std::vector<int32_t> context(requests[i].committed.begin(), requests[i].committed.end());
    context.push_back(requests[i].anchor);
    const std::vector<int32_t>& truth = GreedyContinuation(context);
    const int32_t error = ErrorPosition(context);
    for (int32_t j = 0; j < candidates; ++j) {
      int32_t token = truth[j];
      if (j + 1 == error) token = static_cast<int32_t>((token + 1) % vocab);
      out->tokens.push_back(token);
      out->logits[(i * candidates + j) * vocab + token] = 1.0f;  // one-hot draft logits
    }
    drafted_.push_back(std::move(context));
  }
  return Status::Ok();
}

}  // namespace dscale::testing
