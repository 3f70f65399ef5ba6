"""The flags the four commands share (engine.train, engine.infer, engine.serve,
engine.stream_train), each defined once: one help text, one default, one type.

A command builds its parser with ``command_parser`` (--version, defaults shown in --help, no
abbreviations, a bad flag raised as ``FlagError``) and adds the shared flags with the
``add_*`` builders; its own flags it adds itself. A few shared flags keep a default of the
command's own, because what the command runs differs (``OWN_DEFAULT`` says why); their help
starts with the same words everywhere and names the default (tests/engine/cli/
test_command_family.py checks both).

Errors: argparse's refusals (an unknown flag, a missing value, one its type refuses) are
``prog: error: ... (see --help)``; a value the project refuses (a --model the command cannot
run, at parse time; a budget too small, later) is its one line, ``prog: --flag value: ...``.
Both exit 2 (``error_line``).
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass

import zoo
from planner import policy as policies_registry

from .. import backend_registry
from ..autodiff import OPTIMIZERS
from ..errors import UsageError
from ..library.imported import is_model_folder
from ..library.models import SMALL_MODELS
from ..profile import DEVICES
from . import flag_types as types
from .report_json import FORMAT, tool_version


class FlagError(UsageError):
    """A flag argparse refused: reported as ``prog: error: message``, exit status 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise FlagError(f"{message} (see --help)")


class DefaultsShown(argparse.HelpFormatter):
    """Every option's default in --help, unless its help already says it."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "default" in text or action.default in (None, False, argparse.SUPPRESS) or not action.option_strings:
            return text
        shown = ",".join(action.default) if isinstance(action.default, list) else action.default
        return f"{text} (default {shown})"


def command_parser(prog: str, description: str) -> Parser:
    """A command's parser: ``python -m prog``, --version as engine.train always had it."""
    p = Parser(prog=f"python -m {prog}", description=description, allow_abbrev=False,
               formatter_class=DefaultsShown)
    p.add_argument("--version", action="version", version=f"swapengine {tool_version()}")
    return p


def error_line(prog: str, error: Exception) -> str:
    """The one line a refused run prints on stderr (then exits 2)."""
    return f"{prog}: error: {error}" if isinstance(error, FlagError) else f"{prog}: {error}"


# ---------------------------------------------------------------------------- --model
@dataclass(frozen=True)
class Models:
    """What a command's --model takes; a name it cannot run is refused by the flag parser,
    before anything is printed (a backend detected, a graph built)."""
    default: str
    listed: str               # for --help and the refusal
    forward_only: bool        # inference models (resnet-D) instead of training ones
    small: bool = False       # engine.library.models' small-cnn and small-lstm
    folders: bool = True      # an imported model's folder (python -m engine.importer)

    def check(self, text: str) -> str:
        """The name, or the project's one-line refusal of a bad value (a ``UsageError``, which
        argparse lets through: ``prog: --model X: ...``), raised while parsing."""
        if self.folders and is_model_folder(text):
            return text                     # read, and its kind checked, before the run prints
        name = text.strip().lower()
        small = name in SMALL_MODELS
        try:
            training = small or zoo.parse(name)[0].training
        except ValueError as e:
            why = str(e) if "positive" in str(e) else f"unknown model '{text}'"
            raise UsageError(f"--model {text}: {why}; this command takes {self.listed}") from None
        if training and self.forward_only:
            raise UsageError(f"--model {text} is a training model; this command runs forward-only models: "
                             f"{self.listed}")
        if not training and not self.forward_only:
            raise UsageError(f"--model {text} is a forward-only model (python -m engine.infer runs it); this "
                             f"command trains {self.listed}")
        if small and not self.small:
            raise UsageError(f"--model {text} is not a model this command runs; it takes {self.listed}")
        return text


_ZOO_TRAINING = ("wresnet-D-X, inception-X, nasnet-R, rnn-L-XK, brnn-L-XK, densenet-D, pix2pixhd, deeplabv3plus, "
                 "gpt-tiny, gpt2-small|medium|large|xl, gpt-7b, gpt-L-W-H")
TRAINING = Models("small-cnn", f"small-cnn, small-lstm, a zoo model ({_ZOO_TRAINING}), or the folder of an "
                               "imported PyTorch model (python -m engine.importer)", forward_only=False, small=True)
INFERENCE_TABLE2 = "resnet-152"      # SwapAdvisor's Table 2: engine.infer's budgets are its
SERVING = "resnet-50"
INFERENCE = "resnet-D (e.g. resnet-50), or the folder of a forward-only export (python -m engine.importer --inference)"
STREAM = Models("gpt-tiny", f"a zoo model ({_ZOO_TRAINING}); with --varying-seq a gpt or rnn one",
                forward_only=False, folders=False)


def inference_models(default: str) -> Models:
    return Models(default, INFERENCE, forward_only=True)


# What the shared flags whose default is each command's own begin their help with, and why.
HELP_STEM = {
    "--model": "the model",
    "--memory": "device memory for the tensor pool and operator scratch, in binary units (e.g. 64MiB, 16GiB; a "
                "bare number is refused)",
    "--policy": "the swap policy",
    "--search-seconds": "genetic search for the policy that searches (swapadvisor): seconds",
}
OWN_DEFAULT = {
    "--model": "the commands run different models: training ones, forward-only ones, a stream of changing graphs",
    "--memory": "what the budget is shared by differs: one model, several budgets compared, N served models",
    "--policy": "train compares several; a stream and inference plan with one suited to them",
    "--search-seconds": "engine.infer searches once per budget, so its searches add up",
}


