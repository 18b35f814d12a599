// dscale draft: prefill the ids, take the target's greedy next token as the anchor, run one
// drafting step, print the candidates, their draft logits and (a DSpark drafter with a confidence
// head) their confidence logits.

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_util.h"
#include "commands.h"
#include "kernels/cpu/softmax.h"
#include "model/dflash_drafter.h"

namespace dscale::cli {
namespace {

struct DraftArgs {
  std::string target;
  std::string drafter;
  std::string ids;
  KvDtype kv_dtype = KvDtype::kBf16;
  DrafterHead head = DrafterHead::kNone;
  DraftVocabChoice draft_vocab = kDefaultDraftVocab;
  cpu::Bf16Activations activations = DefaultActivations();
};

int RunDraft(const DraftArgs& args) {
  Result<std::vector<int32_t>> ids = ParseIdList(args.ids, "--ids");
  if (!ids.ok()) return ReportError("draft", ids.status());
  Result<DecoderModel> target =
      DecoderModel::Load(args.target, WeightsMode::kAsStored, {.bf16 = args.activations});
  if (!target.ok()) return ReportError("draft", target.status());
  if (Status s = CheckTokenIds(*ids, target->config().vocab_size, "--ids"); !s.ok()) {
    return ReportError("draft", s);
  }
  Result<DFlashDrafter> drafter =
      DFlashDrafter::Load(args.drafter, *target, args.head, args.draft_vocab);
  if (!drafter.ok()) return ReportError("draft", drafter.status());

  const auto n = static_cast<int32_t>(ids->size());
  const int32_t block = drafter->block_size();
  constexpr int32_t kPageSize = 16;
  PagedKvCache cache(
      target->KvShape(kPageSize, (n + block + kPageSize - 1) / kPageSize).WithDtype(args.kv_dtype));
  drafter->Bind(cache);
  const int32_t seq = cache.AddSequence();
  if (Status s = cache.Reserve(seq, n + block); !s.ok()) return ReportError("draft", s);
  StepBatch batch;
  AddRequestRows(batch, seq, 0, *ids, cache, /*all_logits=*/false);
  ForwardOutput out;
  batch.capture_layers = drafter->feature_layers();
  if (Status s = target->Forward(batch, cache, &out); !s.ok()) {
    return ReportError("draft", s.WithContext("--ids"));
  }
  drafter->AppendContext(
      {.features = out.features, .positions = batch.positions(), .slots = batch.kv_slots()});
  int32_t bonus = 0;
  cpu::ArgmaxRows(out.logits.data(), 1, target->config().vocab_size, &bonus);

  DraftOutput draft;
  const DraftRequest request{.seq = seq, .ctx_len = n, .anchor = bonus, .committed = *ids};
  if (Status s = drafter->Draft(std::span(&request, 1), cache, 16, &draft); !s.ok()) {
    return ReportError("draft", s);
  }
  const int64_t vocab = drafter->draft_vocab_size();
  nlohmann::json logits = nlohmann::json::array();
  for (int32_t j = 0; j < draft.candidates; ++j) {
    logits.push_back(std::vector<float>(draft.logits.begin() + j * vocab,
                                        draft.logits.begin() + (j + 1) * vocab));
  }
  nlohmann::json result{{"bonus", bonus}, {"draft", draft.tokens}, {"draft_logits", logits}};
  // One raw logit per candidate (σ of it: the head's estimate that the candidate is accepted
  // given those before it were).
  if (!draft.confidence.empty()) result["confidence"] = draft.confidence;
  // With a reduced vocabulary, column i of draft_logits is target token draft_vocab[i].
  if (const DraftVocab* subset = drafter->draft_vocab()) result["draft_vocab"] = subset->token_ids;
  std::cout << result.dump() << "\n";
  return 0;
}

}  // namespace

void RegisterDraftCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<DraftArgs>();
  CLI::App* cmd = app.add_subcommand("draft", "Prefill, then one drafting step");
  cmd->add_option("--target", args->target, "Target checkpoint directory")->required();
  cmd->add_option("--drafter", args->drafter, "DFlash or DSpark drafter checkpoint directory")
      ->required();
  cmd->add_option("--ids", args->ids, "Comma-separated token ids")->required();
  AddKvDtypeOption(cmd, &args->kv_dtype);
  AddDrafterHeadOption(cmd, &args->head);
  AddDraftVocabOption(cmd, &args->draft_vocab);
  AddActivationsOption(cmd, &args->activations);
  cmd->callback([args, exit_code] { *exit_code = RunDraft(*args); });
}

}  // namespace dscale::cli
