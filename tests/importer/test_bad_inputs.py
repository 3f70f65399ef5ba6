"""What cannot be imported gets one line and exit status 2: an operator we do not have, a
dynamic shape, a corrupt archive, a program without a loss, a file that is not an export,
and an archive holding pickled data (never unpickled)."""
import io
import json
import zipfile

import pytest

torch = pytest.importorskip("torch")

from engine.importer.__main__ import main  # noqa: E402

from .torch_models import GPT, example  # noqa: E402

pytestmark = pytest.mark.torch


def run(capsys, *argv) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err.strip()
    return code, err


def refused(capsys, path, out, *extra) -> str:
    code, err = run(capsys, path, "-o", out, *extra)
    assert code == 2
    assert len(err.splitlines()) == 1 and err.startswith("engine.importer: "), err
    assert "Traceback" not in err
    return err


class Cumulative(torch.nn.Module):
    def forward(self, x, y):
        return torch.cumsum(x, dim=1).mean() + 0 * y.sum()


class Payload:
    """An object torch's weights-only unpickler refuses (as it would any code a file brings)."""


def rewrite(src, dst, edit):
    """Copy the archive ``src`` to ``dst``, each member's bytes through ``edit(name, data)``."""
    with zipfile.ZipFile(src) as a, zipfile.ZipFile(dst, "w") as b:
        for info in a.infolist():
            b.writestr(info, edit(info.filename, a.read(info)))
    return dst


def save(module, args, path, **kw):
    torch.export.save(torch.export.export(module, args, **kw), path)
    return path


def test_an_unsupported_operator_is_named_with_its_node_and_source_line(tmp_path, capsys):
    pt2 = save(Cumulative(), (torch.randn(2, 3), torch.randn(2)), tmp_path / "m.pt2")
    err = refused(capsys, pt2, tmp_path / "out")
    assert "aten.cumsum.default is not supported" in err and "cumsum" in err and "test_bad_inputs.py:" in err


def test_a_dynamic_shape_is_refused(tmp_path, capsys):
    model, args = example("gpt", torch.float32)
    batch = torch.export.Dim("batch", min=2, max=64)
    pt2 = save(model, args, tmp_path / "m.pt2", dynamic_shapes=({0: batch}, {0: batch}))
    err = refused(capsys, pt2, tmp_path / "out")
    assert "dynamic size" in err and "static shapes" in err


def test_a_corrupt_archive_is_refused(tmp_path, capsys):
    model, args = example("gpt", torch.float32)
    pt2 = save(model, args, tmp_path / "m.pt2")
    data = pt2.read_bytes()
    broken = tmp_path / "broken.pt2"
    broken.write_bytes(data[: len(data) // 2])
    err = refused(capsys, broken, tmp_path / "out")
    assert "broken.pt2" in err


def test_a_member_overwritten_with_garbage_is_refused(tmp_path, capsys):
    model, args = example("gpt", torch.float32)
    pt2 = save(model, args, tmp_path / "m.pt2")
    garbled = rewrite(pt2, tmp_path / "garbled.pt2",      # the program itself: models/<name>.json
                      lambda name, data: b"{not json" if "/models/" in name and name.endswith(".json") else data)
    refused(capsys, garbled, tmp_path / "out")


def test_a_program_without_a_loss_is_refused_unless_inference(tmp_path, capsys):
    pt2 = save(GPT(), (torch.randint(0, 50, (2, 8)),), tmp_path / "logits.pt2")
    err = refused(capsys, pt2, tmp_path / "out")
    assert "no loss output" in err and "--inference" in err
    code, _ = run(capsys, pt2, "-o", tmp_path / "out", "--inference")
    assert code == 0


def test_a_file_that_is_not_an_export_is_refused(tmp_path, capsys):
    text = tmp_path / "notes.pt2"
    text.write_text("hello")
    assert "not a zip archive" in refused(capsys, text, tmp_path / "out")
    other = tmp_path / "other.pt2"
    with zipfile.ZipFile(other, "w") as z:
        z.writestr("x/readme.txt", "hi")
    assert "not part of an exported program" in refused(capsys, other, tmp_path / "out")


def test_pickled_weights_are_never_loaded(tmp_path, capsys):
    model, args = example("gpt", torch.float32)
    pt2 = save(model, args, tmp_path / "m.pt2")
    def mark_pickled(name, data):
        if not name.endswith("weights_config.json"):
            return data
        config = json.loads(data)
        next(iter(config["config"].values()))["use_pickle"] = True
        return json.dumps(config).encode()

    pickled = rewrite(pt2, tmp_path / "pickled.pt2", mark_pickled)
    assert "pickled" in refused(capsys, pickled, tmp_path / "out")


def test_sample_inputs_that_need_the_unrestricted_unpickler_are_refused(tmp_path, capsys):
    model, args = example("gpt", torch.float32)
    pt2 = save(model, args, tmp_path / "m.pt2")
    hostile = tmp_path / "hostile.pt2"

    buf = io.BytesIO()
    torch.save(((Payload(),), {}), buf)
    rewrite(pt2, hostile, lambda name, data: buf.getvalue() if "sample_inputs" in name else data)
    assert "sample inputs" in refused(capsys, hostile, tmp_path / "out")


def test_a_missing_file_is_one_line(tmp_path, capsys):
    err = refused(capsys, tmp_path / "missing.pt2", tmp_path / "out")
    assert "missing.pt2" in err


def test_an_imported_inference_program_is_not_trained(tmp_path, capsys):
    from engine.cli.run import main as train_main

    pt2 = save(GPT(), (torch.randint(0, 50, (2, 8)),), tmp_path / "logits.pt2")
    assert run(capsys, pt2, "-o", tmp_path / "inf", "--inference")[0] == 0
    assert train_main(["--model", str(tmp_path / "inf"), "--iterations", "1"]) == 2
    assert "inference program" in capsys.readouterr().err


def test_a_zip_bomb_member_is_refused_from_the_directory(tmp_path, capsys):
    bomb = tmp_path / "bomb.pt2"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("m/data/weights/weight_0", bytes(8 << 20))      # 8 MiB of zeros, stored in a few KiB
    assert "zip bomb" in refused(capsys, bomb, tmp_path / "out")
