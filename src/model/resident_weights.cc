#include "model/resident_weights.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "core/huge_pages.h"

namespace dscale {
namespace {

// Matrices start on cache lines in the allocation (32 BF16 values).
constexpr int64_t kAlignValues = 32;

bool AllBf16(const WeightMatrix& m) {
  if (m.empty()) return false;
  for (const WeightMatrix::Block& b : m.blocks()) {
    if (b.format != WeightFormat::kBF16) return false;
  }
  return true;
}

int64_t AlignedValues(const WeightMatrix& m) {
  return (static_cast<int64_t>(m.size()) + kAlignValues - 1) / kAlignValues * kAlignValues;
}

// One piece of the copy: a run of a block's bytes.
struct Piece {
  std::byte* to = nullptr;
  const std::byte* from = nullptr;
  size_t bytes = 0;
};

// `matrices` (all BF16) into one allocation, unzeroed (the copying threads' first writes fault
// its pages in), in pieces of at most 4 MB spread over the threads; each matrix then views its
// copy, which the allocation's owner keeps alive.
void CopyInto(const std::vector<WeightMatrix*>& matrices) {
  int64_t total = 0;
  for (const WeightMatrix* m : matrices) total += AlignedValues(*m);
  if (total == 0) return;
  const std::shared_ptr<uint16_t[]> owner = MakeHugePageArray<uint16_t>(static_cast<size_t>(total));
  uint16_t* values = owner.get();
  constexpr size_t kPieceBytes = size_t{4} << 20;
  std::vector<Piece> pieces;
  std::vector<uint16_t*> starts;
  uint16_t* at = values;
  for (const WeightMatrix* m : matrices) {
    starts.push_back(at);
    auto* to = reinterpret_cast<std::byte*>(at);
    for (const WeightMatrix::Block& b : m->blocks()) {
      const auto* from = static_cast<const std::byte*>(b.data);
      const auto bytes = static_cast<size_t>(b.rows * m->cols()) * sizeof(uint16_t);
      for (size_t done = 0; done < bytes; done += kPieceBytes) {
        pieces.push_back({to + done, from + done, std::min(kPieceBytes, bytes - done)});
      }
      to += bytes;
    }
    at += AlignedValues(*m);
  }
  const auto count = static_cast<int64_t>(pieces.size());
#pragma omp parallel for schedule(dynamic)
  for (int64_t i = 0; i < count; ++i) {
    const Piece& p = pieces[static_cast<size_t>(i)];
    std::memcpy(p.to, p.from, p.bytes);
  }
  for (size_t i = 0; i < matrices.size(); ++i) {
    WeightMatrix& m = *matrices[i];
    m = WeightMatrix::View(DType::kBF16, starts[i], m.rows(), m.cols(), owner);
  }
}

}  // namespace

void CopyLayerToHugePages(DecoderLayerWeights* layer) {
  std::vector<WeightMatrix*> matrices;
  const auto add = [&matrices](WeightMatrix& m) {
    if (AllBf16(m)) matrices.push_back(&m);
  };
  ForEachProjection(*layer, add);
  add(layer->moe.router);
  add(layer->moe.shared_gate);
  CopyInto(matrices);
}

void CopyToHugePages(WeightMatrix* matrix) {
  if (AllBf16(*matrix)) CopyInto({matrix});
}

}  // namespace dscale
