// dscale collect: full-width DFlash runs over prompt files, logging for every live request of
// every verification step how many drafts full-width verification accepted, with the DVL
// features (--out: the predictor's training data) and the drafter's confidence-head logits
// (--confidence-out: a DSpark drafter's calibration data). Formats: docs/TRACE_FORMAT.md.

#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli_util.h"
#include "commands.h"
#include "dvl/features.h"
#include "engine/engine.h"
#include "model/dflash_drafter.h"
#include "model_options.h"
#include "predictor_loading.h"
#include "prompt_input.h"
#include "runtime.h"
#include "train/confidence_traces.h"
#include "train/trace_file.h"

namespace dscale::cli {
namespace {

struct CollectArgs {
  ModelOptions models;
  std::vector<std::string> prompt_files;
  std::string out;             // DVL traces; empty: none
  std::string confidence_out;  // confidence traces; empty: none
  int32_t concurrency = 16;
  int32_t max_tokens = 256;
  int64_t kv_tokens = 0;  // 0: sized to the prompts (KvTokensForPrompts)
  KvDtype kv_dtype = KvDtype::kBf16;
  uint64_t projection_seed = 1;
};

// Writes one record per request of each observed step to each trace it was given.
class TraceCollector {
 public:
  // `writer`: the DVL traces (with the features' projections); `confidence_out`: where the
  // confidence traces of `positions` logits go at Finish. Either may be absent.
  TraceCollector(std::optional<train::TraceWriter> writer, dvl::Projections projections,
                 std::string confidence_out, int32_t positions)
      : writer_(std::move(writer)),
        projections_(std::move(projections)),
        confidence_out_(std::move(confidence_out)) {
    confidence_.positions = positions;
  }

  void SetPromptId(RequestId id, uint32_t prompt) { prompt_of_[id] = prompt; }

  void Record(const StepRecord& step) {
    if (!status_.ok() || step.drafts == nullptr) return;
    const auto n = static_cast<int64_t>(step.ids.size());
    if (writer_) {
      features_.resize(n * dvl::kFeatureCount);
      dvl::ExtractFeaturesBatch(step.drafts->logits.data(), step.drafts->hidden.data(), n, n,
                                projections_, features_.data());
    }
    for (int64_t i = 0; i < n && status_.ok(); ++i) {
      const train::TraceMeta meta{.prompt_id = prompt_of_.at(step.ids[i]),
                                  .live_count = static_cast<uint32_t>(n),
                                  .step = static_cast<uint32_t>(step.step),
                                  .accepted = static_cast<uint32_t>(step.accepted[i])};
      if (writer_) status_ = writer_->Append(meta, features_.data() + i * dvl::kFeatureCount);
      if (status_.ok() && !confidence_out_.empty()) {
        status_ = confidence_.Append(meta.prompt_id, meta.step, meta.accepted,
                                     step.drafts->confidence.data() + i * confidence_.positions);
      }
      accepted_sum_ += step.accepted[i];
      ++records_;
    }
  }

  Status Finish() {
    DSCALE_RETURN_IF_ERROR(status_);
    if (!confidence_out_.empty()) {
      DSCALE_RETURN_IF_ERROR(train::WriteConfidenceTraces(confidence_, confidence_out_));
    }
    return writer_ ? writer_->Close() : Status::Ok();
  }
  int64_t records() const { return records_; }
  double mean_accepted() const { return records() ? double(accepted_sum_) / records() : 0.0; }

