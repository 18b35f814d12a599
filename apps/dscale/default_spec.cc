#include "default_spec.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "io/dflash_config.h"
#include "io/file_util.h"
#include "predictor_loading.h"

namespace dscale::cli {
namespace {

// Whether the drafter folder's config.json declares DeepSpec's drafter with its confidence head.
// A peek only: a config that does not parse is left to the drafter's loader to report.
bool DeclaresConfidenceHead(const std::string& drafter_dir) {
  Result<std::string> text =
      ReadFileToString((std::filesystem::path(drafter_dir) / "config.json").string(), 1 << 20);
  if (!text.ok()) return false;
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return false;
  const auto architectures = j.find("architectures");
  const auto head = j.find("enable_confidence_head");
  return architectures != j.end() && architectures->is_array() && architectures->size() == 1 &&
         (*architectures)[0] == kDSparkArchitecture && head != j.end() && head->is_boolean() &&
         head->get<bool>();
}

}  // namespace

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
  if (DeclaresConfidenceHead(drafter_dir)) {
    return {.spec = "dspark",
            .reason = "a DSpark drafter with a confidence head and no predictor at " + bundled};
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
