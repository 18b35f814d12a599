#pragma once
// Timing shared by the micro-benchmarks.

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace dscale::bench {

// Seconds on a steady clock, for timing one call.
inline double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Median seconds per call over 5 trials, each of as many calls as fill `fill_seconds` (after one
// warm-up call): robust to a slow trial on a shared machine.
inline double MedianSecondsPerCall(const std::function<void()>& call, double fill_seconds) {
  using Clock = std::chrono::steady_clock;
  call();
  auto start = Clock::now();
  int calls = 0;
  while (std::chrono::duration<double>(Clock::now() - start).count() < fill_seconds) {
    call();
    ++calls;
  }
  std::vector<double> trials;
  for (int t = 0; t < 5; ++t) {
    start = Clock::now();
    for (int i = 0; i < calls; ++i) call();
    trials.push_back(std::chrono::duration<double>(Clock::now() - start).count() / calls);
  }
  std::sort(trials.begin(), trials.end());
  return trials[2];
}

}  // namespace dscale::bench
