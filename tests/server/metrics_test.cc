// Prometheus text rendering: families, labels, cumulative histograms.

#include "server/metrics.h"

#include <gtest/gtest.h>

#include <sstream>

namespace dscale::server {
namespace {

bool Has(const std::string& text, const std::string& line) {
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    if (l == line) return true;
  }
  return false;
}

TEST(MetricsTest, Histogram) {
  Histogram h({1, 2});
  for (double x : {0.5, 1.0, 1.5, 7.0}) h.Observe(x);
  EXPECT_EQ(h.counts(), (std::vector<int64_t>{2, 1, 1}));  // le 1 is inclusive
  EXPECT_EQ(h.count(), 4);
  EXPECT_DOUBLE_EQ(h.sum(), 10.0);
}

TEST(MetricsTest, RendersEveryFamily) {
  MetricsSnapshot m;
  m.engine.block_size = 4;
  m.engine.stats.decode_steps = 10;
  m.engine.stats.decode_request_steps = 20;
  m.engine.stats.verified_rows = 80;
  m.engine.stats.committed_tokens = 50;
  m.engine.stats.prefix_query_tokens = 640;
  m.engine.stats.prefix_hit_tokens = 512;
  m.engine.stats.prefill_rows = 300;
  m.engine.stats.mixed_prefill_rows = 120;
  m.engine.stats.prompt_wait_steps = 7;
  m.engine.stats.accepted_histogram[0] = 5;
  m.engine.stats.accepted_histogram[2] = 10;
  m.engine.stats.accepted_histogram[3] = 4;
  m.engine.stats.accepted_histogram[9] = 1;  // beyond the block: counted in +Inf
  m.engine.stats.verify_s = 1.5;
  m.engine.waiting = 3;
  m.engine.running = 2;
  m.engine.free_kv_pages = 90;
  m.engine.total_kv_pages = 100;
  m.engine.prefix_cache_states = 6;
  m.engine.finished[static_cast<int>(Outcome::kLength)] = 7;
  m.engine.time_to_first_token.Observe(0.02);
  m.http_responses[{"/v1/completions", 200}] = 12;
  m.http_responses[{"/v1/completions", 400}] = 3;
  const std::string text = RenderPrometheus(m);

  EXPECT_TRUE(Has(text, "# TYPE dscale_http_requests_total counter"));
  EXPECT_TRUE(Has(text, "dscale_http_requests_total{path=\"/v1/completions\",code=\"200\"} 12"));
  EXPECT_TRUE(Has(text, "dscale_http_requests_total{path=\"/v1/completions\",code=\"400\"} 3"));
  EXPECT_TRUE(Has(text, "dscale_requests_finished_total{reason=\"length\"} 7"));
  EXPECT_TRUE(Has(text, "dscale_requests_waiting 3"));
  EXPECT_TRUE(Has(text, "dscale_requests_running 2"));
  EXPECT_TRUE(Has(text, "dscale_kv_pages_free 90"));
  EXPECT_TRUE(Has(text, "dscale_prefix_cache_states 6"));
  EXPECT_TRUE(Has(text, "dscale_verified_rows_per_step 8"));
  EXPECT_TRUE(Has(text, "dscale_prefix_cache_query_tokens_total 640"));
  EXPECT_TRUE(Has(text, "dscale_prefill_rows_total 300"));
  EXPECT_TRUE(Has(text, "dscale_mixed_prefill_rows_total 120"));
  EXPECT_TRUE(Has(text, "dscale_prompt_wait_steps_total 7"));
  EXPECT_TRUE(Has(text, "dscale_prefix_cache_hit_tokens_total 512"));
  EXPECT_TRUE(Has(text, "dscale_tau 2.5"));
  EXPECT_TRUE(Has(text, "# TYPE dscale_accepted_length histogram"));
  EXPECT_TRUE(Has(text, "dscale_accepted_length_bucket{le=\"0\"} 5"));
  EXPECT_TRUE(Has(text, "dscale_accepted_length_bucket{le=\"1\"} 5"));
  EXPECT_TRUE(Has(text, "dscale_accepted_length_bucket{le=\"2\"} 15"));
  EXPECT_TRUE(Has(text, "dscale_accepted_length_bucket{le=\"3\"} 19"));
  EXPECT_TRUE(Has(text, "dscale_accepted_length_bucket{le=\"+Inf\"} 20"));
  EXPECT_TRUE(Has(text, "dscale_accepted_length_sum 41"));
  EXPECT_TRUE(Has(text, "dscale_accepted_length_count 20"));
  EXPECT_TRUE(Has(text, "dscale_step_seconds_total{stage=\"verify\"} 1.5"));
  EXPECT_TRUE(Has(text, "dscale_time_to_first_token_seconds_bucket{le=\"0.025\"} 1"));
  EXPECT_TRUE(Has(text, "dscale_time_to_first_token_seconds_bucket{le=\"+Inf\"} 1"));
  EXPECT_TRUE(Has(text, "dscale_time_to_first_token_seconds_count 1"));
  EXPECT_TRUE(Has(text, "dscale_draining 0"));

  // Every non-comment line is "name{labels} value" and every family has HELP and TYPE.
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    ASSERT_FALSE(line.empty());
    if (line[0] == '#') continue;
    EXPECT_TRUE(line.starts_with("dscale_")) << line;
    EXPECT_NE(line.rfind(' '), std::string::npos) << line;
  }
  EXPECT_EQ(text.back(), '\n');
}

