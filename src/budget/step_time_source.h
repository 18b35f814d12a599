#pragma once
// Where the auto budget's step times come from. A serving engine reads the clock (its timer
// around the step's stages); a test or a simulation plants another machine's costs, to check
// what the budget converges to there, without touching what the engine computes.

#include <cstdint>

#include "budget/simulation.h"
#include "budget/step_cost_model.h"

namespace dscale::budget {

class StepTimeSource {
 public:
  virtual ~StepTimeSource() = default;
  // Seconds this step spent drafting `drafted` requests and deciding so far, as this source
  // sees them; `measured_s` is the clock's.
  virtual double DraftSeconds(int64_t drafted, double measured_s) const = 0;
  // The step's sample, its counts as measured, its times as this source sees them.
  virtual StepSample Times(const StepSample& measured) const = 0;
};

// The clock's times, as measured.
class MeasuredStepTimes final : public StepTimeSource {
 public:
  double DraftSeconds(int64_t, double measured_s) const override { return measured_s; }
  StepSample Times(const StepSample& measured) const override { return measured; }
};

// The one MeasuredStepTimes (it holds nothing), for callers that were given no source.
inline const StepTimeSource& ClockStepTimes() {
  static const MeasuredStepTimes clock;
  return clock;
}

// A simulated pair's times for the step's counts (drafted requests, fed and verified rows);
// the pair must outlive the source.
class PlantedStepTimes final : public StepTimeSource {
 public:
  explicit PlantedStepTimes(const SimulatedPair& pair) : pair_(pair) {}
  double DraftSeconds(int64_t drafted, double) const override {
    return pair_.draft_seconds(drafted);
  }
  StepSample Times(const StepSample& measured) const override {
    StepSample s = measured;
    s.draft_s = s.drafted > 0 ? pair_.draft_seconds(s.drafted) : 0.0;
    s.feed_s = pair_.feed_seconds_per_row * double(s.fed_rows);
    s.verify_s = pair_.verify_seconds(s.rows);
    s.prompt_rows = 0;  // the planted verify time is the verify's alone
    return s;
  }

 private:
  const SimulatedPair& pair_;
};

}  // namespace dscale::budget
