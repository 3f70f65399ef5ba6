"""Our operators against PyTorch's, in float64: forward values, running statistics and the
gradients our own declarations derive (each operator's ``gradient`` run eagerly, as autodiff
would emit it) against autograd's, to 1e-10 relative (largest difference over the largest
magnitude of torch's result). What an importer of torch.export graphs (Core ATen, after
run_decompositions) relies on. Marked ``torch``: skipped where PyTorch is not importable;
never an engine dependency."""
from types import SimpleNamespace

import numpy as np
import pytest

from ops import registry

from .opcheck import Eager

torch = pytest.importorskip("torch")
F = torch.nn.functional
pytestmark = pytest.mark.torch

RTOL = 1e-10
rng = np.random.default_rng(0)


def rel_err(ours, theirs) -> float:
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    assert ours.shape == theirs.shape, (ours.shape, theirs.shape)
    scale = float(np.max(np.abs(theirs))) if theirs.size else 0.0
    return float(np.max(np.abs(ours - theirs))) / max(scale, np.finfo(np.float64).tiny) if ours.size else 0.0


def check(what, ours, theirs, rtol=RTOL):
    err = rel_err(ours, theirs)
    print(f"{what}: {err:.2e}")
    assert err <= rtol, f"{what} differs from PyTorch's by {err:.3g} (relative), more than {rtol:g}"


def ours(op, arrays, attrs=None, dys=None, wrt=()):
    """Run ``op`` eagerly, then its gradient declaration with upstream gradients ``dys`` (one per
    output, None for none): (outputs, gradients of the inputs in ``wrt``, None elsewhere)."""
    ev = Eager()
    ids = [ev.const(np.asarray(a)) for a in arrays]
    outs = ev.apply(op, ids, **(attrs or {}))
    node = SimpleNamespace(op=op, attrs=ev.last_attrs, inputs=tuple(ids), outputs=tuple(outs))
    ys = [ev.arrays[o] for o in outs]
    if dys is None:
        return ys, None
    dys = list(dys) + [None] * (len(outs) - len(dys))
    dy_ids = [None if d is None else ev.const(np.asarray(d)) for d in dys]
    grads = registry.get(op).gradient(ev, node, dy_ids, [i in wrt for i in range(len(ids))])
    return ys, [None if g is None else ev.arrays[g] for g in grads]


def theirs(fn, arrays, dy, wrt=()):
    """torch's fn on float64 copies of ``arrays``; backward with ``dy`` (None: no backward):
    (output, gradients of the inputs in ``wrt``)."""
    ts = [torch.tensor(np.asarray(a), requires_grad=i in wrt) for i, a in enumerate(arrays)]
    y = fn(*ts)
    if dy is not None:
        y.backward(torch.tensor(np.asarray(dy)))
    return y.detach().numpy(), [ts[i].grad.numpy() if i in wrt and dy is not None else None
                                for i in range(len(ts))]


def compare(what, op, arrays, fn, attrs=None, wrt=(0,), torch_arrays=None, order=None):
    """One operator against ``fn``: output 0 and the gradients of ``wrt``. ``torch_arrays`` and
    ``order`` (our input i is torch's order[i]) when torch takes its arguments differently."""
    y, _ = ours(op, arrays, attrs)
    dy = rng.standard_normal(y[0].shape)
    ys, grads = ours(op, arrays, attrs, [dy], wrt)
    order = order or list(range(len(arrays)))
    t_arrays = torch_arrays if torch_arrays is not None else [arrays[order.index(j)] for j in range(len(arrays))]
    ty, tgrads = theirs(fn, t_arrays, dy, wrt=tuple(order[i] for i in wrt))
    check(f"{what} forward", ys[0], ty)
    for i in wrt:
        check(f"{what} d input {i}", grads[i], tgrads[order[i]])


# ---------------------------------------------------------------- losses and activations

@pytest.mark.parametrize("shape", [(5, 7), (2, 3, 11)])
def test_log_softmax(shape):
    x = rng.standard_normal(shape) * 4
    compare(f"log_softmax{shape}", "log_softmax", [x], lambda t: torch.log_softmax(t, -1))


@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("ignore_index", [-100, 1])
def test_nll_loss(reduction, ignore_index):
    n, c = 9, 5
    logp = np.log(rng.dirichlet(np.ones(c), n))
    labels = rng.integers(0, c, n)
    labels[::4] = ignore_index
    attrs = {"ignore_index": ignore_index, "reduction": reduction}
    (loss,), grads = ours("nll_loss", [logp, labels], attrs, [np.array(0.7)], wrt=(0,))
    ty, tgrads = theirs(lambda a, b: F.nll_loss(a, b, ignore_index=ignore_index, reduction=reduction),
                        [logp, labels], np.array(0.7), wrt=(0,))
    check(f"nll_loss {attrs} forward", loss, ty)
    check(f"nll_loss {attrs} d logp", grads[0], tgrads[0])


