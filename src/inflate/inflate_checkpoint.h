#pragma once
// `dscale inflate` end to end: validates the source pair, plans the inflation, and writes the large
// target and drafter as ordinary Hugging Face checkpoints (config.json, safetensors sharded when
// large, the source's tokenizer and other files copied, and the drafter's DVL predictors inflated
// when it has them). Tensors are made and written a block of rows at a time, so memory stays at
// the source pair plus a few MB whatever the large shape. A DSpark drafter is written in
// DeepSpec's layout: its heads inflated, its copies of the target's embedding and LM head those of
// the large target, its confidence_calibration.json copied (the confidence logits are the
// source's).

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "inflate/inflate_plan.h"

namespace dscale {

// The drafter folder's DVL predictors (for the backbone's drafts, and for the Domino head's when
// the drafter has one): inflated for the large pair, never copied as they are (a predictor is
// built for one drafter width).
inline constexpr const char* kPredictorFileNames[] = {"predictor.bin", "predictor-domino.bin"};

// One drafter of the target: its source folder and the folder its inflation is written to.
struct DrafterFolders {
  std::string source;  // a DFlash or DSpark drafter of the target
  std::string out;     // created; must not exist or be empty
};

struct InflateOptions {
  std::string target_dir;  // the source target
  // Its drafters, at least one. The first places the target's layers (docs/INFLATE.md,
  // "Placement"); the others read the same large target (PlaceBeside), so one inflated target
  // serves them all.
  std::vector<DrafterFolders> drafters;
  InflateShape shape;
  std::string out_target;                    // created; must not exist or be empty
  uint64_t max_shard_bytes = 5'000'000'000;  // Hugging Face's default shard size
};

struct InflatedDrafter {
  InflatePlan plan;                     // the target's part is the same in every drafter's plan
  uint64_t bytes = 0;                   // tensor data written
  std::vector<std::string> predictors;  // the predictor files inflated too
};

struct InflateResult {
  uint64_t target_bytes = 0;              // tensor data written
  std::vector<InflatedDrafter> drafters;  // in InflateOptions::drafters' order
  const InflatePlan& plan() const { return drafters.front().plan; }
};

// Errors name the directory, file, tensor or field: a source that does not load, a drafter that
// does not belong to the target, no drafter, a shape smaller than the source (PlanInflation), an
// output directory that is not empty or is one of the others.
Result<InflateResult> Inflate(const InflateOptions& options);

}  // namespace dscale
