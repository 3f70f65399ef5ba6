"""An imported model trains under a budget of 0.3 of its peak, with the sanitizer poisoning
freed memory and jittering the streams, bit-identically to our unlimited run; and the command
line trains an imported folder and reports the plan."""
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")

from engine import api as se  # noqa: E402
from engine.autodiff import SGD  # noqa: E402
from engine.cli.run import main as train_main  # noqa: E402
from engine.library.imported import training_graph  # noqa: E402
from engine.liveness import peak_bytes  # noqa: E402
from engine.program import SWAP_OUT  # noqa: E402

from .harness import export_import  # noqa: E402
from .torch_models import example  # noqa: E402

pytestmark = pytest.mark.torch


@pytest.fixture(scope="module", params=["resnet18", "gpt", "llama"])
def imported(request, tmp_path_factory):
    model, args = example(request.param, torch.float32)
    folder = tmp_path_factory.mktemp("imported") / request.param
    return request.param, export_import(model, args, folder)


@pytest.mark.parametrize("policy", ["swapadvisor", "window", "smartswap"])
def test_bit_identical_at_three_tenths_of_the_peak(imported, policy):
    name, model = imported
    g = training_graph(model, SGD())
    budget = int(0.3 * peak_bytes(g))
    plan = se.plan(g, policy, memory=budget, profile="v100")
    assert plan.program.count(SWAP_OUT) + plan.program.recomputes > 0, (name, policy)   # the budget binds
    run = se.train(g, plan, iterations=3, sanitize=True)
    reference = se.train(g, None, iterations=3)
    assert se.identical(run, reference), (name, policy)


def test_the_command_line_trains_an_imported_folder(imported, capsys):
    name, model = imported
    code = train_main(["--model", model.path, "--iterations", "3", "--policy", "swapadvisor"])   # 0.3 of the peak
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "parameters identical to the unlimited run: yes (bit for bit)" in out.out, out.out


def test_an_imported_inference_program_runs_under_a_budget(tmp_path, capsys):
    """A forward-only export (torchvision's ResNet-18 in eval mode: batch norm with its running
    statistics) imported with --inference runs in engine.infer at half its peak, its outputs
    identical to the unlimited run's."""
    import torchvision

    from engine.cli.infer import main as infer_main

    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10).eval()
    export_import(model, (torch.randn(2, 3, 32, 32),), tmp_path / "r18", inference=True)
    code = infer_main(["--model", str(tmp_path / "r18"), "--memory", "50%", "--backend", "cpu"])
    out = capsys.readouterr().out
    assert code == 0
    assert "outputs identical to the unlimited run: yes" in out and "NO" not in out, out
