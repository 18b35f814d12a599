#pragma once
// DSpark's scheduler (Cheng et al., "DSpark", Algorithm 1, the synchronous form) on DScale's
// predictor: the baseline `--spec dspark`, "DSpark scheduler on the DFlash drafter".
//
// Confidences. DSpark's head gives conditional confidences c_{r,k} (draft k survives given
// drafts < k did) and ranks positions by survival a_{r,k} = Π_{j≤k} c_{r,j}. DScale's predictor
// is trained on "at least k drafts accepted", so σ(logit_k) already estimates survival; after
// its cumulative minimum q_{r,k} (dvl/budget_allocator.h) the conditionals are
// c_{r,k} = q_{r,k} / q_{r,k−1} (0 after a zero score) and their products give back
// a_{r,k} = q_{r,k}. There is no STS calibration step: the predictor is trained on the pair.
//
// Walk. Candidates (r, k), k = 1..W−1, with a_{r,k} > 0, ranked by a descending, then earlier
// position, then lower request index (rows are nonincreasing, so a request's positions come in
// order). Start with every request verifying its anchor: B = n, τ̂ = n, Θ = n · SPS(n). Take
// candidates in rank order — B += 1, τ̂ += a, Θ' = τ̂ · SPS(B) — while Θ' > Θ; stop at the first
// one that does not improve Θ (the early stop). k_r = 1 + the candidates of r taken.

#include <cstdint>
#include <functional>
#include <vector>

namespace dscale::budget {

// Conditional confidences c [n, width − 1] from prefix scores q [n, width] (q_{·,0} = 1).
void ConditionalConfidences(const float* q, int64_t n, int width, float* c);

struct DSparkScratch {
  struct Candidate {
    float survival;
    int32_t position;  // k, 1..W−1
    int32_t request;
  };
  std::vector<Candidate> candidates;
};

struct DSparkChoice {
  int64_t rows = 0;       // B = Σ k
  double tokens = 0;      // τ̂ at the stop
  double throughput = 0;  // Θ at the stop
};

// k [n] from survival a = prefix scores q [n, width] and `sps` (verification steps per second
// at B rows, positive).
DSparkChoice DSparkWalk(const float* q, int64_t n, int width,
                        const std::function<double(int64_t)>& sps, DSparkScratch* scratch,
                        int32_t* k);

}  // namespace dscale::budget
