// dscale logits: one prefill of the given ids, every position's full logits row as JSON.

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_util.h"
#include "commands.h"
#include "model/decoder_model.h"

namespace dscale::cli {
namespace {

struct LogitsArgs {
  std::string model;
  std::string ids;
  WeightsMode weights = WeightsMode::kAsStored;
  cpu::Bf16Activations activations = DefaultActivations();
  cpu::Int8Activations int8_activations = kDefaultInt8Activations;
  KvDtype kv_dtype = KvDtype::kBf16;
};

int RunLogits(const LogitsArgs& args) {
  Result<std::vector<int32_t>> ids = ParseIdList(args.ids, "--ids");
  if (!ids.ok()) return ReportError("logits", ids.status());
  Result<DecoderModel> model = DecoderModel::Load(
      args.model, args.weights, {.bf16 = args.activations, .int8 = args.int8_activations});
  if (!model.ok()) return ReportError("logits", model.status());
  if (Status s = CheckTokenIds(*ids, model->config().vocab_size, "--ids"); !s.ok()) {
    return ReportError("logits", s);
  }

  const auto n = static_cast<int32_t>(ids->size());
  constexpr int32_t kPageSize = 16;
  PagedKvCache cache(
      model->KvShape(kPageSize, (n + kPageSize - 1) / kPageSize).WithDtype(args.kv_dtype));
  const int32_t seq = cache.AddSequence();
  if (Status s = cache.Reserve(seq, n); !s.ok()) return ReportError("logits", s);
  StepBatch batch;
  AddRequestRows(batch, seq, 0, *ids, cache, /*all_logits=*/true);
  ForwardOutput out;
  if (Status s = model->Forward(batch, cache, &out); !s.ok()) {
    return ReportError("logits", s.WithContext("--ids"));
  }

  const int64_t vocab = model->config().vocab_size;
  nlohmann::json rows = nlohmann::json::array();
  for (int32_t r = 0; r < n; ++r) {
    rows.push_back(
        std::vector<float>(out.logits.begin() + r * vocab, out.logits.begin() + (r + 1) * vocab));
  }
  std::cout << nlohmann::json{{"logits", rows}}.dump() << "\n";
  return 0;
}

}  // namespace

void RegisterLogitsCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<LogitsArgs>();
  CLI::App* cmd = app.add_subcommand("logits", "Print full-vocabulary logits of one prefill");
  cmd->add_option("--model", args->model, "Checkpoint directory")->required();
  cmd->add_option("--ids", args->ids, "Comma-separated token ids, e.g. 1,2,3")->required();
  AddWeightsOption(cmd, &args->weights);
  AddActivationsOption(cmd, &args->activations);
  AddInt8ActivationsOption(cmd, &args->int8_activations);
  AddKvDtypeOption(cmd, &args->kv_dtype);
  cmd->callback([args, exit_code] { *exit_code = RunLogits(*args); });
}

}  // namespace dscale::cli
