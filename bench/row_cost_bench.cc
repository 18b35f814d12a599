// Row cost of a whole Qwen3 (or Qwen3.5 hybrid) forward at real sizes: for 1 … 512 rows of one
// request verified after a context of 512 positions, the step time against the machine's limits
// measured in the same run (machine_limits.h): the weight bytes read per second as a fraction of
// the read bandwidth, the arithmetic rate as a fraction of the sgemm rate, and the time over the
// roofline max((weight + K/V bytes) ÷ bandwidth, FLOPs ÷ sgemm rate). A verify step whose extra
// rows cost nothing until arithmetic dominates stays near 1.0 in the last column.
//
// Checkpoints are random, of Qwen3's real shapes, made once (BF16, `make-tiny`'s writer) under
// --checkpoints and loaded as `dscale generate` loads them (memory-mapped, used in place); or
// --target DIR measures an existing checkpoint.
//
// With --weights int8 or int4 the projections and LM head are quantised at load as `dscale`
// quantises them, and each row count's step runs with both int8 activation modes, alternating (f32
// activations, and activations quantised per 32 inputs: gemm_int8.h): their step times, their
// ratio, and each mode's step time over its one-row step. BF16 checkpoints as stored get the same
// comparison of f32 and BF16-rounded activations (gemm_bf16.h) after the roofline table;
// --activations picks one mode for the roofline table alone.
//
// A hybrid target (--shape qwen3.5-4b, qwen3.5-9b) also gets its sequence state's size and the
// commit stage's cost by the rows a 16-row verify keeps (MeasureRollback).
//
//   build/row_cost_bench [--shape qwen3-0.6b|qwen3-1.7b|qwen3-4b|qwen3-8b|qwen3.5-4b|...|all]
//       [--target DIR] [--checkpoints /tmp/dscale-row-cost] [--context 512]
//       [--rows 1,2,4,8,16,32,64,128,256,512] [--weights as-stored|int8|int4] [--activations
//       f32|bf16]

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench_timing.h"
#include "engine/kv_budget.h"
#include "io/qwen3_shapes.h"
#include "kernels/cpu/openblas_kernels.h"
#include "machine_limits.h"
#include "model/decoder_model.h"
#include "model/random_checkpoint.h"

namespace dscale {
namespace {

struct Args {
  std::vector<std::string> shapes;  // NamedQwen3Config names
  std::string target;
  std::string checkpoints = "/tmp/dscale-row-cost";
  int32_t context = 512;
  std::vector<int32_t> rows = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512};
  WeightsMode weights = WeightsMode::kAsStored;
  // BF16 weights: the roofline table's activations; unset: f32, then both modes side by side.
  std::optional<cpu::Bf16Activations> activations;
};

[[noreturn]] void Usage(const std::string& problem) {
  std::fprintf(stderr, "row_cost_bench: %s\n", problem.c_str());
  std::exit(2);
}

std::vector<int32_t> ParseRows(const std::string& list) {
  std::vector<int32_t> rows;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    const int32_t n = std::atoi(item.c_str());
    if (n <= 0) Usage("--rows wants positive counts separated by commas, got " + list);
    rows.push_back(n);
  }
  return rows;
}

Args ParseArgs(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) Usage(flag + " needs a value");
    const std::string value = argv[i + 1];
    if (flag == "--shape") {
      bool found = false;
      for (const std::string& name : NamedQwen3ConfigNames()) {
        // "all": the dense Qwen3 shapes (the others need more memory than a small machine has).
        const DecoderConfig config = *NamedQwen3Config(name);
        const bool dense = !config.HasSparseLayers() && !config.HasLinearAttentionLayers();
        if (value == name || (value == "all" && dense)) {
          a.shapes.push_back(name);
          found = true;
        }
      }
      if (!found) Usage("unknown --shape " + value);
    } else if (flag == "--target") {
      a.target = value;
    } else if (flag == "--checkpoints") {
      a.checkpoints = value;
    } else if (flag == "--context") {
      a.context = std::atoi(value.c_str());
      if (a.context < 0) Usage("--context must be >= 0");
    } else if (flag == "--rows") {
      a.rows = ParseRows(value);
    } else if (flag == "--weights") {
      const Result<WeightsMode> mode = ParseWeightsMode(value);
      if (!mode.ok()) Usage(mode.status().ToString());
      a.weights = *mode;
    } else if (flag == "--activations") {
      a.activations = cpu::Bf16ActivationsFromName(value);
      if (!a.activations) Usage("--activations wants f32 or bf16, got " + value);
    } else {
      Usage("unknown flag " + flag);
    }
  }
  if (a.activations && IsQuantized(a.weights)) {
    Usage(
        "--activations picks how BF16 weights meet the activations; with --weights int8 or int4 "
        "both int8 activation modes run");
  }
  if (a.shapes.empty() && a.target.empty()) a.shapes = {"qwen3-0.6b", "qwen3-1.7b"};
  return a;
}

