#include "budget/expert_cost_model.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace dscale::budget {
namespace {

// Per step that brings spans of a point's length: the sharing of recent text counts most. A
// point no step brings keeps its average (a stretch of short verifies must not leave only the
// steep start of the curve to extrapolate from).
constexpr double kOccupancyDecay = 0.95;
constexpr double kSmoothing = 0.25;       // weight of the newest drafted step in σ
// The time fit: each drafted step's weight decays by kFitDecay per drafted step after it (about
// the last seven count), and the priors (ρ = 1, r = 0) weigh kPriorShare of the data's own
// weight in each direction: where the steps cannot tell experts from rows (one step, or rows
// and experts growing in proportion), a cost above the prior is split between them evenly.
constexpr double kFitDecay = 0.85;
constexpr double kPriorShare = 0.05;
constexpr double kMinRatio = 0.25, kMaxRatio = 4.0;  // ρ's range
// A step slowed by other work (noise is one-sided) must not move the fit for the next several
// steps: once kSettleSteps steps are fitted, a time above the model's prediction by more than
// kSlowedResiduals typical residuals (their decayed mean, at least kResidualFloor of a plain
// step) counts at that bound.
constexpr int kSettleSteps = 3;
constexpr double kSlowedResiduals = 3.0;
constexpr double kResidualFloor = 0.02;
constexpr double kResidualDecay = 0.9;
constexpr double kMinSharing = 0.05, kMaxSharing = 2.0;  // σ's range
// The least growth exponent of the anchors' expert landings in N (AnchorExperts).
constexpr double kMinAnchorGrowth = 0.25;

// What draft rows whose own experts number `cost` (σ-scaled) add to `awake` of E: each lands on
// an expert at random, so the share still asleep shrinks as they land — other requests' draft
// rows wake some of the same ones: (E − awake) · (1 − exp(−σ · C / E)), σ · C · (1 − awake / E)
// for few.
double AddedExperts(double e, double awake, double cost, double sigma) {
  return (e - awake) * -std::expm1(-sigma * cost / e);
}

// −ln(1 − x / E): the expected landings per expert that leave x of E awake (x capped half an
// expert short of E, so the landings stay finite).
double AnchorLandings(double e, double x) { return -std::log1p(-std::min(x, e - 0.5) / e); }

// The σ for which AddedExperts gives `added`.
double SharingFor(double e, double awake, double cost, double added) {
  const double asleep = e - awake;
  if (added >= asleep) return kMaxSharing;
  return std::clamp(-e / cost * std::log1p(-added / asleep), kMinSharing, kMaxSharing);
}

}  // namespace

ExpertShape ExpertShapeOf(const DecoderConfig& c) {
  if (!c.HasSparseLayers()) return {};
  const double h = double(c.hidden_size);
  const MoeConfig& m = c.moe;
  double dense = double(c.vocab_size) * h;  // the LM head
  double experts = 0;
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    if (c.IsLinearAttentionLayer(layer)) {
      const GatedDeltaNetConfig& l = c.hybrid.linear;
      dense += double(l.conv_dim() + 2 * l.value_dim() + 2 * l.value_heads) * h;
    } else {
      dense += double(c.q_proj_rows() + 2 * c.kv_dim() + c.q_dim()) * h;
    }
    if (!c.IsSparseLayer(layer)) {
      dense += 3.0 * double(c.intermediate_size) * h;
      continue;
    }
    dense += double(m.num_experts) * h;  // the router
    if (m.shared_expert_intermediate_size > 0) {
      dense += (3.0 * double(m.shared_expert_intermediate_size) + 1) * h;  // and its gate
    }
    experts += double(m.experts_per_token) * 3.0 * double(m.expert_intermediate_size) * h;
  }
  return {.experts = static_cast<int32_t>(m.num_experts),
          .top_k = static_cast<int32_t>(m.experts_per_token),
          .expert_share = experts / (dense + experts)};
}

ExpertCostModel::ExpertCostModel(ExpertShape shape, int width, int32_t max_requests)
    : shape_(shape),
      width_(width),
      occupancy_sum_(ExpertOccupancy::kPoints, 0.0),
      occupancy_count_(ExpertOccupancy::kPoints, 0.0),
      anchor_seen_(static_cast<size_t>(max_requests) + 1, -1.0),
      anchor_experts_(anchor_seen_.size(), 0.0) {
  DSCALE_CHECK(shape_.sparse() && shape_.top_k >= 1 && shape_.top_k <= shape_.experts);
  DSCALE_CHECK(shape_.expert_share > 0 && shape_.expert_share < 1 && width >= 2);
  UpdateRowCosts();
}

void ExpertCostModel::AddOccupancy(const ExpertOccupancy& occupancy) {
  if (occupancy.empty()) return;
  for (int p = 0; p < ExpertOccupancy::kPoints; ++p) {
    const auto i = static_cast<size_t>(p);
    if (occupancy.count[i] == 0) continue;
    occupancy_sum_[i] = kOccupancyDecay * occupancy_sum_[i] + occupancy.distinct[i];
    occupancy_count_[i] = kOccupancyDecay * occupancy_count_[i] + double(occupancy.count[i]);
  }
  UpdateRowCosts();
}

