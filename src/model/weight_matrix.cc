#include "model/weight_matrix.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>

#include "core/check.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/gemm_int4.h"
#include "kernels/cpu/gemm_int8.h"

namespace dscale {
namespace {

// Bytes of one stored row of `cols` elements.
size_t RowBytes(WeightFormat format, int64_t cols) {
  switch (format) {
    case WeightFormat::kF32:
      return static_cast<size_t>(cols) * sizeof(float);
    case WeightFormat::kBF16:
      return static_cast<size_t>(cols) * sizeof(uint16_t);
    case WeightFormat::kInt4:
      return static_cast<size_t>(cpu::Int4RowBytes(cols));
    case WeightFormat::kInt8:
      break;
  }
  return static_cast<size_t>(cols) * sizeof(int8_t);
}

bool HasScales(WeightFormat format) {
  return format == WeightFormat::kInt8 || format == WeightFormat::kInt4;
}

bool IsPanels(const WeightMatrix::Block& b) {
  return HasScales(b.format) && b.layout == cpu::QuantLayout::kPanels;
}

cpu::Int4Matrix Int4Of(const WeightMatrix::Block& b) {
  return {.values = static_cast<const uint8_t*>(b.data),
          .scales = b.scales,
          .layout = b.layout,
          .first = b.first};
}

cpu::Int8Matrix Int8Of(const WeightMatrix::Block& b) {
  return {.values = static_cast<const int8_t*>(b.data),
          .scales = b.scales,
          .layout = b.layout,
          .first = b.first};
}

// Bytes of one panel of `cols` inputs of an int8 or int4 matrix.
int64_t PanelBytes(WeightFormat format, int64_t cols) {
  return format == WeightFormat::kInt4 ? cpu::Int4PanelBytes(cols) : cpu::Int8PanelBytes(cols);
}

// Bytes of values and scales an int8 or int4 matrix of `rows` rows takes in `layout`, from lane
// `first`.
std::pair<int64_t, int64_t> QuantSizes(WeightFormat format, cpu::QuantLayout layout, int64_t first,
                                       int64_t rows, int64_t cols) {
  if (layout == cpu::QuantLayout::kRows) {
    return {rows * static_cast<int64_t>(RowBytes(format, cols)), rows * cpu::Int8Groups(cols)};
  }
  const int64_t panels = cpu::QuantPanels(first, rows);
  return {panels * PanelBytes(format, cols), panels * cpu::QuantPanelScales(cols)};
}

template <typename T>
WeightMatrix Owned(std::vector<T> values, DType dtype, int64_t rows, int64_t cols) {
  DSCALE_CHECK(rows >= 0 && cols >= 0 && static_cast<int64_t>(values.size()) == rows * cols);
  auto owner = std::make_shared<std::vector<T>>(std::move(values));
  return WeightMatrix::View(dtype, owner->data(), rows, cols, owner);
}

}  // namespace

WeightMatrix WeightMatrix::FromF32(std::vector<float> values, int64_t rows, int64_t cols) {
  return Owned(std::move(values), DType::kF32, rows, cols);
}

WeightMatrix WeightMatrix::FromF32(std::vector<float> values, const std::vector<int64_t>& shape) {
  const int64_t rows = shape.empty() ? 1 : shape[0];
  const int64_t cols = rows == 0 ? 0 : static_cast<int64_t>(values.size()) / rows;
  return FromF32(std::move(values), rows, cols);
}

WeightMatrix WeightMatrix::FromBf16(std::vector<uint16_t> bits, int64_t rows, int64_t cols) {
  return Owned(std::move(bits), DType::kBF16, rows, cols);
}

WeightMatrix WeightMatrix::FromInt8(std::vector<int8_t> values, std::vector<cpu::Int8Scale> scales,
                                    int64_t rows, int64_t cols, cpu::QuantLayout layout) {
  DSCALE_CHECK(rows >= 0 && cols >= 0);
  const auto [value_bytes, scale_count] = QuantSizes(WeightFormat::kInt8, layout, 0, rows, cols);
  DSCALE_CHECK(static_cast<int64_t>(values.size()) == value_bytes &&
               static_cast<int64_t>(scales.size()) == scale_count);
  auto owner = std::make_shared<std::pair<std::vector<int8_t>, std::vector<cpu::Int8Scale>>>(
      std::move(values), std::move(scales));
  return OwnedQuantized(WeightFormat::kInt8, owner, owner->first.data(), owner->second.data(), rows,
                        cols, layout);
}

WeightMatrix WeightMatrix::FromInt8(HugePageArray<int8_t> values,
                                    HugePageArray<cpu::Int8Scale> scales, int64_t rows,
                                    int64_t cols, cpu::QuantLayout layout) {
  DSCALE_CHECK(rows >= 0 && cols >= 0);
  auto owner = std::make_shared<std::pair<HugePageArray<int8_t>, HugePageArray<cpu::Int8Scale>>>(
      std::move(values), std::move(scales));
  return OwnedQuantized(WeightFormat::kInt8, owner, owner->first.get(), owner->second.get(), rows,
                        cols, layout);
}

WeightMatrix WeightMatrix::FromInt4(std::vector<uint8_t> packed, std::vector<cpu::Int8Scale> scales,
                                    int64_t rows, int64_t cols, cpu::QuantLayout layout) {
  DSCALE_CHECK(rows >= 0 && cols >= 0);
  const auto [value_bytes, scale_count] = QuantSizes(WeightFormat::kInt4, layout, 0, rows, cols);
  DSCALE_CHECK(static_cast<int64_t>(packed.size()) == value_bytes &&
               static_cast<int64_t>(scales.size()) == scale_count);
  auto owner = std::make_shared<std::pair<std::vector<uint8_t>, std::vector<cpu::Int8Scale>>>(
      std::move(packed), std::move(scales));
  return OwnedQuantized(WeightFormat::kInt4, owner, owner->first.data(), owner->second.data(), rows,
                        cols, layout);
}

WeightMatrix WeightMatrix::FromInt4(HugePageArray<uint8_t> packed,
                                    HugePageArray<cpu::Int8Scale> scales, int64_t rows,
                                    int64_t cols, cpu::QuantLayout layout) {
  DSCALE_CHECK(rows >= 0 && cols >= 0);
  auto owner = std::make_shared<std::pair<HugePageArray<uint8_t>, HugePageArray<cpu::Int8Scale>>>(
      std::move(packed), std::move(scales));
  return OwnedQuantized(WeightFormat::kInt4, owner, owner->first.get(), owner->second.get(), rows,
                        cols, layout);
}

WeightMatrix WeightMatrix::OwnedQuantized(WeightFormat format, std::shared_ptr<const void> owner,
                                          const void* values, const cpu::Int8Scale* scales,
                                          int64_t rows, int64_t cols, cpu::QuantLayout layout) {
  // One owner for both arrays, so row ranges and stacks keep them alive together.
  WeightMatrix m;
  m.rows_ = rows;
  m.cols_ = cols;
  if (rows > 0) {
    m.blocks_.push_back(
        {.format = format, .data = values, .scales = scales, .rows = rows, .layout = layout});
  }
  m.owners_.push_back(std::move(owner));
  return m;
}

WeightMatrix WeightMatrix::View(DType dtype, const void* data, int64_t rows, int64_t cols,
                                std::shared_ptr<const void> owner) {
  DSCALE_CHECK_MSG(dtype == DType::kF32 || dtype == DType::kBF16,
                   "weight matrices are f32 or BF16");
  WeightMatrix m;
  m.rows_ = rows;
  m.cols_ = cols;
  const WeightFormat format = dtype == DType::kBF16 ? WeightFormat::kBF16 : WeightFormat::kF32;
  if (rows > 0) m.blocks_.push_back({.format = format, .data = data, .rows = rows});
  m.owners_.push_back(std::move(owner));
  return m;
}

WeightMatrix WeightMatrix::Stack(const std::vector<WeightMatrix>& parts) {
  WeightMatrix m;
  if (!parts.empty()) m.cols_ = parts.front().cols_;
  for (const WeightMatrix& part : parts) {
    DSCALE_CHECK(part.cols_ == m.cols_);
    m.rows_ += part.rows_;
    m.blocks_.insert(m.blocks_.end(), part.blocks_.begin(), part.blocks_.end());
    m.owners_.insert(m.owners_.end(), part.owners_.begin(), part.owners_.end());
  }
  return m;
}

int64_t WeightMatrix::bytes() const {
  int64_t total = 0;
  for (const Block& b : blocks_) {
    if (HasScales(b.format)) {
      const auto [value_bytes, scale_count] =
          QuantSizes(b.format, b.layout, b.first, b.rows, cols_);
      total += value_bytes + scale_count * static_cast<int64_t>(sizeof(cpu::Int8Scale));
      continue;
    }
    total += b.rows * static_cast<int64_t>(RowBytes(b.format, cols_));
  }
  return total;
}

namespace {

// Rows [begin, begin + count) of a block in the rows layout, and of one in the panel layout.
WeightMatrix::Block Rows(const WeightMatrix::Block& b, int64_t begin, int64_t count, int64_t cols) {
  WeightMatrix::Block part = b;
  part.data =
      static_cast<const std::byte*>(b.data) + static_cast<size_t>(begin) * RowBytes(b.format, cols);
  if (b.scales != nullptr) part.scales = b.scales + begin * cpu::Int8Groups(cols);
  part.rows = count;
  return part;
}
WeightMatrix::Block PanelRows(const WeightMatrix::Block& b, int64_t begin, int64_t count,
                              int64_t cols) {
  const int64_t lane = b.first + begin, panel = lane / cpu::kQuantPanelOutputs;
  WeightMatrix::Block part = b;
  part.data = static_cast<const uint8_t*>(b.data) + panel * PanelBytes(b.format, cols);
  part.scales = b.scales + panel * cpu::QuantPanelScales(cols);
  part.rows = count;
  part.first = lane % cpu::kQuantPanelOutputs;
  return part;
}

}  // namespace

WeightMatrix WeightMatrix::RowRange(int64_t begin, int64_t count) const {
  DSCALE_CHECK(begin >= 0 && count >= 0 && begin + count <= rows_);
  WeightMatrix m;
  m.cols_ = cols_;
  m.owners_ = owners_;
  int64_t first = 0;  // first row of the current block
  for (const Block& b : blocks_) {
    const int64_t lo = std::max(begin, first), hi = std::min(begin + count, first + b.rows);
    if (lo < hi) {
      m.blocks_.push_back(IsPanels(b) ? PanelRows(b, lo - first, hi - lo, cols_)
                                      : Rows(b, lo - first, hi - lo, cols_));
      m.rows_ += hi - lo;
    }
    first += b.rows;
  }
  return m;
}

WeightMatrix WeightMatrix::Reshaped(int64_t rows) const {
  DSCALE_CHECK(blocks_.size() == 1 && rows > 0 && static_cast<int64_t>(size()) % rows == 0);
  const Block& b = blocks_[0];
  DSCALE_CHECK(b.format == WeightFormat::kF32 || b.format == WeightFormat::kBF16);
  WeightMatrix m = *this;
  m.rows_ = rows;
  m.cols_ = static_cast<int64_t>(size()) / rows;
  m.blocks_[0].rows = rows;
  return m;
}

namespace {

// The selected rows that lie in blocks of one format (and, quantised, one layout), copied back to
// back in the rows layout.
struct SelectedRun {
  WeightFormat format = WeightFormat::kF32;
  cpu::QuantLayout layout = cpu::QuantLayout::kRows;  // kInt8 and kInt4: the source blocks'
  std::vector<std::byte> values;
  std::vector<cpu::Int8Scale> scales;  // kInt8 and kInt4 only
  int64_t rows = 0;
};

template <typename T>
std::vector<T> BytesAs(const std::vector<std::byte>& bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

// A quantised run as a matrix in the layout its rows came from: panels packed from lane 0.
template <typename T, typename Pack>
WeightMatrix QuantRunToMatrix(SelectedRun run, int64_t cols, int64_t panel_bytes, Pack pack) {
  std::vector<T> values = BytesAs<T>(run.values);
  if (run.layout == cpu::QuantLayout::kPanels) {
    const int64_t panels = cpu::QuantPanels(0, run.rows);
    std::vector<T> packed(static_cast<size_t>(panels * panel_bytes));
    std::vector<cpu::Int8Scale> scales(static_cast<size_t>(panels * cpu::QuantPanelScales(cols)));
    pack(values.data(), run.scales.data(), run.rows, cols, packed.data(), scales.data());
    values = std::move(packed);
    run.scales = std::move(scales);
  }
  if constexpr (std::is_same_v<T, int8_t>) {
    return WeightMatrix::FromInt8(std::move(values), std::move(run.scales), run.rows, cols,
                                  run.layout);
  } else {
    return WeightMatrix::FromInt4(std::move(values), std::move(run.scales), run.rows, cols,
                                  run.layout);
  }
}

WeightMatrix RunToMatrix(SelectedRun run, int64_t cols) {
  switch (run.format) {
    case WeightFormat::kBF16:
      return WeightMatrix::FromBf16(BytesAs<uint16_t>(run.values), run.rows, cols);
    case WeightFormat::kInt8:
      return QuantRunToMatrix<int8_t>(std::move(run), cols, cpu::Int8PanelBytes(cols),
                                      cpu::PackInt8Panels);
    case WeightFormat::kInt4:
      return QuantRunToMatrix<uint8_t>(std::move(run), cols, cpu::Int4PanelBytes(cols),
                                       cpu::PackInt4Panels);
    case WeightFormat::kF32:
      break;
  }
  return WeightMatrix::FromF32(BytesAs<float>(run.values), run.rows, cols);
}

}  // namespace

WeightMatrix WeightMatrix::SelectRows(std::span<const int32_t> rows) const {
  std::vector<WeightMatrix> parts;
  SelectedRun run;
  const int64_t groups = cpu::Int8Groups(cols_);
  for (const int32_t wanted : rows) {
    DSCALE_CHECK(wanted >= 0 && wanted < rows_);
    int64_t row = wanted;
    const Block* block = blocks_.data();
    while (row >= block->rows) row -= (block++)->rows;
    if (run.rows > 0 && (run.format != block->format || run.layout != block->layout)) {
      parts.push_back(RunToMatrix(std::move(run), cols_));
      run = SelectedRun{};
    }
    run.format = block->format;
    run.layout = block->layout;
    const size_t row_bytes = RowBytes(block->format, cols_);
    if (HasScales(block->format)) {  // copied to the rows layout from either
      run.values.resize(run.values.size() + row_bytes);
      run.scales.resize(run.scales.size() + static_cast<size_t>(groups));
      std::byte* values = run.values.data() + run.values.size() - row_bytes;
      cpu::Int8Scale* scales = run.scales.data() + run.scales.size() - groups;
      if (block->format == WeightFormat::kInt4) {
        cpu::Int4RowOf(Int4Of(*block), cols_, row, reinterpret_cast<uint8_t*>(values), scales);
      } else {
        cpu::Int8OutputsOf(Int8Of(*block), cols_, row, 1, reinterpret_cast<int8_t*>(values),
                           scales);
      }
    } else {
      const auto* source = static_cast<const std::byte*>(block->data) + row * row_bytes;
      run.values.insert(run.values.end(), source, source + row_bytes);
    }
    ++run.rows;
  }
  if (run.rows > 0 || parts.empty()) parts.push_back(RunToMatrix(std::move(run), cols_));
  WeightMatrix selected = Stack(parts);
  selected.cols_ = cols_;
  return selected;
}

void WeightMatrix::RowToF32(int64_t row, float* dst) const {
  DSCALE_CHECK(row >= 0 && row < rows_);
  for (const Block& b : blocks_) {
    if (row >= b.rows) {
      row -= b.rows;
      continue;
    }
    if (b.format == WeightFormat::kInt4) {  // found by Int4RowOf: panels have no row offset
      std::vector<uint8_t> packed(static_cast<size_t>(cpu::Int4RowBytes(cols_)));
      std::vector<cpu::Int8Scale> scales(static_cast<size_t>(cpu::Int8Groups(cols_)));
      cpu::Int4RowOf(Int4Of(b), cols_, row, packed.data(), scales.data());
      cpu::DequantizeInt4Rows(packed.data(), scales.data(), 1, cols_, dst);
      return;
    }
    if (b.format == WeightFormat::kInt8) {  // found by Int8OutputsOf, as int4 by Int4RowOf
      std::vector<int8_t> values(static_cast<size_t>(cols_));
      std::vector<cpu::Int8Scale> scales(static_cast<size_t>(cpu::Int8Groups(cols_)));
      cpu::Int8OutputsOf(Int8Of(b), cols_, row, 1, values.data(), scales.data());
      cpu::DequantizeInt8Rows(values.data(), scales.data(), 1, cols_, dst);
      return;
    }
    const std::byte* data = static_cast<const std::byte*>(b.data) +
                            static_cast<size_t>(row) * RowBytes(b.format, cols_);
    const DType dtype = b.format == WeightFormat::kBF16 ? DType::kBF16 : DType::kF32;
    ConvertToF32(dtype, data, static_cast<size_t>(cols_), dst);
    return;
  }
}

std::vector<float> WeightMatrix::ToF32() const {
  std::vector<float> out(size());
  for (int64_t r = 0; r < rows_; ++r) RowToF32(r, out.data() + r * cols_);
  return out;
}

std::vector<uint16_t> WeightMatrix::ToBf16() const {
  std::vector<uint16_t> out(size());
  size_t at = 0;
  int64_t row = 0;  // first row of the current block
  for (const Block& b : blocks_) {
    const auto count = static_cast<size_t>(b.rows * cols_);
    if (b.format == WeightFormat::kBF16) {
      std::memcpy(out.data() + at, b.data, count * sizeof(uint16_t));
    } else if (b.format == WeightFormat::kF32) {
      ConvertFromF32(DType::kBF16, static_cast<const float*>(b.data), count, out.data() + at);
    } else {
      std::vector<float> wide(static_cast<size_t>(cols_));
      for (int64_t r = 0; r < b.rows; ++r) {
        RowToF32(row + r, wide.data());
        ConvertFromF32(DType::kBF16, wide.data(), wide.size(), out.data() + at + r * cols_);
      }
    }
    at += count;
    row += b.rows;
  }
  return out;
}

void Project(const float* x, const WeightMatrix& w, float* y, int64_t rows, bool accumulate,
             ActivationModes activations) {
  int64_t column = 0;
  for (const WeightMatrix::Block& b : w.blocks()) {
    if (b.format == WeightFormat::kBF16) {
      cpu::LinearBf16(x, static_cast<const uint16_t*>(b.data), y + column, rows, w.cols(), b.rows,
                      accumulate, w.rows(), activations.bf16);
    } else if (b.format == WeightFormat::kInt8) {
      cpu::LinearInt8(x, Int8Of(b), y + column, rows, w.cols(), b.rows, accumulate, w.rows(),
                      activations.int8);
    } else if (b.format == WeightFormat::kInt4) {
      cpu::LinearInt4(x, Int4Of(b), y + column, rows, w.cols(), b.rows, accumulate, w.rows(),
                      activations.int8);
    } else {
      cpu::Linear(x, static_cast<const float*>(b.data), y + column, rows, w.cols(), b.rows,
                  accumulate, w.rows());
    }
    column += b.rows;
  }
}

void GatherRows(const WeightMatrix& table, const int32_t* tokens, int64_t n, float* x) {
  for (int64_t i = 0; i < n; ++i) table.RowToF32(tokens[i], x + i * table.cols());
}

}  // namespace dscale