// The folder of `shape`'s random checkpoint, written on first use.
std::string CheckpointFor(const std::string& shape, const std::string& root) {
  const std::string dir = root + "/" + shape;
  if (std::filesystem::exists(dir + "/config.json")) return dir;
  std::printf("writing a random %s checkpoint to %s (once)...\n", shape.c_str(), dir.c_str());
  std::fflush(stdout);
  const Status status = WriteRandomCheckpoint(dir, *NamedQwen3Config(shape), 1, DType::kBF16);
  if (!status.ok()) Usage(status.ToString());
  return dir;
}

int64_t FloatBytes(const std::vector<float>& v) {
  return static_cast<int64_t>(v.size() * sizeof(float));
}

// Bytes of the weights one forward reads whatever its rows: every layer's projections and
// norms (a Gated DeltaNet layer's in_proj, out_proj, conv taps and gains in place of attention's),
// the final norm and the LM head (the embedding is read row by row).
int64_t WeightBytesPerStep(const DecoderWeights& w) {
  int64_t bytes = w.LmHead().bytes() + FloatBytes(w.final_norm);
  for (const DecoderLayerWeights& l : w.layers) {
    const GatedDeltaNetWeights& g = l.linear;
    bytes += l.qkv.bytes() + l.o_proj.bytes() + l.gate_up.bytes() + l.down.bytes();
    bytes += g.in_proj.bytes() + g.out_proj.bytes();
    for (const std::vector<float>* v : {&l.input_norm, &l.post_norm, &l.q_norm, &l.k_norm, &g.conv,
                                        &g.a_log, &g.dt_bias, &g.norm}) {
      bytes += FloatBytes(*v);
    }
  }
  return bytes;
}

// FLOPs of a forward of `rows` rows after `context` positions (multiply-adds count 2). A Gated
// DeltaNet layer's recurrence costs about four multiply-adds per state value per row (decay,
// kᵀS, the rank-one update, qᵀS) and its conv K per channel; an attention layer's QKᵀ and PV
// 4·head_dim per visible key per head.
double ForwardFlops(const DecoderConfig& c, int64_t rows, int64_t context) {
  const double h = c.hidden_size, q = c.q_dim(), kv = c.kv_dim(), inter = c.intermediate_size;
  const GatedDeltaNetConfig& g = c.hybrid.linear;
  const double mlp = h * 2 * inter + inter * h;
  double flops = 2.0 * rows * h * static_cast<double>(c.vocab_size);
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    if (c.IsLinearAttentionLayer(layer)) {
      const double projections =
          h * static_cast<double>(g.conv_dim() + g.value_dim() + 2 * g.value_heads) +
          static_cast<double>(g.value_dim()) * h;
      const double recurrence =
          4.0 * static_cast<double>(g.value_heads * g.key_head_dim * g.value_head_dim) +
          static_cast<double>(g.conv_dim() * g.conv_kernel);
      flops += 2.0 * rows * (projections + recurrence + mlp);
      continue;
    }
    const double projections = h * static_cast<double>(c.q_proj_rows() + 2 * kv) + q * h;
    flops += 2.0 * rows * (projections + mlp);
    for (int64_t j = 0; j < rows; ++j) flops += 4.0 * q * static_cast<double>(context + j + 1);
  }
  return flops;
}

std::vector<int32_t> RandomTokens(std::mt19937& rng, int64_t vocab, int32_t n) {
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> t(n);
  for (int32_t& x : t) x = token(rng);
  return t;
}

