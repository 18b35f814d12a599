#include "inflate/inflate_checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "inflate/inflate_draft_vocab.h"
#include "inflate/inflate_predictor.h"
#include "inflate/inflate_tensors.h"
#include "inflate/pad_bounds.h"
#include "io/file_util.h"
#include "model/decoder_model.h"
#include "model/dflash_drafter.h"

namespace dscale {
namespace {

namespace fs = std::filesystem;

// Values made and written per block of rows (4 MiB of f32).
constexpr int64_t kBlockValues = int64_t{1} << 20;

Status CheckOutputDir(const std::string& dir, const char* flag) {
  if (dir.empty()) return InvalidArgument(std::string(flag) + ": an output directory is required");
  std::error_code error;
  if (!fs::exists(dir, error)) return Status::Ok();
  if (!fs::is_directory(dir, error)) {
    return InvalidArgument(std::string(flag) + ": " + dir + " exists and is not a directory");
  }
  if (!fs::is_empty(dir, error)) {
    return InvalidArgument(std::string(flag) + ": " + dir +
                           " is not empty (inflate writes into a new or empty directory)");
  }
  return Status::Ok();
}

bool SamePath(const std::string& a, const std::string& b) {
  std::error_code error;
  return fs::weakly_canonical(a, error) == fs::weakly_canonical(b, error);
}

Status CheckDirectories(const InflateOptions& o) {
  if (o.drafters.empty()) return InvalidArgument("--drafter: at least one drafter is required");
  DSCALE_RETURN_IF_ERROR(CheckOutputDir(o.out_target, "--out-target"));
  std::vector<std::string> outputs = {o.out_target};
  for (const DrafterFolders& d : o.drafters) {
    DSCALE_RETURN_IF_ERROR(CheckOutputDir(d.out, "--out-drafter"));
    for (const std::string& other : outputs) {
      if (SamePath(d.out, other)) {
        return InvalidArgument("--out-drafter: " + d.out + " is also " +
                               (other == o.out_target ? "--out-target" : "another --out-drafter"));
      }
    }
    outputs.push_back(d.out);
  }
  return Status::Ok();
}

Status WriteText(const std::string& path, const std::string& text) {
  DSCALE_ASSIGN_OR_RETURN(AtomicFileWriter writer, AtomicFileWriter::Create(path));
  DSCALE_RETURN_IF_ERROR(writer.Write(text.data(), text.size()));
  return writer.Commit();
}

// Makes one tensor a block of rows at a time into `writer`; `block` is reused scratch.
Status AppendTensor(const InflatedTensor& t, SafetensorsStreamWriter& writer,
                    std::vector<float>& block) {
  DSCALE_ASSIGN_OR_RETURN(RowFiller fill, t.prepare());
  const int64_t rows_per_block =
      std::max<int64_t>(1, kBlockValues / std::max<int64_t>(1, t.cols()));
  for (int64_t first = 0; first < t.rows(); first += rows_per_block) {
    const int64_t count = std::min(rows_per_block, t.rows() - first);
    block.resize(static_cast<size_t>(count * t.cols()));
    fill(first, count, block.data());
    DSCALE_RETURN_IF_ERROR(writer.Append(block.data(), block.size()));
  }
  return Status::Ok();
}

std::vector<TensorToWrite> Headers(const std::vector<InflatedTensor>& tensors, uint64_t* bytes) {
  std::vector<TensorToWrite> headers;
  *bytes = 0;
  for (const InflatedTensor& t : tensors) {
    headers.push_back({.name = t.name, .dtype = t.dtype, .shape = t.shape, .values = {}});
    *bytes += static_cast<uint64_t>(t.rows() * t.cols()) * DTypeSize(t.dtype);
  }
  return headers;
}

// Makes every tensor a block of rows at a time into `dir`; *bytes receives the data size.
Status WriteTensors(const std::string& dir, const std::vector<InflatedTensor>& tensors,
                    uint64_t max_shard_bytes, uint64_t* bytes) {
  std::vector<float> block;
  return WriteCheckpointStreaming(dir, Headers(tensors, bytes), max_shard_bytes,
                                  [&](size_t i, SafetensorsStreamWriter& writer) -> Status {
                                    return AppendTensor(tensors[i], writer, block);
                                  });
}

// One safetensors file (the Domino head's side file) of `tensors`; *bytes receives the data size.
Status WriteTensorFile(const std::string& path, std::vector<InflatedTensor> tensors,
                       uint64_t* bytes) {
  // The stream writer needs element sizes in non-increasing order (F32 before BF16).
  std::stable_sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) {
    return DTypeSize(a.dtype) > DTypeSize(b.dtype);
  });
  DSCALE_ASSIGN_OR_RETURN(SafetensorsStreamWriter writer,
                          SafetensorsStreamWriter::Create(path, Headers(tensors, bytes)));
  std::vector<float> block;
  for (const InflatedTensor& t : tensors) DSCALE_RETURN_IF_ERROR(AppendTensor(t, writer, block));
  return writer.Commit();
}

