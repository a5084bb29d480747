"""``hf``: a transformers judge, batched ``generate`` in a Ray Data actor pool (CPU or GPU).

Each actor of the pool (``judge.hf.workers`` of them, one GPU each when ``judge.hf.device`` is cuda) loads
``judge.model`` once with ``AutoProcessor`` and ``AutoModelForImageTextToText`` (``AutoModelForCausalLM``
for a text-only checkpoint) and answers ``judge.hf.batch_size`` requests per ``generate`` call.

Media are handled here, the same way for every image-text model:

* a ``video_url`` part (``file://`` URL, plain absolute path, or ``data:video/...;base64`` URL) is decoded
  with :class:`~vbench_ray.video.io.VideoReader` at ``judge.video.fps`` frames per second, capped at
  ``judge.video.max_frames`` (:func:`~vbench_ray.video.io.fps_indices`), each frame downscaled to fit
  ``judge.video.max_pixels``; the frames replace the part as that many image parts, in order, so the
  model's own chat template renders its own image placeholders and its processor expands them;
* an ``image_url`` part (``file://``, a path, or a ``data:image/...;base64`` URL) becomes one image part,
  downscaled to the same pixel budget.
A request's own ``video`` overrides (``JudgeRequest.video``, e.g. an fps sweep) replace ``judge.video`` for
that request. Remote (http) media are not fetched. A decoded video is kept in a small per-actor cache
(keyed on path, size, mtime and sampling), since several requests of a case show the same video.

Generation: left padding, ``do_sample = temperature > 0`` (then ``temperature``, ``top_p`` and, when set,
``top_k``; an unset ``judge.top_k`` leaves the checkpoint's ``generation_config``),
``max_new_tokens = judge.max_tokens`` (capped so prompt plus answer fit the model's positions),
``torch.manual_seed(judge.seed)`` before each batch, dtype ``judge.hf.dtype`` (float32 where the device
cannot run it). A response carries the prompt token count (image tokens included), the completion
token count (up to and including the end-of-sequence token) and its latency (its own media decoding plus
its batch's generation).

Failures: a request whose media or prompt cannot be prepared gets ``error`` and the rest of its batch is
generated; if a batched ``generate`` fails, its requests are generated one by one so that only the
culprit fails. If the engine itself dies after some answers came back, the requests still unanswered
come back with ``error`` (the judge stage retries them); a pipeline that answers nothing (a model that
cannot load) raises.

Each ``generate`` call runs its own Ray Data pipeline, so every round of re-asks reloads the model in
fresh actors: cheap for small judges, a fixed cost per round for large ones.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Iterator

from vbench_ray.cfgutil import plain as to_plain
from vbench_ray.judges.backends.hf_worker import HFJudgeWorker
from vbench_ray.judges.base import JudgeBackend, JudgeRequest, JudgeResponse, cfg_get, model_problems

__all__ = ["DTYPES", "HFBackend", "HFJudgeWorker", "resolve_model_path"]  # HFJudgeWorker: backends/hf_worker.py

log = logging.getLogger(__name__)

DTYPES = ("bfloat16", "float16", "float32", "auto")
_RESPONSE_FIELDS = ("request_id", "text", "error", "latency_s", "prompt_tokens", "completion_tokens", "model")


def _config_error(message: str) -> Exception:
    from vbench_ray.config import ConfigError

    return ConfigError(message)


def resolve_model_path(model: str | None, env_vars: dict | None = None) -> Path:
    """``judge.model`` as a local checkpoint directory: a path, or a hub id already in the local HF cache.

    Raises ``ConfigError`` (a ``ValueError``) naming ``judge.model`` otherwise."""
    if not model:
        raise _config_error(
            "judge.backend=hf needs judge.model: a local transformers checkpoint directory "
            "(or a hub id already in the local Hugging Face cache)"
        )
    path = Path(model).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise _config_error(f"judge.model={model} is not a transformers checkpoint (no config.json in {path})")
        return path.resolve()
    if path.exists():
        raise _config_error(f"judge.model={model} is a file; it must be a checkpoint directory")
    if not path.is_absolute() and str(model).count("/") == 1 and not str(model).startswith("."):
        cache = (env_vars or {}).get("HF_HUB_CACHE") or None
        if cache is None and (env_vars or {}).get("HF_HOME"):
            cache = str(Path(env_vars["HF_HOME"]) / "hub")
        try:
            from huggingface_hub import snapshot_download

            return Path(snapshot_download(str(model), local_files_only=True, cache_dir=cache))
        except Exception as exc:
            raise _config_error(
                f"judge.model={model}: not a local directory, and not in the local Hugging Face "
                f"cache ({type(exc).__name__}); download it first or set judge.model to a "
                "local checkpoint directory"
            ) from exc
    raise _config_error(f"judge.model not found: {model} (set judge.model to a local checkpoint directory)")


class HFBackend(JudgeBackend):
    name = "hf"
    engine = "vbench_ray.judges.backends.hf_engine:hf_engine"

    @classmethod
    def stream_replicas(cls, cfg: Any) -> int:
        return int(cfg.hf.workers)

    @classmethod
    def problems(cls, node: Any, key: str) -> list[str]:
        out = model_problems(node, key, "hf", "a local model folder", local=True)
        device = cfg_get(node, "hf.device")
        if device and str(device).startswith("cuda"):
            out.append(f"__gpu__:{key}.hf.device")  # preflight: said only when the cluster has no GPU
        return out

    def __init__(self, cfg):
        super().__init__(cfg)
        plain = dict(to_plain(cfg))
        hf = plain.get("hf") or {}
        if str(hf.get("dtype", "bfloat16")) not in DTYPES:
            raise _config_error(f"judge.hf.dtype must be one of {DTYPES}, got {hf.get('dtype')!r}")
        if int(hf.get("batch_size", 1)) < 1 or int(hf.get("workers", 1)) < 1:
            raise _config_error("judge.hf.batch_size and judge.hf.workers must be at least 1")
        env_vars = {str(k): str(v) for k, v in (plain.get("env_vars") or {}).items()}
        plain["model_path"] = str(resolve_model_path(plain.get("model"), env_vars))
        plain["label"] = self.model_label
        plain["env_vars"] = env_vars
        self.worker_cfg = plain

    def generate(self, requests: list[JudgeRequest]) -> Iterator[list[JudgeResponse]]:
        if not requests:
            return
        import ray

        hf = self.worker_cfg["hf"]
        on_gpu = str(hf.get("device", "cpu")).startswith("cuda")
        rows = [
            {
                "request_id": r.request_id,
                "messages": json.dumps(r.messages, ensure_ascii=False),
                "video": json.dumps(getattr(r, "video", None) or {}),
            }
            for r in requests
        ]
        if on_gpu and ray.cluster_resources().get("GPU", 0) < 1:
            log.warning(
                "hf judge: judge.hf.device=%s but the Ray cluster has no GPU; Ray Data waits for one "
                "(set judge.hf.device=cpu to run on CPU)",
                hf.get("device"),
            )
        kwargs: dict[str, Any] = {}
        if self.worker_cfg["env_vars"]:
            kwargs["runtime_env"] = {"env_vars": self.worker_cfg["env_vars"]}
        ds = ray.data.from_items(rows).map_batches(
            HFJudgeWorker,
            fn_constructor_kwargs={"cfg": self.worker_cfg},
            batch_size=int(hf.get("batch_size", 4)),
            batch_format="pyarrow",
            compute=ray.data.ActorPoolStrategy(size=int(hf.get("workers", 1))),
            num_cpus=1,
            num_gpus=1 if on_gpu else 0,
            **kwargs,
        )
        wanted = {r.request_id for r in requests}
        answered: set[str] = set()
        try:
            for block in ds.iter_batches(batch_size=None, batch_format="pyarrow"):
                batch = [JudgeResponse(**{k: row.get(k) for k in _RESPONSE_FIELDS}) for row in block.to_pylist()]
                batch = [b for b in batch if b.request_id in wanted and b.request_id not in answered]
                answered.update(b.request_id for b in batch)
                if batch:
                    yield batch
        except Exception as exc:
            if not answered:
                raise
            log.warning("hf judge pipeline failed after %d of %d answers: %s", len(answered), len(requests), exc)
            lost = [
                JudgeResponse(
                    r.request_id,
                    error=f"hf judge engine failed: {type(exc).__name__}: {str(exc)[:500]}",
                    model=self.model_label,
                )
                for r in requests
                if r.request_id not in answered
            ]
            if lost:
                yield lost
            return
        missing = [r for r in requests if r.request_id not in answered]
        if missing:  # never expected: the actor answers every row it is given
            yield [
                JudgeResponse(
                    r.request_id, error="hf judge pipeline returned no row for this request", model=self.model_label
                )
                for r in missing
            ]
