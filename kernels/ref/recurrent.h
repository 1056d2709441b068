// What the recurrent reference kernels (RNN, GRU, LSTM: recurrent.cc) share
// with their fast rows (kernels/cpu/recurrent_f32.cc).
#pragma once

#include <string>

namespace sparq {

// ONNX activation names compare without case ("Sigmoid" == "sigmoid").
bool SameNameIgnoringCase(const std::string& a, const char* b);

}  // namespace sparq
