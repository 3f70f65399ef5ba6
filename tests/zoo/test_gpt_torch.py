"""gpt-tiny against PyTorch: three float64 training iterations with AdamW, our numpy reference
beside autograd and torch.optim.AdamW on the same forward pass (translated node by node from
our graph, with our initial parameters and batches), give the same losses and parameters to
1e-9. Marked ``torch``: skipped where PyTorch is not importable (CI); never an engine
dependency."""
import numpy as np
import pytest

import zoo
from bench.cuda_vs_torch import forward_nodes
from engine.autodiff import Adam
from engine.data import TeacherData
from engine.initializers import initial_state
from engine.ir import Kind
from engine.training import ReferenceRunner, Trainer

STEPS = 3
ADAMW = Adam(lr=3e-3, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1, decoupled=True)


class TorchGpt:
    """Our graph's forward nodes as torch operations; autograd and AdamW do the rest."""

    def __init__(self, g, torch, seed=0):
        self.g, self.torch, self.F = g, torch, torch.nn.functional
        self.nodes = [g.nodes[n] for n in forward_nodes(g)]
        state = initial_state(g, seed)
        self.values = {t: torch.nn.Parameter(torch.tensor(state[t])) for t in g.leaves(Kind.PARAMETER)}
        a = next(n.attrs for n in g.nodes if n.op == "adam_update")
        assert a["decoupled"]
        self.opt = torch.optim.AdamW(list(self.values.values()), lr=a["lr"], betas=(a["beta1"], a["beta2"]),
                                     eps=a["eps"], weight_decay=a["weight_decay"])

    def _apply(self, n, xs):
        torch, F, a = self.torch, self.F, n.attrs
        if n.op == "embedding":
            return [F.embedding(xs[1].long(), xs[0])]
        if n.op == "layer_norm":
            return [F.layer_norm(xs[0], xs[0].shape[-1:], xs[1], xs[2], a["eps"]), None, None]
        if n.op == "fully_connected":
            return [F.linear(xs[0], xs[1], xs[2] if len(xs) == 3 else None)]
        if n.op == "split":
            return list(torch.split(xs[0], list(a["sizes"]), dim=a["axis"]))
        if n.op == "batch_matmul":
            x, y = (t.transpose(-1, -2) if a[k] else t for t, k in zip(xs, ("transpose_a", "transpose_b")))
            return [torch.matmul(x, y)]
        if n.op == "softmax":
            z = xs[0] * a["scale"]
            if a["causal"]:
                t = z.shape[-1]
                z = z.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
            return [torch.softmax(z, dim=-1)]
        if n.op == "softmax_cross_entropy":
            return [F.cross_entropy(xs[0], xs[1].long()), None]
        simple = {"reshape": lambda: xs[0].reshape(a["shape"]), "transpose": lambda: xs[0].permute(a["axes"]),
                  "concat": lambda: torch.cat(xs, dim=a["axis"]), "add": lambda: xs[0] + xs[1],
                  "gelu": lambda: F.gelu(xs[0], approximate="tanh")}
        return [simple[n.op]()]

    def step(self, batch):
        vals = dict(self.values)
        vals.update({t: self.torch.tensor(v) for t, v in batch.items()})
        for n in self.nodes:
            for t, y in zip(n.outputs, self._apply(n, [vals[t] for t in n.inputs])):
                vals[t] = y
        loss = vals[self.g.loss]
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return float(loss.detach())


@pytest.mark.torch
def test_gpt_tiny_trains_like_pytorch_with_adamw():
    torch = pytest.importorskip("torch")
    g = zoo.build("gpt-tiny", dtype="float64", optimizer=ADAMW)
    data = TeacherData(g, seed=0)
    ours = Trainer(g, seed=0, runner=ReferenceRunner(g), data=data)
    twin = TorchGpt(g, torch)
    losses, loss_gap = [], 0.0
    for i in range(STEPS):
        ours_loss, twin_loss = ours.step(), twin.step(data.batch(i))
        assert ours_loss == pytest.approx(twin_loss, rel=1e-9), f"iteration {i}"
        losses.append(ours_loss)
        loss_gap = max(loss_gap, abs(ours_loss - twin_loss) / abs(twin_loss))
    state = ours.state
    worst = 0.0
    for t, p in twin.values.items():
        expected = p.detach().numpy()
        scale = max(float(np.max(np.abs(expected))), 1e-12)
        worst = max(worst, float(np.max(np.abs(state[t] - expected))) / scale)
        assert np.max(np.abs(state[t] - expected)) <= 1e-9 * scale, g.tensors[t].name
    assert losses[-1] < losses[0]
    print(f"gpt-tiny vs PyTorch AdamW, {STEPS} float64 iterations: losses {losses} (largest relative "
          f"difference {loss_gap:.3g}), largest parameter difference {worst:.3g} of the tensor's scale")
