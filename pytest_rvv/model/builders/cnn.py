"""Image classifiers with seeded random weights: MobileNetV2, SqueezeNet 1.1, AlexNet, NiN, GoogLeNet, ResNet18.

Input ``input`` float32 [1, 3, H, W], output ``output`` float32 [1, 1000] logits. ``size="full"`` is
224x224; ``size="ci"`` shrinks only the image (``CI_IMAGE``): every layer of the full network is kept. ResNet18
has one size, 224x224 (the studies it is compared with measure it there).
"""

from __future__ import annotations

import math

import numpy as np
import onnx

from pytest_rvv.model.builders.graph import GraphBuilder
from pytest_rvv.model.model import InputSpec

FULL_IMAGE = 224
# The smallest multiple of 8 for which every layer is valid (no window larger than its padded input) and
# no strided Conv/MaxPool produces a 1-wide output from a padded or ceil-mode input larger than its
# kernel: IREE's fold-unit-extent-dims pass miscompiles those ("inferred ... dimension to be 5, but
# found 3"). Minima: MobileNetV2 33 (at 32 the last stride-2 depthwise conv gives 1x1 from 2x2 padded
# to 4x4), SqueezeNet 1.1 33, GoogLeNet 47 (its ceil-mode 2/2 pool before 5a), AlexNet 63 (11x11/4 then
# three 3/2 pools), NiN 71 (11x11/4 unpadded then three ceil-mode 3/2 pools).
CI_IMAGE = {"mobilenetv2": 40, "squeezenet1.1": 40, "alexnet": 64, "nin": 72, "googlenet": 48}
CLASSES = 1000


def image_size(name: str, size: str) -> int:
    if size == "full":
        return FULL_IMAGE
    if size == "ci":
        return CI_IMAGE[name]
    raise ValueError(f"unknown size {size!r}; expected 'ci' or 'full'")


def image_inputs(name: str, size: str) -> tuple[InputSpec, ...]:
    """The one graph input of CNN ``name``: a normalised image, N(0, 1)."""
    side = image_size(name, size)
    return (InputSpec("input", (1, 3, side, side), "float32", "normal", 0.0, 1.0),)


def _start(name: str, size: str, seed: int) -> tuple[GraphBuilder, str]:
    g = GraphBuilder(name, seed)
    spec = image_inputs(name, size)[0]
    return g, g.input(spec.name, spec.shape, spec.dtype)


def _logits(g: GraphBuilder, x: str) -> onnx.ModelProto:
    return g.finish({"output": x})


# MobileNetV2 ------------------------------------------------------------------------------------

# torchvision's inverted residual settings: expansion t, output channels c, repeats n, first stride s
MOBILENETV2_SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                        (6, 160, 3, 2), (6, 320, 1, 1))


