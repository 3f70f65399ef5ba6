"""Everything a run can refuse, refused before any long work starts.

Training, profiling and a search take minutes; a bad flag combination, an unwritable output
path or a corrupt input file found after them loses that work (and, for an output, the
checkpoint). So the run asks here first, in this order: flags that contradict each other,
outputs it will write, inputs it will read (parsed and validated once, and handed on), then,
once the model is built, whether the checkpoint fits it and whether the host can hold the
run. Each refusal is a UsageError: one line, exit status 2.
"""
from __future__ import annotations

import errno
import importlib.util
import math
import os
import tempfile
from dataclasses import dataclass

from allocator.registry import check_options, takes_option
from planner import policy as policies_registry

from .. import checkpoint
from ..files import memory_refusal, physical_memory, shown_path
from ..ir import PERSISTENT_KINDS, Graph, Kind
from ..profile import DEVICES, Profile
from ..program import Program
from ..training import checkpoint_mismatch
from ..units import format_bytes
from planner.policy import RECOMPUTE_OPTION

from .config import WINDOW_OPTION, RunConfig
from .flags import UsageError, parser
from .plans import read_plan

STDOUT = "-"          # --json - writes the report to standard output


class JsonTaken(UsageError):
    """--json names a file another output or an input holds: even the error report must not be
    written there (a refused run still writes its report)."""


@dataclass(frozen=True)
class Inputs:
    """The input files, read and validated once."""
    profile: Profile | None = None          # --profile FILE (a device name is analytic: None here)
    plan: Program | None = None             # --load-plan
    resume: tuple[dict, dict] | None = None  # --resume: (header, arrays)


# ---------------------------------------------------------------------- flags
def check_names(pairs) -> None:
    """A file or folder flag given an empty name ("") was taken as not given: --out "" wrote
    into runs/<model>, --checkpoint "" saved nothing. ``pairs``: (flag, value or None)."""
    for flag, given in pairs:
        if given == "":
            raise UsageError(f"{flag} '': an empty name; give a name or leave {flag} out")


