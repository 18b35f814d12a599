#pragma once
// A mixture of experts' verify step costs the experts its rows wake: each distinct expert's
// weights are read once per step, so a dense target's nearly flat cost in rows becomes, on a
// sparse one, a cost that grows with the distinct experts (docs/BENCHMARKS.md, "Mixture of
// experts"). This model predicts that cost for a step that has not been run, so the auto budget
// can price draft rows before verifying them (docs/VERIFY_BUDGET.md, "Pricing rows by the experts
// they wake"):
//
//   a request's m consecutive rows wake u(m) distinct experts per sparse layer — measured on the
//     spans every forward runs (prompt chunks and verified blocks, core/expert_occupancy.h), so
//     known from the first prefill on; a request's (j+1)-th row adds c_j = u(j+1) − u(j);
//   a step over N requests wakes X_N experts per layer on its anchors (plain steps measure it;
//     at an N not seen, from the nearest N₀ seen: the asleep share 1 − X/E = exp(−L), L growing
//     as (N / N₀)^γ, γ fitted between the smallest and largest N seen, 1 with one),
//     and draft rows whose costs sum to C add (E − X_N) · (1 − exp(−σ · C / E)) more: each of
//     their own experts lands at random, so the share still asleep shrinks as they land (other
//     requests' draft rows wake some of the same ones; σ · C · (1 − X_N / E) for few), σ fitted
//     so that the drafted steps' experts match;
//   each expert woken costs t seconds: the plain step's time times the experts' share of its
//     weight bytes, per expert (memory-bound; the prior), times ρ;
//   each draft row costs r seconds besides the experts it wakes: its arithmetic (attention, the
//     router, its expert products, the LM head), which a CPU without matrix tiles pays in full
//     even where the anchors already woke the row's experts (0: the prior);
//   ρ and r are fitted together on the drafted steps' verify time over the plain step's, by
//     decayed least squares shrunk toward the priors, so a step of few rows on many new experts
//     and one of many rows on experts already awake tell the two apart.
//
// So verify(N, R, C) = V_plain(N) + t · (X̂ − X_N) + r · R for R draft rows,
// X̂ = X_N + (E − X_N) · (1 − exp(−σ · C / E)).
//
// A verify pass that also runs prompt chunks (mixed prefill) wakes what the chunks wake too,
// u(P) for a chunk of P rows (the same points, measured up to 256 rows), each chunk and the
// anchors independently: X_N becomes X_A = E − (E − X_N) · Π (1 − u(P_i) / E) in both terms, so
// the draft rows pay for the experts still asleep after the prompts, and the prompts' own time
// (which plain decoding pays too) is left out of the step's price.

#include <cstdint>
#include <span>
#include <vector>

#include "core/expert_occupancy.h"
#include "io/decoder_config.h"

namespace dscale::budget {

// What the model needs of the target; experts 0: a dense target.
struct ExpertShape {
  int32_t experts = 0;  // E per sparse layer
  int32_t top_k = 0;
  // The share of a one-row plain step's weight bytes that its k experts (in every sparse layer)
  // are, in (0, 1).
  double expert_share = 0;

  bool sparse() const { return experts > 0; }
};

// From the config's parameter counts (every projection stored alike): the layers' attention or
// Gated DeltaNet, routers, shared experts and dense MLPs, and the LM head, against k experts in
// each sparse layer.
ExpertShape ExpertShapeOf(const DecoderConfig& config);

class ExpertCostModel {
 public:
  // `width`: W, the rows a request may verify; `max_requests`: N at most.
  ExpertCostModel(ExpertShape shape, int width, int32_t max_requests);

  // The first rows of a step's spans (any forward: prefill, verify).
  void AddOccupancy(const ExpertOccupancy& occupancy);
  // A verify step over `requests` requests and `draft_rows` rows past their anchors (0: anchors
  // only), whose draft rows were predicted to add `cost` (Σ c_j); `experts` the distinct experts
  // per sparse layer it woke, `verify_s` its time, `plain_s` a plain step's at that N (the
  // step-cost model's).
  void AddStep(int32_t requests, int64_t draft_rows, double cost, double experts, double verify_s,
               double plain_s);

  // [W]: c_j at position j (c_0 = 0: the anchor is verified anyway).
  const std::vector<double>& row_costs() const { return row_costs_; }
  // Whether a step of anchors only has been seen (the anchors' experts are known, and follow from
  // the nearest N seen at any other).
  bool ready() const;
  // u(m): the distinct experts per sparse layer among a span's first m rows (any m ≥ 0).
  double SpanExperts(double rows) const;
  // The distinct experts per sparse layer that prompt chunks of these rows wake together.
  double PromptExperts(std::span<const int32_t> chunks) const;
  // X_A: the anchors' experts at N with those of prompt chunks riding in the pass
  // (`prompt_experts`, PromptExperts; 0: none), per sparse layer.
  double AwakeExperts(int32_t requests, double prompt_experts = 0) const;
  // X̂ for N requests whose draft rows cost `cost`, in a pass with `prompt_experts`.
  double Experts(int32_t requests, double cost, double prompt_experts = 0) const;
  // The verify seconds of that step with `draft_rows` rows past the anchors, from a plain
  // step's `plain_s` at N; in a pass with `prompt_experts`, without the prompts' own time.
  double VerifySeconds(int32_t requests, double draft_rows, double cost, double plain_s,
                       double prompt_experts = 0) const;

  double sharing() const { return sigma_; }                         // σ
  double time_ratio() const { return rho_; }                        // ρ
  double row_seconds() const { return row_s_; }                     // r
  double AnchorExperts(int32_t requests) const;                     // X_N
  double SecondsPerExpert(int32_t requests, double plain_s) const;  // t

 private:
  void UpdateRowCosts();
  void UpdateAnchorExperts();
  // ρ and r from the drafted steps seen: y = verify − plain ≈ ρ · a + r · b, a the experts'
  // prior seconds (t / ρ · added), b the draft rows; a step slowed by other work counts at a
  // bound above the prediction.
  void FitTime(double a, double b, double y, double plain_s);

  ExpertShape shape_;
  int width_;
  // Per ExpertOccupancy point, decayed by the steps that bring spans of its length.
  std::vector<double> occupancy_sum_, occupancy_count_;
  // u's measured points (rows, experts) and its slope past the last.
  std::vector<double> points_rows_, points_experts_;
  double tail_slope_ = 0;
  std::vector<double> row_costs_;                        // [W]
  std::vector<double> anchor_seen_;     // [max_requests + 1]: X_N measured; < 0: not seen
  std::vector<double> anchor_experts_;  // [max_requests + 1]: X_N for every N (UpdateAnchorExperts)
  double sigma_ = 1.0, rho_ = 1.0, row_s_ = 0.0;
  bool sigma_seen_ = false;
  // Decayed sums of the time fit's normal equations: Σ a², Σ ab, Σ b², Σ ay, Σ by.
  double fit_aa_ = 0, fit_ab_ = 0, fit_bb_ = 0, fit_ay_ = 0, fit_by_ = 0;
  int fitted_steps_ = 0;
  double residual_s_ = 0;  // the typical |y − ρ a − r b|
};

}  // namespace dscale::budget
