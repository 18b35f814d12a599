#include "model/greedy_decode.h"

#include <algorithm>
#include <span>
#include <string>

#include "kernels/cpu/softmax.h"

namespace dscale {

Result<std::vector<int32_t>> GreedyDecode(TargetModel& model, const std::vector<int32_t>& prompt,
                                          const GreedyOptions& options) {
  if (prompt.empty()) return InvalidArgument("prompt: expected at least one token");
  if (options.max_new_tokens < 0) return InvalidArgument("max_new_tokens: must be >= 0");
  const int64_t total = static_cast<int64_t>(prompt.size()) + options.max_new_tokens;
  if (total > model.config().max_position_embeddings) {
    return InvalidArgument("prompt + max_new_tokens = " + std::to_string(total) +
                           " exceeds max_position_embeddings " +
                           std::to_string(model.config().max_position_embeddings));
  }
  const int32_t pages = static_cast<int32_t>((total + options.page_size - 1) / options.page_size);
  PagedKvCache cache(
      model.KvShape(options.page_size, std::max(pages, 1)).WithDtype(options.kv_dtype));
  const int32_t seq = cache.AddSequence();
  DSCALE_RETURN_IF_ERROR(cache.Reserve(seq, static_cast<int32_t>(total)));

  const auto prompt_len = static_cast<int32_t>(prompt.size());
  const int32_t chunk = options.prefill_chunk > 0 ? options.prefill_chunk : prompt_len;
  StepBatch batch;
  ForwardOutput out;
  int32_t done = 0;
  while (done < prompt_len) {  // prefill, possibly chunked
    const int32_t n = std::min(chunk, prompt_len - done);
    batch.Clear();
    AddRequestRows(batch, seq, done, std::span(prompt).subspan(done, n), cache,
                   /*all_logits=*/false, SpanRows::kAlwaysKept);
    batch.tile_rows = 128;
    DSCALE_RETURN_IF_ERROR(model.Forward(batch, cache, &out));
    done += n;
  }

  std::vector<int32_t> generated;
  const int64_t vocab = model.config().vocab_size;
  for (int32_t step = 0; step < options.max_new_tokens; ++step) {
    int32_t next = 0;
    cpu::ArgmaxRows(out.logits.data(), 1, vocab, &next);
    generated.push_back(next);
    const bool stop = std::find(options.stop_ids.begin(), options.stop_ids.end(), next) !=
                      options.stop_ids.end();
    if (stop || step + 1 == options.max_new_tokens) break;
    batch.Clear();
    AddRequestRows(batch, seq, prompt_len + step, std::span(&generated.back(), 1), cache,
                   /*all_logits=*/false, SpanRows::kAlwaysKept);
    batch.tile_rows = 16;
    DSCALE_RETURN_IF_ERROR(model.Forward(batch, cache, &out));
  }
  return generated;
}

}  // namespace dscale
