#pragma once
// The verify-budget flags shared by generate, bench and serve:
//   --verify-budget F|auto   dscale: rows per step as a fraction of W·N (0.5: the paper's), or
//                            auto (budget/auto_budget.h)
//   --sps-table FILE         dspark: load the steps-per-second table instead of profiling it
//   --sps-table-out FILE     dspark: write the table profiled at start-up

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "budget/auto_budget.h"
#include "budget/sps_table.h"
#include "budget/verify_budget.h"
#include "core/status.h"
#include "model/drafter.h"
#include "model/target_model.h"
#include "spec/length_policy.h"

namespace CLI {
class App;
}  // namespace CLI

namespace dscale::cli {

struct BudgetFlags {
  std::string verify_budget = "0.5";
  std::string sps_table;
  std::string sps_table_out;

  // --verify-budget, checked when parsed (AddBudgetOptions), so this only fails if unchecked.
  Result<budget::VerifyBudget> VerifyBudget() const;
};

void AddBudgetOptions(CLI::App* cmd, BudgetFlags* flags);

// dspark's table (nullopt when `needed` is false): loaded from --sps-table, else profiled on
// `target` up to `max_rows` verified rows with the drafter's feature layers captured (a line
// to stderr says so and how long it took), then written to --sps-table-out when given.
Result<std::optional<budget::SpsTable>> SpsTableFor(const BudgetFlags& flags, bool needed,
                                                    TargetModel& target, const Drafter* drafter,
                                                    int64_t max_rows);

// auto's state for --json and results.json: mode, gain, calibration, steps and the fits.
nlohmann::json AutoBudgetJson(const budget::AutoBudgetSnapshot& a);

}  // namespace dscale::cli
