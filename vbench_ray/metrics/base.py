"""The metric contract: one small class per metric, torchmetrics-style.

A metric declares everything a benchmark, the pipeline and preflight need on its class:

* ``name``: the output column and its config key (``metrics.<name>``);
* ``config_class``: the dataclass of ``metrics.<name>``, whose field defaults (with a comment each) are
  the documented defaults; ``choices``: the allowed values of its string keys;
* its inputs: ``sampling()`` (which frames), ``needs_source``, ``needs_mask``, ``needs_text``;
* its formula: ``compute(edited, source)`` on the sampled frames at native resolution; or, for a formula that
  starts by preprocessing each frame alone (grayscale, resize), ``frame_view()`` (that preprocessing, a
  hashable ``FrameView``) and ``compute_views`` (the formula on prepared frames), and the default ``compute``
  chains the two;
* its resources: ``model_backed``, ``resources()`` and ``in_pool()`` (CPU decode stage or a model pool
  of its own);
* its weight check: ``check_weights(cfg)`` (preflight and the benchmarks call it before any compute);
* how to read it: ``higher_is_better`` and ``scale`` (shown in summary.json).

It computes one number per case from decoded frames. The frame stage (``vbench_ray.metrics.stage``)
decodes every video once, takes the union of all metrics' sampling specs, and hands each metric its own
frames: for a metric with a ``frame_view()``, that view of each frame, made as the decoder hands the frame
over, once per (frame, view) however many metrics share it, so full-resolution frames are not kept for it.
Metrics never open files themselves.

Benchmarks only *name* the metrics they use: ``metrics_config`` builds a benchmark's ``metrics`` config
section from those names and the registry, so adding a metric is one module under ``vbench_ray/metrics``
(registered with ``@register_metric`` and imported in ``vbench_ray/metrics/__init__.py``), its name in the
benchmark's metric list, and its test (``tests/unit/test_metrics_registry.py`` walks through one, CPU and
model-backed; a metric block absent from a benchmark's YAML takes the class's defaults).

Model-backed metrics load weights in ``setup()`` (called once per actor) from a configured local path
and raise ``MissingWeightsError`` naming the config key when the path is not set or does not exist.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Sequence

import numpy as np

from vbench_ray.registry import Registry
from vbench_ray.video.io import VideoInfo, fps_indices, uniform_indices

if TYPE_CHECKING:
    from vbench_ray.video.flow import FrameView


class MissingWeightsError(FileNotFoundError):
    """Raised by a model-backed metric or judge whose weights are not configured."""

    def __init__(self, config_key: str, value: Any, what: str):
        hint = "is not set" if not value else f"points to {value!r}, which does not exist"
        source = published_weights(config_key)
        super().__init__(
            f"{what}: config key `{config_key}` {hint}; set it to a local weights path "
            f"(e.g. `{config_key}=/models/...`) or choose a backend that needs no weights"
            + (f"; official weights: {source}" if source else "")
        )
        self.config_key = config_key


def published_weights(config_key: str) -> str | None:
    """Where the official weights behind ``metrics.<metric>.<field>`` are published (the metric class's
    ``weights_from``), or None."""
    parts = config_key.split(".")
    if len(parts) != 3 or parts[0] != "metrics" or parts[1] not in METRICS:
        return None
    return METRICS[parts[1]].weights_from.get(parts[2])


class VideoTooShortError(ValueError):
    """A video has fewer frames than a metric needs (MSM: 3, MF: 2). Raised from ``compute``, so the
    frame stage records it as that case's failure (``error_<metric>``) instead of a score."""

    def __init__(self, metric: str, got: int, need: int, what: str = "the video"):
        super().__init__(
            f"{metric} needs at least {need} frames of {what}, got {got} "
            f"(a video shorter than that has no {metric} score; recorded as a failure, not scored)"
        )
        self.metric, self.got, self.need = metric, got, need


def weights_problem(path: str | None, config_key: str, what: str) -> list[str]:
    """``[message]`` when ``path`` is unset or missing (what ``require_weights`` would raise), else ``[]``."""
    if not path or not Path(path).exists():
        return [str(MissingWeightsError(config_key, path, what))]
    return []


def require_weights(path: str | None, config_key: str, what: str) -> Path:
    if not path or not Path(path).exists():
        raise MissingWeightsError(config_key, path, what)
    return Path(path)