// Copies the source folder's other files (tokenizer, generation config, ...): everything but the
// config, the safetensors, their index and the files named in `skip`.
Status CopyOtherFiles(const std::string& from, const std::string& to,
                      const std::vector<std::string>& skip) {
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(from, error)) {
    if (!entry.is_regular_file()) continue;
    const std::string name = entry.path().filename().string();
    const bool weights = name.ends_with(".safetensors") || name == "model.safetensors.index.json";
    if (weights || name == "config.json" ||
        std::find(skip.begin(), skip.end(), name) != skip.end()) {
      continue;
    }
    fs::copy_file(entry.path(), fs::path(to) / name, fs::copy_options::overwrite_existing, error);
    if (error) return IoError(entry.path().string() + ": cannot copy: " + error.message());
  }
  if (error) return IoError(from + ": cannot list: " + error.message());
  return Status::Ok();
}

Status WriteTarget(const InflateOptions& o, InflateResult* result) {
  const InflatePlan& plan = result->plan();
  DSCALE_ASSIGN_OR_RETURN(Checkpoint source, Checkpoint::Open(o.target_dir));
  DSCALE_ASSIGN_OR_RETURN(
      std::vector<InflatedTensor> tensors,
      InflatedTargetTensors(plan, std::make_shared<const Checkpoint>(std::move(source))));
  DSCALE_RETURN_IF_ERROR(
      WriteTensors(o.out_target, tensors, o.max_shard_bytes, &result->target_bytes));
  DSCALE_RETURN_IF_ERROR(
      WriteText(JoinPath(o.out_target, "config.json"), DecoderConfigToJson(plan.large_target)));
  return CopyOtherFiles(o.target_dir, o.out_target, {});
}

// The drafter's predictors present among kPredictorFileNames, each checked against the source
// pair: built for the target's vocabulary, or for the drafter's reduced one (`subset`, when the
// folder has one): (file name, predictor).
using NamedPredictors = std::vector<std::pair<std::string, dvl::Predictor>>;
Result<NamedPredictors> LoadSourcePredictors(const DrafterFolders& d, const InflatePlan& plan,
                                             const std::optional<DraftVocab>& subset) {
  NamedPredictors predictors;
  const int64_t full = plan.small_target.vocab_size;
  for (const char* name : kPredictorFileNames) {
    const std::string path = JoinPath(d.source, name);
    if (!PathExists(path)) continue;
    DSCALE_ASSIGN_OR_RETURN(
        dvl::Predictor small,
        dvl::Predictor::Load(path, {.hidden_size = plan.small_target.hidden_size,
                                    .vocab_size = subset.has_value() ? 0 : full}));
    const int64_t built_for = small.projections().vocab_size;
    if (subset.has_value() && built_for != full && built_for != subset->size()) {
      return InvalidArgument("predictor file " + path + ": built for drafter vocabulary size " +
                             std::to_string(built_for) + ", but the drafter has " +
                             std::to_string(full) + " tokens and a " + kDraftVocabFileName +
                             " of " + std::to_string(subset->size()));
    }
    predictors.emplace_back(name, std::move(small));
  }
  return predictors;
}

// The drafter folder's reduced vocabulary, inflated, when it has one (model/draft_vocab.h).
Status WriteDraftVocab(const DrafterFolders& d, const InflatePlan& plan,
                       const std::optional<DraftVocab>& subset) {
  if (!subset.has_value()) return Status::Ok();
  return SaveDraftVocab(JoinPath(d.out, kDraftVocabFileName), InflateDraftVocab(*subset, plan));
}

// The drafter's Domino head file, inflated, when its config declares one (the source file was
// checked when the plan was made).
Status WriteDominoHead(const DrafterFolders& d, InflatedDrafter* result) {
  const std::optional<DominoHeadConfig>& head = result->plan.large_drafter.domino;
  if (!head.has_value()) return Status::Ok();
  DSCALE_ASSIGN_OR_RETURN(Checkpoint source,
                          Checkpoint::OpenFile(JoinPath(d.source, head->head_file)));
  DSCALE_ASSIGN_OR_RETURN(std::vector<InflatedTensor> tensors,
                          InflatedDominoHeadTensors(
                              result->plan, std::make_shared<const Checkpoint>(std::move(source))));
  uint64_t bytes = 0;
  DSCALE_RETURN_IF_ERROR(
      WriteTensorFile(JoinPath(d.out, head->head_file), std::move(tensors), &bytes));
  result->bytes += bytes;
  return Status::Ok();
}

