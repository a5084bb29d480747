"""The judge contract: requests, responses, configs and the backend interface.

Every benchmark here is scored by an MLLM/LLM judge through the same loop, the one the official evaluators share
(NJU-LINK/CoVEBench 4fe1c2f ``eval_checklist.py``, NJU-LINK/ViDiC-1K b7aeefd ``judge/judge.py``): build one
request per question group, send it to a backend, parse and validate the answer, retry the failed
requests alone, and record every raw response in the run's judge log. A request is identified by
``{benchmark}/{case_id}/{variant}/{stage}/{group}`` (e.g. ``cove/17/base/checklist/AB-MCQ``), which is
what makes resume and replay work; ``request_id`` is the one place that formats it (``JudgeRequest.build``
makes a request and its id from the same parts).

Messages use the OpenAI chat format; media are content parts ``{"type": "video_url", "video_url":
{"url": "file:///abs/path.mp4"}}`` (or ``image_url``), which vLLM, OpenAI-compatible servers and the
``hf`` backend all accept.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, Iterator, List, Optional

from vbench_ray.cfgutil import get as cfg_get
from vbench_ray.config import bounded
from vbench_ray.judges.backends import BACKENDS
from vbench_ray.judges.parsing import PARSE_MODES


@dataclass
class JudgeVideoConfig:
    """Frame sampling pinned for the judge (the official CoVEBench code leaves it to vLLM defaults)."""

    fps: float = bounded(2.0, gt=0)  # frames per second sampled from each video
    # cap per video; 0 is refused: vLLM's loaders read it as "no cap", the hf backend as "no frame" (a failed case)
    max_frames: int = bounded(32, ge=1, note="the cap on frames sampled per video")
    max_pixels: int = bounded(360 * 640, ge=1)  # pixel budget per frame (resized down to fit)


@dataclass
class JudgeConfig:
    backend: str = "vllm"  # vllm | http | hf | replay
    model: Optional[str] = None  # local path (vllm, hf), or the served model name (http)
    name: Optional[str] = None  # label of this judge in logs and summaries (default: the model's basename)
    max_retries: int = bounded(3, ge=0)  # re-asks of a request whose answer fails to parse or validate
    # a metric whose share of never-usable judge answers passes this is reported unavailable (null, with the
    # endpoint's answer) and the run exits non-zero
    max_invalid_fraction: float = bounded(0.05, ge=0, le=1, note="a share, e.g. 0.05")
    parse: str = "official"  # CoVEBench, ViDiC: official (the official code's parse and literal matching) | lenient
    temperature: float = bounded(0.0, ge=0)
    top_p: float = bounded(1.0, gt=0, le=1)
    # sample from the k likeliest tokens; None: not sent, the engine's own default
    top_k: Optional[int] = bounded(None, ge=1, note="null: the engine's default")
    max_tokens: int = bounded(4096, ge=1)
    seed: int = 0
    replay_path: Optional[str] = None  # judge log (or {"request_id", "text"} JSONL) to answer from
    env_vars: Dict[str, str] = field(default_factory=dict)  # environment of the judge's Ray workers (HF_HOME ...)
    video: JudgeVideoConfig = field(default_factory=JudgeVideoConfig)
    # then one section per judge backend that declares one (``judge.vllm``, ``judge.http``, ``judge.hf``): its
    # dataclass, from the backend registry (``compose_sections``)


_OWN_FIELDS = dataclasses.fields(JudgeConfig)  # the fields above: every composition starts from them


def compose_sections() -> None:
    """Make ``JudgeConfig`` hold the backends' config sections: after its own fields, ``<name>: <its dataclass>``
    for each registered backend that declares one (``BACKENDS.config_classes``), in registration order.

    The class is remade in place (its fields, ``__init__``, ``__repr__``, ``__eq__``) from a dataclass built with
    ``dataclasses.make_dataclass``, so the benchmarks' configs, which name ``JudgeConfig`` as a field type, see
    the sections too. Runs at import and after every registration or removal (``BackendRegistry.on_change``): a
    backend registered later (a plugin, a test's toy) has its keys in every config built after it."""
    own = [(f.name, f.type, _copy_field(f)) for f in _OWN_FIELDS]
    sections = [(name, cls, field(default_factory=cls)) for name, cls in BACKENDS.config_classes().items()]
    for name, cls, _ in sections:
        if name in {f.name for f in _OWN_FIELDS} or not dataclasses.is_dataclass(cls):
            raise ValueError(
                f"judge backend {name!r}: its config section judge.{name} must be a dataclass under a name no judge "
                f"key has (taken: {', '.join(f.name for f in _OWN_FIELDS)}); got {cls!r}"
            )
    made = dataclasses.make_dataclass("JudgeConfig", own + sections, namespace={"__module__": __name__})
    for attr in ("__dataclass_fields__", "__annotations__", "__init__", "__repr__", "__eq__", "__match_args__"):
        setattr(JudgeConfig, attr, getattr(made, attr))


def _copy_field(f: dataclasses.Field) -> dataclasses.Field:
    return field(default=f.default, default_factory=f.default_factory, metadata=f.metadata)


BACKENDS.on_change.append(compose_sections)
compose_sections()


def judge_choices(prefix: str = "judge", *, parse: bool = True) -> dict[str, tuple]:
    """``{"<prefix>.<key>": allowed values}`` of one judge block (``judge``, CoVEBench's ``vqr``, ViDiC's ``model``):
    ``backend`` (the registered backends), each backend section's string keys (its config class's ``CHOICES``, e.g.
    ``judge.http.media``) and, with ``parse``, ``parse``. Read from the backend registry at each call, when a config
    is checked, so a backend registered after the benchmarks were imported (a plugin, a test's toy) counts."""
    choices: dict[str, tuple] = {f"{prefix}.backend": tuple(BACKENDS)}
    for name, cls in BACKENDS.config_classes().items():
        for key, allowed in getattr(cls, "CHOICES", {}).items():
            choices[f"{prefix}.{name}.{key}"] = tuple(allowed)
    if parse:
        choices[f"{prefix}.parse"] = PARSE_MODES
    return choices


def model_problems(node: Any, key: str, backend: str, what: str, local: bool) -> List[str]:
    """``{key}.model`` not set (``what`` the backend needs there), or, for a backend that loads a local model folder
    (``local``), a path that does not exist ("org/name" may be a Hugging Face cache id)."""
    import re
    from pathlib import Path

    model = cfg_get(node, "model")
    if not model:
        return [f"`{key}.model` is not set: the {backend} backend needs {what}"]
    if (
        local
        and not Path(str(model)).expanduser().exists()
        and not re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+", str(model))
    ):
        return [f"`{key}.model` = {model!r} does not exist (the {backend} backend loads a local model folder)"]
    return []


def request_id(benchmark: str, case_id: str, variant: str, stage: str, group: str) -> str:
    """``{benchmark}/{case_id}/{variant}/{stage}/{group}``, the id of one judge request.

    Every request id is made here: the judge log, resume and replay match on it, so its format must not
    change (an id of an existing judge log must be rebuilt byte for byte).
    """
    return f"{benchmark}/{case_id}/{variant}/{stage}/{group}"


@dataclass
class JudgeRequest:
    request_id: str
    messages: List[dict]
    case_id: str = ""
    variant: str = "base"
    stage: str = ""
    group: str = ""
    parser: str = ""  # name of the parser/validator in vbench_ray.judges.parsing.PARSERS
    expected: Any = None  # what the validator checks against (e.g. the question ids)
    video: Optional[Dict[str, Any]] = None  # per-request judge.video overrides (fps sweeps): {"fps": 1.0}
    attempt: int = 0

    @classmethod
    def build(
        cls, benchmark: str, case_id: str, variant: str, stage: str, group: str, messages: List[dict], **fields: Any
    ) -> "JudgeRequest":
        """A request whose ``request_id`` is made from its own parts (``request_id``); ``fields``: parser,
        expected, video."""
        return cls(
            request_id=request_id(benchmark, case_id, variant, stage, group),
            messages=messages,
            case_id=case_id,
            variant=variant,
            stage=stage,
            group=group,
            **fields,
        )

    def prompt_hash(self) -> str:
        """Hash of the messages as sent: a changed prompt is a different request in the log."""
        blob = json.dumps(self.messages, sort_keys=True, ensure_ascii=False).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def to_row(self) -> dict:
        row = asdict(self)
        row["messages"] = json.dumps(self.messages, ensure_ascii=False)
        row["expected"] = json.dumps(self.expected, ensure_ascii=False)
        return row

    @classmethod
    def from_row(cls, row: dict) -> "JudgeRequest":
        data = dict(row)
        data["messages"] = json.loads(data["messages"]) if isinstance(data["messages"], str) else data["messages"]
        data["expected"] = json.loads(data["expected"]) if isinstance(data["expected"], str) else data["expected"]
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


@dataclass
class JudgeResponse:
    """One raw answer (or transport failure) from a backend."""

    request_id: str
    text: Optional[str] = None
    error: Optional[str] = None  # transport/engine failure; None when text came back
    latency_s: Optional[float] = None
    prompt_tokens: Optional[int] = None
    completion_tokens: Optional[int] = None
    model: Optional[str] = None
    sent: bool = True  # False: never sent (the endpoint was found down): no attempt spent, nothing to log
    # True: the replica serving it was lost (process or node) and the engine has it back: sent again as it was,
    # the first ``stage.FREE_ENGINE_FAULTS`` such losses of a request spend nothing of its budget
    engine_fault: bool = False


class JudgeUnavailable(Exception):
    """The judge cannot be reached at all (its endpoint refuses connections): the run stops, exit status 3,
    with the endpoint's own error; what was computed and answered is kept, and running again resumes."""


class JudgeBackend:
    """Turns requests into responses. Backends own their Ray Data plumbing (ray.data.llm processors,
    actor pools); the judge stage owns parsing, validation, retries and the log.

    ``generate`` yields batches as they finish so the stage can record them (and survive a crash).
    It must yield exactly one response per request, a failed one with ``error`` set, never raise for
    a single bad request.
    """

    name = ""
    # The registry entry of a backend is its class (``backends.BACKENDS``); everything dispatched on its name lives on
    # it: ``config_class`` the dataclass of its own settings, the section ``judge.<name>`` (None: none; a lazy entry
    # declares it on its registration instead, ``BACKENDS.add(..., config=...)``), ``engine`` the
    # ``"module:function"`` that makes the run's engine (``engines.make_engine`` calls it with the config, this
    # class and the run directory; a string so backends never import the engines), ``problems`` its preflight checks.
    config_class: Optional[type] = None
    engine: str = "vbench_ray.judges.engines:local_engine"
    asks_a_model: bool = True  # False (replay): answers read from a file, no Ray, no identity of its own
    video_per_request: bool = True  # a request's ``video`` override is read per request (False: one engine each)

    @classmethod
    def stream_replicas(cls, cfg: Any) -> int:
        """Engine replicas serving the stream's judge stage (which gets two actors per replica)."""
        return 1

    @classmethod
    def problems(cls, node: Any, key: str) -> List[str]:
        """What is wrong with judge config ``node`` (at ``key`` in the run's config, e.g. ``judge``, ``judges[1]``)
        for this backend, found without loading anything: one sentence per problem, naming the key."""
        return []

    def __init__(self, cfg: Any):
        self.cfg = cfg
        top_k = getattr(cfg, "top_k", None)
        if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
            from vbench_ray.config import ConfigError

            raise ConfigError(f"judge.top_k must be a positive integer or null (the engine's default), got {top_k!r}")

    @property
    def model_label(self) -> str:
        from pathlib import PurePath

        return self.cfg.name or (PurePath(self.cfg.model).name if self.cfg.model else self.name)

    def sampling_params(self) -> dict:
        """The request's sampling, as vLLM's ``SamplingParams`` and the OpenAI chat body name it; ``top_k`` only
        when set (``judge.top_k``), so an unset one leaves the engine's default and an API without it is not sent it."""
        params = {
            "temperature": float(self.cfg.temperature),
            "top_p": float(self.cfg.top_p),
            "max_tokens": int(self.cfg.max_tokens),
            "seed": int(self.cfg.seed),
        }
        if getattr(self.cfg, "top_k", None) is not None:
            params["top_k"] = int(self.cfg.top_k)
        return params

    def identity(self) -> str | None:
        """Who answers: backend, model and sampling, hashed. The judge log's cache key includes it, so a
        different judge in the same run directory asks again instead of inheriting another judge's answers;
        the prompt is in the key already (``prompt_hash``). ``replay`` answers from the
        records themselves: it has no identity of its own and accepts any judge's."""
        if not self.asks_a_model:
            return None
        keys = ("model", "name", "temperature", "top_p", "max_tokens", "seed")
        who = {"backend": self.name, **{k: getattr(self.cfg, k, None) for k in keys}}
        if getattr(self.cfg, "top_k", None) is not None:  # only when set: logs written before top_k keep their key
            who["top_k"] = int(self.cfg.top_k)
        blob = json.dumps(who, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    def generate(self, requests: list[JudgeRequest]) -> Iterator[list[JudgeResponse]]:
        raise NotImplementedError
