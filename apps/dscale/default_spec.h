#pragma once
// The length policy generate and serve run when --spec is not given: the fastest lossless one the
// folders allow. Plain decoding without a drafter; with a drafter and a DVL predictor (--predictor,
// or the drafter folder's own file) DScale with the auto verify budget, which measures the step
// costs and turns to plain decoding where speculation does not pay; with a DSpark drafter that
// has a confidence head and no predictor, DSpark's own scheduler (dspark); with another drafter
// and no predictor, DFlash.

#include <string>

#include "budget_options.h"
#include "model/domino_head.h"

namespace CLI {
class App;
}  // namespace CLI

namespace dscale::cli {

struct DefaultSpec {
  std::string spec;           // --spec's value
  std::string verify_budget;  // --verify-budget's value for dscale ("auto"); empty otherwise
  std::string reason;         // why, for the start-up line
};

DefaultSpec ChooseDefaultSpec(const std::string& drafter_dir, const std::string& predictor_flag,
                              DrafterHead head);

// When `cmd` was given no --spec: sets `spec` (and `budget`'s verify budget, unless
// --verify-budget was given) to ChooseDefaultSpec's, and says which on stderr
// ("dscale <command>: --spec ... (reason; --spec chooses another)").
void ApplyDefaultSpec(const CLI::App& cmd, const char* command, const std::string& drafter_dir,
                      const std::string& predictor_flag, DrafterHead head, std::string* spec,
                      BudgetFlags* budget);

}  // namespace dscale::cli
