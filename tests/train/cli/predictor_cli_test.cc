// End-to-end: `dscale train-predictor` then `dscale eval-predictor` through the built binary.

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "dvl/predictor.h"
#include "dvl/scoped_temp_dir.h"
#include "run_command.h"
#include "train/synthetic_traces.h"
#include "train/trace_file.h"

namespace dscale::train {
namespace {

using dscale::testing::CommandResult;

// `dscale <args>` with stdout only.
CommandResult RunDscale(const std::string& args) {
  return dscale::testing::RunDscale(args, /*merge_stderr=*/false);
}

TEST(PredictorCliTest, TrainThenEvaluate) {
  const test_util::ScopedTempDir dir;
  const auto TempPath = [&dir](const std::string& name) { return dir.File(name); };
  const TraceSet set = testing::SyntheticTraces(1500, 21);
  const std::string traces = TempPath("train.trace");
  {
    Result<TraceWriter> writer = TraceWriter::Create(traces, set.header);
    ASSERT_TRUE(writer.ok());
    for (size_t r = 0; r < set.size(); ++r) {
      ASSERT_TRUE(writer->Append(set.meta[r], set.features_of(r)).ok());
    }
    ASSERT_TRUE(writer->Close().ok());
  }
  const std::string predictor = TempPath("predictor.bin");
  const CommandResult train =
      RunDscale("train-predictor --traces " + traces + " --out " + predictor +
                " --epochs 20 --lr 0.003 --batch-size 64 --seed 4");
  ASSERT_EQ(train.exit_code, 0) << train.out;
  EXPECT_NE(train.out.find("holdout R2"), std::string::npos) << train.out;
  Result<dvl::Predictor> loaded =
      dvl::Predictor::Load(predictor, {.hidden_size = 8, .vocab_size = 40});
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->projections().seed, 77u);

  const CommandResult eval = RunDscale("eval-predictor --predictor " + predictor + " --traces " +
                                       traces + " --split holdout --seed 4");
  ASSERT_EQ(eval.exit_code, 0) << eval.out;
  const nlohmann::json report = nlohmann::json::parse(eval.out);
  EXPECT_GT(report["r2"].get<double>(), 0.7);
  EXPECT_GE(report["retention_adjusted"].get<double>(), report["retention_raw"].get<double>());
  EXPECT_NEAR(report["mean_window_adjusted"].get<double>(), 8.0, 1e-9);

  EXPECT_EQ(
      RunDscale("eval-predictor --predictor " + TempPath("missing.bin") + " --traces " + traces)
          .exit_code,
      1);
  EXPECT_EQ(
      RunDscale("train-predictor --traces " + TempPath("missing.trace") + " --out " + predictor)
          .exit_code,
      1);
}

}  // namespace
}  // namespace dscale::train
