#include "inflate/tensor_recipes.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/dtype.h"

namespace dscale {
namespace {

// out[i, j] = scale · source[rows[first + i], cols[j]] where both maps give an index, else 0;
// then `patch` on each row. A null `source` (an identity layer's tensor) gives zeros.
RowFiller MappedRows(std::shared_ptr<const std::vector<float>> source, int64_t source_cols,
                     SharedIndexMap rows, SharedIndexMap cols, float scale, RowPatch patch) {
  return [=](int64_t first, int64_t count, float* out) {
    const auto width = static_cast<int64_t>(cols->size());
    for (int64_t i = 0; i < count; ++i) {
      float* row = out + i * width;
      const int64_t r = source ? (*rows)[static_cast<size_t>(first + i)] : -1;
      if (r < 0) {
        std::fill(row, row + width, 0.0f);
      } else {
        const float* src = source->data() + r * source_cols;
        for (int64_t j = 0; j < width; ++j) {
          const int64_t c = (*cols)[static_cast<size_t>(j)];
          row[j] = c >= 0 ? scale * src[c] : 0.0f;
        }
      }
      if (patch) patch(first + i, row);
    }
  };
}

bool ExactInBf16(const std::vector<float>& values) {
  return std::all_of(values.begin(), values.end(),
                     [](float v) { return Bf16ToF32(F32ToBf16(v)) == v; });
}

int64_t Rows(const std::vector<int64_t>& shape) { return shape.size() == 2 ? shape[0] : 1; }

}  // namespace

SharedIndexMap ShareMap(IndexMap map) { return std::make_shared<const IndexMap>(std::move(map)); }

SharedIndexMap IdentityMap(int64_t n) {
  IndexMap map(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) map[static_cast<size_t>(i)] = i;
  return ShareMap(std::move(map));
}

RowPatch ScaleColumns(int64_t first, int64_t count, float factor) {
  return [first, count, factor](int64_t, float* row) {
    for (int64_t i = first; i < first + count; ++i) row[i] *= factor;
  };
}

void AppendKeptColumns(int64_t small_first, int64_t count, IndexMap* cols) {
  for (int64_t i = 0; i < count; ++i) cols->push_back(small_first + i);
}

RowPatch AppendFinalRowColumns(const InflatePlan& plan, int64_t small_first, IndexMap* cols) {
  const auto first = static_cast<int64_t>(cols->size());
  for (const int64_t i : plan.hidden) cols->push_back(i >= 0 ? small_first + i : -1);
  return ScaleColumns(first, static_cast<int64_t>(plan.hidden.size()), plan.final_row_scale());
}

std::vector<float> MapGains(const std::vector<float>& small, const IndexMap& map, double scale) {
  std::vector<float> out(map.size(), 0.0f);
  for (size_t j = 0; j < map.size(); ++j) {
    if (map[j] >= 0) out[j] = static_cast<float>(scale * small[static_cast<size_t>(map[j])]);
  }
  return out;
}

Result<std::vector<float>> TensorList::Read(const std::string& name,
                                            const std::vector<int64_t>& shape) const {
  return source_->ReadF32(prefix_ + name, shape);
}

Status TensorList::Matrix(MatrixRecipe r) {
  const TensorInfo* info = source_->Find(prefix_ + r.source);
  if (info == nullptr)
    return NotFound(source_->dir() + ": no tensor \"" + prefix_ + r.source + "\"");
  DType dtype = info->dtype == DType::kBF16 ? DType::kBF16 : DType::kF32;
  int exponent = 0;
  if (std::frexp(r.scale, &exponent) != 0.5f) dtype = DType::kF32;
  auto prepare = [source = source_, full = prefix_ + r.source, r]() -> Result<RowFiller> {
    std::shared_ptr<const std::vector<float>> values;
    if (!r.zero) {
      DSCALE_ASSIGN_OR_RETURN(std::vector<float> read, source->ReadF32(full, r.source_shape));
      values = std::make_shared<const std::vector<float>>(std::move(read));
    }
    return MappedRows(values, r.source_shape.back(), r.rows, r.cols, r.scale, r.patch);
  };
  tensors_.push_back(
      {.name = r.name, .dtype = dtype, .shape = r.shape, .prepare = std::move(prepare)});
  return Status::Ok();
}

Status TensorList::Copy(const std::string& name, const std::vector<int64_t>& shape) {
  return Matrix({.name = name,
                 .shape = shape,
                 .source = name,
                 .source_shape = shape,
                 .rows = IdentityMap(Rows(shape)),
                 .cols = IdentityMap(shape.back())});
}

Status TensorList::Gains(std::string name, std::vector<float> values,
                         const std::string& source_name) {
  const auto n = static_cast<int64_t>(values.size());
  return Values(std::move(name), {n}, std::move(values), source_name);
}

Status TensorList::Values(std::string name, std::vector<int64_t> shape, std::vector<float> values,
                          const std::string& source_name) {
  const TensorInfo* info = source_->Find(prefix_ + source_name);
  const bool bf16 = info != nullptr && info->dtype == DType::kBF16 && ExactInBf16(values);
  const int64_t cols = shape.back();
  auto shared = std::make_shared<const std::vector<float>>(std::move(values));
  auto prepare = [shared, cols]() -> Result<RowFiller> {
    return RowFiller([shared, cols](int64_t first, int64_t count, float* out) {
      std::copy(shared->begin() + first * cols, shared->begin() + (first + count) * cols, out);
    });
  };
  tensors_.push_back({.name = std::move(name),
                      .dtype = bf16 ? DType::kBF16 : DType::kF32,
                      .shape = std::move(shape),
                      .prepare = std::move(prepare)});
  return Status::Ok();
}

}  // namespace dscale
