#include "model/draft_choice.h"

#include <span>

#include "kernels/cpu/softmax.h"
#include "spec/draft_distribution.h"
#include "spec/position_uniform.h"

namespace dscale {

int32_t DraftChoice::Column(const float* row, int64_t columns, int32_t candidate,
                            std::vector<double>* scratch) const {
  if (temperature <= 0.0f) {
    int32_t column = 0;
    cpu::ArgmaxRows(row, 1, columns, &column);
    return column;
  }
  const double u = StreamUniform(seed, first_position + candidate, UniformStream::kDraft);
  return SampleDraftColumn(std::span(row, static_cast<size_t>(columns)), temperature, u, scratch);
}

DraftChoice DraftChoiceFor(const SamplingParams* sampling, int32_t ctx_len) {
  if (sampling == nullptr || sampling->greedy()) return {};
  return {.temperature = sampling->temperature,
          .seed = sampling->seed,
          .first_position = int64_t{ctx_len} + 1};
}

}  // namespace dscale