TEST(MetricsTest, RendersTheVerifyBudgetAndAutosCostModel) {
  MetricsSnapshot m;
  m.engine.block_size = 16;
  m.engine.stats.last_step_rows = 32;
  m.engine.stats.last_step_requests = 8;
  std::string text = RenderPrometheus(m);
  EXPECT_TRUE(Has(text, "dscale_verify_budget_rows 32"));
  EXPECT_TRUE(Has(text, "dscale_verify_budget_requests 8"));
  EXPECT_TRUE(Has(text, "dscale_verify_budget_fraction 0.25"));
  EXPECT_EQ(text.find("auto_budget"), std::string::npos) << "only with --verify-budget auto";

  m.engine.stats.auto_budget =
      budget::AutoBudgetSnapshot{.mode = budget::AutoMode::kPlain,
                                 .last_rows = 24,
                                 .gain = 0.5,
                                 .calibration = 0.75,
                                 .drafted_steps = 6,
                                 .plain_steps = 90,
                                 .feed_s_per_row = 2e-05,
                                 .verify_fit = {.a = 0.002, .b = 0.125, .c = 0},
                                 .verify_bins = 5,
                                 .verify_samples = 96,
                                 .verify_min_rows = 8,
                                 .verify_max_rows = 128};
  text = RenderPrometheus(m);
  EXPECT_TRUE(Has(text, "dscale_auto_budget_mode{mode=\"plain\"} 1"));
  EXPECT_TRUE(Has(text, "dscale_auto_budget_mode{mode=\"speculate\"} 0"));
  EXPECT_TRUE(Has(text, "dscale_auto_budget_gain 0.5"));
  EXPECT_TRUE(Has(text, "dscale_auto_budget_calibration 0.75"));
  EXPECT_TRUE(Has(text, "dscale_auto_budget_steps_total{kind=\"plain\"} 90"));
  EXPECT_TRUE(Has(text, "dscale_auto_cost_verify_seconds{term=\"a\"} 0.002"));
  EXPECT_TRUE(Has(text, "dscale_auto_cost_verify_seconds{term=\"b\"} 0.125"));
  EXPECT_TRUE(Has(text, "dscale_auto_cost_verify_rows_seen{bound=\"max\"} 128"));
  EXPECT_TRUE(Has(text, "dscale_auto_cost_verify_samples_total 96"));
  EXPECT_TRUE(Has(text, "dscale_auto_cost_feed_seconds_per_row 2e-05"));
  EXPECT_EQ(text.find("auto_cost_experts"), std::string::npos) << "only on a mixture of experts";
  EXPECT_EQ(text.find("prompt_steps_total"), std::string::npos);
  EXPECT_EQ(text.find("verify_experts_per_layer"), std::string::npos);

  // A mixture of experts whose rows auto prices by their experts.
  m.engine.stats.decode_steps = 5;  // one of them ran prompt rows: its experts are not counted
  m.engine.stats.expert_counted_steps = 4;
  m.engine.stats.verify_experts_per_layer = 100;
  m.engine.stats.auto_budget->experts_priced = true;
  m.engine.stats.auto_budget->expert_sharing = 0.75;
  m.engine.stats.auto_budget->expert_time_ratio = 1.5;
  m.engine.stats.auto_budget->expert_row_s = 0.004;
  m.engine.stats.auto_budget->expert_own_rows = 33.5;
  m.engine.stats.auto_budget->prompt_steps = 3;
  text = RenderPrometheus(m);
  EXPECT_TRUE(Has(text, "dscale_verify_experts_per_layer 25"));
  EXPECT_TRUE(Has(text, "dscale_auto_cost_experts{term=\"sharing\"} 0.75"));
  EXPECT_TRUE(Has(text, "dscale_auto_cost_experts{term=\"time_ratio\"} 1.5"));
  EXPECT_TRUE(Has(text, "dscale_auto_cost_experts{term=\"row_seconds\"} 0.004"));
  EXPECT_TRUE(Has(text, "dscale_auto_cost_experts{term=\"own_rows\"} 33.5"));
  EXPECT_TRUE(Has(text, "dscale_auto_budget_prompt_steps_total 3"));
}

TEST(MetricsTest, LabelValuesAreEscaped) {
  MetricsSnapshot m;
  m.http_responses[{"a\"b\\c\nd", 404}] = 1;
  EXPECT_TRUE(Has(RenderPrometheus(m),
                  "dscale_http_requests_total{path=\"a\\\"b\\\\c\\nd\",code=\"404\"} 1"));
}

}  // namespace
}  // namespace dscale::server
