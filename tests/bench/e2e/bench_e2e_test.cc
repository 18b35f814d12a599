// The harness end to end: the closed loop against an in-test server that streams OpenAI-style
// chat-completion chunks, and `dscale bench` on tiny random models in process.

#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/datasets.h"
#include "bench/http_client.h"
#include "bench/in_process.h"
#include "bench/manifest.h"
#include "io/tokenizer/tokenizer.h"
#include "run_command.h"

namespace dscale::bench {
namespace {

// Streams `max_tokens` one-token chunks (5 ms apart), a usage chunk and [DONE], for chat turns
// (/v1/chat/completions) or a prompt of token ids (/v1/completions); records the most requests
// it ever had in flight at once, the token-id prompts and the "model" fields sent. GET /v1/models
// lists `models`.
class MockServer {
 public:
  explicit MockServer(std::vector<std::string> models = {"mock-served-model"}) {
    server_.Get("/v1/models", [models](const httplib::Request&, httplib::Response& res) {
      nlohmann::json list = {{"object", "list"}, {"data", nlohmann::json::array()}};
      for (const std::string& id : models)
        list["data"].push_back({{"id", id}, {"object", "model"}});
      res.set_content(list.dump(), "application/json");
    });
    server_.Post("/v1/chat/completions",
                 [this](const httplib::Request& req, httplib::Response& res) { Reply(req, res); });
    server_.Post("/v1/completions",
                 [this](const httplib::Request& req, httplib::Response& res) { Reply(req, res); });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~MockServer() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int peak() const { return peak_; }
  int served() const { return served_; }
  std::vector<std::vector<int32_t>> prompt_ids() const {
    std::lock_guard<std::mutex> lock(mu_);
    return prompt_ids_;
  }
  std::set<std::string> models_sent() const {
    std::lock_guard<std::mutex> lock(mu_);
    return models_sent_;
  }

 private:
  void Reply(const httplib::Request& req, httplib::Response& res) {
    const nlohmann::json body = nlohmann::json::parse(req.body);
    const bool completion = req.path == "/v1/completions";
    const char* input = completion ? "prompt" : "messages";
    if (!body.value("stream", false) || !body.contains(input) || body[input].empty()) {
      res.status = 400;
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      models_sent_.insert(body.value("model", std::string("(none)")));
      if (completion) prompt_ids_.push_back(body["prompt"].get<std::vector<int32_t>>());
    }
    const int now = ++in_flight_;
    for (int seen = peak_; now > seen && !peak_.compare_exchange_weak(seen, now);) {
    }
    const int tokens = body.value("max_tokens", 4);
    res.set_chunked_content_provider("text/event-stream", [this, tokens, completion](
                                                              size_t, httplib::DataSink& sink) {
      for (int i = 0; i < tokens; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        const std::string chunk =
            completion ? "data: {\"choices\":[{\"index\":0,\"text\":\"t\"}]}\n\n"
                       : "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"t\"}}]}\n\n";
        sink.write(chunk.data(), chunk.size());
      }
      const std::string tail =
          "data: {\"choices\":[],\"usage\":{\"completion_tokens\":" + std::to_string(tokens) +
          "}}\n\ndata: [DONE]\n\n";
      sink.write(tail.data(), tail.size());
      --in_flight_;
      ++served_;
      sink.done();
      return true;
    });
  }

  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::atomic<int> in_flight_{0}, peak_{0}, served_{0};
  mutable std::mutex mu_;
  std::vector<std::vector<int32_t>> prompt_ids_;
  std::set<std::string> models_sent_;
};

TEST(ServerClosedLoop, KeepsCRequestsInFlightAndCountsTokens) {
  MockServer server;
  std::vector<ChatRequest> requests(9, ChatRequest{.prompt = "hi", .max_tokens = 6});
  int done = 0;
  Result<LoopOutcome> outcome =
      RunServerLoop({.url = server.url()}, requests, {.concurrency = 3}, [&] { ++done; });
  ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
  EXPECT_EQ(done, 9);
  EXPECT_EQ(server.served(), 9);
  EXPECT_EQ(server.peak(), 3);
  ASSERT_EQ(outcome->samples.size(), 9u);
  for (const RequestSample& s : outcome->samples) {
    EXPECT_EQ(s.output_tokens, 6);
    EXPECT_GT(s.ttft_s, 0.0);
    EXPECT_GE(s.latency_s, s.ttft_s);
    EXPECT_GE(s.latency_s, 0.025);
  }
  EXPECT_GT(outcome->window_s, 0.0);
}

// An open loop sends no request before its arrival time, and counts its latency from then: a
// request that waited for the one worker paid that wait too.
TEST(ServerOpenLoop, SendsAtTheArrivalTimesAndCountsLatencyFromThem) {
  MockServer server;
  std::vector<ChatRequest> requests(4, ChatRequest{.prompt = "hi", .max_tokens = 6});
  const std::vector<double> spread_out = {0.0, 0.2, 0.4, 0.6};
  Result<LoopOutcome> outcome = RunServerLoop({.url = server.url()}, requests,
                                              {.concurrency = 3, .arrivals = spread_out}, {});
  ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
  EXPECT_GE(outcome->window_s, 0.6);
  EXPECT_EQ(server.peak(), 1);  // each reply (about 30 ms) ends before the next arrival
  const std::vector<double> together = {0.0, 0.0, 0.0, 0.0};
  outcome =
      RunServerLoop({.url = server.url()}, requests, {.concurrency = 1, .arrivals = together}, {});
  ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
  ASSERT_EQ(outcome->samples.size(), 4u);
  // The last to be served waited for three replies before its own.
  EXPECT_GE(outcome->samples.back().latency_s, 4 * 0.025);
  EXPECT_GE(outcome->samples.back().ttft_s, 3 * 0.025);
}

TEST(ServerClosedLoop, ReportsAnUnreachableServer) {
  std::vector<ChatRequest> requests(2);
  Result<LoopOutcome> outcome =
      RunServerLoop({.url = "http://127.0.0.1:1"}, requests, {.concurrency = 2}, {});
  ASSERT_FALSE(outcome.ok());
  EXPECT_NE(outcome.status().message().find("127.0.0.1:1"), std::string::npos);
}

TEST(BenchCommand, AgainstAServer) {
  MockServer server;
  const std::filesystem::path out = std::filesystem::path(::testing::TempDir()) / "bench_url";
  const auto r = testing::RunDscale(
      "bench --url " + server.url() + " --data-dir " DSCALE_DATA_DIR +
      " --datasets gsm8k --concurrency 1,2 --warmup 1 --requests 4 --max-tokens 3 --no-progress"
      " --out " +
      out.string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("server"), std::string::npos) << r.out;
  EXPECT_EQ(server.served(), 2 * 5);
  // Without --server-model every request names the model the server lists.
  EXPECT_EQ(server.models_sent(), std::set<std::string>{"mock-served-model"});
  std::ifstream json(out / "results.json");
  const nlohmann::json j = nlohmann::json::parse(json);
  ASSERT_EQ(j["cells"].size(), 2u);
  EXPECT_EQ(j["cells"][1]["runs"][0]["output_tokens"], 12);
  EXPECT_TRUE(j["cells"][0]["runs"][0]["tau"].is_null());
}

// --server-model is sent as given; without it a server listing several models (or none) is an
// error that says so and names the flag, before any request is sent.
TEST(BenchCommand, ServerModelIsGivenOrTheOneTheServerLists) {
  const std::string args = " --data-dir " DSCALE_DATA_DIR
                           " --datasets gsm8k --concurrency 1 --warmup 0 --requests 1"
                           " --max-tokens 2 --no-progress --out " +
                           (std::filesystem::path(::testing::TempDir()) / "bench_model").string();
  {
    MockServer server;
    const auto r =
        testing::RunDscale("bench --url " + server.url() + " --server-model mine" + args);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(server.models_sent(), std::set<std::string>{"mine"});
  }
  MockServer two({"a", "b"});
  auto r = testing::RunDscale("bench --url " + two.url() + args);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("serves 2 models (a, b); choose one with --server-model"), std::string::npos)
      << r.out;
  EXPECT_EQ(two.served(), 0);
  MockServer none(std::vector<std::string>{});
  r = testing::RunDscale("bench --url " + none.url() + args);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("--server-model not given: GET " + none.url() + "/v1/models: no model id"),
            std::string::npos)
      << r.out;
}

// --server-prompts ids: the chat turns encoded here, as the in-process runs encode them, and sent
// as token ids to /v1/completions.
TEST(BenchCommand, AgainstAServerWithTokenIdPrompts) {
  MockServer server;
  const std::string tokenizer_dir = DSCALE_TEST_DATA_DIR "/tokenizer/qwen3";
  const auto r = testing::RunDscale("bench --url " + server.url() +
                                    " --data-dir " DSCALE_DATA_DIR " --tokenizer " + tokenizer_dir +
                                    " --server-prompts ids --datasets gsm8k --concurrency 2"
                                    " --warmup 1 --requests 4 --max-tokens 3 --no-progress");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::vector<std::vector<int32_t>> sent = server.prompt_ids();
  ASSERT_EQ(sent.size(), 5u);
  const Tokenizer tokenizer = Tokenizer::Load(tokenizer_dir).value();
  const Dataset gsm8k = LoadDataset(DSCALE_DATA_DIR, "gsm8k", 256).value();
  const std::vector<std::vector<int32_t>> encoded =
      EncodeChatPrompts(tokenizer, gsm8k.prompts).value();
  for (const std::vector<int32_t>& ids : sent) {
    EXPECT_NE(std::find(encoded.begin(), encoded.end(), ids), encoded.end());
  }
  const auto no_tokenizer = testing::RunDscale(
      "bench --url " + server.url() + " --data-dir " DSCALE_DATA_DIR +
      " --tokenizer /nonexistent --server-prompts ids --datasets gsm8k --no-progress");
  EXPECT_NE(no_tokenizer.exit_code, 0);
  EXPECT_NE(no_tokenizer.out.find("--server-prompts ids"), std::string::npos) << no_tokenizer.out;
}

class InProcessBench : public ::testing::Test {
 protected:
  // ctest runs every test of this suite in its own process, two at a time: the process id keeps
  // one process's pair from being rewritten while another reads it.
  static void SetUpTestSuite() {
    dir_ =
        std::filesystem::path(::testing::TempDir()) / ("bench_tiny_" + std::to_string(::getpid()));
    const auto r = testing::RunDscale(
        "make-tiny --out " + (dir_ / "target").string() + " --drafter-out " +
        (dir_ / "drafter").string() +
        " --vocab 151936 --hidden 32 --intermediate 48 --layers 1 --heads 2 --kv-heads 1"
        " --head-dim 16 --tie --block-size 8");
    ASSERT_EQ(r.exit_code, 0) << r.out;
  }
  static void TearDownTestSuite() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  static std::string Models() {
    return " --target " + (dir_ / "target").string() + " --drafter " + (dir_ / "drafter").string() +
           " --tokenizer " DSCALE_TEST_DATA_DIR "/tokenizer/qwen3 --data-dir " DSCALE_DATA_DIR
           " --no-progress";
  }
  static inline std::filesystem::path dir_;
};

// What a mode's policy needs is checked for every mode before the first cell runs (the policy
// check of plan/planner_config.h, named by the mode): without --drafter the run stops at once and
// measures nothing.
TEST_F(InProcessBench, AModeThatCannotRunStopsTheRunBeforeItStarts) {
  const std::string target = " --target " + (dir_ / "target").string() +
                             " --tokenizer " DSCALE_TEST_DATA_DIR
                             "/tokenizer/qwen3 --data-dir " DSCALE_DATA_DIR " --no-progress";
  const std::string cells = " --datasets gsm8k --concurrency 1 --requests 1 --warmup 0";
  auto r = testing::RunDscale("bench" + target + cells + " --modes none,dflash");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("mode dflash: --spec dflash needs --drafter"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("tok/s"), std::string::npos) << r.out;
  r = testing::RunDscale("bench" + target + cells + " --modes none,domino");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("mode domino runs the drafter's Domino head: it needs --drafter"),
            std::string::npos)
      << r.out;
}

