#pragma once
// Each subcommand of `dscale` registers itself on the CLI11 app. The callback it installs
// stores the process exit code in *exit_code (0 success, 1 runtime error, 2 usage error);
// errors are printed to stderr as "dscale <command>: <message>".

#include <CLI/CLI.hpp>

namespace dscale::cli {

void RegisterMakeTinyCommand(CLI::App& app, int* exit_code);
void RegisterLogitsCommand(CLI::App& app, int* exit_code);
void RegisterGenerateCommand(CLI::App& app, int* exit_code);
void RegisterDraftCommand(CLI::App& app, int* exit_code);
void RegisterCollectCommand(CLI::App& app, int* exit_code);
// dscale draft-vocab: a drafter's reduced vocabulary from token counts (cmd_draft_vocab.cc).
void RegisterDraftVocabCommand(CLI::App& app, int* exit_code);
// dscale tokenize: encode text (or a chat turn) to ids, or decode ids to text, as JSON.
void RegisterTokenizeCommand(CLI::App& app, int* exit_code);
// DVL inspection: the serving budget allocator on JSON probabilities (cmd_dvl_allocate.cc).
void RegisterDvlAllocateCommand(CLI::App& app, int* exit_code);
// Predictor training and evaluation on trace files (cmd_predictor.cc).
void RegisterTrainPredictorCommand(CLI::App& app, int* exit_code);
void RegisterEvalPredictorCommand(CLI::App& app, int* exit_code);
// A DSpark drafter's confidence calibration from traces (cmd_calibrate.cc).
void RegisterCalibrateConfidenceCommand(CLI::App& app, int* exit_code);
// The serving benchmark (cmd_bench.cc).
void RegisterBenchCommand(CLI::App& app, int* exit_code);
// dscale serve: the OpenAI-compatible HTTP server (cmd_serve.cc).
void RegisterServeCommand(CLI::App& app, int* exit_code);
// dscale inflate: a small pair rewritten at a Qwen3 shape, same function (cmd_inflate.cc).
void RegisterInflateCommand(CLI::App& app, int* exit_code);

}  // namespace dscale::cli