// Each row count's step in two activation modes, alternating (best of three rounds each):
// their step times, their ratio, and each mode's step time over its one-row step.
void MeasureActivationModes(DecoderModel& model, StepBatch& batch, PagedKvCache& cache,
                            ForwardOutput& out, const Args& args, int32_t seq, std::mt19937& rng,
                            const std::string (&names)[2], const ActivationModes (&modes)[2]) {
  std::printf("%5s %10s %10s %9s %12s %12s\n", "rows", (names[0] + " ms").c_str(),
              (names[1] + " ms").c_str(), (names[0] + "/" + names[1]).c_str(),
              (names[0] + " /1 row").c_str(), (names[1] + " /1 row").c_str());
  double one[2] = {0, 0};
  for (const int32_t rows : args.rows) {
    batch.Clear();
    AddRequestRows(batch, seq, args.context, RandomTokens(rng, model.config().vocab_size, rows),
                   cache, true);
    batch.tile_rows = rows <= 16 ? 16 : 128;
    double best[2] = {1e30, 1e30};
    for (int round = 0; round < 3; ++round) {
      for (int m = 0; m < 2; ++m) {
        model.set_activations(modes[m]);
        best[m] = std::min(best[m], bench::MedianSecondsPerCall(
                                        [&] {
                                          if (!model.Forward(batch, cache, &out).ok()) std::abort();
                                        },
                                        0.3));
      }
    }
    if (one[0] == 0) std::copy(best, best + 2, one);
    std::printf("%5d %10.2f %10.2f %9.2f %12.2f %12.2f\n", rows, best[0] * 1e3, best[1] * 1e3,
                best[0] / best[1], best[0] / one[0], best[1] / one[1]);
    std::fflush(stdout);
  }
}

// A hybrid target's sequence state: its size per request, and the commit stage after a 16-row
// verify as a function of the rows kept (the kept rows replayed from the committed state; all 16:
// the working copy adopted), against the one-row step. Each measurement runs on a fresh sequence
// (the commit's cost does not depend on the context: the state is a fixed size).
void MeasureRollback(DecoderModel& model, PagedKvCache& cache, std::mt19937& rng,
                     double one_row_step) {
  const RecurrentStateShape& shape = cache.recurrent().shape();
  const double state_mb = static_cast<double>(shape.BytesPerSequence()) / (1 << 20);
  std::printf(
      "\nsequence state: %d linear-attention layers, %.1f MiB per request (twice that while a "
      "verify is pending)\n",
      shape.linear_layers(), state_mb);
  constexpr int32_t kVerifyRows = 16;
  std::printf("rows kept of %d %9s %12s %11s\n", kVerifyRows, "commit ms", "ms per row",
              "/ one-row step");
  StepBatch batch;
  ForwardOutput out;
  for (const int32_t kept : {1, 2, 4, 8, 12, 15, 16}) {
    double best = 1e30;
    for (int round = 0; round < 5; ++round) {
      const int32_t seq = cache.AddSequence();
      if (!cache.Reserve(seq, kVerifyRows).ok()) Usage("KV cache reservation failed");
      batch.Clear();
      AddRequestRows(batch, seq, 0, RandomTokens(rng, model.config().vocab_size, kVerifyRows),
                     cache, true);
      batch.tile_rows = kVerifyRows;
      if (!model.Forward(batch, cache, &out).ok()) std::abort();
      const double start = bench::NowSeconds();
      model.CommitSequenceState(cache, seq, kept);
      best = std::min(best, bench::NowSeconds() - start);
      cache.RemoveSequence(seq);
    }
    std::printf("%16d %9.3f %12.3f %11.3f\n", kept, best * 1e3, best * 1e3 / kept,
                best / one_row_step);
    std::fflush(stdout);
  }
  // The alternative the contract rejects: a snapshot of the whole state after every verified
  // row, so that acceptance only picks one. Its cost is a state copy per row, whatever is kept.
  std::vector<float> from(static_cast<size_t>(shape.BytesPerSequence() / sizeof(float)), 1.0f);
  std::vector<float> to(from.size());
  double copy = 1e30;
  for (int round = 0; round < 5; ++round) {
    const double start = bench::NowSeconds();
    std::copy(from.begin(), from.end(), to.begin());
    copy = std::min(copy, bench::NowSeconds() - start);
  }
  if (to[to.size() / 2] != 1.0f) std::abort();  // the copy is used
  std::printf(
      "a snapshot per verified row instead: %.3f ms per row (one state copied), %.2f ms for "
      "%d rows (%.3f one-row steps), whatever is kept\n",
      copy * 1e3, copy * 1e3 * kVerifyRows, kVerifyRows, copy * kVerifyRows / one_row_step);
}