TEST_F(InProcessBench, SweepsModesAndWritesEveryOutput) {
  const std::filesystem::path out = dir_ / "out";
  const auto r = testing::RunDscale(
      "bench" + Models() +
      " --datasets gsm8k,humaneval --concurrency 1,3 --modes none,dflash,fixed:4 --warmup 1"
      " --requests 4 --max-tokens 6 --profile --out " +
      out.string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* name : {"results.json", "results.csv", "table.txt", "plots.gp",
                           "plot_data_gsm8k.dat", "plot_data_humaneval.dat"}) {
    EXPECT_TRUE(std::filesystem::exists(out / name)) << name;
  }
  EXPECT_NE(r.out.find("step time per decode step"), std::string::npos);
  std::ifstream json(out / "results.json");
  const nlohmann::json j = nlohmann::json::parse(json);
  EXPECT_EQ(j["baseline"], "dflash");
  ASSERT_EQ(j["cells"].size(), 12u);
  for (const nlohmann::json& cell : j["cells"]) {
    const nlohmann::json& run = cell["runs"][0];
    EXPECT_EQ(run["requests"], 4);
    EXPECT_GT(run["output_tokens"].get<int>(), 0);
    EXPECT_GE(run["tau"].get<double>(), 1.0);
    EXPECT_GT(run["stages"]["decode_steps"].get<int>(), 0);
  }
  EXPECT_DOUBLE_EQ(j["geomean_ratio_vs_baseline"]["dflash"].get<double>(), 1.0);
  // Greedy speculation is lossless and the in-process loop is deterministic, so every mode
  // generates the baseline's tokens for every request (a float near-tie between batch shapes
  // would show here as a stable failure naming the cell).
  EXPECT_EQ(j["outputs_vs_baseline"]["identical_to_baseline"], true) << j["outputs_vs_baseline"];
  EXPECT_NE(r.out.find("outputs: every run generated the same tokens as dflash"), std::string::npos)
      << r.out;
}

