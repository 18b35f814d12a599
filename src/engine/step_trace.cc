#include "engine/step_trace.h"

#include <cerrno>
#include <cstring>
#include <utility>

namespace dscale {
namespace {

// Appends `"key": value` (and the comma before it where the object has members already).
class JsonObject {
 public:
  explicit JsonObject(std::string* out) : out_(out) { *out_ += '{'; }
  void Int(const char* key, int64_t value) { Raw(key, std::to_string(value)); }
  // Fixed point, `digits` after the point: a trace is read by people and plotted, not re-fed.
  void Number(const char* key, double value, int digits) {
    char text[64];
    std::snprintf(text, sizeof(text), "%.*f", digits, value);
    Raw(key, text);
  }
  void Bool(const char* key, bool value) { Raw(key, value ? "true" : "false"); }
  void String(const char* key, const char* value) { Raw(key, std::string("\"") + value + '"'); }
  // The value of `key` is the object the caller writes next.
  void Key(const char* key) {
    Separate();
    (*out_ += '"') += key;
    *out_ += "\": ";
  }
  void Close() { *out_ += '}'; }

 private:
  void Separate() {
    if (!first_) *out_ += ", ";
    first_ = false;
  }
  void Raw(const char* key, const std::string& value) {
    Separate();
    ((*out_ += '"') += key) += "\": ";
    *out_ += value;
  }
  std::string* out_;
  bool first_ = true;
};

// `drafted`: whether the step drafted, so the controller's predictions are this step's.
void WriteAuto(const budget::AutoBudgetSnapshot& a, bool drafted, std::string* out) {
  JsonObject o(out);
  o.String("mode", budget::AutoModeName(a.mode));
  o.Bool("cold_start", a.cold_start);
  if (drafted) {
    o.Int("best_rows", a.last_best_rows);
    o.Number("verify_predicted_ms", 1e3 * a.last_verify_predicted_s, 3);
    o.Number("committed_predicted", a.last_tokens_predicted, 3);
  }
  o.Number("step_gain", a.step_gain, 4);
  o.Number("gain", a.gain, 4);
  o.Number("loss_s", a.explore_loss_s, 4);
  o.Number("budget_s", a.explore_budget_s, 4);
  o.Number("calibration", a.calibration, 4);
  o.Close();
}

}  // namespace

std::string StepTraceJson(const StepTraceLine& line, double t_ms) {
  std::string out;
  JsonObject o(&out);
  o.Int("step", line.step);
  o.Number("t_ms", t_ms, 1);
  o.Int("requests", line.requests);
  o.Int("fed", line.fed);
  o.Int("drafted", line.drafted);
  o.Int("rows", line.rows);
  o.Int("committed", line.committed);
  o.Int("prompt_rows", line.prompt_rows);
  const StageSeconds& s = line.seconds;
  o.Number("draft_ms", 1e3 * s.draft, 3);
  o.Number("decide_ms", 1e3 * s.decide, 3);
  o.Number("verify_ms", 1e3 * s.verify, 3);
  o.Number("accept_ms", 1e3 * s.accept, 3);
  o.Number("commit_ms", 1e3 * s.commit, 3);
  o.Number("feed_ms", 1e3 * s.feed, 3);
  if (line.experts_per_layer) o.Number("experts", *line.experts_per_layer, 2);
  if (line.auto_budget) {
    o.Key("auto");
    WriteAuto(*line.auto_budget, line.drafted > 0, &out);
  }
  o.Close();
  return out;
}

Result<std::unique_ptr<StepTrace>> StepTrace::Open(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr) {
    return InvalidArgument("--step-trace " + path + ": cannot create it: " + std::strerror(errno));
  }
  return std::unique_ptr<StepTrace>(new StepTrace(file, path));
}

StepTrace::StepTrace(std::FILE* file, std::string path)
    : file_(file), path_(std::move(path)), opened_(std::chrono::steady_clock::now()) {}

StepTrace::~StepTrace() { std::fclose(file_); }

void StepTrace::Write(const StepTraceLine& line) {
  const double t_ms =
      1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - opened_).count();
  const std::string text = StepTraceJson(line, t_ms);
  std::fprintf(file_, "%s\n", text.c_str());
  std::fflush(file_);
}

}  // namespace dscale
