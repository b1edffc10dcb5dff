"""FLOP and parameter counts of an ONNX graph (torch modules: costs.torch_counts).

Convention (shared by both sides so the numbers are comparable):
FLOPs = 2 * multiply-accumulates, bias ignored.  This is what
``torch.utils.flop_counter.FlopCounterMode`` reports for conv / mm / bmm.
Elementwise ops (activations, Add, BatchNormalization, ...) are reported
separately for ONNX and are *not* part of ``total``, because FlopCounterMode
does not count them either.

This module never imports torch: the benchmarks count a bundle's graphs with it.
"""
import warnings
from functools import reduce
from operator import mul

import onnx
from onnx import TensorProto


def prod(values) -> int:
    """math.prod, which needs Python 3.8 (the device benchmark runs down to Jetson Nano's 3.6)."""
    return reduce(mul, values, 1)


# Ops FlopCounterMode ignores; we count 1 FLOP per output element for them.
ELEMENTWISE_OPS = frozenset({
    "Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Exp", "Log", "Neg", "Abs",
    "Relu", "LeakyRelu", "PRelu", "Elu", "Selu", "Celu", "Gelu", "HardSigmoid",
    "HardSwish", "Sigmoid", "Tanh", "Softplus", "Softsign", "Mish", "Erf",
    "Clip", "Min", "Max", "Where", "BatchNormalization",
    "InstanceNormalization", "LayerNormalization", "Softmax", "LogSoftmax",
})

# Shape/axes/index inputs of ONNX ops (Reshape, Slice, Expand, Pad, ...) are
# always int64, and weights never are, so int64 initializers are not params.
# int32 is kept on purpose: quantized (QDQ) biases are int32 weights.
_NON_PARAM_DTYPES = frozenset({TensorProto.INT64, TensorProto.BOOL})


def _load(model_or_path) -> onnx.ModelProto:
    if isinstance(model_or_path, onnx.ModelProto):
        return model_or_path
    return onnx.load(str(model_or_path))


def _graph_inputs(graph):
    """Real graph inputs (older exporters also list initializers as inputs)."""
    inits = {i.name for i in graph.initializer}
    return [i for i in graph.input if i.name not in inits]


def _fix_batch(model: onnx.ModelProto, batch: int) -> onnx.ModelProto:
    """Copy of `model` with the symbolic first dim of each input set to `batch`.

    The same symbol is replaced everywhere (outputs, value_info) so shape
    inference does not have to reconcile a symbol with a number.
    """
    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    symbols = set()
    for vi in _graph_inputs(graph):
        dims = vi.type.tensor_type.shape.dim
        if dims and not dims[0].HasField("dim_value"):
            symbols.add(dims[0].dim_param)
            dims[0].dim_value = batch
    for vi in list(graph.output) + list(graph.value_info):
        for d in vi.type.tensor_type.shape.dim:
            if d.HasField("dim_param") and d.dim_param in symbols:
                d.dim_value = batch
    return model


def _shape_table(model: onnx.ModelProto) -> dict:
    """name -> tuple of ints (None for unknown dims) for every known tensor."""
    table = {i.name: tuple(i.dims) for i in model.graph.initializer}
    g = model.graph
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if not vi.type.tensor_type.HasField("shape"):
            continue
        dims = vi.type.tensor_type.shape.dim
        table[vi.name] = tuple(d.dim_value if d.HasField("dim_value") else None for d in dims)
    for node in g.node:  # Constant nodes carry their shape in the attribute
        if node.op_type == "Constant":
            for a in node.attribute:
                if a.name == "value":
                    table[node.output[0]] = tuple(a.t.dims)
    return table


def _known(shape) -> bool:
    return shape is not None and all(d is not None for d in shape)


def _attr(node, name, default):
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def _conv(node, s):
    # weight (M, C/g, k...): each output point does prod(w[1:]) MACs per out
    # channel -> prod(w) * prod(out spatial) * N, same as torch.
    w, y = s(node.input[1]), s(node.output[0])
    return 2 * y[0] * prod(w) * prod(y[2:])


def _conv_transpose(node, s):
    # weight (C, M/g, k...): torch counts per *input* spatial point.
    x, w = s(node.input[0]), s(node.input[1])
    return 2 * x[0] * prod(w) * prod(x[2:])


def _gemm(node, s):
    a, y = s(node.input[0]), s(node.output[0])
    k = a[0] if _attr(node, "transA", 0) else a[1]
    return 2 * prod(y) * k


def _matmul(node, s):
    a, y = s(node.input[0]), s(node.output[0])
    return 2 * prod(y) * a[-1]


_MAC_OPS = {"Conv": _conv, "ConvTranspose": _conv_transpose,
            "Gemm": _gemm, "MatMul": _matmul}


class _Unresolved(Exception):
    """A countable node whose operand shapes inference could not determine."""


def _node_flops(node, shapes):
    """(flops, is_mac_op), or None for ops that are not counted at all."""
    def s(name):
        shape = shapes.get(name)
        if not _known(shape):
            raise _Unresolved(name)
        return shape

    if node.op_type in _MAC_OPS:
        return _MAC_OPS[node.op_type](node, s), True
    if node.op_type in ELEMENTWISE_OPS:
        return prod(s(node.output[0])), False
    return None


def onnx_flops(model_or_path, batch: int = 1) -> dict:
    """Static FLOP count (2*MAC) of an ONNX graph at the given batch size.

    Returns ``total`` (Conv/ConvTranspose/Gemm/MatMul only, comparable to
    FlopCounterMode), ``elementwise`` (1 per output element of activation /
    arithmetic / norm ops), ``by_op`` (op_type -> flops, both kinds) and
    ``unresolved`` (names of countable nodes whose shapes could not be
    inferred; non-empty means ``total`` is a lower bound).
    """
    model = _fix_batch(_load(model_or_path), batch)
    model = onnx.shape_inference.infer_shapes(model, data_prop=True)
    shapes = _shape_table(model)
    total, elementwise, by_op, unresolved = 0, 0, {}, []
    for node in model.graph.node:
        try:
            res = _node_flops(node, shapes)
        except _Unresolved:
            unresolved.append(node.name or node.op_type)
            continue
        if res is None:
            continue
        flops, is_mac = res
        by_op[node.op_type] = by_op.get(node.op_type, 0) + int(flops)
        if is_mac:
            total += int(flops)
        else:
            elementwise += int(flops)
    if unresolved:
        warnings.warn(f"onnx_flops: shapes unknown for {len(unresolved)} node(s); "
                      "total is a lower bound", RuntimeWarning, stacklevel=2)
    return {"total": total, "elementwise": elementwise, "by_op": by_op,
            "unresolved": unresolved}


def onnx_params(model_or_path) -> int:
    """Sum of initializer element counts, skipping int64/bool shape constants."""
    model = _load(model_or_path)
    return int(sum(prod(i.dims) for i in model.graph.initializer
                   if i.data_type not in _NON_PARAM_DTYPES))
