#pragma once
// What a benchmark "mode" is: a length policy plus the runtime options the paper's experiments
// toggle. Lists come from --modes, or from the presets --ablation and --widths.

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace dscale::bench {

enum class TileRouting { kAuto, kOn, kOff };

// Which drafter a mode drafts with: --drafter's, --drafter's with its Domino head
// (docs/DOMINO.md), or --dspark-drafter's (a Qwen3DSparkModel: DSpark's own drafter).
enum class ModeDrafter { kMain, kDomino, kDSpark };

struct BenchMode {
  std::string label;          // how tables name it
  std::string policy;         // LengthPolicy text: none, dflash, fixed:K, dscale, dspark
  std::string verify_budget;  // dscale: "auto" or a fraction; empty: the run's --verify-budget
  bool tile_routing = true;
  bool runnable = true;      // false: listed with a note, not measured
  bool adaptive = false;     // the budget moves during a run (dscale:auto, dspark)
  ModeDrafter drafter = ModeDrafter::kMain;
  std::string note;
};

// "none,dflash,fixed:8,dscale,dscale:auto,dspark,domino,domino+dscale,dspark-drafter,
// dspark-drafter+dscale:auto": dscale:B runs dscale with --verify-budget B (auto or a fraction);
// dspark is labelled "DSpark scheduler on the DFlash drafter"; domino is the dflash policy on the
// drafter with its Domino head (full-block verification, as Domino's authors run it) and
// domino+dscale the dscale policy on it; dspark-drafter is DSpark as published (the dspark policy
// on --dspark-drafter, ranked by its confidence head) and dspark-drafter+P any other policy P on
// that drafter. Tile routing kAuto: off for the dflash policy (full blocks in one 128-row tile,
// as they ship), on for the others.
Result<std::vector<BenchMode>> ParseModes(const std::string& list, TileRouting tiles);
// The cumulative ablation: DFlash control → +tile routing → +DVL → +fixed-address workspaces and
// graphs. The last rung has no CPU counterpart (no graph capture on the CPU backend), so it is
// listed as not measured unless `graphs_available`.
std::vector<BenchMode> AblationModes(bool graphs_available);
// "4,6,8" → fixed:4, fixed:6, fixed:8 (uniform truncation, tile routing on).
Result<std::vector<BenchMode>> WidthModes(const std::string& widths);

// "8,16,32" → {8, 16, 32}; each at least 1.
Result<std::vector<int32_t>> ParsePositiveList(const std::string& text, const std::string& flag);
// "a,b" → {"a", "b"}, empty items dropped.
std::vector<std::string> SplitList(const std::string& text);

}  // namespace dscale::bench
