"""Operation counts of a model (FLOPs and parameters, of a torch module or an ONNX graph): the exporter records
them in a bundle's manifest and the benchmarks print them, so they live here, below both, and neither imports
the other for them. Imports numpy, onnx and (for a torch module) torch, and no other area of sensorveil."""
