"""Framework profiles: stage rules and iteration markers as data (``l4/profiles/*.yaml``).

Adding a framework means adding a YAML file, not code.  A profile's rules come before the
generic ones, so a framework can say precisely what its own lines mean.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import yaml

STAGES = (
    "initialization",
    "data_loading",
    "model_loading",
    "training",
    "checkpointing",
    "evaluation",
    "finalization",
)
#: stages that can only come before training starts
EARLY = {"initialization", "data_loading", "model_loading"}
# Which generic rule wins when several match: the more specific stage first.
_GENERIC_ORDER = (
    "finalization",
    "checkpointing",
    "evaluation",
    "training",
    "model_loading",
    "data_loading",
    "initialization",
)
PROFILE_DIR = Path(__file__).with_name("profiles")
ALIASES = {
    "megatron-lm": "megatron",
    "megatron": "megatron",
    "megatron-deepspeed": "megatron",
    "deepspeed": "deepspeed",
    "hf": "hf",
    "huggingface": "hf",
    "hf-trainer": "hf",
    "accelerate": "hf",
    "transformers": "hf",
    "torchtitan": "torchtitan",
    "titan": "torchtitan",
    "mindspeed": "mindspeed",
    "ascend": "mindspeed",
    "torch_npu": "mindspeed",
}


@dataclass
class Profile:
    name: str
    detect: list[re.Pattern[str]] = field(default_factory=list)
    stage_rules: list[tuple[str, re.Pattern[str]]] = field(default_factory=list)
    error_hints: list[tuple[str, re.Pattern[str]]] = field(default_factory=list)
    iteration_markers: list[re.Pattern[str]] = field(default_factory=list)
    #: (stage, rule) for lines that report a periodic phase with its iteration number
    periodic: list[tuple[str, re.Pattern[str]]] = field(default_factory=list)
    #: how many of ``iteration_markers`` are the framework's own (the rest are generic)
    own_markers: int = 0
    #: lines that end a save or an evaluation (training resumes after them)
    resume: list[re.Pattern[str]] = field(default_factory=list)
    #: (the phase it ends, rule) for the resume lines a profile keys by phase
    resume_phase: list[tuple[str, re.Pattern[str]]] = field(default_factory=list)

    def is_resume(self, template: str) -> bool:
        return any(rx.search(template) for rx in self.resume)

    def stage_of(self, template: str) -> str | None:
        for stage, rx in self.stage_rules:
            if rx.search(template):
                return stage
        return None

    def phase_of(self, template: str) -> str | None:
        """The stage a line belongs to, counting the line that ends a save or an
        evaluation ("validation loss at iteration 35") as part of that phase rather than
        as the training it hands back to."""
        for stage, rx in self.resume_phase:
            if rx.search(template):
                return stage
        resume = {id(rx) for rx in self.resume}
        for stage, rx in self.stage_rules:
            if id(rx) not in resume and rx.search(template):
                return stage
        return None

    def hint_of(self, template: str) -> str | None:
        for stage, rx in self.error_hints:
            if rx.search(template):
                return stage
        return None

    def is_marker(self, template: str) -> bool:
        return any(rx.search(template) for rx in self.iteration_markers)

    def marker_rank(self, template: str) -> int:
        """2 for the framework's own iteration line, 1 for a generic one, 0 otherwise."""
        for k, rx in enumerate(self.iteration_markers):
            if rx.search(template):
                return 2 if k < self.own_markers else 1
        return 0


def _compile(patterns: list[str]) -> list[re.Pattern[str]]:
    return [re.compile(p, re.I) for p in patterns or []]


def _resume(doc: dict) -> list[tuple[str | None, re.Pattern[str]]]:
    """A profile's resume lines with the phase each ends: a list (phases unnamed) or a
    mapping phase -> list."""
    section = doc.get("resume") or []
    if isinstance(section, dict):
        return [(stage, rx) for stage in STAGES for rx in _compile(section.get(stage, []))]
    return [(None, rx) for rx in _compile(section)]


def _rules(doc: dict, key: str, order: tuple[str, ...]) -> list[tuple[str, re.Pattern[str]]]:
    section = doc.get(key) or {}
    unknown = set(section) - set(STAGES)
    if unknown:
        raise ValueError(f"profile {doc.get('name')}: unknown stage(s) {sorted(unknown)}")
    return [(stage, rx) for stage in order for rx in _compile(section.get(stage, []))]


@cache
def load_profiles(directory: str | None = None) -> dict[str, Profile]:
    """All profiles, each with the generic rules appended after its own."""
    base = Path(directory) if directory else PROFILE_DIR
    docs = {p.stem: yaml.safe_load(p.read_text()) for p in sorted(base.glob("*.yaml"))}
    generic = docs.pop("generic")
    g_keyed = _resume(generic)
    g_resume_rx = [rx for _, rx in g_keyed]
    g_phase = [(st, rx) for st, rx in g_keyed if st is not None]
    g_resume = [("training", rx) for rx in g_resume_rx]
    g_stages = _rules(generic, "stages", _GENERIC_ORDER)
    g_hints = _rules(generic, "error_hints", _GENERIC_ORDER)
    g_markers = _compile(generic.get("iteration_markers", []))
    g_periodic = _rules(generic, "periodic", STAGES)
    out = {"generic": Profile("generic", [], g_resume + g_stages, g_hints, g_markers,
                              g_periodic, own_markers=0, resume=g_resume_rx,
                              resume_phase=g_phase)}
    for name, doc in docs.items():
        keyed = _resume(doc)
        resume = [rx for _, rx in keyed]
        out[name] = Profile(
            name=name,
            detect=_compile(doc.get("detect", [])),
            stage_rules=(
                [("training", rx) for rx in resume]
                + g_resume + _rules(doc, "stages", STAGES) + g_stages
            ),
            resume=resume + g_resume_rx,
            resume_phase=[(st, rx) for st, rx in keyed if st is not None] + g_phase,
            error_hints=_rules(doc, "error_hints", _GENERIC_ORDER) + g_hints,
            iteration_markers=_compile(doc.get("iteration_markers", [])) + g_markers,
            own_markers=len(doc.get("iteration_markers", []) or []),
            periodic=_rules(doc, "periodic", STAGES) + g_periodic,
        )
    return out


def choose_profile(templates: list[str], framework: str | None = None) -> Profile:
    """The job's profile: as declared in job.json, else the one whose markers match most."""
    profiles = load_profiles()
    if framework:
        key = ALIASES.get(framework.strip().lower())
        if key in profiles:
            return profiles[key]
    best, best_hits = profiles["generic"], 0
    for name, prof in profiles.items():
        if name == "generic":
            continue
        hits = sum(1 for rx in prof.detect for t in templates if rx.search(t))
        if hits > best_hits:
            best, best_hits = prof, hits
    return best
