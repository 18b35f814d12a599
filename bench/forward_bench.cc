// Verification-shaped forward throughput: 32 requests × 16 rows over 256 committed positions
// each, on a Qwen3 model of hidden 512 and 8 layers, against plain sgemm measured in the same
// run. Prints achieved GFLOP/s of both and their ratio.
//
//   build/forward_bench [--requests 32] [--rows 16] [--context 256]

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "bench_timing.h"
#include "model/decoder_model.h"
#include "model/random_checkpoint.h"
#include "support/tiny_models.h"

namespace dscale {
namespace {

struct BenchShape {
  int32_t requests = 32;
  int32_t rows = 16;
  int32_t context = 256;
};

double SecondsPerCall(const std::function<void()>& call) {
  return bench::MedianSecondsPerCall(call, 0.3);
}

// FLOPs of one verification forward (multiply-adds count 2).
double ForwardFlops(const DecoderConfig& c, const BenchShape& s) {
  const double rows = double(s.requests) * s.rows;
  const double h = c.hidden_size, q = c.q_dim(), kv = c.kv_dim(), inter = c.intermediate_size;
  const double per_row_layer = 2 * (h * (q + 2 * kv) + q * h + h * 2 * inter + inter * h);
  double attention = 0;  // QKᵀ and PV: 4·head_dim per visible key per head
  for (int32_t j = 0; j < s.rows; ++j) attention += 4.0 * q * (s.context + j + 1);
  attention *= s.requests;
  return c.num_hidden_layers * (rows * per_row_layer + attention) + 2 * rows * h * c.vocab_size;
}

void Run(const BenchShape& shape) {
  const DecoderConfig config = testing::ForwardBenchConfig();
  DecoderModel model(config, RandomDecoderWeights(config, 1, DType::kBF16));
  const int32_t page_size = 16;
  const int32_t pages_per_request = (shape.context + shape.rows) / page_size + 2;
  PagedKvCache cache(model.KvShape(page_size, shape.requests * pages_per_request));
  std::mt19937 rng(3);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(config.vocab_size - 1));
  auto random_tokens = [&](int32_t n) {
    std::vector<int32_t> t(n);
    for (int32_t& x : t) x = token(rng);
    return t;
  };

  // Prefill every request's context once.
  std::vector<int32_t> seqs;
  StepBatch batch;
  ForwardOutput out;
  for (int32_t r = 0; r < shape.requests; ++r) {
    seqs.push_back(cache.AddSequence());
    if (!cache.Reserve(seqs.back(), shape.context + shape.rows).ok()) std::abort();
    batch.Clear();
    AddRequestRows(batch, seqs.back(), 0, random_tokens(shape.context), cache, false);
    batch.tile_rows = 128;
    if (!model.Forward(batch, cache, &out).ok()) std::abort();
  }
  // The verification batch: every request's 16 rows after its context, logits for all rows.
  batch.Clear();
  for (int32_t seq : seqs)
    AddRequestRows(batch, seq, shape.context, random_tokens(shape.rows), cache, true);

  const double flops = ForwardFlops(config, shape);
  std::printf("verification forward: %d requests x %d rows, context %d, hidden %lld, %lld layers\n",
              shape.requests, shape.rows, shape.context, static_cast<long long>(config.hidden_size),
              static_cast<long long>(config.num_hidden_layers));
  double forward_gflops[2];
  const int tiles[2] = {16, 128};
  for (int i = 0; i < 2; ++i) {
    const double seconds = SecondsPerCall([&] {
      batch.tile_rows = tiles[i];
      if (!model.Forward(batch, cache, &out).ok()) std::abort();
    });
    forward_gflops[i] = flops / seconds / 1e9;
    std::printf("  forward, attention tile %3d: %8.3f ms  %7.1f GFLOP/s\n", tiles[i], seconds * 1e3,
                forward_gflops[i]);
  }

  // Plain sgemm at the MLP up-projection's shape, same rows.
  const int64_t m = int64_t(shape.requests) * shape.rows, k = config.hidden_size;
  const int64_t n = 2 * config.intermediate_size;
  std::vector<float> x(m * k, 0.5f), w(n * k, 0.25f), y(m * n);
  const double sgemm_seconds = SecondsPerCall([&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(m),
                static_cast<blasint>(n), static_cast<blasint>(k), 1.0f, x.data(),
                static_cast<blasint>(k), w.data(), static_cast<blasint>(k), 0.0f, y.data(),
                static_cast<blasint>(n));
  });
  const double sgemm_gflops = 2.0 * m * k * n / sgemm_seconds / 1e9;
  std::printf("  plain sgemm %lldx%lldx%lld:     %8.3f ms  %7.1f GFLOP/s\n",
              static_cast<long long>(m), static_cast<long long>(k), static_cast<long long>(n),
              sgemm_seconds * 1e3, sgemm_gflops);
  std::printf("  forward / sgemm GFLOP/s: %.2f (tile 16), %.2f (tile 128)\n",
              forward_gflops[0] / sgemm_gflops, forward_gflops[1] / sgemm_gflops);
}

}  // namespace
}  // namespace dscale

int main(int argc, char** argv) {
  dscale::BenchShape shape;
  for (int i = 1; i + 1 < argc; i += 2) {
    const int value = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--requests") == 0)
      shape.requests = value;
    else if (std::strcmp(argv[i], "--rows") == 0)
      shape.rows = value;
    else if (std::strcmp(argv[i], "--context") == 0)
      shape.context = value;
    else {
      std::fprintf(stderr, "forward_bench: unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  if (shape.requests <= 0 || shape.rows <= 0 || shape.rows > 128 || shape.context < 0) {
    std::fprintf(stderr, "forward_bench: need requests > 0, 0 < rows <= 128, context >= 0\n");
    return 2;
  }
  dscale::Run(shape);
  return 0;
}