 private:
  std::optional<train::TraceWriter> writer_;
  dvl::Projections projections_;
  std::string confidence_out_;
  train::ConfidenceTraces confidence_;
  int64_t records_ = 0;
  std::map<RequestId, uint32_t> prompt_of_;
  std::vector<float> features_;
  Status status_;
  int64_t accepted_sum_ = 0;
};

Result<std::vector<std::vector<int32_t>>> LoadAllPrompts(const CollectArgs& args,
                                                         const Tokenizer* tokenizer) {
  std::vector<std::vector<int32_t>> all;
  for (const std::string& file : args.prompt_files) {
    DSCALE_ASSIGN_OR_RETURN(auto prompts, LoadPrompts({.prompts_file = file}, tokenizer));
    all.insert(all.end(), prompts.begin(), prompts.end());
  }
  return all;
}

// The trace writers for `drafter`'s drafts that the flags ask for, the DVL one with the
// features' fixed projections; each refuses a drafter that cannot supply its records.
Result<std::unique_ptr<TraceCollector>> MakeCollector(const CollectArgs& args,
                                                      const DFlashDrafter& drafter) {
  const int64_t hidden = drafter.config().draft.hidden_size;
  // The features read the draft logits: one column per token drafted over.
  const int64_t vocab = drafter.draft_vocab_size();
  std::optional<train::TraceWriter> writer;
  if (!args.out.empty()) {
    if (drafter.block_size() != dvl::kBlockWidth) {
      return InvalidArgument("--out: DVL traces need a drafter whose verify block has " +
                             std::to_string(dvl::kBlockWidth) + " rows, this one has " +
                             std::to_string(drafter.block_size()));
    }
    const train::TraceHeader header{.drafter_hidden = static_cast<uint32_t>(hidden),
                                    .drafter_vocab = static_cast<uint32_t>(vocab),
                                    .projection_seed = args.projection_seed};
    DSCALE_ASSIGN_OR_RETURN(writer, train::TraceWriter::Create(args.out, header));
  }
  if (!args.confidence_out.empty() && !drafter.has_confidence_head()) {
    return InvalidArgument("--confidence-out: the drafter (" + args.models.drafter +
                           ") has no confidence head (enable_confidence_head)");
  }
  dvl::Projections projections = dvl::MakeProjections(hidden, vocab, args.projection_seed);
  // The features as the runtime computes them for the predictor these traces train.
  const std::optional<dvl::HeadRows> head_rows = LinearHeadRows(drafter);
  if (writer && head_rows) dvl::FoldLogitProjection(projections, *head_rows);
  return std::make_unique<TraceCollector>(std::move(writer), std::move(projections),
                                          args.confidence_out, drafter.block_size() - 1);
}

// Runs every prompt to its end, each request's records tagged with its prompt's index.
Status CollectAll(Engine& engine, const CollectArgs& args,
                  const std::vector<std::vector<int32_t>>& prompts, const DecoderModel& target,
                  TraceCollector& collector) {
  const GenerationParams params{.max_tokens = args.max_tokens,
                                .stop_ids = target.config().eos_token_ids};
  for (size_t i = 0; i < prompts.size(); ++i) {
    Result<RequestId> id = engine.Submit(prompts[i], params);
    if (!id.ok()) return id.status().WithContext("prompt " + std::to_string(i + 1));
    collector.SetPromptId(*id, static_cast<uint32_t>(i));
  }
  DSCALE_RETURN_IF_ERROR(engine.RunToCompletion());
  return collector.Finish();
}

int RunCollect(const CollectArgs& args) {
  auto fail = [](const Status& s) { return ReportError("collect", s); };
  if (args.out.empty() && args.confidence_out.empty()) {
    return fail(InvalidArgument("nothing to write: give --out, --confidence-out or both"));
  }
  // Traces record full-width DFlash verification.
  const LengthPolicy policy{.mode = SpecMode::kDFlash};
  Result<std::unique_ptr<Runtime>> runtime =
      LoadRuntime(args.models, PartsFor(policy, TokenizerNeed::kIfFound));
  if (!runtime.ok()) return fail(runtime.status());
  Runtime& rt = **runtime;
  Result<std::vector<std::vector<int32_t>>> prompts = LoadAllPrompts(args, rt.tokenizer_or_null());
  if (!prompts.ok()) return fail(prompts.status());
  // The engine first: it refuses a runtime without a drafter before the collector reads it.
  std::unique_ptr<TraceCollector> collector;
  Result<std::unique_ptr<Engine>> engine = MakeEngine(
      rt, {.policy = policy,
           .max_running = args.concurrency,
           .kv_tokens = KvTokensForPrompts(args.kv_tokens, *prompts, args.concurrency,
                                           args.max_tokens, rt.main.block_size()),
           .kv_dtype = args.kv_dtype,
           .cut_blocks_at_output_end = false,  // labels of whole blocks
           .on_step = [&collector](const StepRecord& step) { collector->Record(step); }});
  if (!engine.ok()) return fail(engine.status());
  Result<std::unique_ptr<TraceCollector>> made = MakeCollector(args, *rt.main.drafter);
  if (!made.ok()) return fail(made.status());
  collector = std::move(made).value();
  if (Status s = CollectAll(**engine, args, *prompts, *rt.target, *collector); !s.ok()) {
    return fail(s);
  }
  const std::string written = args.out.empty()              ? args.confidence_out
                               : args.confidence_out.empty() ? args.out
                                                             : args.out + " and " + args.confidence_out;
  std::printf("wrote %s: %lld records from %zu prompts, mean accepted %.2f of %d\n",
              written.c_str(), static_cast<long long>(collector->records()), prompts->size(),
              collector->mean_accepted(), rt.main.block_size() - 1);
  return 0;
}

}  // namespace

void RegisterCollectCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<CollectArgs>();
  CLI::App* cmd =
      app.add_subcommand("collect", "Log DVL features and full-width acceptance (traces)");
  AddModelOptions(cmd, &args->models,
                  {.drafter_required = true,
                   .predictor = false,
                   .device = false,
                   .draft_sampling = false});
  cmd->add_option("--prompts", args->prompt_files, "JSONL prompt files (see generate --prompts)")
      ->required();
  cmd->add_option("--out", args->out, "DVL trace file to write (the predictor's training data)");
  cmd->add_option("--confidence-out", args->confidence_out,
                  "Confidence trace file to write (a DSpark drafter's head; calibrate-confidence "
                  "fits on it)");
  cmd->add_option("--concurrency", args->concurrency, "Running requests at most")
      ->check(CLI::Range(1, kMaxRunningRequests))
      ->capture_default_str();
  cmd->add_option("--max-tokens", args->max_tokens, "Tokens per request at most")
      ->check(AtLeast(1))
      ->capture_default_str();
  cmd->add_option("--kv-tokens", args->kv_tokens,
                  "KV cache capacity in positions (default: what the prompts need at once)")
      ->check(AtLeast(0));
  AddKvDtypeOption(cmd, &args->kv_dtype);
  cmd->add_option("--projection-seed", args->projection_seed, "Seed of the fixed projections")
      ->capture_default_str();
  cmd->callback([args, exit_code] { *exit_code = RunCollect(*args); });
}

}  // namespace dscale::cli
