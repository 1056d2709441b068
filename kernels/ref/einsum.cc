// Reference Einsum: every output element is the sum, over the labels the
// output lacks, of the product of the operands' elements at those label
// values. Floating point sums in double and rounds once; integers multiply
// and add in 64-bit unsigned arithmetic (wrapping) and wrap to the type.
#include "kernels/ref/einsum.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <type_traits>

#include "kernels/parallel.h"
#include "kernels/ref/nn_common.h"

namespace sparq {

namespace {

bool IsLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// One term of the equation: its letters in order, with the position of its
// ellipsis among them (-1: none).
struct Term {
  std::vector<int> letters;
  int ellipsis_at = -1;
};

StatusOr<Term> ParseTerm(const std::string& text, const std::string& where) {
  Term term;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (IsLetter(c)) {
      term.letters.push_back(static_cast<unsigned char>(c));
    } else if (c == '.') {
      if (text.compare(i, 3, "...") != 0) return Status::InvalidArgument(where + ": '.' outside an ellipsis '...'");
      if (term.ellipsis_at >= 0) return Status::InvalidArgument(where + ": more than one ellipsis");
      term.ellipsis_at = static_cast<int>(term.letters.size());
      i += 2;
    } else {
      return Status::InvalidArgument(where + ": '" + std::string(1, c) + "' is not a letter, ',', '->' or '...'");
    }
  }
  return term;
}

// The labels of `term` with `ellipsis` dims at its ellipsis, aligned right
// within the widest ellipsis of `widest` dims.
std::vector<int> Expand(const Term& term, int ellipsis, int widest) {
  std::vector<int> labels(term.letters.begin(), term.letters.end());
  if (term.ellipsis_at < 0) return labels;
  std::vector<int> dots(static_cast<size_t>(ellipsis));
  for (int k = 0; k < ellipsis; ++k) dots[k] = kEinsumEllipsisLabel + (widest - ellipsis) + k;
  labels.insert(labels.begin() + term.ellipsis_at, dots.begin(), dots.end());
  return labels;
}

}  // namespace

StatusOr<EinsumSpec> ParseEinsum(const std::string& equation, const std::vector<int64_t>& ranks) {
  std::string eq;
  for (char c : equation)
    if (c != ' ') eq.push_back(c);
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> texts;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    texts.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  const std::string quoted = "equation '" + equation + "'";
  if (texts.size() != ranks.size()) {
    return Status::InvalidArgument(quoted + " has " + std::to_string(texts.size()) + " input term(s) for " +
                                   std::to_string(ranks.size()) + " input(s)");
  }
  EinsumSpec spec;
  std::vector<Term> terms;
  std::vector<int> ellipses;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string where = quoted + ", term " + std::to_string(i) + " '" + texts[i] + "'";
    SPARQ_ASSIGN_OR_RETURN(Term term, ParseTerm(texts[i], where));
    const int64_t letters = static_cast<int64_t>(term.letters.size());
    const int64_t ellipsis = term.ellipsis_at >= 0 ? ranks[i] - letters : 0;
    if (ellipsis < 0 || (term.ellipsis_at < 0 && letters != ranks[i])) {
      return Status::InvalidArgument(where + ": " + std::to_string(letters) + " letter(s)" +
                                     (term.ellipsis_at >= 0 ? " and an ellipsis" : "") + " for an input of rank " +
                                     std::to_string(ranks[i]));
    }
    spec.ellipsis_rank = std::max(spec.ellipsis_rank, static_cast<int>(ellipsis));
    terms.push_back(std::move(term));
    ellipses.push_back(static_cast<int>(ellipsis));
  }
  for (size_t i = 0; i < terms.size(); ++i) spec.operands.push_back(Expand(terms[i], ellipses[i], spec.ellipsis_rank));

  std::map<int, int> count;  // letter -> occurrences over all terms
  for (const Term& term : terms)
    for (int l : term.letters) ++count[l];
  if (arrow == std::string::npos) {
    for (int k = 0; k < spec.ellipsis_rank; ++k) spec.output.push_back(kEinsumEllipsisLabel + k);
    for (const auto& [label, n] : count)  // std::map: character order
      if (n == 1) spec.output.push_back(label);
    return spec;
  }
  const std::string where = quoted + ", output '" + eq.substr(arrow + 2) + "'";
  SPARQ_ASSIGN_OR_RETURN(Term out, ParseTerm(eq.substr(arrow + 2), where));
  std::vector<int> seen;
  for (int l : out.letters) {
    if (count.count(l) == 0) return Status::InvalidArgument(where + ": '" + std::string(1, char(l)) + "' is in no input");
    if (std::find(seen.begin(), seen.end(), l) != seen.end())
      return Status::InvalidArgument(where + ": '" + std::string(1, char(l)) + "' appears twice");
    seen.push_back(l);
  }
  spec.output = Expand(out, out.ellipsis_at >= 0 ? spec.ellipsis_rank : 0, spec.ellipsis_rank);
  return spec;
}

namespace {

template <typename T>
using EinsumAcc = std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;

template <typename T>
EinsumAcc<T> ToAcc(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<double>(v);
  } else {
    using Signed = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
    return static_cast<uint64_t>(static_cast<Signed>(v));
  }
}