def read_state_dict(path: str | Path, config_key: str) -> dict:
    """A torch checkpoint's state dict (a ``{"state_dict": ...}`` wrapper unwrapped); an unreadable file or
    anything but a dict fails naming ``config_key``."""
    import torch

    try:
        state = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as exc:  # not a torch file
        raise ValueError(f"{config_key}={path}: not a readable checkpoint ({type(exc).__name__}: {exc})") from exc
    if isinstance(state, dict) and isinstance(state.get("state_dict"), dict):
        state = state["state_dict"]
    if not isinstance(state, dict):
        raise ValueError(f"{config_key}={path}: expected a state dict, got {type(state).__name__}")
    return state


class TensorShape:
    """A tensor of a checkpoint read by ``checkpoint_shapes``: its ``shape`` only (no data was read)."""

    def __init__(self, shape):
        self.shape = tuple(shape)


def checkpoint_shapes(path: str | Path, config_key: str) -> dict:
    """``read_state_dict``'s keys with each tensor as a ``TensorShape``, read from the checkpoint's pickle alone,
    without torch: a preflight check of keys and shapes (RAFT's variant) costs the driver no torch import (1-3 s
    before Ray can start) and reads no tensor data. The file is ``torch.save``'s zip format (``<name>/data.pkl``
    beside the tensors' storages); its pickle is read with only the names a state dict uses allowed (torch's
    tensor and parameter rebuilders, storage types, ``OrderedDict``), so nothing else in it runs. Anything else
    (the legacy format, another object) is read by ``read_state_dict``, with torch."""
    import collections
    import io
    import pickle
    import zipfile

    def tensor(storage, offset, size, *rest):
        return TensorShape(size)

    def parameter(data, *rest):
        return data

    class ShapesOnly(pickle.Unpickler):
        def find_class(self, module, name):
            if module == "torch._utils" and name.startswith("_rebuild_tensor"):
                return tensor
            if module == "torch._utils" and name == "_rebuild_parameter":
                return parameter
            if module == "torch" and name.endswith("Storage") or (module, name) == ("torch", "dtype"):
                return name
            if (module, name) == ("collections", "OrderedDict"):
                return collections.OrderedDict
            raise pickle.UnpicklingError(f"{module}.{name} is not part of a state dict")

        def persistent_load(self, pid):
            return None  # a storage: its data stays in the file

    try:
        with zipfile.ZipFile(path) as archive:
            pickles = [n for n in archive.namelist() if n.endswith("data.pkl")]
            if len(pickles) != 1:
                raise ValueError("not one data.pkl")
            state = ShapesOnly(io.BytesIO(archive.read(pickles[0]))).load()
    except Exception:  # noqa: BLE001  (not torch's zip format, or more than a state dict: torch reads it)
        return read_state_dict(path, config_key)
    if isinstance(state, dict) and isinstance(state.get("state_dict"), dict):
        state = state["state_dict"]
    if not isinstance(state, dict):
        raise ValueError(f"{config_key}={path}: expected a state dict, got {type(state).__name__}")
    return state


def load_checked(module, state: dict, config_key: str, path: str | Path, what: str, shown_prefix: str = ""):
    """``module`` with ``state`` loaded, after checking that every key it needs is there with its shape (errors
    name ``config_key`` and ``what`` the file should have been; ``shown_prefix`` spells keys as the checkpoint
    does). Extra keys in ``state`` are ignored."""
    expected = module.state_dict()
    missing = sorted(set(expected) - set(state))
    if missing:
        raise ValueError(
            f"{config_key}={path}: not {what} (missing {shown_prefix}{missing[0]}"
            f"{f' and {len(missing) - 1} more' if len(missing) > 1 else ''})"
        )
    for k, v in expected.items():
        if tuple(state[k].shape) != tuple(v.shape):
            raise ValueError(
                f"{config_key}={path}: {what} needs {shown_prefix}{k} of shape {tuple(v.shape)}, "
                f"the file has {tuple(state[k].shape)}"
            )
    module.load_state_dict({k: state[k] for k in expected})
    return module.eval()


def _torch():
    """torch, imported on first use (importing a metric module does not import it)."""
    import torch

    return torch


def _unit(x):
    """``x`` L2-normalised along its last dimension (torch)."""
    return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)


