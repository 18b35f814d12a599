// Verification step time on the device: DFlash's full-width verification against DScale's
// packed verification, on a Qwen3-8B-shaped target with random BF16 weights made on the device.
//
//   build-cuda/cuda_step_bench [--requests 8,16,32] [--context 512] [--layers 36]
//                              [--iterations 50] [--warmup 10] [--traces FILE] [--seed 1]
//                              [--json]
//
// For each request count N (one bucket, N_bs = N) and each mode it times one verification step
// — target forward over the packed rows → argmax → greedy acceptance → output builder → the
// results' copy to the host (model/cuda/verify_step.h) — replayed from a CUDA graph and run
// eagerly (kernel by kernel from the host), as the median over --iterations steps after
// --warmup, measured with CUDA events:
//   dflash  every request verifies all W = 16 rows (M = 16·N), with DFlash's 128-row attention
//           tile and with the 16-row tile;
//   dscale  rows packed to M = W·N/2 = 8·N, lengths from replayed accepted lengths (below),
//           16-row tile.
// Drafting and the DVL decision are not timed: both modes share the drafter, and the decision's
// kernels are a few percent of a step (paper §DVL).
//
// Every request has --context committed positions, whose K/V are random values (attention cost
// depends on the count, not the values). DScale's lengths: each request draws an accepted count
// y — from the records of a trace file (--traces, docs/TRACE_FORMAT.md) or, without one, from
// the fixed synthetic distribution P(y ≥ j) = 0.85^j, j ≤ 15 (mean ≈ 5.2 accepted drafts;
// a stand-in for a recorded distribution, not a measurement) — and the budget allocator
// (dvl::Allocate) fits lengths to M on prefix scores that are 1 through the accepted drafts and
// halve after them (so seeds are y + 1, what a perfect predictor would verify). 32 such steps
// per N are staged in turn, with random tokens.
//
// Prints a table (or JSON with --json): per N and mode the rows, tile, graph and eager
// milliseconds and the workspace bytes reserved; per N the reduction 1 − dscale/dflash in %
// against both DFlash tiles; and the device memory graph replays allocated (expected 0: every
// buffer is a fixed-address workspace allocated before capture). Exits 1 without a usable
// device or without enough device memory, 2 on bad flags.

#include <cuda_runtime_api.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/dvl_shapes.h"
#include "dvl/budget_allocator.h"
#include "dvl/flat_pack.h"
#include "io/qwen3_shapes.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_available.h"
#include "kernels/cuda/gemm_bf16.h"
#include "kernels/cuda/graph.h"
#include "kernels/cuda/random_fill.h"
#include "model/cuda/device_forward.h"
#include "model/cuda/device_kv_cache.h"
#include "model/cuda/device_weights.h"
#include "model/cuda/verify_step.h"
#include "train/trace_file.h"

namespace dscale {
namespace {

constexpr int kWidth = dvl::kBlockWidth;
constexpr int32_t kPageSize = 16;
constexpr int kStagedSteps = 32;           // distinct step inputs per N, staged in turn
constexpr double kSyntheticAccept = 0.85;  // P(y ≥ j) = 0.85^j
constexpr double kBytesPerMiB = 1024.0 * 1024.0;

struct Options {
  std::vector<int32_t> requests = {8, 16, 32};
  int32_t context = 512;
  int32_t layers = 36;
  int iterations = 50;
  int warmup = 10;
  std::string traces;
  uint64_t seed = 1;
  bool json = false;
};

// Qwen3-8B's shape (io/qwen3_shapes.h), with the layer count adjustable.
DecoderConfig Qwen3_8BShape(int32_t layers) {
  DecoderConfig config = *NamedQwen3Config("qwen3-8b");
  config.num_hidden_layers = layers;
  return config;
}

// ---- accepted lengths ------------------------------------------------------------------------

// Where DScale's accepted counts come from: a trace file's records, or the synthetic law.
class AcceptedCounts {
 public:
  static std::optional<AcceptedCounts> FromTraces(const std::string& path) {
    Result<train::TraceSet> set = train::ReadTraceFile(path);
    if (!set.ok()) {
      std::fprintf(stderr, "cuda_step_bench: %s\n", set.status().ToString().c_str());
      return std::nullopt;
    }
    if (set->size() == 0) {
      std::fprintf(stderr, "cuda_step_bench: %s holds no records\n", path.c_str());
      return std::nullopt;
    }
    AcceptedCounts counts;
    for (const train::TraceMeta& m : set->meta) {
      counts.recorded_.push_back(static_cast<int32_t>(m.accepted));
    }
    counts.source_ = "trace " + path + " (" + std::to_string(set->size()) + " records)";
    return counts;
  }

