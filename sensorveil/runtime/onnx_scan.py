"""Does an ONNX model reference tensors outside its own bytes? Only the bundle's hashed bytes may run.

An initializer stored as external data (TensorProto.data_location = EXTERNAL, with an ``external_data``
location) is read by onnxruntime and TensorRT's parser from a file beside the model, or from the
process's working directory when the model is given as bytes: weights nobody hashed or signed. The
runtime has onnxruntime but not the ``onnx`` package on a board, so this walks the protobuf wire format
itself, descending only into the messages that can hold a tensor (graphs, nodes, attributes, functions,
sparse tensors) and skipping every other field by its length.

Field numbers are onnx.proto's (IR version 10). Runs on the boards' Python (3.6).
"""
from sensorveil.runtime.errors import BundleError

# message -> {field number: message type of that field}; fields not listed are skipped
MESSAGE_FIELDS = {
    "model": {7: "graph", 25: "function"},                      # ModelProto.graph, .functions
    "graph": {1: "node", 5: "tensor", 15: "sparse"},            # GraphProto.node, .initializer, .sparse_initializer
    "function": {7: "node"},                                     # FunctionProto.node
    "node": {5: "attribute"},                                    # NodeProto.attribute
    "attribute": {5: "tensor", 6: "graph", 10: "tensor", 11: "graph", 22: "sparse", 23: "sparse"},
    "sparse": {1: "tensor", 2: "tensor"},                        # SparseTensorProto.values, .indices
    "tensor": {},
}
TENSOR_EXTERNAL_DATA = 13       # TensorProto.external_data: the location entries
TENSOR_DATA_LOCATION = 14       # TensorProto.data_location: 1 = EXTERNAL
EXTERNAL = 1
MAX_DEPTH = 64                  # nested subgraphs (If/Loop bodies) are a few deep in real models


class MalformedModel(ValueError):
    pass


def read_varint(data, position):
    value, shift = 0, 0
    while True:
        if position >= len(data) or shift > 63:
            raise MalformedModel("a varint runs past the end")
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, position


def fields(data, start, end):
    """(field number, wire type, value or (start, end) of a length-delimited field) of one message."""
    position = start
    while position < end:
        tag, position = read_varint(data, position)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, position = read_varint(data, position)
        elif wire == 1:
            value, position = None, position + 8
        elif wire == 5:
            value, position = None, position + 4
        elif wire == 2:
            length, position = read_varint(data, position)
            value, position = (position, position + length), position + length
        else:
            raise MalformedModel("wire type {} is not used by ONNX".format(wire))
        if position > end:
            raise MalformedModel("a field runs past the end of its message")
        yield number, wire, value


def references_external_data(data):
    """True when any tensor of the model (initializers, constants, subgraphs, functions) is external."""
    stack = [("model", 0, len(data), 0)]
    while stack:
        kind, start, end, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise MalformedModel("graphs nested more than {} deep".format(MAX_DEPTH))
        children = MESSAGE_FIELDS[kind]
        for number, wire, value in fields(data, start, end):
            if kind == "tensor" and (number == TENSOR_EXTERNAL_DATA or
                                     number == TENSOR_DATA_LOCATION and wire == 0 and value == EXTERNAL):
                return True
            if number in children and wire == 2:
                stack.append((children[number], value[0], value[1], depth + 1))
    return False


def refuse_external_data(data, where, name):
    """One BundleError when the model ``name`` of bundle ``where`` is not self-contained."""
    try:
        external = references_external_data(memoryview(data))
    except MalformedModel as error:
        raise BundleError("{}: {} is not a valid ONNX model ({})".format(where, name, error))
    if external:
        raise BundleError("{}: {} stores tensors as external data, read from outside the bundle's hashed bytes; "
                          "expected a self-contained model (re-export it without external data)".format(where, name))