def check_flags(cfg: RunConfig) -> None:
    """Flags that contradict each other, or one that needs another."""
    check_names((("--out", cfg.out), ("--checkpoint", cfg.checkpoint), ("--json", cfg.json),
                 ("--save-plan", cfg.save_plan), ("--save-profile", cfg.save_profile),
                 ("--search-checkpoint", cfg.search.checkpoint), ("--resume", cfg.resume),
                 ("--load-plan", cfg.load_plan), ("--profile", cfg.profile),
                 ("--ray-address", cfg.search.ray_address)))
    searching = cfg.searching
    wanted = ", ".join(p.name for p in policies_registry.REGISTRY.values() if p.searches)
    for flag, given in (("--load-plan", cfg.load_plan), ("--save-plan", cfg.save_plan),
                        ("--search-checkpoint", cfg.search.checkpoint), ("--resume-search", cfg.search.resume),
                        ("--ray-address", cfg.search.ray_address)):
        if given and searching is None:
            raise UsageError(f"{flag} is about the searched policy's plan, but --policy "
                             f"{','.join(p.name for p in cfg.policies)} has none; add {wanted} to --policy")
    if cfg.search.resume and not cfg.search.checkpoint:
        raise UsageError("--resume-search continues from --search-checkpoint FILE; give that too")
    if cfg.load_plan and (cfg.search.checkpoint or cfg.search.resume):
        raise UsageError("--load-plan runs a saved plan without searching; drop --search-checkpoint and "
                         "--resume-search, or drop --load-plan to search")
    if cfg.search.ray_address:
        from ga.ray_workers import address_problem
        problem = address_problem(cfg.search.ray_address)
        if problem:
            raise UsageError(f"--ray-address {cfg.search.ray_address}: {problem}")
    if cfg.search.ray_address and importlib.util.find_spec("ray") is None:
        raise UsageError("--ray-address needs Ray installed: pip install \".[ray]\" (or leave it out to "
                         "search on this machine's processes)")
    if cfg.window is not None and not any(WINDOW_OPTION in p.options for p in cfg.policies):
        readers = " or ".join(p.name for p in policies_registry.REGISTRY.values() if WINDOW_OPTION in p.options)
        raise UsageError(f"--window sizes the {readers} policy's look-ahead, but --policy "
                         f"{','.join(p.name for p in cfg.policies)} has no {readers}; add {readers} to --policy or "
                         "drop --window")
    if cfg.swap_only and not any(RECOMPUTE_OPTION in p.options for p in cfg.policies):
        readers = ", ".join(p.name for p in policies_registry.REGISTRY.values() if RECOMPUTE_OPTION in p.options)
        raise UsageError(f"--swap-only turns recomputation off in {readers}, but --policy "
                         f"{','.join(p.name for p in cfg.policies)} has none of them; add one or drop --swap-only")
    if cfg.allocator and not any(p.needs_budget for p in cfg.planned):
        budgeted = ", ".join(p.name for p in policies_registry.REGISTRY.values() if p.needs_budget)
        raise UsageError(f"--allocator {cfg.allocator} places the tensors of policies that plan under a budget, but "
                         f"--policy {','.join(p.name for p in cfg.policies)} has none (ideal holds every tensor, "
                         f"reference runs no plan); drop --allocator or add one of {budgeted}")
    if cfg.allocator:
        for policy in cfg.planned:
            if policy.needs_budget:
                policies_registry.check_allocator(policy, cfg.allocator)
    if cfg.chunk_bytes and not takes_option(cfg.allocator, "chunk_bytes"):     # auto's chunks are va's
        chosen = f"--allocator {cfg.allocator}" if cfg.allocator else "each policy's own allocator"
        raise UsageError(f"--chunk-mib sizes the chunks of --allocator va (or auto), not {chosen}; drop it or add "
                         "--allocator va")
    if cfg.chunk_bytes:      # a chunk size the allocator refuses is refused now, not after profiling
        check_options(cfg.allocator, chunk_bytes=cfg.chunk_bytes)
    if cfg.simulate_only:
        for flag, given in (("--checkpoint", cfg.checkpoint), ("--resume", cfg.resume)):
            if given:
                raise UsageError(f"{flag} is about training, which --simulate-only does not do; drop one of them")


# ---------------------------------------------------------------------- outputs
def _check_directory(directory: str, flag: str, path: str) -> None:
    """``directory`` exists and takes new files, or can be made under an ancestor that does."""
    probe = os.path.abspath(directory)
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        raise UsageError(f"{flag} {path}: '{probe}' is a file, not a directory; choose another path")
    try:                  # os.access says yes to root on a read-only file system: try it
        fd, tmp = tempfile.mkstemp(prefix=".swapengine-probe-", dir=probe)
        os.close(fd)
        os.unlink(tmp)
    except OSError as e:
        raise UsageError(f"{flag} {path}: cannot write in '{probe}' ({e.strerror}); choose a writable "
                         "path") from None


def _check_name(path: str, flag: str) -> None:
    """A name the file system refuses (a part over NAME_MAX, the whole over PATH_MAX) refused now,
    not when the work's result is written."""
    try:
        os.stat(path)
    except OSError as e:
        if e.errno == errno.ENAMETOOLONG:
            raise UsageError(f"{flag} {shown_path(path)}: the name is too long for the file system "
                             f"({len(os.path.basename(path))} characters in its last part, {len(path)} in all); "
                             "choose a shorter path") from None


def check_writable_file(path: str, flag: str, read_back: bool = False) -> None:
    """``path`` can take the file ``flag`` writes; ``read_back``: a checkpoint, which a resume
    reads again, so a pipe or device other than /dev/null is refused."""
    _check_name(path, flag)
    if os.path.isdir(path):
        raise UsageError(f"{flag} {path}: is a directory; give a file name")
    if os.path.exists(path) and checkpoint.written_through(path):   # /dev/null, a pipe: no file is made
        if read_back and os.path.realpath(path) != os.devnull:
            raise UsageError(f"{flag} {path}: is a pipe or device; a checkpoint is read back to resume, so give "
                             "a regular file (or /dev/null to keep none)")
        if not os.access(path, os.W_OK):
            raise UsageError(f"{flag} {path}: cannot be written; choose another path")
        return
    _check_directory(os.path.dirname(os.path.abspath(path)), flag, path)
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise UsageError(f"{flag} {path}: the file is not writable; choose another path")