@dataclass(frozen=True)
class Sampling:
    """Which frames of one video a metric needs: ``n`` uniform frames, or ``fps`` (capped at ``max_frames``)."""

    n: int | None = 10
    fps: float | None = None
    max_frames: int | None = None

    def indices(self, info: VideoInfo) -> list[int]:
        if self.fps is not None:
            return fps_indices(info.num_frames, info.fps, self.fps, self.max_frames)
        if self.n is None:
            raise ValueError("Sampling needs either n or fps")
        return uniform_indices(info.num_frames, self.n)


class AllFrames(Sampling):
    """Every frame of the video (``frames: null`` in a metric config)."""

    def indices(self, info: VideoInfo) -> list[int]:
        return list(range(info.num_frames))


def sampling_of(frames: int | None) -> Sampling:
    """``frames`` uniform frames, or every frame when ``frames`` is None."""
    return AllFrames(n=None) if frames is None else Sampling(n=int(frames))


class FrameMetric:
    """Base class. Subclasses set ``name`` (the output column), ``config_class``, their inputs
    (``needs_source``, ``needs_mask``, ``needs_text``) and implement ``compute``, or ``frame_view`` and
    ``compute_views``.

    ``cfg`` is the metric's config node (``metrics.<name>`` in the run config), an object with attributes;
    without one the metric runs with ``config_class()``'s defaults.
    ``compute`` returns a float on the scale the paper reports, or ``nan`` when undefined for the case
    (a recorded failure, never a silent zero).
    """

    name: ClassVar[str] = ""
    config_class: ClassVar[type | None] = None  # dataclass of metrics.<name>: the documented defaults
    choices: ClassVar[dict[str, tuple]] = {}  # allowed values of string keys of metrics.<name>
    needs_source: ClassVar[bool] = True  # compares against the source video's frames
    needs_mask: ClassVar[bool] = False  # takes the benchmark's editing mask: compute(..., mask=)
    needs_text: ClassVar[bool] = False  # takes the case's prompts: compute(..., texts=)
    higher_is_better: ClassVar[bool] = True
    scale: ClassVar[str | None] = None  # the scale the score is reported on (summary.json), e.g. "[0,1]"
    model_backed: ClassVar[bool] = False  # loads a model in setup(): runs in a model pool (see in_pool)
    paper: ClassVar[str] = ""  # the paper section (or official code) its formula follows, e.g. "CoVEBench App. F.3"
    # its config keys that name weights -> where the official weights are published (a URL or a model name):
    # shown by `vbench-ray list metrics` and in every missing-weights message
    weights_from: ClassVar[dict[str, str]] = {}
    # ms one case takes in its GPU pool's actor at the defaults (measured: tests/perf/gpu_stream.py; 100 where not):
    # GPU pools get parts of the GPUs in proportion to it (vbench_ray.pool_plan), the slowest the most
    gpu_cost: ClassVar[float] = 100.0
    # libraries its compute imports on first use (not at module import, so the driver, which only validates
    # configs, never loads them): the decode stage's workers import them before their first case (prewarm);
    # ``module:attribute`` where a package loads an attribute's module only when it is first read (scikit-image)
    imports: ClassVar[tuple[str, ...]] = ()
    # keys of its config_class that do not change a case's score, beyond the ones every section shares
    # (``compare_base.RUNTIME_KEYS``: device, batch_size, gpu_fraction ...): `vbench-ray compare` does not count runs
    # that differ in them as scored differently. Declare a key only with a test that shows a case's score the same
    # either way (``pool_batch``: tests/pipeline/test_metrics_runtime_keys.py scores cases in pool calls of 1 and 4)
    runtime_keys: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, cfg: Any = None):
        self.cfg = cfg if cfg else self.default_config()

    @classmethod
    def default_config(cls) -> Any:
        """``config_class()``: the metric's documented defaults (None for a metric without a config)."""
        return cls.config_class() if cls.config_class is not None else None

    def sampling(self) -> Sampling:
        """``cfg.frames`` uniform frames (every frame when null; 10 when the config has no such key)."""
        return sampling_of(getattr(self.cfg, "frames", 10))

    def resources(self) -> dict:
        """Ray resources one worker of this metric needs: a GPU when ``cfg.device`` is a CUDA device.
        Metrics that use the GPU only for some settings (RAFT, CoTracker) override this."""
        return {"num_gpus": 1.0} if str(getattr(self.cfg, "device", "cpu")).startswith("cuda") else {}

    def in_pool(self) -> bool:
        """Whether the metric runs in a model pool of its own (``vbench_ray.metrics.pool``: its model loaded
        once per actor, its own GPU share) instead of in the CPU decode stage. Model-backed metrics and any
        metric that asks for a GPU do; the decode stage hands them their frames in the row."""
        return self.model_backed or bool(self.resources().get("num_gpus"))

    @classmethod
    def resolved_settings(cls, cfg: dict) -> dict:
        """``{key: value}`` of the settings whose configured value leaves the choice to the device they run on
        (AES's ``dtype: auto``), as they resolve there; ``cfg`` is ``metrics.<name>`` as the run recorded it (a dict).
        `vbench-ray compare` records these in place of the configured values (``compare_base.resolved_settings``),
        so runs whose ``auto`` became different numbers are told apart."""
        return {}

    @classmethod
    def check_weights(cls, cfg: Any) -> list[str]:
        """Problems with the weights ``cfg`` asks for, each naming its config key (``vbench_ray.preflight``
        calls this before any compute, so a missing file is one clear message, not a traceback per worker)."""
        return []

    def extra_inputs(self, row: dict) -> dict:
        """Keyword arguments for ``compute`` taken from the case's row (e.g. SRC's entities to keep, from the
        row's ``annotations``); the decode stage passes them on (to a pool metric inside its payload)."""
        return {}

    def setup(self) -> None:
        """Load models. Called once per worker before the first ``compute``."""

    def frame_view(self) -> FrameView | None:
        """The preprocessing the formula applies to each frame alone before anything else (e.g. grayscale then
        ``INTER_AREA`` to 224x224: ``FrameView((Gray(), AreaResize(224)))``, ``vbench_ray.video.flow``), the
        same for both videos; None (the default): the formula reads raw frames (``compute``).

        Declaring it lets the decode stage make the view of each frame as the decoder hands it over, once per
        distinct (frame, view) among the metrics, and drop the full-resolution frame: a metric's score must not depend
        on whether its views came from ``compute`` or from the stage, which holds when ``compute`` is the
        default below. A metric in a model pool gets raw frames whatever it declares here."""
        return None

    def compute_views(self, edited: np.ndarray, source: np.ndarray | None, **kwargs) -> float:
        """The formula on prepared frames: ``edited`` and ``source`` are stacks of ``frame_view()`` of each
        sampled frame, in sampling order (``(T, 224, 224)`` for a grayscale 224 view). Implement it with
        ``frame_view``."""
        raise NotImplementedError(f"{type(self).__name__} declares no frame_view, so it has no compute_views")

    def compute(self, edited: np.ndarray, source: np.ndarray | None = None, **kwargs) -> float:
        """``edited`` and ``source``: uint8 RGB ``(T, H, W, 3)`` at their native resolution. This default, for a
        metric with a ``frame_view``, makes the view of each frame and calls ``compute_views``; a metric on raw
        frames overrides it."""
        view = self.frame_view()
        if view is None:
            raise NotImplementedError(f"{type(self).__name__} implements neither compute nor frame_view")
        return self.compute_views(view.stack(edited), None if source is None else view.stack(source), **kwargs)

    def pool_inputs(
        self, edited: np.ndarray, source: np.ndarray | None, kwargs: dict
    ) -> tuple[np.ndarray, np.ndarray | None, dict]:
        """What the decode worker hands this metric's pool instead of the decoded frames (run on the CPU, in the
        decode stage, without the model). The default hands the frames as they are; a metric whose model reads a
        small derivative of many frames (TQ: fragment mosaics) computes it here, so the row carries megabytes,
        not the whole sampled video, and the pool's actors spend their time on the model. ``compute`` and
        ``compute_many`` must accept what this returns."""
        return edited, source, kwargs

    def compute_many(self, items: Sequence[tuple[np.ndarray, np.ndarray | None, dict]]) -> list[float | Exception]:
        """Scores of several cases at once: ``items`` are ``(edited, source, extra_inputs)`` as ``compute`` takes
        them. One entry per item: its score, or the exception that is that case's failure (what ``compute`` would
        have raised for it). A model pool (``vbench_ray.metrics.pool``) calls this with the rows of its batch.

        This default computes the cases one after the other. A metric whose model can batch across cases
        overrides it (one forward pass over the frames of several cases) and must return, per case, what
        ``compute`` would have returned (``allclose``). An exception it *raises* fails the batched attempt only:
        the pool then calls it again with each case alone, so a bad case never fails the others."""
        out: list[float | Exception] = []
        for edited, source, kwargs in items:
            try:
                out.append(float(self.compute(edited, source, **(kwargs or {}))))
            except Exception as exc:  # this case's failure, recorded in its error column
                out.append(exc)
        return out


