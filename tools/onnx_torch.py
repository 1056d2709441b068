"""A small ONNX-to-torch interpreter for fine-tuning a model's weights.

OnnxModule(model) is a torch.nn.Module whose parameters are the model's float
initializers (and the float Constant nodes named in `trainable`); forward()
runs the graph node by node with torch operators, so gradients reach every
weight. It covers the operators of sparq's real-model suite (CNNs, BERT-style
encoders, YOLOv8), at the default domain, opsets 11-17 (the inputs-vs-
attributes forms of Clip, Split, Squeeze/Unsqueeze, Reduce*, Pad are both
read). Control flow (If/Loop/Scan), recurrent and quantized operators are not
supported: the constructor raises NotImplementedError naming the first one.

Used by tools/retrain_distill.py (prune.retrain's distillation); a tool, not
part of sparq's run time.
"""
import math

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper

_DTYPES = {
    onnx.TensorProto.FLOAT: torch.float32, onnx.TensorProto.DOUBLE: torch.float64,
    onnx.TensorProto.FLOAT16: torch.float16, onnx.TensorProto.BFLOAT16: torch.bfloat16,
    onnx.TensorProto.INT64: torch.int64, onnx.TensorProto.INT32: torch.int32,
    onnx.TensorProto.INT16: torch.int16, onnx.TensorProto.INT8: torch.int8,
    onnx.TensorProto.UINT8: torch.uint8, onnx.TensorProto.BOOL: torch.bool,
}


def _attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _ints(t):
    return [int(v) for v in t.reshape(-1).tolist()]


def _pads_torch(pads):
    """ONNX pads [b0, b1, ..., e0, e1, ...] -> F.pad's (b_last, e_last, ..., b0, e0)."""
    r = len(pads) // 2
    out = []
    for i in reversed(range(r)):
        out += [pads[i], pads[i + r]]
    return out


