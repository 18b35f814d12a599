#pragma once
// LinearInt8's int8 × int8 products (Int8Activations::kInt8, gemm_int8.h) on AMX tiles (Intel
// Xeon from Sapphire Rapids): one tdpbssd multiplies a 16 × 32 tile of int8 weights (16 outputs,
// one scale group) by a 32 × 16 tile of quantised activations (up to 16 rows) into the 16 × 16
// exact int32 group dot products at once; AVX-512 then takes each group's term in group order,
// acc = fma(fl(d_x · d_w), dot_g, acc), as every other variant does, so the bits are the same
// as theirs for every row count.

#include <cstdint>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gemm_int4.h"
#include "kernels/cpu/gemm_int8.h"

namespace dscale::cpu {

// Whether this CPU has AMX-TILE, AMX-INT8 and AVX-512 F, DSCALE_CPU_ISA's cap allows AMX, and
// this process may use the tiles (read from CpuFeaturesInUse() once); the same under `cap` instead
// of the environment's, and for `features`.
bool HasAmxInt8();
bool HasAmxInt8(CpuIsaCap cap);
bool HasAmxInt8(const CpuFeatures& features);

// y[rows, out] (+)= the products of gemm_int8.h for activations already quantised — q [rows,
// groups · 32] (each row zero-padded to whole groups) and their scales [rows, groups] — and
// weights w [out, in] int8 with scales [out, groups], groups = Int8Groups(in); rows of y are
// `ldy` floats apart. Requires HasAmxInt8(). The threads split the outputs.
void LinearAmxInt8(const int8_t* q, const float* x_scales, int64_t rows, const int8_t* w,
                   const Int8Scale* w_scales, int64_t in, int64_t out, float* y, int64_t ldy,
                   bool accumulate);

// The same with 4-bit weights w4 [out, in] in either layout (gemm_int4.h; the values q as the
// int8 weights), the bits of LinearAmxInt8 on the unpacked matrix. The panel layout runs
// LinearAmxInt4Panels; the rows layout unpacks each output tile's 16 rows to int8 once, into the
// thread's scratch (16 × in bytes, in L2), and multiplies every row tile from there.
void LinearAmxInt4(const Int8ActivationRows& xq, int64_t rows, const Int4Matrix& w4, int64_t in,
                   int64_t out, float* y, int64_t ldy, bool accumulate);

// 4-bit weights in the panel layout from lane `first` (gemm_int4.h) on AMX tiles
// (gemm_int4_amx.cc): each panel's groups unpacked once into weight tiles, as tdpbssd reads its
// second operand, and multiplied by tiles of up to 16 activation rows packed once per call (a
// last tile of one or two rows through Int4PanelGroups512 instead). Requires HasAmxInt8().
void LinearAmxInt4Panels(const Int8ActivationRows& xq, int64_t rows, const uint8_t* panels,
                         const Int8Scale* panel_scales, int64_t first, int64_t in, int64_t out,
                         float* y, int64_t ldy, bool accumulate);

}  // namespace dscale::cpu
