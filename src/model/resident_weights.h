#pragma once
// BF16 matrices the CPU forward reads every step, copied out of the checkpoint's memory mapping
// into memory of the process's own on transparent huge pages (core/huge_pages.h), each matrix one
// contiguous block. Streamed from the mapping's page-cache pages, the weights of a one-row step
// arrived at 0.87 of the rate the same bytes stream from anonymous huge pages (the AMX tiles over
// a Qwen3.5-4B checkpoint's 8.4 GB: 26 against 29.8 GB/s on the AMX Xeon of docs/BENCHMARKS.md,
// "Weights in memory of the process's own"); and a matrix stacked from blocks in several places
// (q/k/v, a gated query's heads reordered) becomes one product call instead of one per block.
// The copy costs a pass over the weights at load, and the same resident memory the mapping's
// pages took (the checkpoint's pages are dropped from the process as each layer is copied:
// Checkpoint::DropResident).

#include "model/decoder_weights.h"
#include "model/weight_matrix.h"

namespace dscale {

// The layer's projections (ForEachProjection), its router and shared-expert gate, each a matrix
// whose blocks are all BF16, copied into one huge-page allocation for the layer (the rest, f32
// or quantised, is already the process's own).
void CopyLayerToHugePages(DecoderLayerWeights* layer);
// One matrix (the LM head) the same way; a matrix with a block that is not BF16 stays as it is.
void CopyToHugePages(WeightMatrix* matrix);

}  // namespace dscale
