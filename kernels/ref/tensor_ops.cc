// Reference tensor/shape operators. The kernels live in three files grouped
// by what they do; this file only collects their registrations.
//
//   tensor_shape_ops.cc  Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout,
//                        Shape, Size, Expand, Cast, CastLike, Constant,
//                        ConstantOfShape, EyeLike, Range
//   tensor_copy_ops.cc   Concat, Split, Slice, Transpose, Pad, Tile,
//                        DepthToSpace, SpaceToDepth
//   tensor_index_ops.cc  Gather, GatherElements, GatherND, Scatter(Elements), ScatterND,
//                        OneHot, NonZero, TopK, Trilu, CumSum
#include "kernels/ref/tensor_util.h"
#include "kernels/registry.h"

namespace sparq {

void RegisterTensorOps(KernelRegistry& r) {
  RegisterTensorShapeOps(r);
  RegisterTensorCopyOps(r);
  RegisterTensorIndexOps(r);
}

}  // namespace sparq