def test_log_softmax_and_nll_loss_are_cross_entropy():
    n, c = 8, 6
    logits, labels = rng.standard_normal((n, c)) * 3, rng.integers(0, c, n)
    labels[2] = -100
    ev = Eager()
    x, lab = ev.const(logits), ev.const(labels)
    (logp,) = ev.apply("log_softmax", [x])
    ls_node = SimpleNamespace(op="log_softmax", attrs={}, inputs=(x,), outputs=(logp,))
    (loss,) = ev.apply("nll_loss", [logp, lab])
    nll_node = SimpleNamespace(op="nll_loss", attrs=ev.last_attrs, inputs=(logp, lab), outputs=(loss,))
    (dlogp, _) = registry.get("nll_loss").gradient(ev, nll_node, [ev.const(np.array(1.0))], [True, False])
    (dx,) = registry.get("log_softmax").gradient(ev, ls_node, [dlogp], [True])
    ty, tgrads = theirs(lambda a, b: F.cross_entropy(a, b), [logits, labels], np.array(1.0), wrt=(0,))
    check("cross_entropy forward", ev.arrays[loss], ty)
    check("cross_entropy d logits", ev.arrays[dx], tgrads[0])


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(approximate):
    x = rng.standard_normal((6, 50)) * 3
    attrs = {} if approximate == "tanh" else {"approximate": "none"}
    compare(f"gelu {approximate}", "gelu", [x], lambda t: F.gelu(t, approximate=approximate), attrs)


@pytest.mark.parametrize("scale", [1.0, 0.125])
def test_softmax(scale):
    x = rng.standard_normal((3, 4, 9)) * 3
    compare(f"softmax scale={scale}", "softmax", [x], lambda t: torch.softmax(t * scale, -1), {"scale": scale})


# ---------------------------------------------------------------- normalisation

@pytest.mark.parametrize("shape", [(16, 5), (4, 3, 6, 5)])
def test_batch_norm_training(shape):
    """batch_norm_stats then batch_norm_apply (as zoo.layers.batch_norm pairs them) against
    F.batch_norm(training=True): y, running statistics (torch's momentum m is our 1 - m; both
    update running_var with the unbiased variance), and dx, dgamma, dbeta."""
    c, eps, torch_momentum = shape[1], 1e-3, 0.1
    x = rng.standard_normal(shape) * 2 + 0.5
    gamma, beta = rng.standard_normal(c), rng.standard_normal(c)
    rm, rv = rng.standard_normal(c), np.abs(rng.standard_normal(c)) + 0.5
    ev = Eager()
    xi, gi, bi, rmi, rvi = (ev.const(a) for a in (x, gamma, beta, rm, rv))
    mean, invstd, rm_next, rv_next = ev.apply("batch_norm_stats", [xi, rmi, rvi], eps=eps,
                                              momentum=1 - torch_momentum)
    (y,) = ev.apply("batch_norm_apply", [xi, gi, bi, mean, invstd])
    dy = rng.standard_normal(shape)
    node = SimpleNamespace(op="batch_norm_apply", attrs={}, inputs=(xi, gi, bi, mean, invstd), outputs=(y,))
    grads = registry.get("batch_norm_apply").gradient(ev, node, [ev.const(dy)], [True, True, True, False, False])

    trm, trv = torch.tensor(rm), torch.tensor(rv)
    ty, tgrads = theirs(lambda a, g, b: F.batch_norm(a, trm, trv, g, b, training=True, momentum=torch_momentum,
                                                     eps=eps),
                        [x, gamma, beta], dy, wrt=(0, 1, 2))
    check(f"batch_norm{shape} forward", ev.arrays[y], ty)
    check(f"batch_norm{shape} running_mean", ev.arrays[rm_next], trm.numpy())
    check(f"batch_norm{shape} running_var", ev.arrays[rv_next], trv.numpy())
    for i, what in enumerate(("dx", "dgamma", "dbeta")):
        check(f"batch_norm{shape} {what}", ev.arrays[grads[i]], tgrads[i])


@pytest.mark.parametrize("shape", [(2, 3, 5, 4), (1, 2, 1, 9)])
def test_instance_norm(shape):
    x = 2 + rng.standard_normal(shape)
    compare("instance_norm", "instance_norm", [x], lambda a: F.instance_norm(a, eps=1e-5), {"eps": 1e-5})


@pytest.mark.parametrize("shape", [(6, 10), (2, 3, 17)])
def test_layer_norm(shape):
    d, eps = shape[-1], 1e-5 if shape == (6, 10) else 1e-3
    x = rng.standard_normal(shape) * 2 + 1
    gamma, beta = rng.standard_normal(d), rng.standard_normal(d)
    compare(f"layer_norm{shape} eps={eps}", "layer_norm", [x, gamma, beta],
            lambda a, g, b: F.layer_norm(a, (d,), g, b, eps=eps), {"eps": eps}, wrt=(0, 1, 2))


# ---------------------------------------------------------------- convolution, pooling, products