Status Einsum(OpContext& ctx) {
  if (ctx.num_inputs() == 0) return ctx.InvalidArgument("Einsum needs at least one input");
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(ctx.num_inputs()));
  const DataType type = ctx.input(0).dtype();
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    if (ctx.input(i).dtype() != type) {
      return ctx.InvalidArgument("input " + std::to_string(i) + " has type " + DataTypeName(ctx.input(i).dtype()) +
                                 " but input 0 has type " + DataTypeName(type));
    }
  }
  if (IsHalfType(type)) return RunInFloat32(ctx, Einsum);
  std::vector<int64_t> ranks;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) ranks.push_back(ctx.input(i).rank());
  StatusOr<EinsumSpec> parsed = ParseEinsum(ctx.node().attr_string("equation", ""), ranks);
  if (!parsed.ok()) return ctx.InvalidArgument(parsed.status().message());
  const EinsumSpec& spec = *parsed;

  // Every label's size: equal where it occurs, or 1 there (broadcast).
  std::map<int, int64_t> size;
  for (size_t i = 0; i < spec.operands.size(); ++i) {
    const Shape& shape = ctx.input(i).shape();
    for (size_t d = 0; d < shape.size(); ++d) {
      const int label = spec.operands[i][d];
      auto [it, fresh] = size.emplace(label, shape[d]);
      if (fresh || it->second == shape[d] || shape[d] == 1) continue;
      if (it->second == 1) {
        it->second = shape[d];
        continue;
      }
      const std::string name = label >= kEinsumEllipsisLabel ? "an ellipsis dim" : "'" + std::string(1, char(label)) + "'";
      return ctx.InvalidArgument(name + " has size " + std::to_string(it->second) + " in one place and " +
                                 std::to_string(shape[d]) + " in input " + std::to_string(i) + " " +
                                 ShapeToString(shape));
    }
  }
  // The loop's labels: the output's, then the summed ones (increasing).
  std::vector<int> labels = spec.output;
  for (const auto& [label, n] : size)
    if (std::find(spec.output.begin(), spec.output.end(), label) == spec.output.end()) labels.push_back(label);
  const size_t n_out = spec.output.size(), n_all = labels.size();
  std::vector<int64_t> extent(n_all);
  for (size_t k = 0; k < n_all; ++k) extent[k] = size.at(labels[k]);
  // Each operand's element stride per loop label (a repeated label adds its
  // dims' strides: the diagonal; a broadcast dim of size 1 adds nothing).
  std::vector<std::vector<int64_t>> stride(spec.operands.size(), std::vector<int64_t>(n_all, 0));
  for (size_t i = 0; i < spec.operands.size(); ++i) {
    const Shape& shape = ctx.input(i).shape();
    int64_t s = 1;
    for (size_t d = shape.size(); d-- > 0;) {
      const size_t k = std::find(labels.begin(), labels.end(), spec.operands[i][d]) - labels.begin();
      if (shape[d] != 1) stride[i][k] += s;
      s *= shape[d];
    }
  }
  Shape y_shape(extent.begin(), extent.begin() + n_out);
  Tensor y(type, y_shape);
  int64_t inner = 1;
  for (size_t k = n_out; k < n_all; ++k) inner *= extent[k];

  auto run = [&](auto tag) -> Status {
    using T = decltype(tag);
    std::vector<const T*> data;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) data.push_back(ctx.input(i).data<T>());
    T* yp = y.data<T>();
    ParallelFor(ctx.pool(), y.numel(), 256, [&](int64_t o0, int64_t o1) {
      std::vector<int64_t> index(n_all, 0);
      for (int64_t o = o0; o < o1; ++o) {
        // The output labels' values of element o (row-major).
        for (size_t k = n_out, rest = static_cast<size_t>(o); k-- > 0;) {
          index[k] = static_cast<int64_t>(rest % static_cast<size_t>(extent[k]));
          rest /= static_cast<size_t>(extent[k]);
        }
        std::fill(index.begin() + n_out, index.end(), 0);
        EinsumAcc<T> acc{};
        for (int64_t s = 0; s < inner; ++s) {
          EinsumAcc<T> product = 1;
          for (size_t i = 0; i < data.size(); ++i) {
            int64_t offset = 0;
            for (size_t k = 0; k < n_all; ++k) offset += index[k] * stride[i][k];
            product *= ToAcc(data[i][offset]);
          }
          acc += product;
          for (size_t k = n_all; k-- > n_out;) {  // next summed index, last label fastest
            if (++index[k] < extent[k]) break;
            index[k] = 0;
          }
        }
        yp[o] = static_cast<T>(acc);
      }
    });
    return Status::OK();
  };
  Status st;
  switch (type) {
    case DataType::kFloat32: st = run(float{}); break;
    case DataType::kFloat64: st = run(double{}); break;
    case DataType::kInt32: st = run(int32_t{}); break;
    case DataType::kInt64: st = run(int64_t{}); break;
    case DataType::kUInt32: st = run(uint32_t{}); break;
    case DataType::kUInt64: st = run(uint64_t{}); break;
    default: return ctx.NotSupported("data type " + DataTypeName(type) + " is not supported");
  }
  SPARQ_RETURN_IF_ERROR(st);
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

}  // namespace

void RegisterEinsumOps(KernelRegistry& r) { r.Add({"Einsum", "", 12, 99, Einsum, "ref"}); }

}  // namespace sparq