def _describe(cls: type[FrameMetric]) -> dict:
    """A metric's line in ``vbench-ray list metrics``, from its class."""
    needs = []
    if cls.weights_from:
        keys = ", ".join(f"metrics.{cls.name}.{k}" for k in cls.weights_from)
        optional = not cls.check_weights(cls.default_config()) if cls.config_class is not None else False
        needs.append(f"weights{' for some settings' if optional else ''} ({keys})")
    elif cls.model_backed:
        needs.append("weights")
    fields = {f.name for f in dataclasses.fields(cls.config_class)} if cls.config_class is not None else set()
    if "device" in fields:
        needs.append("GPU optional (device: cuda)")
    return {"section": cls.paper, "scale": cls.scale or "", "needs": ", ".join(needs)}


METRICS: Registry = Registry("metric", describe=_describe)


def register_metric(cls: type[FrameMetric]) -> type[FrameMetric]:
    """Class decorator: add ``cls`` to ``METRICS`` under its ``name`` (a second class under a taken name is
    refused: ``registry.DuplicateName``)."""
    if not cls.name:
        raise TypeError(f"{cls.__name__} must set `name`")
    if cls.config_class is not None and not dataclasses.is_dataclass(cls.config_class):
        raise TypeError(f"{cls.__name__}.config_class must be a dataclass (the schema of metrics.{cls.name})")
    fields = {f.name for f in dataclasses.fields(cls.config_class)} if cls.config_class else set()
    for trait in ("choices", "runtime_keys"):
        unknown = set(getattr(cls, trait)) - fields
        if unknown:
            raise TypeError(f"{cls.__name__}.{trait} names keys its config_class lacks: {sorted(unknown)}")
    METRICS.add(cls.name, cls)
    return cls