// The measured points of u, and the slope past the last one: its last increment per row (with
// only u(1), the prior: k new experts a row); then c_j = u(j + 1) − u(j) for j < W.
void ExpertCostModel::UpdateRowCosts() {
  points_rows_.clear();
  points_experts_.clear();
  for (int p = 0; p < ExpertOccupancy::kPoints; ++p) {
    const auto i = static_cast<size_t>(p);
    if (occupancy_count_[i] < 0.5) break;
    // Longer spans are fewer (a point averages those at least its length), so the averages
    // may dip where u itself never does: the points keep their running maximum.
    const double mean = occupancy_sum_[i] / occupancy_count_[i];
    points_rows_.push_back(ExpertOccupancy::kRows[i]);
    points_experts_.push_back(p == 0 ? mean : std::max(mean, points_experts_.back()));
  }
  if (points_rows_.empty()) {
    points_rows_ = {1.0};
    points_experts_ = {double(shape_.top_k)};
  }
  const size_t last = points_rows_.size() - 1;
  tail_slope_ = last >= 1 ? (points_experts_[last] - points_experts_[last - 1]) /
                                (points_rows_[last] - points_rows_[last - 1])
                          : double(shape_.top_k);
  row_costs_.assign(static_cast<size_t>(width_), 0.0);
  double previous = SpanExperts(1);
  for (int j = 1; j < width_; ++j) {
    const double next = SpanExperts(j + 1);
    row_costs_[static_cast<size_t>(j)] = next - previous;
    previous = next;
  }
}

// u(m): the measured points, linear between them (and from 0 to the first); past the last one
// measured, its slope goes on; at most E.
double ExpertCostModel::SpanExperts(double rows) const {
  if (rows <= 0) return 0;
  const double e = shape_.experts;
  const std::vector<double>& xs = points_rows_;
  const std::vector<double>& ys = points_experts_;
  double value;
  if (rows >= xs.back()) {
    value = ys.back() + std::max(0.0, tail_slope_) * (rows - xs.back());
  } else if (rows <= xs.front()) {
    value = ys.front() * rows / xs.front();
  } else {
    size_t hi = 1;
    while (xs[hi] < rows) ++hi;
    const double f = (rows - xs[hi - 1]) / (xs[hi] - xs[hi - 1]);
    value = ys[hi - 1] + f * (ys[hi] - ys[hi - 1]);
  }
  return std::min(value, e);
}

double ExpertCostModel::PromptExperts(std::span<const int32_t> chunks) const {
  const double e = shape_.experts;
  double asleep = 1.0;
  for (const int32_t rows : chunks) asleep *= 1.0 - SpanExperts(rows) / e;
  return e * (1.0 - asleep);
}

bool ExpertCostModel::ready() const {
  return std::any_of(anchor_seen_.begin(), anchor_seen_.end(), [](double x) { return x >= 0; });
}

// X_N for every N from the N seen: as seen where seen; elsewhere carried from the nearest N₀
// seen, the landings growing as N^γ — γ = 1 where other requests' anchors share experts by chance
// only, less where they share more (one text's language routes alike), fitted between the
// smallest and largest N seen.
void ExpertCostModel::UpdateAnchorExperts() {
  const auto size = static_cast<int32_t>(anchor_seen_.size());
  const double e = shape_.experts;
  const auto seen = [&](int32_t at) { return anchor_seen_[static_cast<size_t>(at)]; };
  int32_t lo = -1, hi = -1;
  for (int32_t at = 1; at < size; ++at) {
    if (seen(at) < 0) continue;
    if (lo < 0) lo = at;
    hi = at;
  }
  if (lo < 0) return;
  double gamma = 1.0;
  if (hi > lo) {
    gamma = std::clamp(std::log(AnchorLandings(e, seen(hi)) / AnchorLandings(e, seen(lo))) /
                           std::log(double(hi) / double(lo)),
                       kMinAnchorGrowth, 1.0);
  }
  for (int32_t n = 1; n < size; ++n) {
    int32_t nearest = lo;  // ties to the smaller N
    for (int32_t at = lo; at <= hi; ++at) {
      if (seen(at) >= 0 && std::abs(at - n) < std::abs(nearest - n)) nearest = at;
    }
    const double l =
        AnchorLandings(e, seen(nearest)) * std::pow(double(n) / double(nearest), gamma);
    anchor_experts_[static_cast<size_t>(n)] = nearest == n ? seen(n) : -e * std::expm1(-l);
  }
}

double ExpertCostModel::AnchorExperts(int32_t requests) const {
  const int32_t n = std::clamp(requests, 0, static_cast<int32_t>(anchor_experts_.size()) - 1);
  if (n == 0) return 0;
  if (!ready()) return std::min<double>(shape_.experts, double(shape_.top_k) * requests);
  return anchor_experts_[static_cast<size_t>(n)];
}

