#include "default_spec.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>

#include "predictor_loading.h"

namespace dscale::cli {

DefaultSpec ChooseDefaultSpec(const std::string& drafter_dir, const std::string& predictor_flag,
                              DrafterHead head) {
  if (drafter_dir.empty()) return {.spec = "none", .reason = "no --drafter"};
  if (!predictor_flag.empty()) {
    return {.spec = "dscale", .verify_budget = "auto", .reason = "--predictor given"};
  }
  const std::string bundled = BundledPredictorPath(drafter_dir, head);
  std::error_code error;
  if (std::filesystem::is_regular_file(bundled, error)) {
    return {.spec = "dscale", .verify_budget = "auto", .reason = "predictor " + bundled};
  }
  return {.spec = "dflash", .reason = "no predictor at " + bundled};
}

void ApplyDefaultSpec(const CLI::App& cmd, const char* command, const std::string& drafter_dir,
                      const std::string& predictor_flag, DrafterHead head, std::string* spec,
                      BudgetFlags* budget) {
  if (cmd.count("--spec") > 0) return;
  const DefaultSpec chosen = ChooseDefaultSpec(drafter_dir, predictor_flag, head);
  *spec = chosen.spec;
  std::string line = "--spec " + chosen.spec;
  if (!chosen.verify_budget.empty()) {
    if (cmd.count("--verify-budget") == 0) budget->verify_budget = chosen.verify_budget;
    line += " --verify-budget " + budget->verify_budget;
  }
  std::fprintf(stderr, "dscale %s: %s (%s; --spec chooses another)\n", command, line.c_str(),
               chosen.reason.c_str());
}

}  // namespace dscale::cli