@pytest.mark.parametrize("stride,padding,groups", [(1, 0, 1), (2, 1, 1), (1, 1, 2), (2, (1, 2), 4)])
def test_conv2d(stride, padding, groups):
    x = rng.standard_normal((2, 4, 9, 8))
    w = rng.standard_normal((8, 4 // groups, 3, 3))
    attrs = {"stride": stride, "padding": padding, "groups": groups}
    compare(f"conv2d {attrs}", "conv2d", [x, w],
            lambda a, b: F.conv2d(a, b, stride=stride, padding=padding, groups=groups), attrs, wrt=(0, 1))


@pytest.mark.parametrize("stride,padding,dilation", [(1, 2, 2), (2, 1, 2), ((1, 2), (6, 1), (6, 1))])
def test_dilated_conv2d(stride, padding, dilation):
    x, w = rng.standard_normal((2, 4, 13, 12)), rng.standard_normal((6, 4, 3, 3))
    attrs = {"stride": stride, "padding": padding, "dilation": dilation}
    compare(f"conv2d {attrs}", "conv2d", [x, w], lambda a, b: F.conv2d(a, b, **attrs), attrs, wrt=(0, 1))


@pytest.mark.parametrize("stride,padding,output_padding,groups,dilation",
                         [(2, 1, 1, 1, 1), (3, (1, 0), (2, 1), 2, 1), (1, 1, 0, 1, 2)])
def test_conv_transpose2d(stride, padding, output_padding, groups, dilation):
    x, w = rng.standard_normal((2, 4, 5, 6)), rng.standard_normal((4, 6 // groups, 3, 3))
    attrs = {"stride": stride, "padding": padding, "output_padding": output_padding, "groups": groups,
             "dilation": dilation}
    compare(f"conv_transpose2d {attrs}", "conv_transpose2d", [x, w],
            lambda a, b: F.conv_transpose2d(a, b, **attrs), attrs, wrt=(0, 1))


@pytest.mark.parametrize("size,align_corners", [((17, 12), False), ((17, 12), True), ((3, 2), False), ((1, 1), True)])
def test_upsample_bilinear2d(size, align_corners):
    x = rng.standard_normal((2, 3, 5, 4))
    attrs = {"size": size, "align_corners": align_corners}
    compare(f"upsample_bilinear2d {attrs}", "upsample_bilinear2d", [x],
            lambda a: F.interpolate(a, size=size, mode="bilinear", align_corners=align_corners), attrs)


@pytest.mark.parametrize("padding", [1, 3, (2, 1)])
def test_reflection_pad2d(padding):
    x = rng.standard_normal((2, 3, 5, 4))
    ph, pw = (padding, padding) if isinstance(padding, int) else padding
    compare(f"reflection_pad2d {padding}", "reflection_pad2d", [x],
            lambda a: F.pad(a, (pw, pw, ph, ph), mode="reflect"), {"padding": padding})


def test_max_pool2d():
    x = rng.standard_normal((2, 3, 9, 8))
    compare("max_pool2d k3 s2 p1", "max_pool2d", [x], lambda t: F.max_pool2d(t, 3, stride=2, padding=1),
            {"kernel": 3, "stride": 2, "padding": 1})


@pytest.mark.parametrize("count_include_pad", [True, False])
def test_avg_pool2d(count_include_pad):
    x = rng.standard_normal((2, 3, 9, 8))
    compare(f"avg_pool2d count_include_pad={count_include_pad}", "avg_pool2d", [x],
            lambda t: F.avg_pool2d(t, 3, stride=2, padding=1, count_include_pad=count_include_pad),
            {"kernel": 3, "stride": 2, "padding": 1, "count_include_pad": count_include_pad})


def test_global_avg_pool():
    x = rng.standard_normal((3, 5, 4, 6))
    compare("global_avg_pool", "global_avg_pool", [x], lambda t: t.mean(dim=(2, 3)))


def test_embedding():
    table = rng.standard_normal((11, 6))
    ids = rng.integers(0, 11, (4, 7))          # repeated ids: the gradient sums rows
    compare("embedding", "embedding", [table, ids], lambda i, t: F.embedding(i, t), order=[1, 0])


@pytest.mark.parametrize("ta,tb", [(False, False), (False, True), (True, False), (True, True)])
@pytest.mark.parametrize("batch", [(), (2, 3)])
def test_batch_matmul(batch, ta, tb):
    m, k, n = 5, 4, 6
    a = rng.standard_normal(batch + ((k, m) if ta else (m, k)))
    b = rng.standard_normal(batch + ((n, k) if tb else (k, n)))

    def fn(x, y):
        return torch.matmul(x.transpose(-1, -2) if ta else x, y.transpose(-1, -2) if tb else y)
    compare(f"batch_matmul{batch} ta={ta} tb={tb}", "batch_matmul", [a, b], fn,
            {"transpose_a": ta, "transpose_b": tb}, wrt=(0, 1))


@pytest.mark.parametrize("bias", [True, False])
def test_fully_connected(bias):
    x, w, b = rng.standard_normal((7, 5)), rng.standard_normal((3, 5)), rng.standard_normal(3)
    arrays = [x, w, b] if bias else [x, w]
    compare(f"fully_connected bias={bias}", "fully_connected", arrays, F.linear, wrt=tuple(range(len(arrays))))
