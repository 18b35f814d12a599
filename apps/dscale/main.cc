// dscale: the command line. Subcommands live in cmd_*.cc; see commands.h.

#include <CLI/CLI.hpp>

#include "commands.h"
#include "kernels/cpu/cpu_isa_cap.h"
#include "kernels/cpu/openblas_kernels.h"

int main(int argc, char** argv) {
  // An unknown DSCALE_CPU_ISA is a usage error before anything runs, whatever the command.
  dscale::cpu::CpuIsaCapFromEnvironment();
  dscale::cpu::ReexecForMatchingOpenBlasKernels(argv);
  CLI::App app{"dscale: block-diffusion speculative decoding with adaptive verification"};
  app.require_subcommand(1);
  int exit_code = 0;
  dscale::cli::RegisterMakeTinyCommand(app, &exit_code);
  dscale::cli::RegisterLogitsCommand(app, &exit_code);
  dscale::cli::RegisterGenerateCommand(app, &exit_code);
  dscale::cli::RegisterDraftCommand(app, &exit_code);
  dscale::cli::RegisterCollectCommand(app, &exit_code);
  dscale::cli::RegisterDraftVocabCommand(app, &exit_code);
  dscale::cli::RegisterTokenizeCommand(app, &exit_code);
  dscale::cli::RegisterDvlAllocateCommand(app, &exit_code);
  dscale::cli::RegisterTrainPredictorCommand(app, &exit_code);
  dscale::cli::RegisterEvalPredictorCommand(app, &exit_code);
  dscale::cli::RegisterCalibrateConfidenceCommand(app, &exit_code);
  dscale::cli::RegisterBenchCommand(app, &exit_code);
  dscale::cli::RegisterServeCommand(app, &exit_code);
  dscale::cli::RegisterInflateCommand(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints the message (or the help); any parse failure is a usage error.
    return app.exit(e) == 0 ? 0 : 2;
  }
  return exit_code;
}
