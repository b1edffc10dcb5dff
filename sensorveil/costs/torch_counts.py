"""FLOP and parameter counts of a torch module, by the convention of costs.onnx_counts (FLOPs = 2 x
multiply-accumulates, bias and elementwise ops left out, as torch's FlopCounterMode counts): the exporter records
them beside the ONNX graph's. Apart from costs.onnx_counts so that counting a bundle's graphs never imports torch."""


def torch_flops(model, example_input) -> int:
    """FLOPs (2*MAC) of one inference forward pass, via FlopCounterMode."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    args = example_input if isinstance(example_input, tuple) else (example_input,)
    counter = FlopCounterMode(display=False)
    # no_grad: we measure inference; autograd bookkeeping would not add
    # forward FLOPs but costs memory on large models.
    with torch.no_grad(), counter:
        model(*args)
    return int(counter.get_total_flops())


def torch_params(model) -> int:
    """Number of parameters (shared tensors counted once, buffers excluded)."""
    return int(sum(p.numel() for p in model.parameters()))
