#include "budget_options.h"

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>

#include "engine/sps_profile.h"

namespace dscale::cli {

Result<budget::VerifyBudget> BudgetFlags::VerifyBudget() const {
  return budget::VerifyBudget::Parse(verify_budget);
}

void AddBudgetOptions(CLI::App* cmd, BudgetFlags* flags) {
  cmd->add_option("--verify-budget", flags->verify_budget,
                  "dscale: verified rows per step as a fraction of W·N in (0, 1], or auto (per "
                  "step, what maximises committed tokens per second under a step-cost model "
                  "fitted online; a mixture of experts' rows priced by the experts they wake), "
                  "or auto-rows (rows priced by their count alone)")
      ->check([](const std::string& text) {
        const Result<budget::VerifyBudget> parsed = budget::VerifyBudget::Parse(text);
        return parsed.ok() ? std::string() : parsed.status().message();
      })
      ->capture_default_str();
  cmd->add_option("--sps-table", flags->sps_table,
                  "dspark: steps-per-second table to load (JSON) instead of profiling at start-up");
  cmd->add_option("--sps-table-out", flags->sps_table_out,
                  "dspark: write the table profiled at start-up here");
}

Result<std::optional<budget::SpsTable>> SpsTableFor(const BudgetFlags& flags, bool needed,
                                                    TargetModel& target, const Drafter* drafter,
                                                    int64_t max_rows) {
  if (!needed) return std::optional<budget::SpsTable>();
  if (!flags.sps_table.empty()) {
    Result<budget::SpsTable> loaded = budget::LoadSpsTable(flags.sps_table);
    if (!loaded.ok()) return loaded.status().WithContext("--sps-table");
    return std::optional<budget::SpsTable>(std::move(*loaded));
  }
  SpsProfileOptions options{.max_tokens = max_rows};
  if (drafter != nullptr) {
    options.block = drafter->block_size();
    options.capture_layers = drafter->feature_layers();
  }
  const auto start = std::chrono::steady_clock::now();
  DSCALE_ASSIGN_OR_RETURN(budget::SpsTable table, ProfileStepsPerSecond(target, options));
  std::fprintf(stderr,
               "dspark: profiled steps per second at %zu verify sizes up to %lld rows "
               "in %.1f s\n",
               table.tokens.size(), static_cast<long long>(max_rows),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  if (!flags.sps_table_out.empty()) {
    Status saved = budget::SaveSpsTable(table, flags.sps_table_out);
    if (!saved.ok()) return saved.WithContext("--sps-table-out");
  }
  return std::optional<budget::SpsTable>(std::move(table));
}

nlohmann::json AutoBudgetJson(const budget::AutoBudgetSnapshot& a) {
  const auto fit = [](const budget::RooflineFit& f) {
    return nlohmann::json{{"a", f.a}, {"b", f.b}, {"c", f.c}, {"knee", f.knee()}};
  };
  nlohmann::json j = {{"mode", budget::AutoModeName(a.mode)},
                      {"last_drafted_rows", a.last_rows},
                      {"last_drafted_requests", a.last_drafted},
                      {"gain", a.gain},
                      {"calibration", a.calibration},
                      {"drafted_steps", a.drafted_steps},
                      {"plain_steps", a.plain_steps},
                      {"verify_seconds_fit", fit(a.verify_fit)},
                      {"verify_rows_seen", {a.verify_min_rows, a.verify_max_rows}},
                      {"verify_bins", a.verify_bins},
                      {"verify_samples", a.verify_samples},
                      {"draft_seconds_fit", fit(a.draft_fit)},
                      {"feed_seconds_per_row", a.feed_s_per_row}};
  if (a.experts_priced) {
    j["experts"] = {{"sharing", a.expert_sharing},
                    {"time_ratio", a.expert_time_ratio},
                    {"row_seconds", a.expert_row_s},
                    {"own_rows", a.expert_own_rows}};
  }
  return j;
}

}  // namespace dscale::cli