// The bundled drafter ships both predictors: without --predictor and --domino-predictor the
// dscale and domino+dscale modes load them from its folder, and the report names the files.
// --request-rate: the measured requests arrive at their Poisson times; the table says so and
// compares mean latency, and the outputs are the closed loop's (greedy, lossless).
TEST_F(InProcessBench, AnOpenLoopComparesLatencyAndGeneratesTheSameTokens) {
  const std::filesystem::path out = dir_ / "open";
  const auto r = testing::RunDscale(
      "bench" + Models() +
      " --datasets gsm8k --concurrency 2 --modes none,fixed:4 --warmup 1 --requests 5"
      " --max-tokens 6 --request-rate 20 --out " +
      out.string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("open loop, 20 requests/s arriving (Poisson)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("outputs: every run generated the same tokens as none"), std::string::npos)
      << r.out;
  std::ifstream json(out / "results.json");
  const nlohmann::json j = nlohmann::json::parse(json);
  EXPECT_EQ(j["config"]["request_rate"], 20.0);
  // The last measured request arrives at its Poisson time, so the window lasts at least that.
  const double last_arrival = PoissonArrivals(5, 20.0, 0).back();
  for (const nlohmann::json& cell : j["cells"]) {
    EXPECT_EQ(cell["runs"][0]["requests"], 5);
    EXPECT_GE(cell["runs"][0]["window_s"].get<double>(), last_arrival);
  }
}

TEST_F(InProcessBench, PredictorsDefaultToTheDrafterFolders) {
  const std::string drafter = DSCALE_MODELS_DIR "/tiny-dflash";
  const std::filesystem::path out = dir_ / "bundled";
  const auto r = testing::RunDscale(
      "bench --target " DSCALE_MODELS_DIR "/tiny-target --drafter " + drafter +
      " --data-dir " DSCALE_DATA_DIR
      " --no-progress --modes dscale,domino+dscale"
      " --datasets gsm8k --concurrency 2 --warmup 0 --requests 2 --max-tokens 6 --out " +
      out.string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::ifstream json(out / "results.json");
  const nlohmann::json j = nlohmann::json::parse(json);
  EXPECT_EQ(j["config"]["predictor"], drafter + "/predictor.bin");
  EXPECT_EQ(j["config"]["domino_predictor"], drafter + "/predictor-domino.bin");
  EXPECT_EQ(j["outputs_vs_baseline"]["identical_to_baseline"], true) << j["outputs_vs_baseline"];
}

TEST_F(InProcessBench, ComparesWithAnEarlierRun) {
  const std::filesystem::path first = dir_ / "first", second = dir_ / "second";
  const std::string cell =
      " --datasets gsm8k --concurrency 2 --modes none,dflash --warmup 0 --requests 3"
      " --max-tokens 4 --repeats 2 --out ";
  ASSERT_EQ(testing::RunDscale("bench" + Models() + cell + first.string()).exit_code, 0);
  const auto r = testing::RunDscale("bench" + Models() + cell + second.string() + " --compare " +
                                    (first / "results.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("agreement with the earlier run"), std::string::npos) << r.out;
  EXPECT_TRUE(std::filesystem::exists(second / "agreement.txt"));
  std::ifstream json(second / "results.json");
  const nlohmann::json cells = nlohmann::json::parse(json)["agreement"]["cells"];
  ASSERT_EQ(cells.size(), 2u);
  // Whether each cell agrees depends on timing noise; the summary line must count the JSON's.
  int agreeing = 0;
  for (const nlohmann::json& c : cells) agreeing += c["agree"].get<bool>() ? 1 : 0;
  EXPECT_NE(r.out.find("\n" + std::to_string(agreeing) + " of 2 cells agree"), std::string::npos)
      << r.out;

  const auto missing = testing::RunDscale("bench" + Models() + cell + second.string() +
                                          " --compare " + (dir_ / "nope.json").string());
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.out.find("--compare"), std::string::npos) << missing.out;
  EXPECT_NE(missing.out.find("nope.json"), std::string::npos) << missing.out;
}

TEST_F(InProcessBench, AblationNeedsAPredictorForTheDvlRung) {
  const auto r = testing::RunDscale("bench" + Models() +
                                    " --ablation --datasets gsm8k --concurrency 2 --warmup 0"
                                    " --requests 2 --max-tokens 4");
  // +dvl needs a predictor: the error names the flag and the cell.
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("--predictor"), std::string::npos) << r.out;
}

TEST_F(InProcessBench, WidthSweepAndBadFlags) {
  const auto r = testing::RunDscale("bench" + Models() +
                                    " --widths 2,8 --datasets mbpp --concurrency 2 --warmup 0"
                                    " --requests 2 --max-tokens 4");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("fixed:8: "), std::string::npos) << r.out;
  EXPECT_EQ(testing::RunDscale("bench" + Models() + " --concurrency 0,2").exit_code, 1);
  EXPECT_EQ(testing::RunDscale("bench" + Models() + " --datasets nope").exit_code, 1);
}

}  // namespace
}  // namespace dscale::bench
