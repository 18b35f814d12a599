#pragma once
// A one-line progress bar on stderr ("[#####.....] 120/544 requests  dflash gsm8k c=8  12 s").
// On a terminal it redraws in place; otherwise it prints a line per 10% and per label change.
// Thread-safe: server client threads advance it concurrently.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>

namespace dscale::bench {

class Progress {
 public:
  Progress(int64_t total, FILE* out, bool enabled);
  void SetLabel(const std::string& label);
  void Advance();
  void Finish();  // ends the line

 private:
  void Draw();  // with mu_ held

  std::mutex mu_;
  int64_t total_;
  int64_t done_ = 0;
  int64_t last_decile_ = -1;
  FILE* out_;
  bool enabled_;
  bool tty_;
  std::string label_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace dscale::bench
