#pragma once
// The budget policies in a simulated closed loop against planted step times (the cost model's
// simulation mode), for the tests and `budget_sim_bench`: requests with planted acceptance rates,
// step times D(drafted) + V(rows) + feed · fed rows with lognormal noise and outliers, and common
// random numbers so policies run with one seed see the same requests and noise. The loop's rules:
// docs/VERIFY_BUDGET.md ("The simulated loop").

#include <cstdint>
#include <functional>
#include <vector>

#include "budget/auto_budget.h"

namespace dscale::budget {

// A mixture of experts' verify (when `experts` > 0 it replaces verify_seconds): the step wakes
// X = E · (1 − (1 − k/E)^(Σ_i k_i^own_exponent)^anchor_exponent) distinct experts per layer for
// k_i rows of request i — a request's own rows share experts (own_exponent < 1) and other
// requests' share some more (anchor_exponent < 1) — and costs base_s + per_expert_s · X +
// per_row_s · Σ k_i (a row's arithmetic, which a CPU without matrix tiles pays whatever experts
// it wakes). Each admitted request's prompt reports what m of its rows wake (the engine's span
// occupancy).
struct SimulatedExperts {
  int32_t experts = 0, top_k = 0;
  double own_exponent = 0.66, anchor_exponent = 0.82;
  double base_s = 0, per_expert_s = 0, per_row_s = 0;

