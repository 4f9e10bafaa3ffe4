"""Two PyTorch nets for benchmarks/bench_convert.py, exported to ONNX in the pinned ``torch-2.13`` tool
environment (torch, numpy and onnx only: the workbench is not installed there).

    python export_convert_nets.py mbnet OUT.onnx
    python export_convert_nets.py gnet OUT.onnx

- ``mbnet``: MobileNetV2-style inverted residuals (1x1 expand, 3x3 depthwise, 1x1 project, ReLU6,
  BatchNorm folded by the export), input ``image`` [1, 3, 64, 64], 10 class logits;
- ``gnet``: ResNeXt/ShuffleNet-style blocks with grouped (non-depthwise) 3x3 convolutions
  (groups=4) and a channel shuffle (Reshape-Transpose-Reshape: the model's own Transpose), same I/O.

Seeded weights (untrained) with BatchNorm statistics that are not the identity.
"""

from __future__ import annotations

import sys
import warnings


def build(name: str):
    import torch
    from torch import nn
    torch.manual_seed(20261202)

    def cbr(cin, cout, k=3, s=1, g=1, act=True):
        layers = [nn.Conv2d(cin, cout, k, s, k // 2, groups=g, bias=False), nn.BatchNorm2d(cout)]
        return nn.Sequential(*layers, nn.ReLU6()) if act else nn.Sequential(*layers)

    class Inverted(nn.Module):
        def __init__(self, cin, cout, s, e=4):
            super().__init__()
            mid = cin * e
            self.body = nn.Sequential(cbr(cin, mid, 1), cbr(mid, mid, 3, s, g=mid), cbr(mid, cout, 1, act=False))
            self.res = s == 1 and cin == cout

        def forward(self, x):
            y = self.body(x)
            return x + y if self.res else y

    class Grouped(nn.Module):
        def __init__(self, c, s, g=4):
            super().__init__()
            self.g = g
            self.a = cbr(c, c, 1)
            self.b = cbr(c, c, 3, s, g=g)
            self.c = cbr(c, c, 1, act=False)
            self.res = s == 1

        def forward(self, x):
            y = self.a(x)
            n, ch, h, w = y.shape
            y = y.reshape(n, self.g, ch // self.g, h, w).transpose(1, 2).reshape(n, ch, h, w)   # channel shuffle
            y = self.c(self.b(y))
            return torch.relu(x + y) if self.res else torch.relu(y)

    class Net(nn.Module):
        def __init__(self, blocks):
            super().__init__()
            self.stem = cbr(3, 16, 3, 2)
            self.blocks = nn.Sequential(*blocks)
            self.head = nn.Linear(32, 10)

        def forward(self, x):
            return self.head(self.blocks(self.stem(x)).mean(dim=(2, 3)))

    if name == "mbnet":
        net = Net([Inverted(16, 16, 1), Inverted(16, 24, 2), Inverted(24, 24, 1), Inverted(24, 32, 2),
                   Inverted(32, 32, 1)])
    else:
        net = Net([Grouped(16, 1), cbr(16, 32, 1), Grouped(32, 2), Grouped(32, 1), Grouped(32, 2)])
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.1, 0.1)
    return net.eval()


def main(argv: list[str]) -> int:
    import torch
    name, out = argv
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(build(name), torch.zeros(1, 3, 64, 64), out, input_names=["image"],
                          output_names=["logits"], opset_version=17, dynamo=False)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