def _registered(name: str) -> type[FrameMetric]:
    import vbench_ray.metrics  # noqa: F401  (importing the package registers every metric module)

    return METRICS[name]  # an unknown name: registry.UnknownName, listing the metrics there are


def metrics_config(
    cls_name: str, metrics: Sequence[str], *, module: str, before: Sequence[tuple] = (), after: Sequence[tuple] = ()
) -> type:
    """The dataclass of a benchmark's ``metrics`` config section, generated from the metrics it names.

    One field per metric, ``<name>: METRICS[name].config_class`` with that class's defaults, between the
    benchmark's own fields ``before`` and ``after`` (``(name, type, dataclasses.field(...))`` tuples, e.g.
    ``enabled`` and ``exclude``). ``module``: the benchmark module (``__name__``), which must bind the
    result to ``cls_name``, so the class pickles by reference as a hand-written one does.
    """
    fields = list(before)
    for name in metrics:
        config_class = _registered(name).config_class
        if config_class is None:
            raise TypeError(f"metric {name!r} declares no config_class, so it has no metrics.{name} section")
        fields.append((name, config_class, dataclasses.field(default_factory=config_class)))
    cls = dataclasses.make_dataclass(cls_name, fields + list(after))
    cls.__module__ = module
    cls.__doc__ = f"``metrics``: {', '.join(metrics)} (each its metric's config_class), generated by metrics_config."
    return cls


def metric_choices(metrics: Sequence[str]) -> dict[str, tuple]:
    """``{"metrics.<name>.<key>": allowed values}`` of the named metrics, for a benchmark's ``config_choices``."""
    return {
        f"metrics.{name}.{key}": tuple(allowed)
        for name in metrics
        for key, allowed in _registered(name).choices.items()
    }


def build_metric(name: str, cfg: Any = None) -> FrameMetric:
    return _registered(name)(cfg)