def _spatial_pads(a, x, kernel, strides, dilations):
    """The explicit [b..., e...] pads of a Conv/pool node, auto_pad resolved."""
    n = len(kernel)
    auto = a.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pads_b, pads_e = [], []
        for i in range(n):
            size = x.shape[2 + i]
            out = math.ceil(size / strides[i])
            total = max(0, (out - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - size)
            small, big = total // 2, total - total // 2
            pads_b.append(small if auto == "SAME_UPPER" else big)
            pads_e.append(big if auto == "SAME_UPPER" else small)
        return pads_b + pads_e
    if auto == "VALID":
        return [0] * (2 * n)
    return list(a.get("pads", [0] * (2 * n)))


def _reduce_axes(node, a, args, opset):
    if "axes" in a:
        return list(a["axes"])
    if len(args) > 1 and args[1] is not None and args[1].numel() > 0:
        return _ints(args[1])
    return None


class OnnxModule(torch.nn.Module):
    """The graph of an onnx.ModelProto as a torch module.

    trainable: names of float Constant-node outputs to make parameters too
    (initializers that are float are always parameters). `names[p]` maps a
    parameter's attribute name back to its ONNX name (parameters are stored
    under sanitized names: p0, p1, ...)."""

    def __init__(self, model, trainable=()):
        super().__init__()
        opset = {o.domain: o.version for o in model.opset_import}
        self.opset = opset.get("", opset.get("ai.onnx", 13))
        g = model.graph
        self.input_names = [i.name for i in g.input]
        init_names = {t.name for t in g.initializer}
        self.input_names = [n for n in self.input_names if n not in init_names]
        self.output_names = [o.name for o in g.output]
        self.nodes = list(g.node)
        for n in self.nodes:
            if n.domain not in ("", "ai.onnx") or n.op_type not in _OPS:
                raise NotImplementedError(f"node {n.name or n.output[0]}: operator {n.domain + '.' if n.domain else ''}"
                                          f"{n.op_type} is not supported by tools/onnx_torch.py")
        self.param_names = {}  # attribute name -> ONNX name
        self.param_of = {}  # ONNX name -> attribute name
        self.consts = {}  # ONNX name -> tensor (not trained)
        trainable = set(trainable)

        def add(name, arr):
            t = torch.from_numpy(np.array(arr))
            if t.is_floating_point():
                key = f"p{len(self.param_names)}"
                self.register_parameter(key, torch.nn.Parameter(t.float().clone()))
                self.param_names[key] = name
                self.param_of[name] = key
            else:
                self.consts[name] = t

        for t in g.initializer:
            add(t.name, numpy_helper.to_array(t))
        self.constant_nodes = set()
        for n in self.nodes:
            if n.op_type == "Constant":
                value = _constant_value(n)
                if n.output[0] in trainable and value.is_floating_point():
                    add(n.output[0], value.numpy())
                else:
                    self.consts[n.output[0]] = value
                self.constant_nodes.add(id(n))

    def value_of(self, name):
        key = self.param_of.get(name)
        return getattr(self, key) if key else self.consts[name]

    def forward(self, inputs, keep=()):
        """inputs: {name: tensor}. Returns ({output name: tensor}, {kept name: tensor})."""
        env = dict(self.consts)
        for key, name in self.param_names.items():
            env[name] = getattr(self, key)
        env.update(inputs)
        kept = {}
        keep = set(keep)
        for n in self.nodes:
            if id(n) in self.constant_nodes:
                continue
            args = [env[i] if i else None for i in n.input]
            outs = _OPS[n.op_type](n, _attrs(n), args, self.opset)
            if not isinstance(outs, (list, tuple)):
                outs = [outs]
            for name, v in zip(n.output, outs):
                if name:
                    env[name] = v
                    if name in keep:
                        kept[name] = v
        return {o: env[o] for o in self.output_names}, kept


def _constant_value(n):
    a = _attrs(n)
    if "value" in a:
        return torch.from_numpy(np.array(numpy_helper.to_array(a["value"])))
    if "value_float" in a:
        return torch.tensor(a["value_float"], dtype=torch.float32)
    if "value_floats" in a:
        return torch.tensor(list(a["value_floats"]), dtype=torch.float32)
    if "value_int" in a:
        return torch.tensor(a["value_int"], dtype=torch.int64)
    if "value_ints" in a:
        return torch.tensor(list(a["value_ints"]), dtype=torch.int64)
    raise NotImplementedError(f"Constant {n.output[0]}: attribute {list(a)} not supported")


# --- operators: f(node, attrs, args, opset) -> tensor or list of tensors ---

def _conv(n, a, x, opset):
    x, w, b = x[0], x[1], x[2] if len(x) > 2 else None
    k = list(w.shape[2:])
    nd = len(k)
    strides = list(a.get("strides", [1] * nd))
    dil = list(a.get("dilations", [1] * nd))
    pads = _spatial_pads(a, x, k, strides, dil)
    group = a.get("group", 1)
    if pads[:nd] == pads[nd:]:
        padding = pads[:nd]
    else:
        x = F.pad(x, _pads_torch([0, 0] + pads[:nd] + [0, 0] + pads[nd:]))
        padding = [0] * nd
    fn = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[nd]
    return fn(x, w, b, stride=strides, padding=padding, dilation=dil, groups=group)


def _conv_transpose(n, a, x, opset):
    x, w, b = x[0], x[1], x[2] if len(x) > 2 else None
    k = list(w.shape[2:])
    nd = len(k)
    strides = list(a.get("strides", [1] * nd))
    dil = list(a.get("dilations", [1] * nd))
    pads = list(a.get("pads", [0] * (2 * nd)))
    if pads[:nd] != pads[nd:] or "output_shape" in a:
        raise NotImplementedError(f"ConvTranspose {n.output[0]}: asymmetric pads / output_shape")
    fn = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[nd]
    return fn(x, w, b, stride=strides, padding=pads[:nd], output_padding=list(a.get("output_padding", [0] * nd)),
              groups=a.get("group", 1), dilation=dil)


def _pool(kind):
    def run(n, a, x, opset):
        x = x[0]
        k = list(a["kernel_shape"])
        nd = len(k)
        strides = list(a.get("strides", [1] * nd))
        dil = list(a.get("dilations", [1] * nd))
        pads = _spatial_pads(a, x, k, strides, dil)
        ceil = bool(a.get("ceil_mode", 0))
        if pads[:nd] != pads[nd:] or any(p > kk // 2 for p, kk in zip(pads, k + k)):
            fill = float("-inf") if kind == "max" else 0.0
            x = F.pad(x, _pads_torch([0, 0] + pads[:nd] + [0, 0] + pads[nd:]), value=fill)
            pads = [0] * (2 * nd)
        if kind == "max":
            fn = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[nd]
            return fn(x, k, strides, pads[:nd], dil, ceil_mode=ceil)
        fn = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[nd]
        return fn(x, k, strides, pads[:nd], ceil_mode=ceil, count_include_pad=bool(a.get("count_include_pad", 0)))
    return run


def _gemm(n, a, x, opset):
    A, B = x[0], x[1]
    if a.get("transA", 0):
        A = A.t()
    if a.get("transB", 0):
        B = B.t()
    y = a.get("alpha", 1.0) * (A @ B)
    if len(x) > 2 and x[2] is not None:
        y = y + a.get("beta", 1.0) * x[2]
    return y


def _div(n, a, x, opset):
    if x[0].is_floating_point():
        return x[0] / x[1]
    return torch.div(x[0], x[1], rounding_mode="trunc")


def _clip(n, a, x, opset):
    lo = x[1] if len(x) > 1 and x[1] is not None else a.get("min")
    hi = x[2] if len(x) > 2 and x[2] is not None else a.get("max")
    lo = float(lo) if lo is not None else None
    hi = float(hi) if hi is not None else None
    return torch.clamp(x[0], lo, hi)


def _reshape(n, a, x, opset):
    shape = _ints(x[1])
    if not a.get("allowzero", 0):
        shape = [x[0].shape[i] if s == 0 else s for i, s in enumerate(shape)]
    return x[0].reshape(shape)


def _slice(n, a, x, opset):
    data = x[0]
    if len(x) > 1:
        starts, ends = _ints(x[1]), _ints(x[2])
        axes = _ints(x[3]) if len(x) > 3 and x[3] is not None else list(range(len(starts)))
        steps = _ints(x[4]) if len(x) > 4 and x[4] is not None else [1] * len(starts)
    else:
        starts, ends = list(a["starts"]), list(a["ends"])
        axes = list(a.get("axes", range(len(starts))))
        steps = [1] * len(starts)
    for s, e, ax, st in zip(starts, ends, axes, steps):
        ax = ax % data.dim()
        dim = data.shape[ax]
        s, e, st = slice(s, e, st).indices(dim)
        if st > 0:
            idx = [slice(None)] * data.dim()
            idx[ax] = slice(s, e, st)
            data = data[tuple(idx)]
        else:
            data = data.index_select(ax, torch.arange(s, e, st, dtype=torch.long))
    return data


def _gather(n, a, x, opset):
    data, idx = x[0], x[1].long()
    ax = a.get("axis", 0) % data.dim()
    flat = idx.reshape(-1) % data.shape[ax]
    out = data.index_select(ax, flat)
    return out.reshape(list(data.shape[:ax]) + list(idx.shape) + list(data.shape[ax + 1:]))


def _split(n, a, x, opset):
    data = x[0]
    ax = a.get("axis", 0) % data.dim()
    if len(x) > 1 and x[1] is not None:
        sizes = _ints(x[1])
    elif "split" in a:
        sizes = list(a["split"])
    else:
        parts = a.get("num_outputs", len(n.output))
        size = -(-data.shape[ax] // parts)
        sizes = [min(size, data.shape[ax] - i * size) for i in range(parts)]
    return list(torch.split(data, sizes, dim=ax))


def _unsqueeze(n, a, x, opset):
    axes = list(a["axes"]) if "axes" in a else _ints(x[1])
    y = x[0]
    rank = y.dim() + len(axes)
    for ax in sorted(ax % rank for ax in axes):
        y = y.unsqueeze(ax)
    return y


def _squeeze(n, a, x, opset):
    axes = list(a["axes"]) if "axes" in a else (_ints(x[1]) if len(x) > 1 and x[1] is not None else None)
    y = x[0]
    if axes is None:
        return y.squeeze()
    for ax in sorted((ax % y.dim() for ax in axes), reverse=True):
        y = y.squeeze(ax)
    return y


def _concat(n, a, x, opset):
    xs = [t for t in x if t is not None and not (t.dim() == 1 and t.numel() == 0)]
    if not xs:
        return x[0]
    dtype = torch.promote_types(xs[0].dtype, xs[0].dtype)
    return torch.cat([t.to(dtype) for t in xs], dim=a["axis"])


def _pad(n, a, x, opset):
    mode = a.get("mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    pads = _ints(x[1]) if len(x) > 1 else list(a["pads"])
    value = 0.0
    if len(x) > 2 and x[2] is not None and x[2].numel():
        value = float(x[2])
    elif "value" in a:
        value = a["value"]
    if len(x) > 3 and x[3] is not None:  # axes (opset 18)
        axes = [ax % x[0].dim() for ax in _ints(x[3])]
        full = [0] * (2 * x[0].dim())
        for i, ax in enumerate(axes):
            full[ax], full[ax + x[0].dim()] = pads[i], pads[i + len(axes)]
        pads = full
    tp = _pads_torch(pads)
    while len(tp) >= 2 and tp[-1] == 0 and tp[-2] == 0:
        tp = tp[:-2]
    if not tp:
        return x[0]
    if mode == "constant":
        return F.pad(x[0], tp, value=value)
    return F.pad(x[0], tp, mode={"reflect": "reflect", "edge": "replicate", "wrap": "circular"}[mode])


def _resize(n, a, x, opset):
    data = x[0]
    mode = a.get("mode", b"nearest")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    ctm = a.get("coordinate_transformation_mode", b"half_pixel")
    ctm = ctm.decode() if isinstance(ctm, bytes) else ctm
    scales = x[2] if len(x) > 2 and x[2] is not None and x[2].numel() else None
    sizes = x[3] if len(x) > 3 and x[3] is not None and x[3].numel() else None
    if sizes is not None:
        size = _ints(sizes)[2:]
    else:
        sc = [float(s) for s in scales.reshape(-1).tolist()]
        size = [int(math.floor(d * s)) for d, s in zip(data.shape[2:], sc[2:])]
    if mode == "nearest":
        nm = a.get("nearest_mode", b"round_prefer_floor")
        nm = nm.decode() if isinstance(nm, bytes) else nm
        if ctm == "asymmetric" and nm == "floor":
            return F.interpolate(data, size=size, mode="nearest")
        if ctm in ("half_pixel", "pytorch_half_pixel", "tf_half_pixel_for_nn") or \
                (ctm == "asymmetric" and all(s % d == 0 for s, d in zip(size, data.shape[2:]))):
            return F.interpolate(data, size=size, mode="nearest-exact" if ctm != "asymmetric" else "nearest")
        raise NotImplementedError(f"Resize {n.output[0]}: nearest with {ctm}/{nm}")
    if mode == "linear":
        torch_mode = {1: "linear", 2: "bilinear", 3: "trilinear"}[data.dim() - 2]
        if ctm == "align_corners":
            return F.interpolate(data, size=size, mode=torch_mode, align_corners=True)
        if ctm in ("half_pixel", "pytorch_half_pixel"):
            return F.interpolate(data, size=size, mode=torch_mode, align_corners=False)
    raise NotImplementedError(f"Resize {n.output[0]}: mode {mode} with {ctm}")


def _reduce(fn):
    def run(n, a, x, opset):
        axes = _reduce_axes(n, a, x, opset)
        keep = bool(a.get("keepdims", 1))
        if axes is None:
            if a.get("noop_with_empty_axes", 0):
                return x[0]
            axes = list(range(x[0].dim()))
        return fn(x[0], [ax % x[0].dim() for ax in axes], keep)
    return run


def _softmax_like(fn):
    def run(n, a, x, opset):
        ax = a.get("axis", -1 if opset >= 13 else 1)
        if opset >= 13:
            return fn(x[0], dim=ax)
        shape = x[0].shape
        flat = x[0].reshape(int(np.prod(shape[:ax % len(shape)])), -1)
        return fn(flat, dim=1).reshape(shape)
    return run


def _layer_norm(n, a, x, opset):
    ax = a.get("axis", -1) % x[0].dim()
    shape = list(x[0].shape[ax:])
    b = x[2] if len(x) > 2 else None
    return F.layer_norm(x[0], shape, x[1].expand(shape) if x[1].dim() else x[1], b, a.get("epsilon", 1e-5))


def _batch_norm(n, a, x, opset):
    return F.batch_norm(x[0], x[3], x[4], x[1], x[2], training=False, eps=a.get("epsilon", 1e-5))


def _cast(n, a, x, opset):
    return x[0].to(_DTYPES[a["to"]])


def _constant_of_shape(n, a, x, opset):
    value = torch.from_numpy(np.array(numpy_helper.to_array(a["value"]))) if "value" in a else torch.zeros(1)
    return torch.full(_ints(x[0]), value.reshape(-1)[0].item(), dtype=value.dtype)


def _expand(n, a, x, opset):
    shape = torch.broadcast_shapes(tuple(x[0].shape), tuple(_ints(x[1])))
    return x[0].expand(shape)


def _flatten(n, a, x, opset):
    ax = a.get("axis", 1) % (x[0].dim() + 1) if x[0].dim() else 0
    return x[0].reshape(int(np.prod(x[0].shape[:ax])), -1)


def _transpose(n, a, x, opset):
    perm = list(a.get("perm", reversed(range(x[0].dim()))))
    return x[0].permute(perm)


def _range(n, a, x, opset):
    return torch.arange(x[0].item(), x[1].item(), x[2].item(), dtype=x[0].dtype)


def _hard_sigmoid(n, a, x, opset):
    return torch.clamp(a.get("alpha", 0.2) * x[0] + a.get("beta", 0.5), 0.0, 1.0)


def _gelu(n, a, x, opset):
    approx = a.get("approximate", b"none")
    approx = approx.decode() if isinstance(approx, bytes) else approx
    return F.gelu(x[0], approximate=approx)


def _einsum(n, a, x, opset):
    eq = a["equation"]
    return torch.einsum(eq.decode() if isinstance(eq, bytes) else eq, *x)


def _variadic(fn):
    def run(n, a, x, opset):
        y = x[0]
        for t in x[1:]:
            y = fn(y, t)
        return y
    return run


def _leaky(n, a, x, opset):
    return F.leaky_relu(x[0], a.get("alpha", 0.01))


_OPS = {
    "Constant": None,  # evaluated once at construction
    "Identity": lambda n, a, x, o: x[0],
    "Dropout": lambda n, a, x, o: [x[0], torch.ones_like(x[0], dtype=torch.bool)],
    "Conv": _conv, "ConvTranspose": _conv_transpose,
    "Gemm": _gemm, "MatMul": lambda n, a, x, o: torch.matmul(x[0], x[1]),
    "Einsum": _einsum,
    "Add": lambda n, a, x, o: x[0] + x[1], "Sub": lambda n, a, x, o: x[0] - x[1],
    "Mul": lambda n, a, x, o: x[0] * x[1], "Div": _div,
    "Pow": lambda n, a, x, o: torch.pow(x[0], x[1]),
    "Mod": lambda n, a, x, o: torch.fmod(x[0], x[1]) if a.get("fmod", 0) else torch.remainder(x[0], x[1]),
    "Max": _variadic(torch.maximum), "Min": _variadic(torch.minimum), "Sum": _variadic(torch.add),
    "Neg": lambda n, a, x, o: -x[0], "Abs": lambda n, a, x, o: torch.abs(x[0]),
    "Sqrt": lambda n, a, x, o: torch.sqrt(x[0]), "Exp": lambda n, a, x, o: torch.exp(x[0]),
    "Log": lambda n, a, x, o: torch.log(x[0]), "Reciprocal": lambda n, a, x, o: 1.0 / x[0],
    "Floor": lambda n, a, x, o: torch.floor(x[0]), "Ceil": lambda n, a, x, o: torch.ceil(x[0]),
    "Relu": lambda n, a, x, o: F.relu(x[0]), "LeakyRelu": _leaky,
    "Sigmoid": lambda n, a, x, o: torch.sigmoid(x[0]), "Tanh": lambda n, a, x, o: torch.tanh(x[0]),
    "HardSigmoid": _hard_sigmoid, "HardSwish": lambda n, a, x, o: F.hardswish(x[0]),
    "Erf": lambda n, a, x, o: torch.erf(x[0]), "Gelu": _gelu, "Clip": _clip,
    "Softmax": _softmax_like(torch.softmax), "LogSoftmax": _softmax_like(torch.log_softmax),
    "LayerNormalization": _layer_norm, "BatchNormalization": _batch_norm,
    "ReduceMean": _reduce(lambda t, ax, k: t.mean(dim=ax, keepdim=k)),
    "ReduceSum": _reduce(lambda t, ax, k: t.sum(dim=ax, keepdim=k)),
    "ReduceMax": _reduce(lambda t, ax, k: t.amax(dim=ax, keepdim=k)),
    "ReduceMin": _reduce(lambda t, ax, k: t.amin(dim=ax, keepdim=k)),
    "GlobalAveragePool": lambda n, a, x, o: x[0].mean(dim=list(range(2, x[0].dim())), keepdim=True),
    "GlobalMaxPool": lambda n, a, x, o: x[0].amax(dim=list(range(2, x[0].dim())), keepdim=True),
    "MaxPool": _pool("max"), "AveragePool": _pool("avg"), "Resize": _resize, "Pad": _pad,
    "Reshape": _reshape, "Transpose": _transpose, "Concat": _concat, "Split": _split, "Slice": _slice,
    "Gather": _gather, "Unsqueeze": _unsqueeze, "Squeeze": _squeeze, "Flatten": _flatten, "Expand": _expand,
    "Shape": lambda n, a, x, o: torch.tensor(list(x[0].shape)[a.get("start", 0):a.get("end", None)],
                                             dtype=torch.int64),
    "Cast": _cast, "ConstantOfShape": _constant_of_shape, "Range": _range,
    "Where": lambda n, a, x, o: torch.where(x[0].bool(), x[1], x[2]),
    "Equal": lambda n, a, x, o: torch.eq(x[0], x[1]), "Greater": lambda n, a, x, o: torch.gt(x[0], x[1]),
    "Less": lambda n, a, x, o: torch.lt(x[0], x[1]), "GreaterOrEqual": lambda n, a, x, o: torch.ge(x[0], x[1]),
    "LessOrEqual": lambda n, a, x, o: torch.le(x[0], x[1]),
    "And": lambda n, a, x, o: torch.logical_and(x[0], x[1]), "Or": lambda n, a, x, o: torch.logical_or(x[0], x[1]),
    "Not": lambda n, a, x, o: torch.logical_not(x[0]),
}