def check_outputs(cfg: RunConfig) -> None:
    """Every path the run will write, before the work whose result it holds."""
    for flag, path in (("--checkpoint", cfg.checkpoint), ("--save-plan", cfg.save_plan),
                       ("--save-profile", cfg.save_profile), ("--search-checkpoint", cfg.search.checkpoint),
                       ("--json", None if cfg.json == STDOUT else cfg.json)):
        if path:
            check_writable_file(path, flag, read_back=flag in ("--checkpoint", "--search-checkpoint"))
    for path in (cfg.checkpoint, cfg.search.checkpoint, cfg.save_plan, cfg.save_profile,
                 None if cfg.json == STDOUT else cfg.json):
        if path:                        # written atomically: a killed run's temporaries go now
            checkpoint.remove_stale_temporaries(path)
    _check_distinct(cfg)
    out = cfg.out or "runs"
    if os.path.islink(out) and not os.path.exists(out):     # makedirs: a FileExistsError traceback
        raise UsageError(f"--out {out}: is a symbolic link to nothing (its target is missing, or it loops); give a "
                         "folder")
    _check_name(out, "--out")
    _check_name(os.path.join(out, "x" * 64), "--out")      # room for the names the run writes in it
    if os.path.exists(out) and not os.path.isdir(out):
        raise UsageError(f"--out {out}: is a file, not a directory; choose a directory")
    _check_directory(out, "--out", out)


# An output may name the input it continues: the checkpoint resumed, the plan loaded, the profile read.
CONTINUES = {("--checkpoint", "--resume"), ("--save-plan", "--load-plan"), ("--out's plan.json", "--load-plan"),
             ("--save-profile", "--profile")}


def _check_distinct(cfg: RunConfig) -> None:
    """Two outputs naming one file keep only the last one written (--json over --checkpoint lost the
    checkpoint silently); an output naming an input the run reads, other than one it continues,
    overwrites it."""
    from .run_folder import RUN_FILES
    outputs = [(flag, path) for flag, path in (
        ("--checkpoint", cfg.checkpoint), ("--save-plan", cfg.save_plan), ("--save-profile", cfg.save_profile),
        ("--search-checkpoint", cfg.search.checkpoint), ("--json", None if cfg.json == STDOUT else cfg.json),
        ("--save-weights", cfg.save_weights)) if path]
    if cfg.out:
        outputs += [(f"--out's {name}", os.path.join(cfg.out, name)) for name in RUN_FILES]
    # the run's plan.json is the last policy's: the searched one's, as --save-plan, when it is last
    same = {"--save-plan", "--out's plan.json"} if cfg.searching is cfg.policies[-1] else set()
    seen: dict[str, str] = {}
    for flag, path in outputs:
        if os.path.exists(path) and checkpoint.written_through(path):      # a device or pipe: nothing kept
            continue
        other = seen.setdefault(os.path.realpath(path), flag)
        if other != flag and {other, flag} != same:
            error = JsonTaken if "--json" in (other, flag) else UsageError
            raise error(f"{other} and {flag} name the same file ({shown_path(path)}): one would replace the other; "
                        "give each its own")
    profile_file = cfg.profile if cfg.profile and cfg.profile.lower() not in DEVICES else None
    for flag, path in (("--resume", cfg.resume), ("--load-plan", cfg.load_plan), ("--data", cfg.data),
                       ("--profile", profile_file)):
        writer = seen.get(os.path.realpath(path)) if path else None
        if writer and (writer, flag) not in CONTINUES:
            error = JsonTaken if writer == "--json" else UsageError
            raise error(f"{writer} would overwrite {flag} {shown_path(path)}, which this run reads; give {writer} "
                        "another file")