// A DSpark drafter's heads and, as DeepSpec ships a drafter, copies of the (large) target's
// embedding and LM head, appended to the drafter's tensors.
Status AppendDSparkTensors(const std::string& target_dir, const InflatePlan& plan,
                           std::shared_ptr<const Checkpoint> source, const std::string& prefix,
                           std::vector<InflatedTensor>* tensors) {
  DSCALE_ASSIGN_OR_RETURN(std::vector<InflatedTensor> heads,
                          InflatedDSparkHeadTensors(plan, std::move(source), prefix));
  DSCALE_ASSIGN_OR_RETURN(Checkpoint target, Checkpoint::Open(target_dir));
  DSCALE_ASSIGN_OR_RETURN(
      std::vector<InflatedTensor> copies,
      InflatedTargetCopies(plan, std::make_shared<const Checkpoint>(std::move(target))));
  for (auto* list : {&heads, &copies}) {
    std::move(list->begin(), list->end(), std::back_inserter(*tensors));
  }
  return Status::Ok();
}

Status WriteDrafter(const InflateOptions& o, const DrafterFolders& d,
                    const NamedPredictors& predictors, const std::optional<DraftVocab>& subset,
                    InflatedDrafter* result) {
  const InflatePlan& plan = result->plan;
  DSCALE_ASSIGN_OR_RETURN(Checkpoint opened, Checkpoint::Open(d.source));
  const std::string prefix = DFlashTensorPrefix(opened);
  const auto source = std::make_shared<const Checkpoint>(std::move(opened));
  DSCALE_ASSIGN_OR_RETURN(std::vector<InflatedTensor> tensors,
                          InflatedDrafterTensors(plan, source, prefix));
  if (plan.large_drafter.is_dspark()) {
    DSCALE_RETURN_IF_ERROR(AppendDSparkTensors(o.target_dir, plan, source, prefix, &tensors));
  }
  DSCALE_RETURN_IF_ERROR(WriteTensors(d.out, tensors, o.max_shard_bytes, &result->bytes));
  DSCALE_RETURN_IF_ERROR(
      WriteText(JoinPath(d.out, "config.json"), DFlashConfigToJson(plan.large_drafter) + "\n"));
  std::vector<std::string> rewritten(std::begin(kPredictorFileNames),
                                     std::end(kPredictorFileNames));
  rewritten.push_back(kDraftVocabFileName);
  DSCALE_RETURN_IF_ERROR(CopyOtherFiles(d.source, d.out, rewritten));
  DSCALE_RETURN_IF_ERROR(WriteDominoHead(d, result));
  DSCALE_RETURN_IF_ERROR(WriteDraftVocab(d, plan, subset));
  for (const auto& [name, small] : predictors) {
    const bool over_subset =
        subset.has_value() && small.projections().vocab_size != plan.small_target.vocab_size;
    DSCALE_ASSIGN_OR_RETURN(dvl::Predictor large,
                            over_subset ? InflatePredictor(small, plan, subset->size(),
                                                           InflateDraftVocab(*subset, plan).size())
                                        : InflatePredictor(small, plan));
    DSCALE_RETURN_IF_ERROR(large.Save(JoinPath(d.out, name)));
    result->predictors.push_back(name);
  }
  return Status::Ok();
}

// A declared Domino head's file, checked as `--drafter-head domino` loads it (errors name the file,
// the tensor and the shape expected), and the bound on its corrections; 0 without a head.
Result<double> DominoCorrectionBound(const std::string& drafter_dir, const DFlashConfig& drafter,
                                     const DecoderConfig& target, double final_gain) {
  if (!drafter.domino.has_value()) return 0.0;
  const DominoHeadConfig& head = *drafter.domino;
  DSCALE_RETURN_IF_ERROR(
      LoadDominoHeadFile(drafter_dir, head, target.hidden_size, target.vocab_size).status());
  DSCALE_ASSIGN_OR_RETURN(Checkpoint file,
                          Checkpoint::OpenFile(JoinPath(drafter_dir, head.head_file)));
  return MeasureCorrectionBound(file, head, target.hidden_size, target.vocab_size, final_gain);
}

