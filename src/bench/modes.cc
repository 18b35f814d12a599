#include "bench/modes.h"

#include <algorithm>
#include <sstream>
#include <string_view>
#include <tuple>
#include <utility>

#include "budget/verify_budget.h"
#include "spec/length_policy.h"

namespace dscale::bench {

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    const size_t first = item.find_first_not_of(' ');
    if (first == std::string::npos) continue;
    item = item.substr(first, item.find_last_not_of(' ') - first + 1);
    items.push_back(item);
  }
  return items;
}

Result<std::vector<int32_t>> ParsePositiveList(const std::string& text, const std::string& flag) {
  std::vector<int32_t> out;
  for (const std::string& item : SplitList(text)) {
    size_t used = 0;
    int value = 0;
    try {
      value = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || value < 1) {
      return InvalidArgument(flag + ": '" + item + "' is not a positive integer");
    }
    out.push_back(value);
  }
  if (out.empty()) return InvalidArgument(flag + ": empty list");
  return out;
}

namespace {

constexpr std::string_view kDSparkDrafter = "dspark-drafter";

// The drafter a listed mode names and the policy text after it: "domino" → (kDomino, dflash),
// "domino+P" → (kDomino, P), "dspark-drafter" → (kDSpark, dspark), "dspark-drafter+P" →
// (kDSpark, P), anything else → (kMain, itself).
Result<std::pair<ModeDrafter, std::string>> SplitDrafter(const std::string& listed) {
  for (const auto& [prefix, drafter, alone] :
       {std::tuple{std::string_view("domino"), ModeDrafter::kDomino, "dflash"},
        std::tuple{kDSparkDrafter, ModeDrafter::kDSpark, "dspark"}}) {
    if (listed == prefix) return std::pair{drafter, std::string(alone)};
    if (listed.size() > prefix.size() + 1 && listed.compare(0, prefix.size(), prefix) == 0 &&
        listed[prefix.size()] == '+') {
      return std::pair{drafter, listed.substr(prefix.size() + 1)};
    }
  }
  return std::pair{ModeDrafter::kMain, listed};
}

std::string ModeNote(ModeDrafter drafter, SpecMode mode) {
  switch (drafter) {
    case ModeDrafter::kDomino:
      return mode == SpecMode::kDFlash
                 ? "Domino: the DFlash drafter with its Domino head, full-block verification"
                 : "Domino head with this policy: the DVL predictor trained on the head's "
                   "corrected drafts (--domino-predictor)";
    case ModeDrafter::kDSpark:
      return mode == SpecMode::kDSpark
                 ? "DSpark as published: its drafter (Markov head), its confidence head "
                   "(calibrated), its scheduler over a steps-per-second table"
                 : "this policy on DSpark's drafter (--dspark-drafter)";
    case ModeDrafter::kMain:
      return mode == SpecMode::kDSpark
                 ? "DSpark scheduler on the DFlash drafter: DSpark's walk with early stop over "
                   "the DVL predictor's scores and a steps-per-second table profiled at start-up"
                 : "";
  }
  return "";
}

}  // namespace

Result<std::vector<BenchMode>> ParseModes(const std::string& list, TileRouting tiles) {
  std::vector<BenchMode> modes;
  for (const std::string& listed : SplitList(list)) {
    DSCALE_ASSIGN_OR_RETURN(const auto split, SplitDrafter(listed));
    const auto& [drafter, item] = split;
    if (drafter == ModeDrafter::kDomino && item != "dflash" && item != "dscale") {
      return InvalidArgument("--modes " + listed + ": expected domino or domino+dscale");
    }
    std::string budget;
    bool automatic = false;
    std::string spec = item;
    if (item.rfind("dscale:", 0) == 0) {
      budget = item.substr(7);
      spec = "dscale";
      Result<budget::VerifyBudget> parsed = budget::VerifyBudget::Parse(budget);
      if (!parsed.ok()) return parsed.status().WithContext("--modes " + item + ", --verify-budget");
      budget = parsed->Name();
      automatic = parsed->automatic;
    }
    Result<LengthPolicy> policy = LengthPolicy::Parse(spec);
    if (!policy.ok()) return policy.status().WithContext("--modes " + listed);
    const bool tiled =
        tiles == TileRouting::kAuto ? policy->mode != SpecMode::kDFlash : tiles == TileRouting::kOn;
    const std::string name = budget.empty() ? policy->Name() : policy->Name() + ":" + budget;
    const std::string label = drafter == ModeDrafter::kMain ? name : listed;
    // The report keys cells by label: a second run of a mode would overwrite the first's.
    if (std::ranges::any_of(modes, [&](const BenchMode& m) { return m.label == label; })) {
      return InvalidArgument("--modes " + listed + ": " + label +
                             " is listed twice (for alternating runs of the modes give --repeats)");
    }
    modes.push_back({.label = label,
                     .policy = policy->Name(),
                     .verify_budget = budget,
                     .tile_routing = tiled,
                     .adaptive = automatic || policy->mode == SpecMode::kDSpark,
                     .drafter = drafter,
                     .note = ModeNote(drafter, policy->mode)});
  }
  if (modes.empty()) return InvalidArgument("--modes: empty list");
  return modes;
}

std::vector<BenchMode> AblationModes(bool graphs_available) {
  std::vector<BenchMode> modes = {
      {.label = "dflash-control", .policy = "dflash", .tile_routing = false},
      {.label = "+tile-routing", .policy = "dflash", .tile_routing = true},
      {.label = "+dvl", .policy = "dscale", .tile_routing = true},
      {.label = "+graphs", .policy = "dscale", .tile_routing = true}};
  if (!graphs_available) {
    modes.back().runnable = false;
    modes.back().note =
        "n/a on CPU: the CPU backend has no graph capture or fixed-address workspace pool to "
        "switch on, so this rung equals +dvl and is not measured";
  }
  return modes;
}

Result<std::vector<BenchMode>> WidthModes(const std::string& widths) {
  DSCALE_ASSIGN_OR_RETURN(std::vector<int32_t> ks, ParsePositiveList(widths, "--widths"));
  std::vector<BenchMode> modes;
  for (int32_t k : ks) {
    const std::string text = "fixed:" + std::to_string(k);
    Result<LengthPolicy> policy = LengthPolicy::Parse(text);
    if (!policy.ok()) return policy.status().WithContext("--widths");
    modes.push_back({.label = text, .policy = text, .tile_routing = true});
  }
  return modes;
}

}  // namespace dscale::bench