def add_model(p, models: Models) -> None:
    p.add_argument("--model", type=models.check, default=models.default,
                   help=f"{HELP_STEM['--model']}: {models.listed} (default {models.default})")


def add_batch(p) -> None:
    p.add_argument("--batch", type=types.positive_int, default=None,
                   help="batch size (default: the model's own; a forward-only zoo model's is one request, an "
                        "imported model's the export's)")


def add_size(p) -> None:
    p.add_argument("--size", type=types.positive_int, default=None,
                   help="image side for CNNs, sequence length for RNNs and GPTs (default: the model's own; an "
                        "imported model keeps the export's)")


def add_memory(p, default_rule: str, several: bool = False, default: str | None = None) -> None:
    """--memory SIZE (bytes), or with ``several`` SIZE[,SIZE...] (kept as text: percentages of
    a peak known only once the model is built)."""
    extra = ("; several, comma-separated, each planned, or percentages of the unlimited peak (50%%)"
             if several else "")
    p.add_argument("--memory", metavar="SIZE[,SIZE...]" if several else "SIZE",
                   type=str if several else types.size, default=default,
                   help=f"{HELP_STEM['--memory']}{extra} (default: {default_rule})")


def _listed_policies() -> str:
    return "; ".join(f"{x.name}: {x.summary}" for x in policies_registry.REGISTRY.values())


def add_policy(p, default: str | list[str], several: bool = False, which: str = "") -> None:
    """--policy: one registered name, or with ``several`` a comma-separated list."""
    shown = ",".join(default) if isinstance(default, list) else default
    p.add_argument("--policy", type=types.policies if several else types.policy, default=default,
                   metavar="P[,P...]" if several else "P",
                   help=f"{HELP_STEM['--policy']} ({_listed_policies()}){which} (default {shown})")


def add_search_seconds(p, default: float, why: str = "") -> None:
    p.add_argument("--search-seconds", type=types.seconds, default=default, metavar="S",
                   help=f"{HELP_STEM['--search-seconds']} to search schedules and allocations (0: no search, the "
                        f"default order and a simple allocation) (default {default:g}{why})")


def add_simulate_only(p) -> None:
    p.add_argument("--simulate-only", action="store_true",
                   help="plan and simulate without executing (graphs of any size, no data allocated, no backend)")


def add_iterations(p) -> None:
    p.add_argument("--iterations", type=types.positive_int, default=150, help="training iterations (default 150)")


def add_optimizer(p) -> None:
    p.add_argument("--optimizer", choices=OPTIMIZERS, default=None,
                   help="sgd (with momentum), adam, or adamw (decoupled weight decay); default: the model's "
                        "own (adamw for gpt models, sgd otherwise)")


def add_lr(p) -> None:
    p.add_argument("--lr", type=types.positive_float, default=None,
                   help="learning rate (default: 0.05 for sgd, 1e-3 for adam and adamw)")


def add_seed(p) -> None:
    p.add_argument("--seed", type=types.seed, default=0,
                   help="seed of every random draw: the initial weights, the data (requests, arrivals, lengths) "
                        "and the search (default 0)")


def _backend_help() -> str:
    listed = "; ".join(f"{k.name}: {k.summary}" for k in backend_registry.REGISTRY.values())
    return (f"where it runs ({listed}), or auto: the first of "
            f"{', '.join(backend_registry.AUTO_PREFERENCE)} that has a device; the run's first line says "
            "which and why (default auto)")


def add_backend(p) -> None:
    """--backend, --device, --link-gbps and --sanitize: where the work runs, and how."""
    p.add_argument("--backend", choices=("auto", *backend_registry.names()), default="auto", help=_backend_help())
    p.add_argument("--device", type=types.nonnegative_int, default=0, metavar="N",
                   help="CUDA device number for the cuda backend (default 0)")
    p.add_argument("--link-gbps", type=types.positive_float, default=None,
                   help=f"emulated host-device link of the cpu backend, GB/s one way (default "
                        f"{backend_registry.DEFAULT_LINK_GBPS:g}; both ways together get 1.6x that); not for the "
                        "cuda backend, whose link is real")
    p.add_argument("--sanitize", action="store_true",
                   help="poison memory about to be overwritten and add random delays to every stream "
                        "(catches races; on cuda, no CUDA graphs)")


def add_profile(p) -> None:
    p.add_argument("--profile", metavar="DEVICE|FILE",
                   help=f"profile driving the planner and simulator: a device name ({', '.join(DEVICES)}) for an "
                        "analytic one, or a profile JSON file (--save-profile); default: measured on the backend "
                        "that runs, by the unlimited plan (analytic v100 where nothing runs first: with "
                        "--simulate-only, and in engine.stream_train, whose graphs change as it goes)")


def add_json(p) -> None:
    p.add_argument("--json", metavar="FILE",
                   help=f"also write the run's settings and results to this JSON file (format {FORMAT}, "
                        "engine/report.schema.json), whatever the end; - for standard output, the run's own "
                        "lines then going to stderr")