// The bound on what the drafter's head adds to a real draft logit (SourceBounds::correction_bound):
// a DSpark Markov head's bias, a declared Domino head's correction, else 0.
Result<double> HeadCorrectionBound(const std::string& drafter_dir, const Checkpoint& drafter_source,
                                   const DFlashConfig& drafter, const DecoderConfig& target,
                                   double final_gain) {
  if (drafter.is_dspark()) {
    return MeasureMarkovBiasBound(drafter_source, DFlashTensorPrefix(drafter_source),
                                  *drafter.dspark, target.vocab_size);
  }
  return DominoCorrectionBound(drafter_dir, drafter, target, final_gain);
}

// Loads one drafter as every command does (shapes, finite weights, the drafter against its
// target), plans its inflation and sizes the pad rows it needs.
Result<InflatePlan> PlanDrafter(const InflateOptions& o, const DecoderModel& target,
                                const Checkpoint& target_source, const std::string& drafter_dir) {
  DSCALE_ASSIGN_OR_RETURN(DFlashDrafter drafter, DFlashDrafter::Load(drafter_dir, target));
  DSCALE_ASSIGN_OR_RETURN(InflatePlan plan,
                          PlanInflation(target.config(), drafter.config(), o.shape));
  DSCALE_ASSIGN_OR_RETURN(Checkpoint drafter_source, Checkpoint::Open(drafter_dir));
  DSCALE_ASSIGN_OR_RETURN(
      SourceBounds bounds,
      MeasureSourceBounds(target_source, target.config(), drafter_source,
                          DFlashTensorPrefix(drafter_source), drafter.config()));
  DSCALE_ASSIGN_OR_RETURN(bounds.correction_bound,
                          HeadCorrectionBound(drafter_dir, drafter_source, drafter.config(),
                                              target.config(), bounds.drafter_final_gain));
  DSCALE_RETURN_IF_ERROR(SetPadRows(bounds, &plan));
  return plan;
}

// Every drafter's plan. The drafters share the large target, so its placement is the first's and
// its LM head's pad weight M the largest any drafter needs (a larger M only lowers the pad logits
// further; each drafter's final norm keeps its own constant gain).
Result<std::vector<InflatePlan>> Plan(const InflateOptions& o) {
  DSCALE_ASSIGN_OR_RETURN(DecoderModel target, DecoderModel::Load(o.target_dir));
  DSCALE_ASSIGN_OR_RETURN(Checkpoint target_source, Checkpoint::Open(o.target_dir));
  std::vector<InflatePlan> plans;
  float pad_weight = 0.0f;
  for (const DrafterFolders& d : o.drafters) {
    DSCALE_ASSIGN_OR_RETURN(InflatePlan plan, PlanDrafter(o, target, target_source, d.source));
    if (!plans.empty()) PlaceBeside(plans.front(), &plan);
    pad_weight = std::max(pad_weight, plan.pad_weight);
    plans.push_back(std::move(plan));
  }
  for (InflatePlan& plan : plans) {
    plan.pad_weight = pad_weight;
    // The configs written must load as any other: round trip them through the parsers.
    DSCALE_ASSIGN_OR_RETURN(
        DecoderConfig large,
        ParseDecoderConfig(DecoderConfigToJson(plan.large_target), "inflated target"));
    DSCALE_RETURN_IF_ERROR(
        ParseDFlashConfig(DFlashConfigToJson(plan.large_drafter), "inflated drafter", large)
            .status());
  }
  return plans;
}

}  // namespace

Result<InflateResult> Inflate(const InflateOptions& o) {
  DSCALE_RETURN_IF_ERROR(CheckDirectories(o));
  InflateResult result;
  DSCALE_ASSIGN_OR_RETURN(std::vector<InflatePlan> plans, Plan(o));
  for (InflatePlan& plan : plans) result.drafters.push_back({.plan = std::move(plan)});
  // Everything a drafter folder holds is checked before anything is written.
  std::vector<std::optional<DraftVocab>> subsets;
  std::vector<NamedPredictors> predictors;
  for (size_t i = 0; i < o.drafters.size(); ++i) {
    const InflatePlan& plan = result.drafters[i].plan;
    DSCALE_ASSIGN_OR_RETURN(std::optional<DraftVocab> subset,
                            LoadDraftVocab(o.drafters[i].source, plan.small_target.vocab_size));
    DSCALE_ASSIGN_OR_RETURN(NamedPredictors loaded,
                            LoadSourcePredictors(o.drafters[i], plan, subset));
    subsets.push_back(std::move(subset));
    predictors.push_back(std::move(loaded));
  }
  DSCALE_RETURN_IF_ERROR(WriteTarget(o, &result));
  for (size_t i = 0; i < o.drafters.size(); ++i) {
    DSCALE_RETURN_IF_ERROR(
        WriteDrafter(o, o.drafters[i], predictors[i], subsets[i], &result.drafters[i]));
  }
  return result;
}

}  // namespace dscale
