"""Export the test zoo's PyTorch models to ONNX; run by ``tests/zoo/fetch.py`` inside the pinned
``torch-2.13`` tool environment (``workbench/toolenv/``), never in the workbench's own.

    python export_torch.py onet FACENET_WHEEL_DIR OUT.onnx
    python export_torch.py heatnet - OUT.onnx
    python export_torch.py mbnet - OUT.onnx          # the two nets of benchmarks/bench_convert.py
    python export_torch.py gnet - OUT.onnx

Standalone on purpose (torch, numpy and onnx only: the workbench is not installed there).

- ``onet``: MTCNN's ONet with the pretrained weights of ``facenet-pytorch==2.6.0`` (the wheel,
  extracted into FACENET_WHEEL_DIR). The package imports torchvision, PIL, requests and tqdm for
  its detection and download helpers, none of which ONet uses; torchvision's index build does not
  load against the CPU torch, so those are stubbed (or skipped) for the import.
- ``heatnet``: a small net of our own (seeded weights, no training) with a spatial NCHW output
  ``heatmaps`` [1, 17, 16, 16] (17 keypoint heatmaps, as pose nets give) and a classifier head
  ``logits`` [1, 5], input ``image`` [1, 3, 64, 64].
- ``mbnet`` and ``gnet``, for ``benchmarks/bench_convert.py``: MobileNetV2-style inverted residuals
  (1x1 expand, 3x3 depthwise, 1x1 project, ReLU6) and ResNeXt/ShuffleNet-style blocks with grouped
  (non-depthwise) 3x3 convolutions (groups=4) and a channel shuffle (Reshape-Transpose-Reshape: the
  model's own Transpose); input ``image`` [1, 3, 64, 64], 10 class logits.

Our own nets have seeded weights (untrained) with BatchNorm statistics that are not the identity
(:func:`perturb_batchnorm`); every model is exported by :func:`main`'s one ``torch.onnx.export``.
"""

from __future__ import annotations

import sys
import types
import warnings


def _stub(name: str, **attrs) -> None:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    module.__path__ = []  # a package, so submodules can be stubbed below it
    sys.modules[name] = module


def onet(wheel_dir: str):
    def unused(*args, **kwargs):
        raise RuntimeError("stubbed for the ONet export: not used by ONet")
    for name in ("torchvision", "torchvision.transforms", "torchvision.ops", "PIL", "requests"):
        _stub(name)
    _stub("torchvision.transforms.functional", to_tensor=unused)
    _stub("torchvision.ops.boxes", batched_nms=unused)
    _stub("PIL.Image", Image=object)
    _stub("requests.adapters", HTTPAdapter=object)
    # the package's __init__ imports InceptionResnetV1 and its download helpers (tqdm): skip it
    _stub("facenet_pytorch")
    sys.modules["facenet_pytorch"].__path__ = [f"{wheel_dir}/facenet_pytorch"]
    from facenet_pytorch.models.mtcnn import ONet
    return ONet(pretrained=True).eval(), (1, 3, 48, 48), ["boxes", "landmarks", "prob"]


def heatnet():
    import torch
    from torch import nn

    torch.manual_seed(20261201)

    def block(cin, cout, stride):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU6())

    class HeatNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(block(3, 16, 2), block(16, 32, 2), block(32, 32, 1))
            self.heat = nn.Conv2d(32, 17, 1)
            self.head = nn.Linear(32, 5)

        def forward(self, x):
            f = self.stem(x)
            heatmaps = torch.sigmoid(self.heat(f))
            logits = self.head(f.mean(dim=(2, 3)))
            return heatmaps, logits

    return perturb_batchnorm(HeatNet()), (1, 3, 64, 64), ["heatmaps", "logits"]


def perturb_batchnorm(model):
    """``model`` in eval mode with BatchNorm statistics that are not the identity (from torch's seed)."""
    import torch
    from torch import nn
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.1, 0.1)
    return model.eval()


def convert_net(name: str):
    """``mbnet`` or ``gnet`` (benchmarks/bench_convert.py)."""
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
    return perturb_batchnorm(net), (1, 3, 64, 64), ["logits"]


def main(argv: list[str]) -> int:
    import torch
    name, wheel_dir, out = argv
    if name == "onet":
        model, shape, outputs = onet(wheel_dir)
    else:
        model, shape, outputs = heatnet() if name == "heatnet" else convert_net(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, torch.zeros(shape), out, input_names=["image"], output_names=outputs,
                          opset_version=17, dynamo=False)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