def _conv_bn(g: GraphBuilder, x: str, out: int, kernel: int, stride: int = 1, group: int = 1,
             act: str = "relu6", eps: float = 1e-5) -> str:
    y = g.batchnorm(g.conv(x, out, kernel, stride, (kernel - 1) // 2, group, bias=False), eps)
    if act == "relu6":
        return g.relu6(y)
    if act == "relu":
        return g.relu(y)
    return y


def mobilenetv2(size: str, seed: int) -> onnx.ModelProto:
    """MobileNetV2 1.0 (torchvision layout): stem 3x3/2 32, 17 inverted residual blocks, 1x1 1280, FC 1000."""
    g, x = _start("mobilenetv2", size, seed)
    with g.scope("features.0"):
        x = _conv_bn(g, x, 32, 3, 2)
    index = 1
    for t, c, n, s in MOBILENETV2_SETTINGS:
        for i in range(n):
            stride = s if i == 0 else 1
            with g.scope(f"features.{index}"):
                channels = g.shape(x)[1]
                hidden = channels * t
                y = x
                if t != 1:
                    y = _conv_bn(g, y, hidden, 1)  # expand
                y = _conv_bn(g, y, hidden, 3, stride, group=hidden)  # depthwise
                y = _conv_bn(g, y, c, 1, act="none")  # linear bottleneck
                x = g.add(x, y) if stride == 1 and channels == c else y
            index += 1
    with g.scope(f"features.{index}"):
        x = _conv_bn(g, x, 1280, 1)
    with g.scope("classifier"):
        x = g.gemm(g.flatten(g.global_avgpool(x)), CLASSES)
    return _logits(g, x)


# SqueezeNet 1.1 ---------------------------------------------------------------------------------

def _fire(g: GraphBuilder, x: str, squeeze: int, expand: int) -> str:
    s = g.relu(g.conv(x, squeeze, 1))
    e1 = g.relu(g.conv(s, expand, 1))
    e3 = g.relu(g.conv(s, expand, 3, pad=1))
    return g.concat([e1, e3])


def squeezenet11(size: str, seed: int) -> onnx.ModelProto:
    """SqueezeNet 1.1: conv 3x3/2 64, 8 fire modules between ceil-mode 3/2 max pools, 1x1 conv 1000, GAP."""
    g, x = _start("squeezenet1.1", size, seed)
    x = g.maxpool(g.relu(g.conv(x, 64, 3, 2)), 3, 2, ceil=True)
    fires = {3: (16, 64), 4: (16, 64), 6: (32, 128), 7: (32, 128), 9: (48, 192), 10: (48, 192),
             11: (64, 256), 12: (64, 256)}
    for index, (squeeze, expand) in fires.items():
        if index in (6, 9):
            x = g.maxpool(x, 3, 2, ceil=True)
        with g.scope(f"features.{index}"):
            x = _fire(g, x, squeeze, expand)
    with g.scope("classifier"):
        x = g.flatten(g.global_avgpool(g.relu(g.conv(x, CLASSES, 1))))
    return _logits(g, x)


# AlexNet ----------------------------------------------------------------------------------------

def alexnet(size: str, seed: int) -> onnx.ModelProto:
    """AlexNet (torchvision, no LRN): 11x11/4 64, 5x5 192, 3x3 384-256-256, three 3/2 max pools,
    FC 4096-4096-1000. The first FC's input is 256 x the last feature map (6x6 at 224)."""
    g, x = _start("alexnet", size, seed)
    with g.scope("features"):
        x = g.maxpool(g.relu(g.conv(x, 64, 11, 4, 2)), 3, 2)
        x = g.maxpool(g.relu(g.conv(x, 192, 5, 1, 2)), 3, 2)
        x = g.relu(g.conv(x, 384, 3, 1, 1))
        x = g.relu(g.conv(x, 256, 3, 1, 1))
        x = g.maxpool(g.relu(g.conv(x, 256, 3, 1, 1)), 3, 2)
    with g.scope("classifier"):
        x = g.relu(g.gemm(g.flatten(x), 4096))
        x = g.relu(g.gemm(x, 4096))
        x = g.gemm(x, CLASSES)
    return _logits(g, x)


# Network in Network -----------------------------------------------------------------------------

def _mlpconv(g: GraphBuilder, x: str, channels: tuple[int, int, int], kernel: int, stride: int, pad: int) -> str:
    x = g.relu(g.conv(x, channels[0], kernel, stride, pad))
    x = g.relu(g.conv(x, channels[1], 1))
    return g.relu(g.conv(x, channels[2], 1))


def nin(size: str, seed: int) -> onnx.ModelProto:
    """Network in Network, ImageNet model (Lin et al. 2014, Caffe zoo): four mlpconv blocks (a conv and two
    1x1 convs, ReLU), ceil-mode 3/2 max pools, the last block ending in 1000 channels, global average pool."""
    g, x = _start("nin", size, seed)
    with g.scope("mlpconv1"):
        x = g.maxpool(_mlpconv(g, x, (96, 96, 96), 11, 4, 0), 3, 2, ceil=True)
    with g.scope("mlpconv2"):
        x = g.maxpool(_mlpconv(g, x, (256, 256, 256), 5, 1, 2), 3, 2, ceil=True)
    with g.scope("mlpconv3"):
        x = g.maxpool(_mlpconv(g, x, (384, 384, 384), 3, 1, 1), 3, 2, ceil=True)
    with g.scope("mlpconv4"):
        x = _mlpconv(g, x, (1024, 1024, CLASSES), 3, 1, 1)
    return _logits(g, g.flatten(g.global_avgpool(x)))


# GoogLeNet --------------------------------------------------------------------------------------

# torchvision's Inception blocks: 1x1, (3x3 reduce, 3x3), (5x5 reduce, 5x5), pool projection
GOOGLENET_BLOCKS = {
    "inception3a": (64, 96, 128, 16, 32, 32),
    "inception3b": (128, 128, 192, 32, 96, 64),
    "inception4a": (192, 96, 208, 16, 48, 64),
    "inception4b": (160, 112, 224, 24, 64, 64),
    "inception4c": (128, 128, 256, 24, 64, 64),
    "inception4d": (112, 144, 288, 32, 64, 64),
    "inception4e": (256, 160, 320, 32, 128, 128),
    "inception5a": (256, 160, 320, 32, 128, 128),
    "inception5b": (384, 192, 384, 48, 128, 128),
}
# The paper's 5x5 branch (torchvision uses 3x3 there and calls it "a known bug").
GOOGLENET_BRANCH3_KERNEL = 5
GOOGLENET_BN_EPS = 1e-3


def _inception(g: GraphBuilder, x: str, c1: int, c3r: int, c3: int, c5r: int, c5: int, proj: int) -> str:
    eps = GOOGLENET_BN_EPS
    with g.scope("branch1"):
        b1 = _conv_bn(g, x, c1, 1, act="relu", eps=eps)
    with g.scope("branch2"):
        b2 = _conv_bn(g, _conv_bn(g, x, c3r, 1, act="relu", eps=eps), c3, 3, act="relu", eps=eps)
    with g.scope("branch3"):
        b3 = _conv_bn(g, x, c5r, 1, act="relu", eps=eps)
        b3 = _conv_bn(g, b3, c5, GOOGLENET_BRANCH3_KERNEL, act="relu", eps=eps)
    with g.scope("branch4"):
        b4 = _conv_bn(g, g.maxpool(x, 3, 1, 1, ceil=True), proj, 1, act="relu", eps=eps)
    return g.concat([b1, b2, b3, b4])


def googlenet(size: str, seed: int) -> onnx.ModelProto:
    """GoogLeNet / Inception v1 (torchvision layout, conv+BN+ReLU, no aux classifiers, no LRN), FC 1000."""
    g, x = _start("googlenet", size, seed)
    eps = GOOGLENET_BN_EPS
    with g.scope("conv1"):
        x = _conv_bn(g, x, 64, 7, 2, act="relu", eps=eps)
    x = g.maxpool(x, 3, 2, ceil=True)
    with g.scope("conv2"):
        x = _conv_bn(g, x, 64, 1, act="relu", eps=eps)
    with g.scope("conv3"):
        x = _conv_bn(g, x, 192, 3, act="relu", eps=eps)
    x = g.maxpool(x, 3, 2, ceil=True)
    for name, channels in GOOGLENET_BLOCKS.items():
        if name == "inception4a":
            x = g.maxpool(x, 3, 2, ceil=True)
        elif name == "inception5a":
            x = g.maxpool(x, 2, 2, ceil=True)
        with g.scope(name):
            x = _inception(g, x, *channels)
    with g.scope("fc"):
        x = g.gemm(g.flatten(g.global_avgpool(x)), CLASSES)
    return _logits(g, x)


# ResNet18 ---------------------------------------------------------------------------------------

RESNET18_IMAGE = 224  # one size: the studies' ResNet18 rows (iree issue 24772) are measured at 224x224
RESNET18_STAGES = ((64, 1), (128, 2), (256, 2), (512, 2))  # torchvision's layer1-4: width, first block's stride
RESNET18_BLOCKS = 2  # BasicBlocks per stage
RESNET18_BN_EPS = 1e-5


def resnet18_inputs(size: str) -> tuple[InputSpec, ...]:
    """ResNet18's one input at either size: a normalised 224x224 image, N(0, 1)."""
    if size not in ("ci", "full"):
        raise ValueError(f"unknown size {size!r}; expected 'ci' or 'full'")
    return (InputSpec("input", (1, 3, RESNET18_IMAGE, RESNET18_IMAGE), "float32", "normal", 0.0, 1.0),)


def _conv_bn_folded(g: GraphBuilder, x: str, out: int, kernel: int, stride: int = 1, relu: bool = True) -> str:
    """Conv (no bias) + inference BatchNorm folded into one biased Conv, as ``torch.onnx.export`` writes an eval-mode
    torchvision model: the BN's seeded statistics (``GraphBuilder.batchnorm``'s distributions) scale the He weights
    per output channel (``gamma / sqrt(var + eps)``) and become the bias (``beta - mean * scale``)."""
    c = g.shape(x)[1]
    fan_in = c * kernel * kernel
    weight = g.rng.standard_normal((out, c, kernel, kernel), dtype=np.float32) * np.float32(math.sqrt(2.0 / fan_in))
    gamma = g.rng.uniform(0.8, 1.2, out)
    beta = g.rng.uniform(-0.1, 0.1, out)
    mean = g.rng.standard_normal(out) * 0.1
    var = g.rng.uniform(0.5, 1.5, out)
    scale = gamma / np.sqrt(var + RESNET18_BN_EPS)
    w = g.const((weight * scale[:, None, None, None]).astype(np.float32), "weight")
    b = g.const((beta - mean * scale).astype(np.float32), "bias")
    n, _, h, wd = g.shape(x)
    pad = (kernel - 1) // 2
    oh, ow = ((s + 2 * pad - kernel) // stride + 1 for s in (h, wd))
    y = g.node("Conv", [x, w, b], (n, out, oh, ow), kernel_shape=[kernel, kernel], strides=[stride, stride],
               pads=[pad] * 4, dilations=[1, 1], group=1)
    return g.relu(y) if relu else y


def _basic_block(g: GraphBuilder, x: str, width: int, stride: int) -> str:
    """torchvision's BasicBlock: 3x3 conv-BN-ReLU, 3x3 conv-BN, plus the identity (or a 1x1/stride conv-BN
    downsample when the shape changes), ReLU."""
    with g.scope("conv1"):
        y = _conv_bn_folded(g, x, width, 3, stride)
    with g.scope("conv2"):
        y = _conv_bn_folded(g, y, width, 3, relu=False)
    if stride != 1 or g.shape(x)[1] != width:
        with g.scope("downsample"):
            x = _conv_bn_folded(g, x, width, 1, stride, relu=False)
    return g.relu(g.add(y, x))


def resnet18(size: str, seed: int) -> onnx.ModelProto:
    """ResNet18 (torchvision layout, BatchNorm folded into the convs): conv1 7x7/2 64, max pool 3x3/2, layer1-4 of
    two BasicBlocks (64, 128, 256, 512; a 1x1/2 conv downsample on the first block of layers 2-4), global average
    pool, FC 1000. 224x224 at both sizes."""
    g = GraphBuilder("resnet18", seed)
    spec = resnet18_inputs(size)[0]
    x = g.input(spec.name, spec.shape, spec.dtype)
    with g.scope("conv1"):
        x = _conv_bn_folded(g, x, 64, 7, 2)
    x = g.maxpool(x, 3, 2, 1)
    for stage, (width, stride) in enumerate(RESNET18_STAGES, start=1):
        for block in range(RESNET18_BLOCKS):
            with g.scope(f"layer{stage}.{block}"):
                x = _basic_block(g, x, width, stride if block == 0 else 1)
    features = g.flatten(g.global_avgpool(x))
    with g.scope("fc"):
        x = _centred_fc(g, features, seed)
    return _logits(g, x)


RESNET18_CENTRING_IMAGES = 8  # seeded images whose mean pooled features the FC bias subtracts
RESNET18_CENTRING_DECIMALS = 2  # the mean is rounded so a last-bit difference in onnxruntime's sums changes nothing


def _centred_fc(g: GraphBuilder, features: str, seed: int) -> str:
    """FC 1000 (He weights) whose bias also subtracts ``W @ mean(features)`` over seeded images.

    Random weights leave the pooled features of ReLU outputs almost all common mode (measured: mean 50, 3 % of
    that varying between input images), so every input got the same class (argmax 593 for every seed). A trained
    network's FC does not see that offset; subtracting it leaves logits that follow the input (std about 2).
    """
    import onnxruntime as ort
    from onnx import helper

    n, width = g.shape(features)
    graph = helper.make_graph(list(g.nodes), "features", list(g.inputs),
                              [helper.make_tensor_value_info(features, onnx.TensorProto.FLOAT, [n, width])],
                              list(g.initializers))
    body = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(body.SerializeToString(), options, providers=["CPUExecutionProvider"])
    images = np.random.default_rng((seed, RESNET18_IMAGE))
    spec = resnet18_inputs("ci")[0]
    mean = np.mean([session.run(None, {spec.name: spec.generate(images)})[0][0]
                    for _ in range(RESNET18_CENTRING_IMAGES)], axis=0)
    mean = np.round(mean, RESNET18_CENTRING_DECIMALS).astype(np.float32)
    weight = g.rng.standard_normal((CLASSES, width), dtype=np.float32) * np.float32(math.sqrt(2.0 / width))
    bias = g.rng.uniform(-0.05, 0.05, CLASSES).astype(np.float32) - weight @ mean
    return g.node("Gemm", [features, g.const(weight, "weight"), g.const(bias.astype(np.float32), "bias")],
                  (n, CLASSES), transB=1)
