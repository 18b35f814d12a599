#include "bench/progress.h"

#include <unistd.h>

#include <algorithm>

namespace dscale::bench {
namespace {

constexpr int kBarWidth = 30;

}  // namespace

Progress::Progress(int64_t total, FILE* out, bool enabled)
    : total_(std::max<int64_t>(total, 1)),
      out_(out),
      enabled_(enabled),
      tty_(isatty(fileno(out)) != 0),
      start_(std::chrono::steady_clock::now()) {}

void Progress::SetLabel(const std::string& label) {
  std::lock_guard<std::mutex> lock(mu_);
  label_ = label;
  if (!tty_) last_decile_ = -1;  // print the new label's first line
  Draw();
}

void Progress::Advance() {
  std::lock_guard<std::mutex> lock(mu_);
  ++done_;
  Draw();
}

void Progress::Finish() {
  std::lock_guard<std::mutex> lock(mu_);
  if (enabled_ && tty_) std::fputc('\n', out_);
  if (enabled_) std::fflush(out_);
}

void Progress::Draw() {
  if (!enabled_) return;
  const int64_t decile = done_ * 10 / total_;
  if (!tty_ && decile == last_decile_) return;
  last_decile_ = decile;
  const int filled = static_cast<int>(done_ * kBarWidth / total_);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kBarWidth, '.');
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::fprintf(out_, "%s[%s] %lld/%lld requests  %s  %.0f s%s", tty_ ? "\r" : "", bar.c_str(),
               static_cast<long long>(done_), static_cast<long long>(total_), label_.c_str(),
               elapsed, tty_ ? "\x1b[K" : "\n");
  std::fflush(out_);
}

}  // namespace dscale::bench
