// dscale draft-vocab: a drafter's reduced vocabulary (model/draft_vocab.h) from token counts —
// of the target's own greedy outputs on prompt files (--prompts), of a corpus of text or token
// ids (--corpus), or both — the --size most frequent tokens plus EOS and the tokenizer's special
// tokens, written as draft_vocab.json.

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli_util.h"
#include "commands.h"
#include "engine/engine.h"
#include "model/decoder_model.h"
#include "model/draft_vocab.h"
#include "prompt_input.h"

namespace dscale::cli {
namespace {

struct DraftVocabArgs {
  std::string target;
  std::string tokenizer;
  std::vector<std::string> prompt_files;
  std::vector<std::string> corpus_files;
  std::string out;
  int64_t size = 0;
  int32_t concurrency = 16;
  int32_t max_tokens = 256;
  WeightsMode weights = WeightsMode::kAsStored;
};

// counts[t] += occurrences of t in `ids` (checked against the vocabulary, naming `what`).
Status AddCounts(std::span<const int32_t> ids, const std::string& what,
                 std::vector<int64_t>& counts) {
  DSCALE_RETURN_IF_ERROR(CheckTokenIds(ids, static_cast<int64_t>(counts.size()), what));
  for (int32_t id : ids) ++counts[static_cast<size_t>(id)];
  return Status::Ok();
}

// The corpus files' tokens as written: {"prompt": text} lines encoded without the chat template,
// {"ids": [...]} lines as they are.
Status CountCorpus(const DraftVocabArgs& args, const Tokenizer* tokenizer,
                   std::vector<int64_t>& counts) {
  for (const std::string& file : args.corpus_files) {
    DSCALE_ASSIGN_OR_RETURN(auto lines,
                            LoadPrompts({.prompts_file = file, .raw = true}, tokenizer));
    for (size_t i = 0; i < lines.size(); ++i) {
      DSCALE_RETURN_IF_ERROR(AddCounts(lines[i], file + ": line " + std::to_string(i + 1), counts));
    }
  }
  return Status::Ok();
}

// The target's greedy outputs (plain decoding, at most --max-tokens each, stopping at EOS) on
// the prompt files' prompts (chat template applied, as generate does).
Status CountTargetOutputs(const DraftVocabArgs& args, DecoderModel& target,
                          const Tokenizer* tokenizer, std::vector<int64_t>& counts) {
  std::vector<std::vector<int32_t>> prompts;
  for (const std::string& file : args.prompt_files) {
    DSCALE_ASSIGN_OR_RETURN(auto loaded, LoadPrompts({.prompts_file = file}, tokenizer));
    prompts.insert(prompts.end(), loaded.begin(), loaded.end());
  }
  if (prompts.empty()) return Status::Ok();
  EngineConfig config{
      .policy = LengthPolicy{.mode = SpecMode::kNone},
      .max_running = args.concurrency,
      .kv_tokens = KvTokensForPrompts(0, prompts, args.concurrency, args.max_tokens, /*block=*/1)};
  DSCALE_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine,
                          Engine::Create(target, nullptr, std::move(config)));
  const GenerationParams params{.max_tokens = args.max_tokens,
                                .stop_ids = target.config().eos_token_ids};
  for (size_t i = 0; i < prompts.size(); ++i) {
    Result<RequestId> id = engine->Submit(prompts[i], params);
    if (!id.ok()) return id.status().WithContext("prompt " + std::to_string(i + 1));
  }
  DSCALE_RETURN_IF_ERROR(engine->RunToCompletion());
  for (const RequestResult& r : engine->TakeFinished()) {
    DSCALE_RETURN_IF_ERROR(AddCounts(r.output_ids, "the target's output", counts));
  }
  return Status::Ok();
}

// EOS (config.json's eos_token_id) and every special token of the tokenizer (the chat format's
// <|im_start|>, <|im_end|>, <think>, ...): a draft may always propose them.
std::vector<int32_t> RequiredTokens(const DecoderConfig& config, const Tokenizer* tokenizer) {
  std::vector<int32_t> required(config.eos_token_ids.begin(), config.eos_token_ids.end());
  if (tokenizer == nullptr) return required;
  for (int32_t id = 0; id < tokenizer->id_limit(); ++id) {
    if (id < config.vocab_size && tokenizer->IsSpecial(id)) required.push_back(id);
  }
  return required;
}

int RunDraftVocab(const DraftVocabArgs& args) {
  auto fail = [](const Status& s) { return ReportError("draft-vocab", s); };
  if (args.prompt_files.empty() && args.corpus_files.empty()) {
    return fail(
        InvalidArgument("give --prompts FILE (the target's outputs are counted) and/or "
                        "--corpus FILE (its tokens are counted)"));
  }
  Result<DecoderModel> target = DecoderModel::Load(args.target, args.weights);
  if (!target.ok()) return fail(target.status());
  const int64_t vocab = target->config().vocab_size;
  if (args.size < kMinDraftVocabSize || args.size > vocab) {
    return fail(InvalidArgument("--size: expected " + std::to_string(kMinDraftVocabSize) +
                                " to the target's vocabulary of " + std::to_string(vocab) +
                                ", got " + std::to_string(args.size)));
  }
  Result<std::optional<Tokenizer>> tokenizer =
      LoadOptionalTokenizer(args.tokenizer, args.target, vocab);
  if (!tokenizer.ok()) return fail(tokenizer.status());
  const Tokenizer* tok = tokenizer->has_value() ? &**tokenizer : nullptr;

  std::vector<int64_t> counts(static_cast<size_t>(vocab), 0);
  if (Status s = CountCorpus(args, tok, counts); !s.ok()) return fail(s.WithContext("--corpus"));
  if (Status s = CountTargetOutputs(args, *target, tok, counts); !s.ok()) {
    return fail(s.WithContext("--prompts"));
  }
  const std::vector<int32_t> required = RequiredTokens(target->config(), tok);
  DraftVocab subset{.target_vocab_size = vocab,
                    .token_ids = RankDraftVocab(counts, args.size, required)};
  if (Status s = SaveDraftVocab(args.out, subset); !s.ok()) return fail(s);
  int64_t total = 0, covered = 0;
  for (int64_t c : counts) total += c;
  for (int32_t id : subset.token_ids) covered += counts[static_cast<size_t>(id)];
  std::printf("wrote %s: %lld of %lld tokens (%zu required), covering %.2f%% of %lld counted\n",
              args.out.c_str(), static_cast<long long>(subset.size()),
              static_cast<long long>(vocab), required.size(),
              total > 0 ? 100.0 * double(covered) / double(total) : 0.0,
              static_cast<long long>(total));
  return 0;
}

}  // namespace

void RegisterDraftVocabCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<DraftVocabArgs>();
  CLI::App* cmd = app.add_subcommand(
      "draft-vocab", "Make a drafter's reduced vocabulary (draft_vocab.json) from token counts");
  cmd->add_option("--target", args->target, "Target checkpoint directory")->required();
  cmd->add_option("--tokenizer", args->tokenizer, "Tokenizer folder (default: the target's)");
  cmd->add_option("--prompts", args->prompt_files,
                  "JSONL prompt files (see generate --prompts): the target's greedy outputs on "
                  "them are counted");
  cmd->add_option("--corpus", args->corpus_files,
                  "JSONL files of {\"prompt\": text} (encoded as written) or {\"ids\": [...]} "
                  "lines whose tokens are counted");
  cmd->add_option("--size", args->size,
                  "Tokens in the subset, the required ones (EOS, special tokens) included")
      ->required();
  cmd->add_option("--out", args->out, "File to write (a drafter folder's draft_vocab.json)")
      ->required();
  cmd->add_option("--concurrency", args->concurrency, "Running requests at most (--prompts)")
      ->check(CLI::Range(1, kMaxRunningRequests))
      ->capture_default_str();
  cmd->add_option("--max-tokens", args->max_tokens, "Output tokens per prompt at most (--prompts)")
      ->check(AtLeast(1))
      ->capture_default_str();
  AddWeightsOption(cmd, &args->weights);
  AddThreadsOption(cmd);
  cmd->callback([args, exit_code] { *exit_code = RunDraftVocab(*args); });
}

}  // namespace dscale::cli