# ---------------------------------------------------------------------- inputs
def check_inputs(cfg: RunConfig) -> Inputs:
    """Read and validate every input file: the checkpoint (and the settings it was saved
    with), the profile, the plan, the search checkpoint."""
    if cfg.profile and cfg.profile.lower() not in DEVICES:
        _check_name(cfg.profile, "--profile")       # not "neither a device nor a file": say why
        if not os.path.isfile(cfg.profile):
            raise UsageError(f"--profile {cfg.profile}: neither a device with an analytic profile "
                             f"({', '.join(DEVICES)}) nor a profile file")
    resume = None
    if cfg.resume:
        resume = checkpoint.read(cfg.resume)
        check_resume_settings(cfg, resume[0])
    profile = Profile.load(cfg.profile) if cfg.profile and cfg.profile.lower() not in DEVICES else None
    plan = read_plan(cfg.load_plan) if cfg.load_plan else None
    if cfg.search.resume and os.path.exists(cfg.search.checkpoint):
        check_search_checkpoint(cfg.search.checkpoint, cfg.search.generations)
    return Inputs(profile, plan, resume)


def check_unused(cfg: RunConfig) -> None:
    """Flags whose work this run never does (their outputs never written): refused once the
    inputs they might have needed are known to be readable."""
    if cfg.checkpoint_every is not None and not cfg.checkpoint:
        raise UsageError(f"--checkpoint-every {cfg.checkpoint_every} says how often --checkpoint FILE is saved, and "
                         "no --checkpoint is given; add one or drop --checkpoint-every")
    if cfg.searching is not None and not cfg.load_plan and not cfg.search.wanted:
        for flag, given in (("--search-checkpoint", cfg.search.checkpoint), ("--resume-search", cfg.search.resume),
                            ("--workers", cfg.search.workers), ("--ray-address", cfg.search.ray_address)):
            if given:
                raise UsageError(f"{flag} is about the search, and --search-seconds 0 without --search-generations "
                                 f"runs none; give --search-seconds S or --search-generations N, or drop {flag}")


def check_search_size(cfg: RunConfig, g: Graph) -> None:
    """A search larger than the host: more worker processes than candidates (--workers 10**6 forked
    until the machine ran out), or a population whose schedules alone exceed the memory
    (--population 2**40: a MemoryError)."""
    search = cfg.search
    if cfg.searching is None or cfg.load_plan or not search.wanted:
        return
    if search.workers and search.workers > search.population:
        raise UsageError(f"--workers {search.workers}: more than the population's {search.population} candidates, "
                         f"which are all a generation evaluates at once; give at most {search.population}")
    why = memory_refusal(search.population * len(g.nodes) * 8,
                         f"the schedules of --population {search.population} ({len(g.nodes)} operators each)")
    if why:
        raise UsageError(f"{why}; give a smaller --population")


def unused_settings(cfg: RunConfig, placement) -> list[str]:
    """Warnings for settings this run takes but that change nothing (a report --config replays
    records them, so they are said, not refused)."""
    from ..autodiff import SGD, make_optimizer
    from ..library.models import optimizer_of

    defaults = parser()
    said = []
    if cfg.simulate_only:
        for flag, given in (("--sanitize", cfg.sanitize), ("--link-gbps", cfg.link_gbps is not None)):
            if given:
                said.append(f"{flag} changes nothing with --simulate-only: nothing runs")
    if placement is not None and cfg.device and not placement.kind.numbered_devices:
        said.append(f"--device {cfg.device} changes nothing: the {placement.kind.name} backend has one device")
    optimizer = optimizer_of(cfg.model, cfg.optimizer)
    if cfg.momentum != defaults.get_default("momentum") and not isinstance(make_optimizer(optimizer), SGD):
        said.append(f"--momentum {cfg.momentum:g} changes nothing: {optimizer} has no momentum (it is SGD's)")
    measured = cfg.measure_iterations != defaults.get_default("measure_iterations")
    if measured and len(cfg.policies) == 1 and not cfg.simulate_only:
        said.append(f"--measure-iterations {cfg.measure_iterations} changes nothing: it times the policies before "
                    "the last, and --policy has one")
    return said


