// The budget policies in the cost model's simulation mode (budget/simulation.h): a closed loop
// against planted step times, auto against plain decoding, fixed:K (K = 4, 8, 12), dflash
// (fixed:W) and the paper's W·N/2; on the mixture of experts (--pair cpu-a3b) auto pricing rows
// by the experts they wake and by their count alone (auto-rows).
//
//   build/budget_sim_bench [--pair gpu] (the names: kPairs below) [--knee ROWS] [--concurrency 16]
//       [--steps 400] [--requests 0] [--tokens 64] [--seed 1] [--trace]
//
// --requests R: a finite run of R requests of --tokens tokens each (all steps until the last
// finishes, at most --steps); 0: requests are replaced forever and the run is --steps long.
//
// Prints tokens per second of each policy, auto's against the best of the others, auto's mode
// and median rows per drafted step over the run's second half, and with --trace auto's rows per
// step (one line per step).

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "budget/simulation.h"

namespace dscale::budget {
namespace {

// --pair's names and the simulated pairs they select (the GPU's knee: --knee, else W·N/2).
struct PairChoice {
  const char* name;
  SimulatedPair (*make)(int64_t knee);
};
constexpr PairChoice kPairs[] = {
    {"gpu", [](int64_t knee) { return GpuShapedPair(knee); }},
    {"cpu", [](int64_t) { return CpuShapedPair(); }},
    {"cpu17b", [](int64_t) { return Cpu17BShapedPair(); }},
    {"cpu17b-gsm8k", [](int64_t) { return Cpu17BRealisticPair(); }},
    {"cpu-zen5", [](int64_t) { return CpuZen5ShapedPair(); }},
    {"cpu-avx2-subset", [](int64_t) { return CpuAvx2SubsetPair(); }},
    {"cpu-a3b", [](int64_t) { return CpuA3BShapedPair(); }},
    {"cpu-a3b-avx2", [](int64_t) { return CpuA3BWithoutTilesPair(); }},
    {"cpu-a3b-amx", [](int64_t) { return CpuA3BAmxPair(); }},
};

const PairChoice* FindPair(const std::string& name) {
  for (const PairChoice& choice : kPairs) {
    if (name == choice.name) return &choice;
  }
  return nullptr;
}

std::string PairNames() {
  std::string names;
  for (const PairChoice& choice : kPairs)
    names += (names.empty() ? "" : "|") + std::string(choice.name);
  return names;
}

struct Args {
  std::string pair = "gpu";
  int64_t knee = 0;  // 0: W·N/2
  int32_t concurrency = 16;
  int64_t steps = 400;
  int64_t requests = 0;
  int32_t tokens = 64;
  uint64_t seed = 1;
  bool trace = false;
};

bool Parse(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    if (flag == "--trace") {
      a->trace = true;
      continue;
    }
    if (value == nullptr) return false;
    ++i;
    if (flag == "--pair") {
      a->pair = value;
    } else if (flag == "--knee") {
      a->knee = std::atoll(value);
    } else if (flag == "--concurrency") {
      a->concurrency = std::atoi(value);
    } else if (flag == "--steps") {
      a->steps = std::atoll(value);
    } else if (flag == "--requests") {
      a->requests = std::atoll(value);
    } else if (flag == "--tokens") {
      a->tokens = std::atoi(value);
    } else if (flag == "--seed") {
      a->seed = std::strtoull(value, nullptr, 10);
    } else {
      return false;
    }
  }
  return FindPair(a->pair) != nullptr && a->concurrency >= 1 && a->steps >= 1 && a->requests >= 0 &&
         a->tokens >= 1;
}

int Run(const Args& a) {
  const SimulationOptions options{.concurrency = a.concurrency,
                                  .tokens_per_request = a.tokens,
                                  .steps = a.steps,
                                  .requests = a.requests,
                                  .seed = a.seed};
  const int64_t knee = a.knee > 0 ? a.knee : int64_t{options.width} * a.concurrency / 2;
  const SimulatedPair pair = FindPair(a.pair)->make(knee);
  const ExpertShape experts{.experts = pair.experts.experts,
                            .top_k = pair.experts.top_k,
                            .expert_share = 0.43};  // the A3B shape's (ExpertShapeOf)
  AutoBudget controller({.width = options.width, .experts = experts});
  const SimulationResult automatic = Simulate(pair, {}, options, &controller);
  AutoBudget by_rows({.width = options.width});
  const SimulationResult rows_only = Simulate(pair, {}, options, &by_rows);
  const SimulationResult paper =
      Simulate(pair, {.kind = SimulatedPolicy::kFraction, .fraction = 0.5}, options, nullptr);
  const SimulationResult plain =
      Simulate(pair, {.kind = SimulatedPolicy::kPlain}, options, nullptr);
  double best = std::max(paper.tokens_per_second, plain.tokens_per_second);
  std::string fixed;
  for (int32_t k : {4, 8, 12, options.width}) {
    const double tps =
        Simulate(pair, {.kind = SimulatedPolicy::kFixed, .rows = k}, options, nullptr)
            .tokens_per_second;
    best = std::max(best, tps);
    fixed += "  fixed:" + std::to_string(k) + " " + std::to_string(tps).substr(0, 6);
  }
  std::vector<int64_t> rows;
  for (size_t i = automatic.steps.size() / 2; i < automatic.steps.size(); ++i) {
    if (automatic.steps[i].drafted > 0) rows.push_back(automatic.steps[i].drafted_rows);
  }
  std::sort(rows.begin(), rows.end());
  const std::string shape =
      a.pair == "gpu" ? "gpu (knee " + std::to_string(knee) + " rows)" : a.pair;
  std::printf("pair %s, N = %d, W·N/2 = %d, %zu steps\n", shape.c_str(), a.concurrency,
              options.width * a.concurrency / 2, automatic.steps.size());
  std::printf("  auto          %9.1f tok/s  mode %s, median rows per drafted step (2nd half) %s\n",
              automatic.tokens_per_second, AutoModeName(controller.mode()),
              rows.empty() ? "-" : std::to_string(rows[rows.size() / 2]).c_str());
  if (experts.sparse()) {
    std::printf("  auto-rows     %9.1f tok/s  mode %s (%.4f of plain)\n",
                rows_only.tokens_per_second, AutoModeName(by_rows.mode()),
                rows_only.tokens_per_second / plain.tokens_per_second);
  }
  std::printf("  fixed 0.5     %9.1f tok/s\n", paper.tokens_per_second);
  std::printf("  plain         %9.1f tok/s\n", plain.tokens_per_second);
  std::printf(" %s tok/s (fixed:%d is dflash)\n", fixed.c_str(), options.width);
  std::printf(
      "  auto / plain %.4f, auto / fixed 0.5 %.4f, auto / best other %.4f, exploration's loss "
      "%.1f ms\n",
      automatic.tokens_per_second / plain.tokens_per_second,
      automatic.tokens_per_second / paper.tokens_per_second, automatic.tokens_per_second / best,
      1e3 * controller.Snapshot().explore_loss_s);
  if (a.trace) {
    std::printf("step mode      requests drafted rows drafted_rows ms committed\n");
    for (size_t i = 0; i < automatic.steps.size(); ++i) {
      const SimulatedStep& s = automatic.steps[i];
      std::printf("%4zu %-9s %8d %7d %4lld %12lld %6.2f %9lld\n", i, AutoModeName(s.mode),
                  s.requests, s.drafted, static_cast<long long>(s.rows),
                  static_cast<long long>(s.drafted_rows), 1e3 * s.seconds,
                  static_cast<long long>(s.committed));
    }
  }
  return 0;
}

}  // namespace
}  // namespace dscale::budget

int main(int argc, char** argv) {
  dscale::budget::Args args;
  if (!dscale::budget::Parse(argc, argv, &args)) {
    std::fprintf(stderr,
                 "usage: budget_sim_bench [--pair %s] [--knee ROWS] [--concurrency N] "
                 "[--steps N] [--requests N] [--tokens N] [--seed N] [--trace]\n",
                 dscale::budget::PairNames().c_str());
    return 2;
  }
  return dscale::budget::Run(args);
}
