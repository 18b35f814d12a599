// dscale dvl-allocate: runs the serving budget allocator (paper Algorithm 1) on acceptance
// probabilities given as JSON, for inspection and tests.
//
//   input   {"probs": [[p_1, ..., p_15], ...one row per request], "budget": M}
//           p_j in [0, 1] is the predicted probability that draft position j is accepted
//           (σ already applied); "budget" is optional (default round(verify_budget · 16 · N))
//           and must lie in [N, 16 · N].
//   output  {"seed": [...], "k": [...], "offsets": [...], "budget": M, "updates": |Δ₀|}

#include <iostream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "commands.h"
#include "core/status.h"
#include "dvl/budget_allocator.h"
#include "io/file_util.h"
#include "io/json_util.h"

namespace dscale::cli {
namespace {

struct DvlAllocateOptions {
  std::string scores_path;
  double verify_budget = dvl::kDefaultVerifyBudget;
};

struct AllocateRequest {
  std::vector<float> probs;  // [n, 15]
  int64_t n = 0;
  int64_t budget = -1;  // −1: from the fraction
};

// Inputs are read whole, and bounded: a regular file of at most kMaxInputBytes, or that many
// bytes of standard input.
constexpr size_t kMaxInputBytes = size_t{256} << 20;

Result<std::string> ReadText(const std::string& path) {
  if (path != "-") return ReadFileToString(path, kMaxInputBytes);
  std::string text;
  char chunk[1 << 16];
  while (std::cin.read(chunk, sizeof(chunk)) || std::cin.gcount() > 0) {
    text.append(chunk, static_cast<size_t>(std::cin.gcount()));
    if (text.size() > kMaxInputBytes) {
      return DataLoss("standard input: more than the " + std::to_string(kMaxInputBytes) +
                      "-byte limit");
    }
  }
  return text;
}

Status ParseProbRow(const nlohmann::json& row, size_t i, std::vector<float>* probs) {
  if (!row.is_array() || row.size() != dvl::kDraftPositions) {
    return InvalidArgument("probs[" + std::to_string(i) + "] must be an array of " +
                           std::to_string(dvl::kDraftPositions) + " numbers");
  }
  for (size_t j = 0; j < row.size(); ++j) {
    const std::string where = "probs[" + std::to_string(i) + "][" + std::to_string(j) + "]";
    const Result<double> p = ReadJsonNumber(row[j], where, 0.0, 1.0);
    if (!p.ok()) {
      return InvalidArgument(where + " must be a probability in [0, 1], got " +
                             DescribeJson(row[j]));
    }
    probs->push_back(static_cast<float>(*p));
  }
  return Status::Ok();
}

Result<AllocateRequest> ParseRequest(const std::string& text) {
  DSCALE_ASSIGN_OR_RETURN(const nlohmann::json doc, ParseJsonDocument(text));
  const nlohmann::json* rows = JsonMember(doc, "probs");
  if (rows == nullptr || !rows->is_array()) {
    return InvalidArgument("expected an object with a \"probs\" array");
  }
  AllocateRequest req;
  if (rows->empty()) return InvalidArgument("\"probs\" must hold at least one request");
  req.n = static_cast<int64_t>(rows->size());
  for (size_t i = 0; i < rows->size(); ++i) {
    DSCALE_RETURN_IF_ERROR(ParseProbRow((*rows)[i], i, &req.probs));
  }
  if (const nlohmann::json* budget = JsonMember(doc, "budget")) {
    // Checked as the JSON number it is; CheckBudget then bounds it by the requests' rows.
    const Result<int64_t> value =
        ReadJsonInt(*budget, "\"budget\"", std::numeric_limits<int64_t>::lowest(),
                    std::numeric_limits<int64_t>::max());
    if (!value.ok()) {
      return InvalidArgument("\"budget\" must be an integer, got " + DescribeJson(*budget));
    }
    req.budget = *value;
    DSCALE_RETURN_IF_ERROR(dvl::CheckBudget(req.n, dvl::kBlockWidth, req.budget));
  }
  return req;
}

Result<nlohmann::ordered_json> RunAllocate(const DvlAllocateOptions& opts) {
  DSCALE_ASSIGN_OR_RETURN(const std::string text, ReadText(opts.scores_path));
  Result<AllocateRequest> parsed = ParseRequest(text);
  if (!parsed.ok()) return parsed.status().WithContext(opts.scores_path);
  AllocateRequest req = std::move(parsed).value();
  if (req.budget < 0) {
    DSCALE_ASSIGN_OR_RETURN(req.budget,
                            dvl::BudgetFromFraction(req.n, dvl::kBlockWidth, opts.verify_budget));
  }
  DSCALE_ASSIGN_OR_RETURN(const dvl::Allocation a,
                          dvl::AllocateFromProbs(req.probs.data(), req.n, req.budget));
  return nlohmann::ordered_json{{"seed", a.seed},
                                {"k", a.k},
                                {"offsets", a.offsets},
                                {"budget", a.budget},
                                {"updates", a.updates}};
}

}  // namespace

void RegisterDvlAllocateCommand(CLI::App& app, int* exit_code) {
  auto opts = std::make_shared<DvlAllocateOptions>();
  CLI::App* cmd = app.add_subcommand(
      "dvl-allocate", "Run the DVL budget allocator on acceptance probabilities (JSON)");
  cmd->add_option("--scores", opts->scores_path,
                  "JSON file {\"probs\": [[15 probabilities] per request], \"budget\": M} "
                  "(\"-\" reads stdin)")
      ->required();
  cmd->add_option("--verify-budget", opts->verify_budget,
                  "budget fraction of W*N used when the file gives no budget")
      ->capture_default_str();
  cmd->callback([opts, exit_code] {
    Result<nlohmann::ordered_json> out = RunAllocate(*opts);
    if (!out.ok()) {
      std::cerr << "dscale dvl-allocate: " << out.status().message() << "\n";
      *exit_code = 1;
      return;
    }
    std::cout << out->dump() << "\n";
    *exit_code = 0;
  });
}

}  // namespace dscale::cli