def check_resume_settings(cfg: RunConfig, header: dict) -> None:
    """A checkpoint continues bit-identically only with the seed and optimizer it was saved
    with, and only if iterations are left."""
    saved = header.get("settings") or {}
    if not isinstance(saved, dict):             # dict([1]) was a TypeError traceback
        raise UsageError(f"checkpoint '{cfg.resume}' is malformed: its settings are {type(saved).__name__}, not an "
                         "object; give the .npz file --checkpoint wrote")
    saved = dict(saved)
    saved["seed"] = header.get("seed")
    ours = {**cfg.checkpoint_settings, "seed": cfg.seed}
    for key in ours:                    # a flag left at its default is None on both sides
        if key in saved and saved[key] != ours[key]:
            flag = "--" + key.replace("_", "-")
            if saved[key] is not None:          # the fix offered must be one the flag takes (--seed 2**70 is not)
                try:
                    parser().parse_args([f"{flag}={saved[key]}"])
                except UsageError as e:
                    raise UsageError(f"checkpoint '{cfg.resume}' is malformed: it was saved with {flag} "
                                     f"{str(saved[key])[:40]}, which no run takes ({e}); give the .npz file "
                                     "--checkpoint wrote") from None
            was, now = (f"{flag} {v}" if v is not None else f"the default {flag}" for v in (saved[key], ours[key]))
            fix = f"pass {flag} {saved[key]}" if saved[key] is not None else f"leave {flag} out"
            raise UsageError(f"checkpoint '{cfg.resume}' was saved with {was}, this run has {now}; {fix} to "
                             "continue it")
    iteration = header.get("iteration")
    if isinstance(iteration, int) and iteration >= cfg.iterations:
        raise UsageError(f"checkpoint '{cfg.resume}' is at iteration {iteration}: --iterations {cfg.iterations} "
                         f"leaves nothing to do; pass --iterations above {iteration}")


def check_search_checkpoint(path: str, generations: int | None = None) -> None:
    """Every field ga.search reads from a checkpoint it resumes, present, of its type and in range,
    and generations left to search when --search-generations bounds them."""
    from ga import checkpoint as ga_checkpoint

    state = ga_checkpoint.load(path)
    ga_checkpoint.check_state(state, path)
    if generations is not None and state["generation"] >= generations:
        raise UsageError(f"search checkpoint '{path}' is at generation {state['generation']}: --search-generations "
                         f"{generations} leaves nothing to search; pass --search-generations above "
                         f"{state['generation']}")


# ---------------------------------------------------------------------- with the model built
def check_resume_fits(cfg: RunConfig, g: Graph, inputs: Inputs) -> None:
    if inputs.resume is not None:
        why = checkpoint_mismatch(g, *inputs.resume)
        if why:
            raise UsageError(f"checkpoint '{cfg.resume}' does not fit this model: {why}")


def host_bytes_needed(g: Graph, peak_bytes: int) -> int:
    """A lower estimate of the host memory a run holds at once: the synthetic data set
    (drawn in float64, at least 256 samples), every parameter and state four times (host
    copies, next values, the unlimited run, a checkpoint), and one iteration's tensors (the
    numpy reference and the CPU backend's arena hold up to the peak)."""
    batch = next((g.tensors[t].shape[0] for t in g.leaves(Kind.INPUT, Kind.LABEL) if g.tensors[t].shape), 1) or 1
    samples = max(1, math.ceil(256 / batch)) * batch
    per_sample = sum(math.prod(g.tensors[t].shape[1:]) * 8 for t in g.leaves(Kind.INPUT, Kind.LABEL))
    persistent = sum(g.tensors[t].nbytes for t in g.leaves(*PERSISTENT_KINDS))
    return samples * per_sample + 4 * persistent + peak_bytes


def check_host_memory(cfg: RunConfig, g: Graph, peak_bytes: int) -> None:
    """A run that needs more host memory than the machine has would die allocating its data."""
    have = physical_memory()
    need = host_bytes_needed(g, peak_bytes)
    if have and need > have:
        raise UsageError(f"running {g.name} at batch {cfg.batch or 'default'} needs at least "
                         f"{format_bytes(need)} of host memory (data set, parameters, one iteration's "
                         f"tensors) and this machine has {format_bytes(have)}; use a smaller --batch or "
                         "--size, or --simulate-only to plan it without data")

