"""torch.equal on neuron (ops_equal.cpp) against the CPU, natively."""
import pytest
import torch


@pytest.mark.parametrize("a,b", [
    (torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0])),
    (torch.tensor([1.0, 2.0]), torch.tensor([1.0, 3.0])),
    (torch.tensor([1.0, float("nan")]), torch.tensor([1.0, float("nan")])),
    (torch.tensor([1.0, 2.0]), torch.tensor([1, 2])),          # by value across dtypes
    (torch.ones(2, 3), torch.ones(3, 2)),                      # sizes differ
    (torch.ones(2, 3), torch.ones(3, 2).t()),                  # strides differ
    (torch.empty(0), torch.empty(0)),
    (torch.tensor(True), torch.tensor(True)),
])
def test_equal_matches_cpu(native, a, b):
    assert torch.equal(a.to("neuron"), b.to("neuron")) == torch.equal(a, b)


def test_equal_rejects_mixed_devices():
    with pytest.raises(RuntimeError, match="same device"):
        torch.equal(torch.ones(2, device="neuron"), torch.ones(2))