  // X for requests verifying k[i] rows each.
  double Woken(const std::vector<int32_t>& k) const;
};

struct SimulatedPair {
  std::function<double(int64_t rows)> verify_seconds;    // true V
  std::function<double(int64_t drafted)> draft_seconds;  // true D (drafting + decision)
  double feed_seconds_per_row = 0;
  double noise = 0.05;  // σ of the lognormal factor
  double outlier_share = 0.02;
  double acceptance_lo = 0.6, acceptance_hi = 0.95;  // α_r uniform in [lo, hi]
  // Stretches of a text its drafter gets wrong (a calculation, a name): each run of
  // hard_stretch_tokens tokens of a request is hard with probability hard_share, and there
  // accepts at hard_acceptance instead of α_r. The predictor sees it, as a drafter's confidence
  // falls with its acceptance.
  double hard_share = 0;
  int32_t hard_stretch_tokens = 16;
  double hard_acceptance = 0.1;
  // The first hard_opening_tokens tokens of every text accept at hard_acceptance too, and the
  // predictor does not see it (it scores them at α_r): the trained pair's GSM8K answers open so,
  // their first blocks rejected while the predictor scores them like the rest.
  int32_t hard_opening_tokens = 0;
  double predictor_noise = 0.1;
  SimulatedExperts experts;  // a mixture of experts, or none (experts 0)
};

// A GPU serving a large target: a verify step is memory-bound (20 ms whatever the rows) up to
// its compute knee at `knee_rows`, then proportional to rows; drafting is cheap (1.5 ms +
// 0.05 ms per request). With the knee at W·N/2 the paper's budget is the best one.
SimulatedPair GpuShapedPair(int64_t knee_rows);
// The bundled tiny pair on 2 CPU cores (docs/BENCHMARKS.md's step profile, rounded): a verified
// row costs about a quarter of a plain step (1.5 ms + 0.35 ms per row), drafting plus the
// decision about as much as a plain step (0.5 ms + 0.8 ms per request), feeding 0.02 ms a row;
// acceptance α in [0.3, 0.7] (τ ≈ 2 at full width, as measured there).
SimulatedPair CpuShapedPair();
// The bundled pair inflated to Qwen3-1.7B's shape on the same 2 cores (docs/BENCHMARKS.md's
// headline and row-cost table, rounded): a verify step reads the 3.4 GB of weights up to about
// 10 rows, then pays each row in arithmetic, V(r) = max(85 + 3·r, 11·r) ms; drafting costs
// 37 ms per drafted request (mostly the target's LM head over the block's rows); feeding is
// counted in it. Acceptance as the tiny pair's (the inflated pair computes the same function).
SimulatedPair Cpu17BShapedPair();
// The 1.7B shape on a 2-vCPU Xeon with a drafter of realistic GSM8K acceptance (measured at one
// request): a plain step 181 ms, a verify step flat-ish to about 8 rows and then arithmetic,
// V(r) = max(171 + 10·r, 30.9·r) ms (252 ms at 8 rows, 494 ms at 16); drafting 100 ms a request
// plus the 11 ms decision, about half a plain step. Acceptance α uniform in [0.3, 0.87]: drafts
// accepted per step 0: 42%, 1: 22%, 2: 12%, 3: 7%, 4: 5%, 5: 3%, then 2% falling to 0.3% at 14
// (1.2% reach the cap, 15); τ 2.67 at 8 rows. Here speculating pays at one request (4–8 rows)
// and not at two or more.
SimulatedPair Cpu17BRealisticPair();
// The bundled pair inflated to Qwen3-1.7B's shape on a 2-vCPU AMD Zen 5 (docs/BENCHMARKS.md,
// "AMD Zen 5: the limits, and the kernels against them", one request, rounded): a plain step
// 86 ms, V(r) = 81 + 5.2·r ms (120 at 8 rows, 165 at 16), drafting 36 ms a request; the trained
// pair's GSM8K acceptance (τ 4 at full width) with α in [0.6, 0.9], and a quarter of its
// 16-token stretches hard (α 0.1). Speculation pays here at one request over a whole text, not
// within its hard stretches.
SimulatedPair CpuZen5ShapedPair();
// The same inflated pair with the 1,536-token draft subset on a 2-vCPU AMD EPYC with AVX2 only
// (docs/BENCHMARKS.md, "The auto budget over a subset, with a predictor trained on its traces";
// the auto budget's own step times there, rounded): V(r) = max(185 + 16·r, 38·r) ms (201 plain,
// 313 at 8 rows, 608 at 16), drafting 65 ms a request, about a third of a plain step; α in
// [0.6, 0.9] (fixed:8 about 1.45× plain) with each text's first 8 tokens hard and unseen by the
// predictor, whose noise is large (0.4; the trained predictor's holdout R² was 0.43).
// Speculation pays at one request over a text; its opening does not show it.
SimulatedPair CpuAvx2SubsetPair();
// The bundled pair inflated to Qwen3-30B-A3B's width at 10 layers on the same 2-vCPU Xeon
// (docs/BENCHMARKS.md, "The whole model at Qwen3-30B-A3B's width", rounded): 128 experts, top 8;
// a verify step 30 ms + 4.2 ms per distinct expert per layer (64 ms plain at one request, 280 at
// sixteen); drafting 20 ms + 25 ms a request; acceptance as Cpu17BRealisticPair's.
SimulatedPair CpuA3BShapedPair();
// The same target on a 2-vCPU AMD EPYC with AVX2 only (docs/BENCHMARKS.md, "Rows priced by their
// arithmetic too", rounded): without matrix tiles a verified row pays its arithmetic whatever
// experts it wakes, so a verify step costs 50 ms + 2.7 ms per distinct expert per layer + 11 ms
// per row (83 ms plain at one request, 381 at sixteen, where the anchors already wake 57 experts
// and a draft row adds few). Drafting 10 ms + 12 ms a request, a quarter of what that CPU took
// over a draft subset (50 ms), so that a few rows pay at one request; acceptance as
// Cpu17BRealisticPair's.
SimulatedPair CpuA3BWithoutTilesPair();
// The same target on another 2-vCPU Xeon with AMX (docs/BENCHMARKS.md, "The modes again on an
// AMX Xeon", fitted and rounded): a verify step 36 ms + 5.3 ms per distinct expert per layer +
// 0.5 ms per row (79 ms plain at one request, 340 at sixteen); drafting 22 ms + 16 ms a request;
// acceptance as Cpu17BRealisticPair's. There a few rows a step paid at one request.
SimulatedPair CpuA3BAmxPair();

// What decides the rows: auto, a fixed fraction of W·N allocated by the predictor (the
// paper's 0.5), the same rows for every drafted request (fixed:K; dflash is fixed:W), or plain
// decoding.
struct SimulatedPolicy {
  enum Kind { kAuto, kFraction, kFixed, kPlain } kind = kAuto;
  double fraction = 0.5;  // kFraction
  int32_t rows = 8;       // kFixed: K, at most W
};

struct SimulationOptions {
  int width = 16;
  int32_t concurrency = 16;
  int32_t tokens_per_request = 64;
  int64_t steps = 400;   // at most
  int64_t requests = 0;  // requests admitted in all (0: replaced forever)
  uint64_t seed = 1;
};

struct SimulatedStep {
  AutoMode mode = AutoMode::kSpeculate;  // auto's mode before the step
  int32_t requests = 0, drafted = 0;
  int64_t rows = 0;          // Σ k_i
  int64_t drafted_rows = 0;  // M of the drafted requests
  double seconds = 0;
  int64_t committed = 0;  // tokens
};

struct SimulationResult {
  std::vector<SimulatedStep> steps;
  double tokens_per_second = 0;
};

// `controller` is used (and left trained) for kAuto, ignored otherwise.
SimulationResult Simulate(const SimulatedPair& pair, const SimulatedPolicy& policy,
                          const SimulationOptions& options, AutoBudget* controller);

}  // namespace dscale::budget