  static AcceptedCounts Synthetic() {
    AcceptedCounts counts;
    counts.source_ = "synthetic, P(y >= j) = 0.85^j";
    return counts;
  }

  int32_t Draw(std::mt19937_64& rng) const {
    if (!recorded_.empty()) {
      std::uniform_int_distribution<size_t> pick(0, recorded_.size() - 1);
      return recorded_[pick(rng)];
    }
    std::bernoulli_distribution next(kSyntheticAccept);
    int32_t y = 0;
    while (y < kWidth - 1 && next(rng)) ++y;
    return y;
  }

  const std::string& source() const { return source_; }

 private:
  std::vector<int32_t> recorded_;
  std::string source_;
};

// DScale's lengths for accepted counts y at budget W·N/2: Algorithm 1 on prefix scores 1 through
// the accepted drafts, then 1/2, 1/4, ... (seeds y + 1).
std::vector<int32_t> DscaleLengths(const std::vector<int32_t>& accepted) {
  const auto n = static_cast<int64_t>(accepted.size());
  std::vector<float> q(static_cast<size_t>(n * kWidth));
  for (int64_t i = 0; i < n; ++i) {
    for (int j = 0; j < kWidth; ++j) {
      const int past = j - accepted[i];
      q[i * kWidth + j] = past <= 0 ? 1.0f : std::ldexp(1.0f, -past);
    }
  }
  const int64_t budget = *dvl::BudgetFromFraction(n, kWidth, dvl::kDefaultVerifyBudget);
  return dvl::Allocate(q.data(), n, kWidth, budget)->k;
}

// ---- step inputs -----------------------------------------------------------------------------

// Request i owns pages [i·P, (i + 1)·P): its context, then room for one block.
int32_t PagesPerRequest(int32_t context) { return (context + kWidth + kPageSize - 1) / kPageSize; }

using Steps = std::vector<std::unique_ptr<dvl::BucketStep>>;

// One step for N requests with lengths k, packed by dvl::Pack into `capacity`. Request i's page
// table is page_tables + i·P (pages [i·P, (i + 1)·P)).
std::unique_ptr<dvl::BucketStep> MakeStep(const std::vector<int32_t>& k, int64_t capacity,
                                          int32_t context, const int32_t* page_tables,
                                          int64_t vocab, std::mt19937_64& rng) {
  const auto n = static_cast<int32_t>(k.size());
  const int32_t pages = PagesPerRequest(context);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(vocab - 1));
  StepBatch blocks;
  for (int32_t i = 0; i < n; ++i) {
    blocks.BeginSpan(i, context, page_tables + int64_t{i} * pages);
    for (int32_t j = 0; j < kWidth; ++j) {
      const int32_t pos = context + j;
      blocks.AddRow(token(rng), (i * pages + pos / kPageSize) * kPageSize + pos % kPageSize,
                    /*logits=*/false);
    }
  }
  auto packed = std::make_unique<dvl::BucketStep>(n, capacity);
  const Status status = dvl::Pack(blocks, k, packed.get());
  DSCALE_CHECK_MSG(status.ok(), "the bench's own packing failed");
  return packed;
}

// ---- modes and timing ------------------------------------------------------------------------

struct Mode {
  const char* name;
  bool packed;  // DScale's half-capacity packing, else DFlash's full width
  int tile_rows;
};
constexpr Mode kModes[] = {{"dflash", false, 128}, {"dflash", false, 16}, {"dscale", true, 16}};

struct ModeResult {
  int32_t n = 0;
  Mode mode{};
  int64_t rows = 0;
  double graph_ms = 0, eager_ms = 0;
  int64_t workspace_bytes = 0;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

// Everything that lives across modes: the model, its KV cache and the timing stream.
class Bench {
 public:
  Bench(const Options& options, AcceptedCounts counts)
      : options_(options), counts_(std::move(counts)), rng_(options.seed) {
    DSCALE_CUDA_CHECK(cudaStreamCreate(&stream_));
    DSCALE_CUDA_CHECK(cudaEventCreate(&start_));
    DSCALE_CUDA_CHECK(cudaEventCreate(&stop_));
    const DecoderConfig config = Qwen3_8BShape(options.layers);
    model_.emplace(config, cuda::RandomDeviceDecoderWeights(config, options.seed, stream_));
    kv_.emplace(model_->KvShape(kPageSize, MaxRequests() * PagesPerRequest(options.context)));
    page_tables_.resize(static_cast<size_t>(kv_->shape().num_pages));
    for (size_t p = 0; p < page_tables_.size(); ++p) page_tables_[p] = static_cast<int32_t>(p);
    for (int32_t layer = 0; layer < options.layers; ++layer) {
      FillKv(layer);
    }
    DSCALE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  ~Bench() {
    model_.reset();
    kv_.reset();
    static_cast<void>(cudaEventDestroy(start_));
    static_cast<void>(cudaEventDestroy(stop_));
    static_cast<void>(cudaStreamDestroy(stream_));
  }

  // One mode at N requests: its steps, eager timing, capture, graph timing.
  ModeResult Run(int32_t n, const Mode& mode) {
    const int64_t capacity = int64_t{n} * (mode.packed ? kWidth / 2 : kWidth);
    cuda::VerifyWorkspace ws({.bucket = n,
                              .capacity = capacity,
                              .width = kWidth,
                              .pages_per_request = PagesPerRequest(options_.context),
                              .page_size = kPageSize,
                              .tile_rows = mode.tile_rows},
                             *model_);
    const Steps steps = MakeSteps(n, mode, capacity);
    const cuda::EnqueueWork enqueue = [&](cudaStream_t s) {
      cuda::EnqueueVerifyStep(*model_, *kv_, ws, s);
    };
    ModeResult result{.n = n, .mode = mode, .rows = capacity, .workspace_bytes = ws.bytes()};
    // Eager first: it also loads every kernel before the capture.
    result.eager_ms = TimeSteps(ws, steps, [&] { enqueue(stream_); });
    const cuda::CapturedGraph graph = cuda::CapturedGraph::Capture(stream_, enqueue);
    result.graph_ms = TimeSteps(ws, steps, [&] { graph.Replay(stream_); });
    return result;
  }

  uint64_t GraphMemoryHighWater() const {
    int device = 0;
    DSCALE_CUDA_CHECK(cudaGetDevice(&device));
    uint64_t bytes = 0;
    DSCALE_CUDA_CHECK(cudaDeviceGetGraphMemAttribute(device, cudaGraphMemAttrUsedMemHigh, &bytes));
    return bytes;
  }

  int64_t weight_bytes() const { return model_->weights().bytes(); }
  int64_t kv_bytes() const { return kv_->bytes(); }

 private:
  int32_t MaxRequests() const {
    return *std::max_element(options_.requests.begin(), options_.requests.end());
  }

  void FillKv(int32_t layer) {
    const int64_t n = kv_->num_slots() * kv_->row_floats();
    const uint64_t seed = options_.seed * 1000 + static_cast<uint64_t>(layer) * 2;
    cuda::FillUniform(kv_->k(layer), n, seed, -1.0f, 1.0f, stream_);
    cuda::FillUniform(kv_->v(layer), n, seed + 1, -1.0f, 1.0f, stream_);
  }

  Steps MakeSteps(int32_t n, const Mode& mode, int64_t capacity) {
    Steps steps;
    for (int s = 0; s < kStagedSteps; ++s) {
      std::vector<int32_t> k(static_cast<size_t>(n), kWidth);
      if (mode.packed) {
        std::vector<int32_t> accepted;
        for (int32_t i = 0; i < n; ++i) accepted.push_back(counts_.Draw(rng_));
        k = DscaleLengths(accepted);
      }
      steps.push_back(MakeStep(k, capacity, options_.context, page_tables_.data(),
                               model_->config().vocab_size, rng_));
    }
    return steps;
  }

  // Median milliseconds of `step` (queued between two events, the results' copy included) over
  // the measured iterations, each after staging the next inputs.
  template <typename StepFn>
  double TimeSteps(cuda::VerifyWorkspace& ws, const Steps& steps, const StepFn& step) {
    std::vector<double> times;
    for (int it = 0; it < options_.warmup + options_.iterations; ++it) {
      ws.Stage(steps[static_cast<size_t>(it) % steps.size()]->batch(), stream_);
      DSCALE_CUDA_CHECK(cudaEventRecord(start_, stream_));
      step();
      ws.QueueResultCopy(stream_);
      DSCALE_CUDA_CHECK(cudaEventRecord(stop_, stream_));
      DSCALE_CUDA_CHECK(cudaEventSynchronize(stop_));
      float ms = 0;
      DSCALE_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
      if (it >= options_.warmup) times.push_back(ms);
    }
    return Median(times);
  }

  Options options_;
  AcceptedCounts counts_;
  std::mt19937_64 rng_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  std::optional<cuda::DeviceDecoderModel> model_;
  std::optional<cuda::DeviceKvCache> kv_;
  std::vector<int32_t> page_tables_;  // request i owns pages [i·P, (i + 1)·P)
};

// ---- device checks ---------------------------------------------------------------------------

// A generous estimate of the device bytes the run needs: weights, KV cache, the largest
// workspace (DFlash's at the largest N: logits dominate) and cuBLAS's workspace, plus 1 GiB for
// the context and kernels' own needs.
int64_t EstimatedBytes(const Options& o) {
  const DecoderConfig c = Qwen3_8BShape(o.layers);
  const int64_t n = *std::max_element(o.requests.begin(), o.requests.end());
  const int64_t slots = n * PagesPerRequest(o.context) * kPageSize;
  const int64_t kv = 2 * o.layers * slots * c.kv_dim() * int64_t{sizeof(float)};
  const int64_t rows = n * kWidth;
  const int64_t per_row = c.vocab_size + 8 * c.hidden_size + 4 * c.intermediate_size + 64;
  return cuda::DeviceDecoderWeightBytes(c) + kv + rows * per_row * int64_t{sizeof(float)} +
         static_cast<int64_t>(cuda::GemmContext::kWorkspaceBytes) + (int64_t{1} << 30);
}

std::string DeviceName() {
  int device = 0;
  DSCALE_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  DSCALE_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return std::string(prop.name) + " (sm_" + std::to_string(prop.major) +
         std::to_string(prop.minor) + ")";
}

// ---- reports ---------------------------------------------------------------------------------

// 1 − dscale/dflash in percent.
double ReductionPct(double dscale, double dflash) { return 100.0 * (1.0 - dscale / dflash); }

const ModeResult& Find(const std::vector<ModeResult>& all, int32_t n, bool packed, int tile) {
  for (const ModeResult& r : all) {
    if (r.n == n && r.mode.packed == packed && r.mode.tile_rows == tile) return r;
  }
  DSCALE_CHECK_MSG(false, "missing bench result");
}

void PrintTable(const Options& o, const std::string& source, const std::vector<ModeResult>& all,
                uint64_t graph_mem, int64_t weight_bytes, int64_t kv_bytes) {
  std::printf("cuda_step_bench on %s\n", DeviceName().c_str());
  std::printf(
      "target: Qwen3-8B shape, %d layers, hidden 4096, 32 q / 8 kv heads x 128, "
      "intermediate 12288, vocab 151936, untied; BF16 weights %.1f GiB, f32 KV %.1f GiB\n",
      o.layers, static_cast<double>(weight_bytes) / (1024 * kBytesPerMiB),
      static_cast<double>(kv_bytes) / (1024 * kBytesPerMiB));
  std::printf(
      "context %d per request; dscale lengths from %s; median of %d steps after %d "
      "warm-up, ms\n\n",
      o.context, source.c_str(), o.iterations, o.warmup);
  std::printf("%5s  %-7s %5s %5s %10s %10s %14s\n", "N", "mode", "rows", "tile", "graph_ms",
              "eager_ms", "workspace_MiB");
  for (const int32_t n : o.requests) {
    for (const Mode& mode : kModes) {
      const ModeResult& r = Find(all, n, mode.packed, mode.tile_rows);
      std::printf("%5d  %-7s %5lld %5d %10.3f %10.3f %14.1f\n", n, mode.name,
                  static_cast<long long>(r.rows), mode.tile_rows, r.graph_ms, r.eager_ms,
                  static_cast<double>(r.workspace_bytes) / kBytesPerMiB);
    }
    const ModeResult& s = Find(all, n, true, 16);
    for (const int tile : {128, 16}) {
      const ModeResult& d = Find(all, n, false, tile);
      std::printf("%5s  reduction vs dflash tile %3d: graph %5.1f%%  eager %5.1f%%\n", "", tile,
                  ReductionPct(s.graph_ms, d.graph_ms), ReductionPct(s.eager_ms, d.eager_ms));
    }
  }
  std::printf("\ngraph memory allocated by replays (cudaGraphMemAttrUsedMemHigh): %llu bytes\n",
              static_cast<unsigned long long>(graph_mem));
}

void PrintJson(const Options& o, const std::string& source, const std::vector<ModeResult>& all,
               uint64_t graph_mem, int64_t weight_bytes, int64_t kv_bytes) {
  nlohmann::json out;
  out["device"] = DeviceName();
  out["config"] = {
      {"layers", o.layers},           {"context", o.context}, {"iterations", o.iterations},
      {"warmup", o.warmup},           {"lengths", source},    {"seed", o.seed},
      {"weight_bytes", weight_bytes}, {"kv_bytes", kv_bytes}};
  for (const ModeResult& r : all) {
    out["results"].push_back({{"n", r.n},
                              {"mode", r.mode.name},
                              {"rows", r.rows},
                              {"tile", r.mode.tile_rows},
                              {"graph_ms", r.graph_ms},
                              {"eager_ms", r.eager_ms},
                              {"workspace_bytes", r.workspace_bytes}});
  }
  for (const int32_t n : o.requests) {
    const ModeResult& s = Find(all, n, true, 16);
    for (const int tile : {128, 16}) {
      const ModeResult& d = Find(all, n, false, tile);
      out["reductions"].push_back({{"n", n},
                                   {"dflash_tile", tile},
                                   {"graph_pct", ReductionPct(s.graph_ms, d.graph_ms)},
                                   {"eager_pct", ReductionPct(s.eager_ms, d.eager_ms)}});
    }
  }
  out["graph_mem_used_high_bytes"] = graph_mem;
  std::printf("%s\n", out.dump(2).c_str());
}

// ---- main ------------------------------------------------------------------------------------

int Main(const Options& o) {
  const std::string& problem = cuda::CudaUnavailableReason();
  if (!problem.empty()) {
    std::fprintf(stderr, "cuda_step_bench: no usable CUDA device: %s\n", problem.c_str());
    return 1;
  }
  size_t free_bytes = 0, total_bytes = 0;
  DSCALE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  const int64_t needed = EstimatedBytes(o);
  if (static_cast<int64_t>(free_bytes) < needed) {
    std::fprintf(stderr,
                 "cuda_step_bench: needs about %.1f GiB of device memory, %.1f GiB are free; "
                 "lower --layers, --context or the largest --requests\n",
                 static_cast<double>(needed) / (1024 * kBytesPerMiB),
                 static_cast<double>(free_bytes) / (1024 * kBytesPerMiB));
    return 1;
  }
  std::optional<AcceptedCounts> counts =
      o.traces.empty() ? AcceptedCounts::Synthetic() : AcceptedCounts::FromTraces(o.traces);
  if (!counts) return 1;
  const std::string source = counts->source();
  Bench bench(o, std::move(*counts));
  std::vector<ModeResult> all;
  for (const int32_t n : o.requests) {
    for (const Mode& mode : kModes) all.push_back(bench.Run(n, mode));
  }
  const uint64_t graph_mem = bench.GraphMemoryHighWater();
  if (o.json) {
    PrintJson(o, source, all, graph_mem, bench.weight_bytes(), bench.kv_bytes());
  } else {
    PrintTable(o, source, all, graph_mem, bench.weight_bytes(), bench.kv_bytes());
  }
  return 0;
}

}  // namespace
}  // namespace dscale

int main(int argc, char** argv) {
  dscale::Options o;
  CLI::App app{"Verification step time on the device: DFlash full width vs DScale packed"};
  app.add_option("--requests", o.requests, "request counts N, one bucket each")
      ->delimiter(',')
      ->check(CLI::Range(1, 4096));
  app.add_option("--context", o.context, "committed positions per request")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--layers", o.layers, "decoder layers (Qwen3-8B has 36)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--iterations", o.iterations, "measured steps per mode")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--warmup", o.warmup, "unmeasured steps first")->check(CLI::Range(0, 1000000));
  app.add_option("--traces", o.traces, "trace file whose accepted counts DScale's lengths follow")
      ->check(CLI::ExistingFile);
  app.add_option("--seed", o.seed, "seed of weights, KV values, tokens and lengths");
  app.add_flag("--json", o.json, "print JSON instead of the table");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  return dscale::Main(o);
}
