#include "cli_util.h"

#include <cblas.h>
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cstdio>

#include "backend/backend.h"
#include "engine/engine.h"
#include "engine/kv_budget.h"

namespace dscale::cli {

void AddDeviceOption(CLI::App* cmd, std::string* device) {
  cmd->add_option("--device", *device,
                  "Where the target and drafter run: cpu, or cuda (weights on the GPU; see README, "
                  "CUDA backend, for the stages that run there)")
      ->check(CLI::IsMember(std::vector<std::string>(kDeviceNames.begin(), kDeviceNames.end())))
      ->capture_default_str();
}

Result<std::vector<int32_t>> ParseIdList(const std::string& text, const std::string& flag) {
  std::vector<int32_t> ids;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find(',', begin);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(begin, end - begin);
    int32_t id = 0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), id);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size() || id < 0) {
      return InvalidArgument(flag + ": expected comma-separated non-negative token ids, got \"" +
                             item + "\"");
    }
    ids.push_back(id);
    begin = end + 1;
  }
  return ids;
}

int ReportError(const std::string& command, const Status& status) {
  std::fprintf(stderr, "dscale %s: %s\n", command.c_str(), status.message().c_str());
  return 1;
}

void AddThreadsOption(CLI::App* cmd) {
  cmd->add_option_function<int>(
         "--threads",
         [](int threads) {
           omp_set_num_threads(threads);
           openblas_set_num_threads(threads);
         },
         "Threads for the CPU kernels (default: OMP_NUM_THREADS, else one per core)")
      ->check(AtLeast(1));
}

CLI::Validator AtLeast(int64_t min) {
  return CLI::Validator(
      [min](std::string& text) -> std::string {
        int64_t value = 0;
        if (!CLI::detail::lexical_cast(text, value)) return "expected a whole number, got " + text;
        if (value < min) return "must be at least " + std::to_string(min) + ", got " + text;
        return {};
      },
      "INT>=" + std::to_string(min));
}

CLI::Validator InRange(int64_t min, int64_t max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        int64_t value = 0;
        if (!CLI::detail::lexical_cast(text, value)) return "expected a whole number, got " + text;
        if (value < min) return "must be at least " + std::to_string(min) + ", got " + text;
        if (value > max) return "must be at most " + std::to_string(max) + ", got " + text;
        return {};
      },
      "INT in [" + std::to_string(min) + ", " + std::to_string(max) + "]");
}

void AddKvDtypeOption(CLI::App* cmd, KvDtype* dtype) {
  cmd->add_option_function<std::string>(
         "--kv-dtype", [dtype](const std::string& name) { *dtype = *KvDtypeFromName(name); },
         "How the KV cache stores K and V: bf16 (half the memory of f32) or f32")
      ->check(CLI::IsMember({"bf16", "f32"}))
      ->default_str(std::string(KvDtypeName(*dtype)));
}

void AddMixedPrefillFlag(CLI::App* cmd, bool* mixed) {
  cmd->add_flag("!--no-mixed-prefill", *mixed,
                "Run prompt chunks in passes of their own instead of in the verify pass of a step "
                "where other requests decode (the same outputs; mixed, the weights are read once "
                "for both)");
}

void AddPromptWaitOption(CLI::App* cmd, int32_t* steps) {
  cmd->add_option("--prompt-wait-steps", *steps,
                  "A mixture of experts: decode steps a prompt may wait while a running "
                  "request finishes, to prefill with the next request's prompt in one read of "
                  "the experts (0: never; dense targets never wait)")
      ->check(InRange(0, 64))
      ->capture_default_str();
}

void AddStepTraceOption(CLI::App* cmd, std::string* path) {
  cmd->add_option("--step-trace", *path,
                  "Write one JSON line per decode step to FILE: requests, drafts, rows, stage "
                  "times and the auto budget's state (docs/VERIFY_BUDGET.md, \"Step trace\")");
}

Result<std::unique_ptr<StepTrace>> OpenStepTrace(const std::string& path) {
  if (path.empty()) return std::unique_ptr<StepTrace>();
  return StepTrace::Open(path);
}

namespace {

// A WeightsMode flag: as-stored, mapped, int8 or int4 (default as-stored).
void AddWeightsModeOption(CLI::App* cmd, const std::string& flag, WeightsMode* weights,
                          const std::string& help) {
  cmd->add_option_function<std::string>(
         flag, [weights](const std::string& name) { *weights = ParseWeightsMode(name).value(); },
         help)
      ->check(CLI::IsMember({"as-stored", "mapped", "int8", "int4"}))
      ->default_str(std::string(WeightsModeName(WeightsMode::kAsStored)));
}

}  // namespace

