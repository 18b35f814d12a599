// Decode steps at a long context with the KV cache stored as f32 and as BF16, interleaved step by
// step so that both see the same machine load (on a shared machine, whole `dscale generate` runs
// differ more from one another than the two dtypes do). Each cache holds random K/V rows for
// the context (timing only: no prefill); a step is one row's forward, as in plain decoding. Also
// times the step's attention alone (every layer's PagedAttention over the cache) the same way.
//
//   build/kv_decode_bench --model DIR [--context 2048] [--steps 15]

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/attention.h"
#include "model/decoder_model.h"

namespace dscale {
namespace {

struct Args {
  std::string model;
  int32_t context = 2048;
  int32_t steps = 15;
};

constexpr KvDtype kDtypes[2] = {KvDtype::kF32, KvDtype::kBf16};

// A cache of `dtype` whose one sequence holds random K/V rows at positions 0 .. context − 1.
PagedKvCache FilledCache(const DecoderModel& model, int32_t context, KvDtype dtype) {
  const DecoderConfig& c = model.config();
  PagedKvCache cache(model.KvShape(16, context / 16 + 2).WithDtype(dtype));
  const int32_t seq = cache.AddSequence();
  if (!cache.Reserve(seq, context + 1).ok()) std::abort();
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  std::vector<float> k(static_cast<size_t>(c.kv_dim())), v(k.size());
  for (int32_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    for (int32_t pos = 0; pos < context; ++pos) {
      for (float& x : k) x = normal(rng);
      for (float& x : v) x = normal(rng);
      cache.Store(layer, cache.Slot(seq, pos), k.data(), v.data());
    }
  }
  return cache;
}

double Milliseconds(const std::function<void()>& call) {
  const auto start = std::chrono::steady_clock::now();
  call();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// "min / median / max" of `ms`.
std::string Spread(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  char text[64];
  std::snprintf(text, sizeof(text), "%7.1f / %7.1f / %7.1f", ms.front(), ms[ms.size() / 2],
                ms.back());
  return text;
}

int Run(const Args& args) {
  Result<DecoderModel> loaded = DecoderModel::Load(args.model);
  if (!loaded.ok()) {
    std::fprintf(stderr, "kv_decode_bench: %s\n", loaded.status().message().c_str());
    return 1;
  }
  DecoderModel& model = *loaded;
  const DecoderConfig& c = model.config();
  std::vector<PagedKvCache> caches;
  for (const KvDtype dtype : kDtypes) caches.push_back(FilledCache(model, args.context, dtype));
  std::vector<float> q(static_cast<size_t>(c.q_dim()), 0.5f), attn(q.size());
  std::vector<double> step_ms[2], attention_ms[2];
  ForwardOutput out;
  for (int32_t s = 0; s < args.steps; ++s) {
    for (int i = 0; i < 2; ++i) {
      PagedKvCache& cache = caches[i];
      const std::vector<int32_t> token = {static_cast<int32_t>(s % c.vocab_size)};
      StepBatch batch;
      AddRequestRows(batch, 0, args.context, token, cache, /*all_logits=*/false);
      step_ms[i].push_back(Milliseconds([&] {
        batch.tile_rows = 16;
        if (!model.Forward(batch, cache, &out).ok()) std::abort();
      }));
      const StepSpan span{.q_start = 0,
                          .q_len = 1,
                          .ctx_len = args.context,
                          .page_table = cache.PageTable(0).data()};
      cpu::AttentionParams p{.q = q.data(),
                             .q_row_stride = c.q_dim(),
                             .out = attn.data(),
                             .heads = static_cast<int32_t>(c.num_attention_heads),
                             .kv_heads = static_cast<int32_t>(c.num_key_value_heads),
                             .head_dim = static_cast<int32_t>(c.head_dim),
                             .scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim)),
                             .spans = &span,
                             .num_spans = 1};
      attention_ms[i].push_back(Milliseconds([&] {
        for (int32_t layer = 0; layer < c.num_hidden_layers; ++layer) {
          p.kv = cache.Layer(layer);
          cpu::PagedAttention(p, 16);
        }
      }));
    }
  }
  std::printf(
      "decode step at context %d, %lld layers, %d steps per dtype (min / median / max ms)\n",
      args.context, static_cast<long long>(c.num_hidden_layers), args.steps);
  for (int i = 0; i < 2; ++i) {
    const double kv_mb =
        2.0 * c.num_hidden_layers * c.kv_dim() * (args.context + 1) * KvDtypeSize(kDtypes[i]) / 1e6;
    std::printf("  %-4s  step %s   attention %s   K/V read %.0f MB\n",
                std::string(KvDtypeName(kDtypes[i])).c_str(), Spread(step_ms[i]).c_str(),
                Spread(attention_ms[i]).c_str(), kv_mb);
  }
  return 0;
}

}  // namespace
}  // namespace dscale

int main(int argc, char** argv) {
  dscale::Args args;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--model") == 0) {
      args.model = argv[i + 1];
    } else if (std::strcmp(argv[i], "--context") == 0) {
      args.context = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--steps") == 0) {
      args.steps = std::atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "kv_decode_bench: unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  if (args.model.empty() || args.context < 1 || args.steps < 1) {
    std::fprintf(stderr, "kv_decode_bench: need --model DIR, --context >= 1, --steps >= 1\n");
    return 2;
  }
  return dscale::Run(args);
}
