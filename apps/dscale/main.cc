// dscale: the command line. Subcommands live in cmd_*.cc; see commands.h.

#include <CLI/CLI.hpp>

#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"dscale: block-diffusion speculative decoding with adaptive verification"};
  app.require_subcommand(1);
  int exit_code = 0;
  dscale::cli::RegisterDvlAllocateCommand(app, &exit_code);
  dscale::cli::RegisterTrainPredictorCommand(app, &exit_code);
  dscale::cli::RegisterEvalPredictorCommand(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return exit_code;
}