double ExpertCostModel::AwakeExperts(int32_t requests, double prompt_experts) const {
  const double e = shape_.experts, anchors = AnchorExperts(requests);
  return e - (e - anchors) * (1.0 - std::clamp(prompt_experts, 0.0, e) / e);
}

double ExpertCostModel::Experts(int32_t requests, double cost, double prompt_experts) const {
  const double awake = AwakeExperts(requests, prompt_experts);
  return awake + AddedExperts(shape_.experts, awake, std::max(0.0, cost), sigma_);
}

double ExpertCostModel::SecondsPerExpert(int32_t requests, double plain_s) const {
  const double share = shape_.expert_share, per_expert = share / shape_.top_k;
  return rho_ * plain_s * per_expert / ((1.0 - share) + AnchorExperts(requests) * per_expert);
}

double ExpertCostModel::VerifySeconds(int32_t requests, double draft_rows, double cost,
                                      double plain_s, double prompt_experts) const {
  const double added =
      Experts(requests, cost, prompt_experts) - AwakeExperts(requests, prompt_experts);
  return plain_s + SecondsPerExpert(requests, plain_s) * std::max(0.0, added) +
         row_s_ * std::max(0.0, draft_rows);
}

void ExpertCostModel::AddStep(int32_t requests, int64_t draft_rows, double cost, double experts,
                              double verify_s, double plain_s) {
  if (experts <= 0 || requests <= 0) return;
  const auto n = static_cast<size_t>(std::min<int32_t>(requests, int32_t(anchor_seen_.size()) - 1));
  if (draft_rows <= 0) {
    double& x = anchor_seen_[n];
    x = x < 0 ? experts : (1 - kSmoothing) * x + kSmoothing * experts;
    UpdateAnchorExperts();
    return;
  }
  if (!ready()) return;
  const double e = shape_.experts, anchors = AnchorExperts(requests);
  const double added = std::max(0.0, experts - anchors);
  if (cost * (1.0 - anchors / e) >= 0.5) {  // at least half an expert predicted
    const double ratio = SharingFor(e, anchors, cost, added);
    sigma_ = sigma_seen_ ? (1 - kSmoothing) * sigma_ + kSmoothing * ratio : ratio;
    sigma_seen_ = true;
  }
  const double prior_s = SecondsPerExpert(requests, plain_s) / rho_ * added;
  FitTime(prior_s, double(draft_rows), verify_s - plain_s, plain_s);
}

// Minimises Σ w (y − ρ a − r b)² + λ_a (ρ − 1)² + λ_b r² over ρ in [kMinRatio, kMaxRatio] and
// r ≥ 0 (λ the priors' share of Σ w a², Σ w b²): the unconstrained solution of the 2 × 2 normal
// equations, else the best with one of them held at its bound.
void ExpertCostModel::FitTime(double a, double b, double y, double plain_s) {
  const double predicted = rho_ * a + row_s_ * b;
  if (fitted_steps_ >= kSettleSteps) {
    const double scale = std::max(residual_s_, kResidualFloor * plain_s);
    y = std::min(y, predicted + kSlowedResiduals * scale);
    residual_s_ = kResidualDecay * residual_s_ + (1 - kResidualDecay) * std::abs(y - predicted);
  } else {
    residual_s_ = (residual_s_ * fitted_steps_ + std::abs(y - predicted)) / (fitted_steps_ + 1);
  }
  ++fitted_steps_;
  fit_aa_ = kFitDecay * fit_aa_ + a * a;
  fit_ab_ = kFitDecay * fit_ab_ + a * b;
  fit_bb_ = kFitDecay * fit_bb_ + b * b;
  fit_ay_ = kFitDecay * fit_ay_ + a * y;
  fit_by_ = kFitDecay * fit_by_ + b * y;
  const double aa = (1 + kPriorShare) * fit_aa_, bb = (1 + kPriorShare) * fit_bb_;
  const double ay = fit_ay_ + kPriorShare * fit_aa_;  // the prior ρ = 1
  const auto rows_given = [&](double rho) {
    return bb > 0 ? std::max(0.0, (fit_by_ - rho * fit_ab_) / bb) : 0.0;
  };
  double rho = rho_, row_s = 0.0;
  if (aa <= 0) {  // no step woke an expert past its anchors: the rows alone
    row_s = rows_given(rho);
  } else {
    // det > 0: the priors' share keeps the system regular ((Σ ab)² ≤ Σ a² · Σ b², by
    // Cauchy–Schwarz).
    const double det = aa * bb - fit_ab_ * fit_ab_;
    rho = (ay * bb - fit_ab_ * fit_by_) / det;
    row_s = (aa * fit_by_ - fit_ab_ * ay) / det;
    if (row_s < 0) {
      row_s = 0;
      rho = ay / aa;
    }
  }
  if (rho < kMinRatio || rho > kMaxRatio) {
    rho = std::clamp(rho, kMinRatio, kMaxRatio);
    row_s = rows_given(rho);
  }
  rho_ = rho;
  row_s_ = row_s;
}

}  // namespace dscale::budget