void Measure(const std::string& dir, const Args& args, double sgemm) {
  Result<DecoderModel> loaded = DecoderModel::Load(dir, args.weights);
  if (!loaded.ok()) Usage(loaded.status().ToString());
  DecoderModel& model = *loaded;
  const DecoderConfig& config = model.config();
  const int32_t max_rows = *std::max_element(args.rows.begin(), args.rows.end());
  const int32_t page_size = 16;
  // Room for the measured sequence and the rollback's fresh 16-row ones.
  const KvCacheShape kv_shape = model.KvShape(page_size, (args.context + max_rows) / page_size + 4);
  PagedKvCache cache(kv_shape);
  std::mt19937 rng(3);
  const int32_t seq = cache.AddSequence();
  if (!cache.Reserve(seq, args.context + max_rows).ok()) Usage("KV cache reservation failed");
  StepBatch batch;
  ForwardOutput out;
  if (args.context > 0) {
    AddRequestRows(batch, seq, 0, RandomTokens(rng, config.vocab_size, args.context), cache, false);
    batch.tile_rows = 128;
    const Status prefill = model.Forward(batch, cache, &out);
    if (!prefill.ok()) Usage(prefill.ToString());
  }

  const double weight_bytes = static_cast<double>(WeightBytesPerStep(model.weights()));
  const double kv_bytes = static_cast<double>(KvBytesPerPosition(kv_shape)) * args.context;
  std::printf(
      "\n%s: %lld layers, hidden %lld, %.2f GB of weights read per step, K/V %.0f MB at "
      "context %d\n",
      dir.c_str(), static_cast<long long>(config.num_hidden_layers),
      static_cast<long long>(config.hidden_size), weight_bytes / 1e9, kv_bytes / 1e6, args.context);
  if (IsQuantized(args.weights)) {
    // f32 activations, and activations quantised per 32 inputs (gemm_int8.h).
    return MeasureActivationModes(
        model, batch, cache, out, args, seq, rng, {"f32", "int8"},
        {{.int8 = cpu::Int8Activations::kF32}, {.int8 = cpu::Int8Activations::kInt8}});
  }
  if (args.activations) model.set_activations({.bf16 = *args.activations});
  std::printf("%5s %10s %9s %8s %8s %8s %9s\n", "rows", "step ms", "rows/s", "bw GB/s", "bw frac",
              "sgemm fr", "/roofline");
  double one_row_step = 0;
  for (const int32_t rows : args.rows) {
    batch.Clear();
    AddRequestRows(batch, seq, args.context, RandomTokens(rng, config.vocab_size, rows), cache,
                   true);
    // Verification runs attention in 16-row tiles; prefill-sized batches in 128-row ones.
    batch.tile_rows = rows <= 16 ? 16 : 128;
    // The machine's read bandwidth drifts by tens of percent over minutes: each row count is
    // compared with probes taken just before and just after it.
    const double bandwidth_before = bench::ReadBandwidth();
    const double s = bench::MedianSecondsPerCall(
        [&] {
          if (!model.Forward(batch, cache, &out).ok()) std::abort();
        },
        0.5);
    const double bandwidth = (bandwidth_before + bench::ReadBandwidth()) / 2;
    if (rows == 1) one_row_step = s;
    const double flops = ForwardFlops(config, rows, args.context);
    const double roofline = std::max((weight_bytes + kv_bytes) / bandwidth, flops / sgemm);
    std::printf("%5d %10.2f %9.1f %8.1f %8.2f %8.2f %9.2f\n", rows, s * 1e3, rows / s,
                bandwidth / 1e9, weight_bytes / s / bandwidth, flops / s / sgemm, s / roofline);
    std::fflush(stdout);
  }
  if (config.HasLinearAttentionLayers() && one_row_step > 0) {
    MeasureRollback(model, cache, rng, one_row_step);
  }
  if (!args.activations &&
      model.weights().LmHead().blocks().front().format == WeightFormat::kBF16) {
    // BF16 weights also meet activations rounded to BF16 (`--activations bf16`, gemm_bf16.h:
    // AMX tiles or AVX512-BF16 dot products where the CPU has them).
    std::printf("\nactivations f32 (above) and bf16, alternating:\n");
    MeasureActivationModes(
        model, batch, cache, out, args, seq, rng, {"f32", "bf16"},
        {{.bf16 = cpu::Bf16Activations::kF32}, {.bf16 = cpu::Bf16Activations::kBf16}});
  }
}

void Run(const Args& args) {
  const double sgemm = bench::SgemmRate();
  std::printf(
      "machine: %d threads, sgemm %.1f GFLOP/s (OpenBLAS %s kernels); read bandwidth probed "
      "around each row count\n",
      omp_get_max_threads(), sgemm / 1e9, cpu::OpenBlasCoreName().c_str());
  std::printf("cpu: %s\n", bench::KernelCpuFeatures().c_str());
  if (!args.target.empty()) Measure(args.target, args, sgemm);
  for (const std::string& shape : args.shapes) {
    Measure(CheckpointFor(shape, args.checkpoints), args, sgemm);
  }
}

}  // namespace
}  // namespace dscale

int main(int argc, char** argv) {
  dscale::cpu::ReexecForMatchingOpenBlasKernels(argv);
  dscale::Run(dscale::ParseArgs(argc, argv));
  return 0;
}
