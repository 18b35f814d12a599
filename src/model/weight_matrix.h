#pragma once
// A weight matrix [rows, cols] in PyTorch's Linear layout (rows are outputs) as the CPU forward
// reads it: f32, BF16 bits used where they lie — in the checkpoint's memory mapping, never
// widened into an f32 copy — or owned 8-bit or 4-bit values with a scale per 32 inputs
// (`--weights int8|int4`, model/quantize_weights.h). A matrix may be stacked from row blocks that
// live in different places (q/k/v projections, gate/up), so stacking costs no copy either.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/dtype.h"
#include "core/huge_pages.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/gemm_int4.h"
#include "kernels/cpu/gemm_int8.h"

namespace dscale {

// How a block stores its elements.
enum class WeightFormat { kF32, kBF16, kInt8, kInt4 };

class WeightMatrix {
 public:
  // Consecutive rows stored in one place.
  struct Block {
    WeightFormat format = WeightFormat::kF32;
    // [rows, cols]: f32, BF16 bits or int8; kInt4: [rows, cpu::Int4RowBytes(cols)] (gemm_int4.h)
    const void* data = nullptr;
    // kInt8, kInt4: [rows, cpu::Int8Groups(cols)] (gemm_int8.h)
    const cpu::Int8Scale* scales = nullptr;
    int64_t rows = 0;
    // kInt8 or kInt4 in the panel layout (gemm_int8.h, gemm_int4.h): data and scales are those
    // of the panels, the block's first row in lane `first` of the first.
    cpu::QuantLayout layout = cpu::QuantLayout::kRows;
    int64_t first = 0;
  };

  WeightMatrix() = default;
  // Owned values: `values` holds rows · cols elements.
  static WeightMatrix FromF32(std::vector<float> values, int64_t rows, int64_t cols);
  static WeightMatrix FromBf16(std::vector<uint16_t> bits, int64_t rows, int64_t cols);
  // `values` [rows, cols] and `scales` [rows, cpu::Int8Groups(cols)] in cpu::LinearInt8's format,
  // or in `layout`: the panels from lane 0 (gemm_int8.h: cpu::PackInt8Panels).
  static WeightMatrix FromInt8(std::vector<int8_t> values, std::vector<cpu::Int8Scale> scales,
                               int64_t rows, int64_t cols,
                               cpu::QuantLayout layout = cpu::QuantLayout::kRows);
  // The same from arrays of those sizes on huge pages (QuantizeInt8 fills them unzeroed, on the
  // threads).
  static WeightMatrix FromInt8(HugePageArray<int8_t> values, HugePageArray<cpu::Int8Scale> scales,
                               int64_t rows, int64_t cols,
                               cpu::QuantLayout layout = cpu::QuantLayout::kRows);
  // A checkpoint tensor of `shape`: shape[0] rows of the remaining dims (a vector, or a scalar,
  // is one column).
  static WeightMatrix FromF32(std::vector<float> values, const std::vector<int64_t>& shape);
  // Borrowed: `data` (f32 or BF16) stays valid as long as `owner` lives.
  static WeightMatrix View(DType dtype, const void* data, int64_t rows, int64_t cols,
                           std::shared_ptr<const void> owner);
  // The rows of `parts` one after another; every part has the same number of columns.
  static WeightMatrix Stack(const std::vector<WeightMatrix>& parts);

  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  // Elements: rows · cols.
  size_t size() const { return static_cast<size_t>(rows_ * cols_); }
  bool empty() const { return rows_ == 0; }
  const std::vector<Block>& blocks() const { return blocks_; }
  // Bytes the elements (and int8 and int4 scales) take where they are stored.
  int64_t bytes() const;

  // Rows [begin, begin + count), sharing this matrix's storage.
  WeightMatrix RowRange(int64_t begin, int64_t count) const;
  // The same elements as `rows` rows of size() / rows columns, sharing this matrix's storage
  // (one slice of a stacked 3-D tensor as the matrix it is). One f32 or BF16 block only.
  WeightMatrix Reshaped(int64_t rows) const;
  // Rows rows[0], rows[1], ... copied into owned storage in the format each is stored in (f32,
  // BF16 bits, or int8 or int4 values with their scales in their layout), so a product over
  // them reads only those rows and gives, row for row, what the source's rows give. Every entry is
  // a valid row.
  WeightMatrix SelectRows(std::span<const int32_t> rows) const;
  // Row `row` widened to f32 into dst[0, cols) (int8, int4: the values Project multiplies by).
  void RowToF32(int64_t row, float* dst) const;
  // `packed` and `scales` in cpu::LinearInt4's format, in `layout`: [rows,
  // cpu::Int4RowBytes(cols)] and [rows, cpu::Int8Groups(cols)], or the panels from lane 0
  // (gemm_int4.h: cpu::PackInt4Panels).
  static WeightMatrix FromInt4(HugePageArray<uint8_t> packed, HugePageArray<cpu::Int8Scale> scales,
                               int64_t rows, int64_t cols,
                               cpu::QuantLayout layout = cpu::QuantLayout::kRows);
  static WeightMatrix FromInt4(std::vector<uint8_t> packed, std::vector<cpu::Int8Scale> scales,
                               int64_t rows, int64_t cols,
                               cpu::QuantLayout layout = cpu::QuantLayout::kRows);
  // Every element widened to f32 (references, uploads, tests).
  std::vector<float> ToF32() const;
  // Every element as BF16 bits (f32 rounded to nearest even).
  std::vector<uint16_t> ToBf16() const;

 private:
  // One int8 or int4 block whose values and scales `owner` keeps alive.
  static WeightMatrix OwnedQuantized(WeightFormat format, std::shared_ptr<const void> owner,
                                     const void* values, const cpu::Int8Scale* scales, int64_t rows,
                                     int64_t cols,
                                     cpu::QuantLayout layout = cpu::QuantLayout::kRows);

  std::vector<Block> blocks_;
  int64_t rows_ = 0;
  int64_t cols_ = 0;
  std::vector<std::shared_ptr<const void>> owners_;
};

// How a product takes its f32 activations, per weight format: BF16 blocks as they are or rounded
// to BF16 (`--activations`, gemm_bf16.h); int8 blocks as they are or quantised per 32 inputs
// (`--int8-activations`, gemm_int8.h), and int4 blocks as int8 ones. f32 blocks always take them
// as they are.
struct ActivationModes {
  cpu::Bf16Activations bf16 = cpu::Bf16Activations::kF32;
  cpu::Int8Activations int8 = cpu::Int8Activations::kF32;
};

// y[rows, w.rows()] = x[rows, w.cols()] · wᵀ, or y += that when `accumulate`: f32 blocks through
// OpenBLAS, BF16 blocks through LinearBf16, int8 blocks through LinearInt8 and int4 ones through
// LinearInt4, each with its mode of `activations`, each into its column block of y.
void Project(const float* x, const WeightMatrix& w, float* y, int64_t rows, bool accumulate = false,
             ActivationModes activations = {});

// x[i, :] = row tokens[i] of `table`, widened to f32, for i < n (embedding lookup; the ids are
// valid rows).
void GatherRows(const WeightMatrix& table, const int32_t* tokens, int64_t n, float* x);

}  // namespace dscale
