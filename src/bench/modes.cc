#include "bench/modes.h"

#include <sstream>

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

Result<std::vector<BenchMode>> ParseModes(const std::string& list, TileRouting tiles) {
  std::vector<BenchMode> modes;
  for (const std::string& listed : SplitList(list)) {
    // domino and domino+dscale: the dflash and dscale policies drafting through the head.
    const bool domino = listed == "domino" || listed.rfind("domino+", 0) == 0;
    const std::string item = listed == "domino"
                                 ? "dflash"
                                 : (domino ? listed.substr(std::string("domino+").size()) : listed);
    if (domino && item != "dflash" && item != "dscale") {
      return InvalidArgument("--modes " + listed + ": expected domino or domino+dscale");
    }
    std::string budget;
    std::string spec = item;
    if (item.rfind("dscale:", 0) == 0) {
      budget = item.substr(7);
      spec = "dscale";
      Result<budget::VerifyBudget> parsed = budget::VerifyBudget::Parse(budget);
      if (!parsed.ok()) return parsed.status().WithContext("--modes " + item);
      budget = parsed->Name();
    }
    Result<LengthPolicy> policy = LengthPolicy::Parse(spec);
    if (!policy.ok()) return policy.status().WithContext("--modes");
    const bool tiled =
        tiles == TileRouting::kAuto ? policy->mode != SpecMode::kDFlash : tiles == TileRouting::kOn;
    BenchMode mode{.label = domino
                                ? listed
                                : (budget.empty() ? policy->Name() : policy->Name() + ":" + budget),
                   .policy = policy->Name(),
                   .verify_budget = budget,
                   .tile_routing = tiled,
                   .adaptive = budget == "auto" || policy->mode == SpecMode::kDSpark,
                   .domino_head = domino};
    if (domino) {
      mode.note = policy->mode == SpecMode::kDFlash
                      ? "Domino: the DFlash drafter with its Domino head, full-block verification"
                      : "Domino head with DScale's verification: the DVL predictor trained on "
                        "the head's corrected drafts (--domino-predictor)";
    }
    if (policy->mode == SpecMode::kDSpark) {
      mode.note =
          "DSpark scheduler on the DFlash drafter: DSpark's walk with early stop over the DVL "
          "predictor's scores and a steps-per-second table profiled at start-up";
    }
    modes.push_back(std::move(mode));
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
