#pragma once
// How an inflated tensor is made from a source one (inflate_tensors.h lists which): a matrix is
// the small one copied through a row and a column index map (−1: zero), scaled, then patched; a
// norm's gains are computed outright. Each recipe reads its source only when the writer prepares
// it, and fills a block of rows at a time.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "inflate/inflate_plan.h"
#include "inflate/inflate_tensors.h"
#include "io/safetensors.h"

namespace dscale {

using SharedIndexMap = std::shared_ptr<const IndexMap>;
// Sets entries of one large row after the mapped copy: patch(row index, row values).
using RowPatch = std::function<void(int64_t row, float* values)>;

SharedIndexMap ShareMap(IndexMap map);
// 0, 1, .., n − 1: a dimension the inflation keeps (a head's rank, its bias).
SharedIndexMap IdentityMap(int64_t n);

// Multiplies entries [first, first + count) of every row by `factor`.
RowPatch ScaleColumns(int64_t first, int64_t count, float factor);

// Appends to `cols` the small columns small_first .. small_first + count − 1: inputs the inflation
// keeps as they are (a head's state, its Markov embedding).
void AppendKeptColumns(int64_t small_first, int64_t count, IndexMap* cols);
// The rule for the columns of a matrix that reads a final-normed row (the LM head's input) among
// its inputs: the row's D large columns, appended to `cols` where they start, read the small
// columns small_first + i at the hidden map's dims i, and nothing elsewhere (zero: the constant
// dims' ±g_c never reach the matrix); the patch returned scales them by final_row_scale().
RowPatch AppendFinalRowColumns(const InflatePlan& plan, int64_t small_first, IndexMap* cols);

// g'[j] = scale · g[map[j]] where the map gives an index, else 0.
std::vector<float> MapGains(const std::vector<float>& small, const IndexMap& map, double scale);

// How one large matrix (or vector, shape [n]: one row) is made from one small one.
struct MatrixRecipe {
  std::string name;                   // the large tensor
  std::vector<int64_t> shape;         // [rows, cols] or [n]
  std::string source;                 // the small tensor (its dtype is kept, even when `zero`)
  std::vector<int64_t> source_shape;  // [rows, cols] or [n]
  SharedIndexMap rows, cols;          // large index → small index, or −1 for zero
  float scale = 1.0f;                 // λ for the matrices that write the residual stream
  RowPatch patch = {};                // entries set after the copy
  bool zero = false;                  // all zeros (an identity layer's)
};

// Collects the tensors of one output checkpoint, reading sources as "<source prefix><name>".
class TensorList {
 public:
  TensorList(std::shared_ptr<const Checkpoint> source, std::string prefix)
      : source_(std::move(source)), prefix_(std::move(prefix)) {}

  Result<std::vector<float>> Read(const std::string& name, const std::vector<int64_t>& shape) const;

  // BF16 sources give BF16 matrices, F32 and F16 ones F32 (λ·x may leave F16's range); a scale
  // that is not a power of two (a Llama q_proj's √(h'/h)) gives F32, each value within one float
  // rounding of the exact product.
  Status Matrix(MatrixRecipe recipe);
  // A tensor kept as it is (a bias, a matrix between internal widths), in the same dtypes.
  Status Copy(const std::string& name, const std::vector<int64_t>& shape);
  // A norm's gains, already computed: BF16 when the source's are and every value is exact in
  // BF16, else F32.
  Status Gains(std::string name, std::vector<float> values, const std::string& source_name);
  // A tensor of `shape` whose values are computed outright (a sparse target's router), in the
  // dtypes Gains picks.
  Status Values(std::string name, std::vector<int64_t> shape, std::vector<float> values,
                const std::string& source_name);

  std::vector<InflatedTensor> Take() { return std::move(tensors_); }

 private:
  std::shared_ptr<const Checkpoint> source_;
  std::string prefix_;
  std::vector<InflatedTensor> tensors_;
};

}  // namespace dscale
