"""Operator applications for the CUDA tests: every distinct one in the zoo's tiny models, plus
shapes chosen to reach the paths tiny models miss (128x128 GEMM tiles, split-K, long
sums, float64, int64 labels, grouped and strided convolutions, axis variants)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from types import SimpleNamespace

import numpy as np

import ops
import zoo
from zoo import small


@dataclass(frozen=True)
class Case:
    op: str
    attrs: dict
    ins: tuple        # specs: .shape, .dtype
    outs: tuple

    @property
    def id(self) -> str:
        shapes = ",".join("x".join(map(str, t.shape)) + ("" if t.dtype == np.float32 else f":{t.dtype}")
                          for t in self.ins)
        return f"{self.op}({shapes})"

    @property
    def decl(self):
        return ops.get(self.op)


def spec(shape, dtype="float32"):
    return SimpleNamespace(shape=tuple(shape), dtype=np.dtype(dtype))


def case(op: str, ins, **attrs) -> Case:
    decl = ops.get(op)
    attrs = decl.canon(attrs)
    ins = tuple(t if isinstance(t, SimpleNamespace) else spec(t) for t in ins)
    outs = tuple(spec(s, d) for s, d in decl.infer(attrs, ins))
    return Case(op, attrs, ins, outs)


def _graph_cases() -> list[Case]:
    graphs = [zoo.tiny(f) for f in zoo.TINY]
    graphs += [small.lstm(batch=4, steps=3, features=8, hidden=8, layers=2, classes=3),
               small.residual_cnn(batch=2, image=8, channels=4, stages=2)]
    seen, out = set(), []
    for g in graphs:
        for n in g.nodes:
            ins = tuple(spec(g.tensors[t].shape, g.tensors[t].dtype) for t in n.inputs)
            key = (n.op, json.dumps(n.attrs, sort_keys=True, default=list),
                   tuple((t.shape, t.dtype.str) for t in ins))
            if key not in seen:
                seen.add(key)
                out.append(case(n.op, ins, **n.attrs))
    return out


def _synthetic_cases() -> list[Case]:
    f64 = "float64"
    c = [
        # dense: 128x128 tiles, split-K weight gradient, float64
        case("fully_connected", [(512, 256), (640, 256), (640,)]),
        case("fully_connected_grad_data", [(640, 256), (512, 640)]),
        case("fully_connected_grad_weight", [(8192, 24), (8192, 40)], has_bias=True),
        case("fully_connected", [spec((5, 7), f64), spec((3, 7), f64)]),
        case("fully_connected_grad_weight", [spec((9, 5), f64), spec((9, 4), f64)], has_bias=True),
        # conv: large tiles, split-K, groups, depthwise with stride, 1x7 kernels
        case("conv2d", [(32, 32, 16, 16), (128, 32, 3, 3)], padding=1),
        case("conv2d_grad_data", [(32, 48, 3, 3), (4, 32, 8, 8)], padding=1, input_hw=(8, 8)),
        case("conv2d_grad_weight", [(16, 32, 16, 16), (16, 32, 16, 16)], padding=1, kernel_hw=(3, 3)),
        case("conv2d", [(2, 64, 9, 9), (64, 16, 3, 3)], padding=1, groups=4, stride=2),
        case("conv2d_grad_data", [(64, 16, 3, 3), (2, 64, 5, 5)], padding=1, groups=4, stride=2, input_hw=(9, 9)),
        case("conv2d_grad_weight", [(2, 64, 9, 9), (2, 64, 5, 5)], padding=1, groups=4, stride=2,
             kernel_hw=(3, 3)),
        case("conv2d", [(2, 8, 9, 7), (8, 1, 3, 3)], padding=1, groups=8, stride=2),
        case("conv2d_grad_data", [(8, 1, 3, 3), (2, 8, 5, 4)], padding=1, groups=8, stride=2, input_hw=(9, 7)),
        case("conv2d_grad_weight", [(2, 8, 9, 7), (2, 8, 5, 4)], padding=1, groups=8, stride=2, kernel_hw=(3, 3)),
        case("conv2d", [(2, 3, 6, 11), (20, 3, 1, 7)], padding=(0, 3)),
        case("conv2d", [spec((1, 2, 5, 5), f64), spec((3, 2, 3, 3), f64)]),
        # dilated convolutions (GEMM and direct, the data gradient's one phase and its direct kernel
        # where an axis is both strided and dilated) and transposed ones (the data gradient's kernels)
        case("conv2d", [(2, 32, 9, 9), (32, 32, 3, 3)], padding=2, dilation=2),
        case("conv2d_grad_data", [(32, 32, 3, 3), (2, 32, 9, 9)], padding=2, dilation=2, input_hw=(9, 9)),
        case("conv2d_grad_data", [(32, 32, 3, 3), (1, 32, 5, 7)], padding=(2, 1), stride=(2, 1), dilation=(2, 3),
             input_hw=(9, 11)),
        case("conv2d_grad_weight", [(2, 32, 9, 9), (2, 32, 9, 9)], padding=2, dilation=2, kernel_hw=(3, 3)),
        case("conv2d", [(1, 4, 10, 9), (4, 2, 3, 3)], padding=(3, 1), stride=(1, 2), groups=2, dilation=(3, 1)),
        case("conv2d_grad_weight", [(1, 4, 10, 9), (1, 4, 10, 5)], padding=(3, 1), stride=(1, 2), groups=2,
             dilation=(3, 1), kernel_hw=(3, 3)),
        case("conv_transpose2d", [(2, 32, 4, 5), (32, 16, 3, 3)], stride=2, padding=1, output_padding=1),
        case("conv_transpose2d", [(1, 4, 3, 4), (4, 3, 3, 2)], stride=(2, 3), padding=(1, 0),
             output_padding=(1, 2), groups=2),
        # resampling: up by 4 and by odd factors, down, both corner conventions; reflection padding
        case("upsample_bilinear2d", [(2, 3, 5, 4)], size=(17, 13)),
        case("upsample_bilinear2d", [(1, 2, 9, 9)], size=(33, 4), align_corners=True),
        case("upsample_bilinear2d", [(1, 2, 1, 1)], size=(5, 3), align_corners=True),
        case("upsample_bilinear2d_grad", [(2, 3, 17, 13)], input_hw=(5, 4)),
        case("upsample_bilinear2d_grad", [(1, 2, 33, 4)], input_hw=(9, 9), align_corners=True),
        case("upsample_bilinear2d_grad", [(1, 2, 5, 3)], input_hw=(1, 1), align_corners=True),
        case("reflection_pad2d", [(2, 3, 6, 5)], padding=(3, 2)),
        case("reflection_pad2d_grad", [(2, 3, 12, 9)], padding=(3, 2), input_hw=(6, 5)),
        case("reflection_pad2d_grad", [(1, 2, 4, 1)], padding=(1, 0), input_hw=(2, 1)),
        # instance norm: planes shorter and longer than a block
        case("instance_norm", [(2, 3, 5, 4)]),
        case("instance_norm", [(1, 2, 20, 30)], eps=1e-3),
        case("instance_norm_grad", [(2, 3, 5, 4), (2, 3), (2, 3, 5, 4)]),
        case("instance_norm_grad", [(1, 2, 20, 30), (1, 2), (1, 2, 20, 30)]),
        # pooling
        case("max_pool2d", [(2, 3, 9, 9)], kernel=3, stride=2, padding=1),
        case("max_pool2d_grad", [(2, 3, 9, 9), (2, 3, 5, 5), (2, 3, 5, 5)], kernel=3, stride=2, padding=1),
        case("avg_pool2d", [(2, 3, 9, 9)], kernel=3, stride=2, padding=1, count_include_pad=False),
        case("avg_pool2d_grad", [(2, 3, 5, 5)], kernel=3, stride=2, padding=1, count_include_pad=False,
             input_hw=(9, 9)),
        case("global_avg_pool", [spec((3, 5, 4, 4), f64)]),
        # normalisation, loss
        case("batch_norm", [(64, 24), (24,), (24,), (24,), (24,)]),
        case("batch_norm", [(8, 3, 64, 64), (3,), (3,), (3,), (3,)]),
        case("batch_norm_grad", [(8, 3, 64, 64), (3,), (3,), (3,), (8, 3, 64, 64)]),
        case("batch_norm_stats", [(64, 24), (24,), (24,)], eps=1e-3, momentum=0.7),
        case("batch_norm_stats", [(8, 3, 64, 64), (3,), (3,)]),
        case("batch_norm_apply", [(64, 24), (24,), (24,), (24,), (24,)]),
        case("batch_norm_apply", [(8, 3, 64, 64), (3,), (3,), (3,), (3,)]),
        case("softmax_cross_entropy", [(6, 1000), spec((6,), "int64")]),
        case("softmax_cross_entropy_grad", [(6, 1000), spec((6,), "int64"), ()]),
        case("softmax_cross_entropy", [spec((3, 4), f64), spec((3,), "int32")]),
        # element-wise: long and single sums, fills of other dtypes, float64
        case("sum_n", [(5, 7)] * 9),
        case("sum_n", [(1001,)] * 16),
        case("sum_n", [(3, 3)]),
        case("accumulate", [(1001,), (1001,)]),
        case("accumulate", [spec((5, 7), f64), spec((5, 7), f64)]),
        case("accumulate_state", [(1001,), (1001,)]),
        case("fill", [], shape=(7, 3), dtype="int32", value=3),
        case("fill", [], shape=(1000,), dtype=f64, value=-0.5),
        case("relu", [spec((1003,), f64)]),
        case("sigmoid_grad", [spec((10,), f64), spec((10,), f64)]),
        case("sgd_update", [(4099,), (4099,), (4099,)], lr=0.1, momentum=0.9, weight_decay=1e-4),
        case("relu_grad", [(1003,), (1003,)]),
        case("sigmoid", [(1003,)]),
        case("tanh", [(1003,)]),
        case("tanh_grad", [(1003,), (1003,)]),
        case("add", [(2, 501), (2, 501)]),
        case("mul", [(2, 501), (2, 501)]),
        case("scale", [(2, 501)], factor=0.3),
        case("global_avg_pool_grad", [(3, 5)], input_hw=(4, 3)),
        case("softmax_cross_entropy_grad", [(5, 7), spec((5,), "int32"), ()]),
        # data movement
        case("concat", [(2, 3, 4), (2, 5, 4), (2, 1, 4)], axis=1),
        case("concat", [(3, 2), (3, 5)], axis=-1),
        case("concat", [(1, 3), (2, 3)], axis=0),
        case("split", [(4, 6, 5)], axis=2, sizes=(1, 3, 1)),
        case("reshape", [(6, 35)], shape=(-1, 7)),
        # small ones for the host emulation: split-K, float64 twins
        case("conv2d_grad_weight", [(1, 1, 64, 64), (1, 16, 64, 64)], kernel_hw=(1, 1)),
        case("fully_connected_grad_weight", [(4096, 4), (4096, 16)], has_bias=True),
        case("fully_connected_grad_data", [(3, 7), (5, 3)]),
        case("conv2d_grad_data", [(32, 16, 1, 1), (2, 32, 4, 4)], stride=2, input_hw=(8, 8)),   # 3 phases get no tap
        case("conv2d_grad_data", [(16, 16, 3, 3), (1, 16, 3, 2)], stride=(3, 2), padding=(1, 0), input_hw=(7, 5)),
        case("fully_connected", [(2, 4096), (16, 4096), (16,)]),          # split over K, bias in the reduce
        case("fully_connected", [(3, 6000), (5, 6000)]),                  # split, K not a multiple of the chunk
        case("fully_connected_grad_data", [(4096, 16), (2, 4096)]),      # split over M (the LSTM's dx)
        case("batch_norm_grad", [(4, 3, 5, 5), (3,), (3,), (3,), (4, 3, 5, 5)]),
        case("batch_norm_stats", [(4, 3, 5, 5), (3,), (3,)]),
        case("batch_norm_apply", [(4, 3, 5, 5), (3,), (3,), (3,), (3,)]),
        case("conv2d_grad_weight", [(1, 2, 5, 5), (1, 2, 3, 3)], groups=2, kernel_hw=(3, 3)),
        # big enough for the 128x128 GEMM tiles (>= 256 tiles)
        case("fully_connected", [(2048, 256), (2048, 256)]),
        case("fully_connected_grad_data", [(256, 2048), (2048, 256)]),
        case("fully_connected_grad_weight", [(64, 2048), (64, 2048)]),
        case("conv2d", [(64, 32, 16, 16), (256, 32, 3, 3)], padding=1),
        case("conv2d_grad_data", [(32, 256, 3, 3), (64, 32, 16, 16)], padding=1, input_hw=(16, 16)),
        case("conv2d_grad_weight", [(1, 1024, 8, 8), (1, 1024, 8, 8)], padding=1, kernel_hw=(3, 3)),
        # log_softmax and nll_loss (PyTorch's cross-entropy): rows longer than a block, both label
        # types, ignored rows (test_cuda_kernels.make_inputs marks some), both reductions
        case("log_softmax", [(2, 3, 7)]),
        case("log_softmax", [(3, 300)]),
        case("log_softmax_grad", [(2, 3, 7), (2, 3, 7)]),
        case("log_softmax_grad", [(3, 300), (3, 300)]),
        case("nll_loss", [(6, 10), spec((6,), "int64")]),
        case("nll_loss", [(300, 4), spec((300,), "int32")], ignore_index=1, reduction="sum"),
        case("nll_loss_grad", [spec((6,), "int64"), ()], classes=10),
        case("nll_loss_grad", [spec((300,), "int32"), ()], classes=4, ignore_index=1, reduction="sum"),
    ]
    c += _broadcast_cases()
    from .transformer_cases import large_tile_cases, transformer_cases
    c += transformer_cases() + large_tile_cases()
    c += _math_cases()
    c += _indexing_cases()
    c += _logic_cases()
    return c + [with_dtype(x, "float64") for x in c]


def _broadcast_cases() -> list[Case]:
    """ops/broadcast.py: every fn, broadcasts of differing ranks, reductions over inner, outer
    and all axes, with and without keepdim."""
    b = "bool"
    c = [case("binary", [(4, 1, 3), (2, 3)], fn=fn)
         for fn in ("add", "sub", "mul", "div", "maximum", "minimum")]
    c += [case("binary", [(), (5, 7)], fn="mul"),
          case("binary", [(2, 3, 1, 4, 1, 5), (3, 6, 4, 1, 1)], fn="add"),
          case("binary", [(1001,), (1001,)], fn="sub"),
          case("binary_grad", [(4, 1, 3), (2, 3), (4, 2, 3)], fn="maximum", side=0),
          case("binary_grad", [(4, 1, 3), (2, 3), (4, 2, 3)], fn="minimum", side=1),
          case("where", [spec((4, 1, 3), b), (2, 3), ()]),
          case("where", [spec((1, 5), "uint8"), (3, 5), (3, 1)]),
          case("broadcast_to", [(3, 1)], shape=(2, 3, 4)),
          case("broadcast_to", [()], shape=(7,))]
    c += [case("reduce", [(3, 4, 5)], fn=fn, axes=(-1, 0)) for fn in ("sum", "mean", "amax", "amin")]
    c += [case("reduce", [(3, 4, 5)], fn="sum", axes=(1,), keepdim=True),
          case("reduce", [(2, 3, 4, 5)], fn="amax", axes=(0, 1, 2, 3)),
          case("reduce", [(600, 3)], fn="mean", axes=(0,)),
          case("reduce_grad", [(3, 4, 5), (4,), (4,)], axes=(0, 2)),
          case("reduce_grad", [(3, 4, 5), (3, 1, 5), (3, 1, 5)], axes=(1,), keepdim=True),
          case("reduce_grad", [(6, 7), (), ()], axes=(0, 1))]
    return c


def _math_cases() -> list[Case]:
    """ops/math.py: every unary and scalar fn and its gradient, casts between every pair of
    dtypes, slices with step 1 (copy_rows) and step 2 (slice_fwd) and their gradients."""
    from ops.math import CAST_DTYPES, SCALAR_FNS, UNARY_FNS
    c = [case("unary", [(3, 67)], fn=fn) for fn in UNARY_FNS]
    c += [case("unary_grad", [(3, 67)] * 3, fn=fn) for fn in UNARY_FNS]
    c += [case("scalar", [(2, 71)], fn=fn, value=0.75) for fn in SCALAR_FNS]
    c += [case("scalar", [(2, 71)], fn="pow", value=v) for v in (0.0, 1.0, 2.0, 3.0, 0.5, -0.5, -1.0, -2.0)]
    c += [case("scalar_grad", [(2, 71)] * 2, fn=fn, value=1.5) for fn in SCALAR_FNS]
    c += [case("scalar_grad", [(2, 71)] * 2, fn="pow", value=v) for v in (0.0, 2.0, 0.5, -1.0)]
    c += [case("cast", [spec((3, 41), src)], dtype=dst) for src in CAST_DTYPES for dst in CAST_DTYPES]
    c += [case("slice", [(4, 9, 5)], axis=1, start=-7, stop=8, step=2),
          case("slice", [(4, 9, 5)], axis=-1, start=1, stop=-1),
          case("slice", [(6, 7)], axis=0, start=1, step=3),
          case("slice", [spec((4, 9), "int64")], axis=1, start=2, stop=100),
          case("slice_grad", [(4, 3, 5)], shape=(4, 9, 5), axis=1, start=2, stop=8, step=2),
          case("slice_grad", [(4, 9, 3)], shape=(4, 9, 5), axis=2, start=1, stop=4, step=1),
          case("slice_grad", [(2, 7)], shape=(6, 7), axis=0, start=1, stop=6, step=3)]
    return c


def _indexing_cases() -> list[Case]:
    """ops/indexing.py: gather along first, middle and last axes (an index smaller than x off
    the axis, torch.gather allows it), index_select along each, int32 and int64 indices
    (test_cuda_kernels.make_inputs draws valid ones, with repeats)."""
    i32, i64 = "int32", "int64"
    c = [case("gather", [(5, 4, 3), spec((7, 4, 3), i64)], axis=0),
         case("gather", [(5, 4, 3), spec((2, 6, 3), i32)], axis=1),
         case("gather", [(5, 9), spec((4, 12), i32)], axis=-1),
         case("gather", [(2, 3, 1, 4, 2, 5), spec((2, 2, 1, 3, 2, 5), i64)], axis=3),
         case("gather_grad", [spec((7, 4, 3), i64), (7, 4, 3)], shape=(5, 4, 3), axis=0),
         case("gather_grad", [spec((2, 6, 3), i32), (2, 6, 3)], shape=(5, 4, 3), axis=1),
         case("gather_grad", [spec((4, 12), i32), (4, 12)], shape=(5, 9), axis=-1),
         case("gather_grad", [spec((2, 2, 1, 3, 2, 5), i64), (2, 2, 1, 3, 2, 5)], shape=(2, 3, 1, 4, 2, 5), axis=3),
         case("index_select", [(6, 4, 3), spec((9,), i64)], axis=0),
         case("index_select", [(6, 4, 3), spec((5,), i32)], axis=1),
         case("index_select", [(6, 7), spec((3,), i32)], axis=-1),
         case("index_select", [(300,), spec((1000,), i64)], axis=0),
         case("index_select_grad", [spec((9,), i64), (9, 4, 3)], shape=(6, 4, 3), axis=0),
         case("index_select_grad", [spec((5,), i32), (6, 5, 3)], shape=(6, 4, 3), axis=1),
         case("index_select_grad", [spec((3,), i32), (6, 3)], shape=(6, 7), axis=-1),
         case("index_select_grad", [spec((1000,), i64), (1000,)], shape=(300,), axis=0)]
    return c


def _logic_cases() -> list[Case]:
    """ops/logic.py: every comparison fn, each compared dtype, broadcasts of differing ranks,
    scalars of each kind (an int, a float, a float against an integer tensor), every logical fn,
    any/all over inner, outer and all axes."""
    b = "bool"
    c = [case("compare", [(4, 1, 3), (2, 3)], fn=fn) for fn in ("eq", "ne", "lt", "le", "gt", "ge")]
    c += [case("compare", [spec((3, 1, 5), dt), spec((4, 1), dt)], fn="le") for dt in ("int32", "int64")]
    c += [case("compare", [spec((2, 7), b), spec((7,), b)], fn=fn) for fn in ("eq", "ne")]
    c += [case("compare", [(2, 3, 1, 4, 1, 5), (3, 6, 4, 1, 1)], fn="gt"),
          case("compare", [(), (5, 7)], fn="ne"),
          case("compare", [(1001,), (1001,)], fn="eq")]
    c += [case("compare_scalar", [(2, 71)], fn=fn, value=0.75) for fn in ("eq", "ne", "lt", "le", "gt", "ge")]
    c += [case("compare_scalar", [(3, 7)], fn="gt", value=0),
          case("compare_scalar", [spec((3, 7), "int64")], fn="eq", value=2),
          case("compare_scalar", [spec((3, 7), "int32")], fn="lt", value=1.5),
          case("compare_scalar", [spec((3, 7), "int64")], fn="ge", value=-1e30),
          case("compare_scalar", [spec((3, 7), b)], fn="eq", value=True)]
    c += [case("logical", [spec((4, 1, 3), b), spec((2, 3), b)], fn=fn) for fn in ("and", "or", "xor")]
    c += [case("logical", [spec((), b), spec((1001,), b)], fn="and"),
          case("logical_not", [spec((3, 67), b)])]
    c += [case("reduce_bool", [spec((3, 4, 5), b)], fn=fn, axes=(-1, 0)) for fn in ("any", "all")]
    c += [case("reduce_bool", [spec((3, 4, 5), b)], fn="any", axes=(1,), keepdim=True),
          case("reduce_bool", [spec((2, 3, 4, 5), b)], fn="all", axes=(0, 1, 2, 3)),
          case("reduce_bool", [spec((3, 0, 2), b)], fn="all", axes=(1,)),
          case("reduce_bool", [spec((600, 3), b)], fn="all", axes=(0,))]
    return c


def with_dtype(c: Case, dtype) -> Case:
    """The same application with every float32 tensor in ``dtype`` (fill's dtype attribute too)."""
    def conv(t):
        return spec(t.shape, dtype) if np.dtype(t.dtype) == np.float32 else t
    attrs = dict(c.attrs)
    if c.op == "fill" and np.dtype(attrs["dtype"]) == np.float32:
        attrs["dtype"] = np.dtype(dtype).name
    return case(c.op, [conv(t) for t in c.ins], **attrs)


@lru_cache(maxsize=1)
def all_cases() -> tuple[Case, ...]:
    return tuple(_graph_cases() + _synthetic_cases())