void AddWeightsOption(CLI::App* cmd, WeightsMode* weights) {
  AddWeightsModeOption(
      cmd, "--weights", weights,
      "The target's projection weights: as-stored (BF16 as stored, copied onto huge pages at "
      "load; F32/F16 as f32), mapped (the same, BF16 read in place from the checkpoint's memory "
      "mapping: no copy at load and the page cache shared, steps slower), int8 (quantised at "
      "load, a scale per 32 inputs; CPU only), or int4 (the layers' projections to 4 bits, a "
      "scale per 32 inputs, the LM head to int8; CPU only)");
}

void AddDrafterWeightsOption(CLI::App* cmd, WeightsMode* weights) {
  AddWeightsModeOption(
      cmd, "--drafter-weights", weights,
      "The drafter's projection weights: as-stored, mapped, int8 (its layers, fc and a draft "
      "vocabulary's LM head rows quantised at load, a scale per 32 inputs; CPU only), or int4 "
      "(its layers' projections to 4 bits, the rest int8; CPU only). Drafting reads about half "
      "(a third) the bytes; the drafts may change, the output does not");
}

cpu::Bf16Activations DefaultActivations() { return cpu::PreferredBf16Activations(); }

void AddActivationsOption(CLI::App* cmd, cpu::Bf16Activations* activations) {
  cmd->add_option_function<std::string>(
         "--activations",
         [activations](const std::string& name) {
           *activations = *cpu::Bf16ActivationsFromName(name);
         },
         "How BF16 weights meet the activations on the CPU: bf16 (each row rounded to BF16 once, "
         "BF16 dot products, f32 sums) or f32 (as they are); default bf16 where the CPU has AMX, "
         "or AVX512-BF16 at the FMA's rate (AMD Zen 4 and 5), and DSCALE_CPU_ISA allows it; "
         "else f32. Either keeps a row's bits independent of the rows beside it")
      ->check(CLI::IsMember({"bf16", "f32"}))
      ->default_str(std::string(cpu::Bf16ActivationsName(DefaultActivations())));
}

void AddInt8ActivationsOption(CLI::App* cmd, cpu::Int8Activations* activations) {
  cmd->add_option_function<std::string>(
         "--int8-activations",
         [activations](const std::string& name) {
           *activations = *cpu::Int8ActivationsFromName(name);
         },
         "How int8 and 4-bit weights (--weights int8|int4) meet the activations: int8 (each row "
         "quantised per 32 "
         "inputs once, int8 dot products, f32 sums) or f32 (as they are)")
      ->check(CLI::IsMember({"int8", "f32"}))
      ->default_str(std::string(cpu::Int8ActivationsName(kDefaultInt8Activations)));
}

void AddDrafterHeadOption(CLI::App* cmd, DrafterHead* head) {
  cmd->add_option_function<std::string>(
         "--drafter-head",
         [head](const std::string& name) { *head = ParseDrafterHead(name).value(); },
         "A head on the drafter's backbone: none, or domino (the causal corrector the drafter's "
         "config.json declares in domino_config; docs/DOMINO.md)")
      ->check(CLI::IsMember({"none", "domino"}))
      ->default_str(std::string(DrafterHeadName(DrafterHead::kNone)));
}

void AddDraftVocabOption(CLI::App* cmd, DraftVocabChoice* choice) {
  cmd->add_option_function<std::string>(
         "--draft-vocab",
         [choice](const std::string& name) { *choice = ParseDraftVocabChoice(name).value(); },
         "Which tokens the drafter drafts over: auto (the drafter folder's draft_vocab.json when "
         "it has one, else the whole vocabulary), full, or subset (draft_vocab.json, required)")
      ->check(CLI::IsMember({"auto", "full", "subset"}))
      ->default_str(std::string(DraftVocabChoiceName(kDefaultDraftVocab)));
}

void AddDraftSamplingOption(CLI::App* cmd, DraftSampling* mode) {
  cmd->add_option_function<std::string>(
         "--draft-sampling",
         [mode](const std::string& name) { *mode = ParseDraftSampling(name).value(); },
         "How requests at temperature > 0 draft: argmax (argmax drafts, seeded output equals "
         "plain sampling's token for token) or distribution (drafts drawn from the drafter's "
         "distribution and verified by speculative sampling with it: the target's law, more "
         "drafts accepted at high temperature, seeded tokens depend on the drafts; CPU only)")
      ->check(CLI::IsMember({"argmax", "distribution"}))
      ->default_str(std::string(DraftSamplingName(DraftSampling::kArgmax)));
}

int64_t KvTokensForPrompts(int64_t flag, const std::vector<std::vector<int32_t>>& prompts,
                           int32_t concurrency, int32_t max_tokens, int32_t block) {
  if (flag > 0) return flag;
  size_t longest = 0;
  for (const std::vector<int32_t>& p : prompts) longest = std::max(longest, p.size());
  const int64_t at_once = std::clamp<int64_t>(static_cast<int64_t>(prompts.size()), 1, concurrency);
  return KvTokensForDemand(at_once, static_cast<int64_t>(longest), max_tokens, block,
                           EngineConfig{}.page_size);
}

}  // namespace dscale::cli
