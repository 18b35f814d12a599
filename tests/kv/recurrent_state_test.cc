// RecurrentStates' two ways of running a span (kv/recurrent_state.h): on a working copy that a
// commit adopts or drops, or, for rows that all commit, on the committed state in place.

#include "kv/recurrent_state.h"

#include <gtest/gtest.h>

#include <vector>

namespace dscale {
namespace {

// Two model layers, both linear: a state of 2 conv and 3 delta values each, 1 input value a row.
RecurrentStates TwoLinearLayers() {
  RecurrentStates states(
      {.linear_index = {0, 1}, .conv_values = 2, .delta_values = 3, .input_values = 1});
  states.Reset(0);
  return states;
}

// Writes `value` over layer `layer`'s working state (conv and delta) as a forward would.
void WriteWorking(RecurrentStates& states, int32_t layer, float value) {
  float* conv = states.WorkingConv(0, layer);
  float* delta = states.WorkingDelta(0, layer);
  std::fill_n(conv, 2, value);
  std::fill_n(delta, 3, value);
}

// The committed state's ten values (readable while a span is pending, as a replay reads them).
std::vector<float> Committed(RecurrentStates& states) {
  const float* values = states.Conv(0, 0);
  return {values, values + 10};
}

TEST(RecurrentStatesTest, AWorkingCopyLeavesTheCommittedStateUntilAdopted) {
  RecurrentStates states = TwoLinearLayers();
  states.BeginSpan(0, /*rows=*/3, /*in_place=*/false);
  EXPECT_FALSE(states.in_place(0));
  EXPECT_NE(states.WorkingConv(0, 1), states.Conv(0, 1));
  WriteWorking(states, 0, 1.0f);
  WriteWorking(states, 1, 2.0f);
  states.Inputs(0, 1)[2] = 7.0f;  // row 2 of layer 1's replay inputs
  EXPECT_EQ(Committed(states), std::vector<float>(10, 0.0f));
  states.AdoptWorking(0);
  EXPECT_EQ(states.position(0), 3);
  EXPECT_EQ(Committed(states), (std::vector<float>{1, 1, 1, 1, 1, 2, 2, 2, 2, 2}));
  // A span cut to none of its rows (the caller replayed nothing) keeps the state it started from.
  states.BeginSpan(0, 2, false);
  WriteWorking(states, 0, 9.0f);
  states.FinishReplay(0, 0);
  EXPECT_EQ(states.position(0), 3);
  EXPECT_EQ(Committed(states), (std::vector<float>{1, 1, 1, 1, 1, 2, 2, 2, 2, 2}));
}

TEST(RecurrentStatesTest, RowsThatAllCommitRunOnTheCommittedStateInPlace) {
  RecurrentStates states = TwoLinearLayers();
  states.BeginSpan(0, /*rows=*/1, /*in_place=*/true);
  EXPECT_TRUE(states.in_place(0));
  EXPECT_EQ(states.WorkingConv(0, 0), states.Conv(0, 0));
  EXPECT_EQ(states.WorkingDelta(0, 1), states.Delta(0, 1));
  WriteWorking(states, 1, 4.0f);
  states.AdoptWorking(0);
  EXPECT_EQ(states.position(0), 1);
  EXPECT_EQ(Committed(states), (std::vector<float>{0, 0, 0, 0, 0, 4, 4, 4, 4, 4}));
  // The next span may take a working copy again: it reads the state the in-place one left.
  states.BeginSpan(0, 2, false);
  EXPECT_NE(states.WorkingConv(0, 1), states.Conv(0, 1));
  states.FinishReplay(0, 2);
  EXPECT_EQ(states.position(0), 3);
}

TEST(RecurrentStatesTest, AnInPlaceSpanKeepsNoReplayInputsAndAllItsRows) {
  RecurrentStates states = TwoLinearLayers();
  states.BeginSpan(0, 4, /*in_place=*/true);
  EXPECT_DEATH(states.Inputs(0, 0), "keeps all its rows");
  EXPECT_DEATH(states.FinishReplay(0, 3), "keeps all its rows");
  states.FinishReplay(0, 4);
  EXPECT_EQ(states.position(0), 4);
}

}  // namespace
}  // namespace dscale
