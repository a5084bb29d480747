"""Static Region Consistency (SRC). CoVEBench App. F (Table 2, "SAM2 + DINOv2, mask-based feature comparison for
unchanged areas"); the details the paper leaves open follow the official evaluator (``metrics/vf/src``).

For one case, with the entities the task says must stay unchanged (see "Entities" below):

1. **Frames.** Both videos sampled at ``fps`` = 2 frames per second, at most ``max_frames`` = 32 (resampled
   uniformly beyond that); the first ``k = min(T_src, T_edit)`` samples of each are paired by index.
2. **Grounding** (Grounding DINO). Each entity, as a lower-case phrase ending in ``"."``, is detected on the
   first ``probe_frames`` = 3 sampled frames of a video (``box_threshold`` 0.30, ``text_threshold`` 0.25);
   the highest-scoring box over those frames is kept if its score is >= ``min_score`` (0.25) and it covers at
   most ``max_box_area`` (55 %) of the frame. Done separately on the source and on the edited video, as the
   official code does.
3. **Masks** (SAM2). The kept boxes prompt SAM2; per frame, the union of the entities' masks (logits > 0).
   The official code propagates the boxes through the video with SAM2's video predictor; here the same boxes
   prompt SAM2's image model on every sampled frame (batched across frames), which is the same for the static
   entities SRC is about and needs no per-video memory state. (transformers' ``Sam2Processor`` needs
   torchvision, which this stack lacks, so the module does SAM2's preprocessing itself: square resize to the
   model's input size, ImageNet mean/std, boxes scaled alike, mask logits resized back bilinearly.)
4. **Score** per frame pair ``t`` (official rule):
   - source mask below ``min_mask_pixels`` (64) pixels: the frame is skipped;
   - edited mask below it: the entity is gone, the frame scores 0;
   - else each frame is cropped to its own mask's bounding box expanded by ``bbox_expand`` (15 %) of its size
     on each side, pixels outside the mask set to 0, and embedded with DINOv2 (CLS token of the last hidden
     state, L2-normalised); the cosine ``c`` of the two embeddings maps to ``clip((c + 1) / 2, 0, 1)``.

   SRC is the mean over the scored frames. Scale [0, 1], higher is better.

Undefined cases are recorded failures (``error_SRC``), never a silent zero, as the official CSV's ``error``:
no entity to keep, no entity grounded in the source or in the edited video, or no frame with a source mask.

**How it runs** (the results of the processors and of one call per image, up to float rounding). A pool call scores
``pool_batch`` cases; each Grounding DINO, SAM2 and DINOv2 pass holds one case's images only (at most
``batch_size``), so a case's score is the same whichever cases share its call, as when the official code scores one
task at a time (a pass of another shape runs other kernels, whose rounding differs: near a detection's or a mask
pixel's threshold, that changes the score); each model's results are read back once per call (passes shared across
the cases of a call saved 2.5 % of SRC's time on one H100, ``docs/performance.md``: too little for scores that
depend on which rows arrive together). With ``gpu_preprocess`` (default) Grounding DINO's and DINOv2's image
processing runs on the model's device: each distinct probe frame and each crop goes there once as uint8, and is
resized, centre-cropped and normalised there as the loaded processor does it (``image_plan`` reads its size rule,
filter, crop, mean and std; torch's antialiased resize is what torchvision's processors run; a processor it cannot
reproduce runs itself); the Swin backbone then runs once per distinct probe frame though each frame is prompted once
per entity (``ImageEncoder.unique``). Masked crops are OpenCV's masked copy. ``bf16`` (default): SAM2 and Grounding
DINO under bf16 autocast on CUDA, as the official SAM2 runs; ``bf16_encoders`` (off by default: not the official
numerics) holds the two image encoders' weights in bf16 and runs them without autocast's per-op casts.

**Entities.** The official pipeline asks an LLM (``--allow-llm``) to turn the task's *Semantic Preservation*
checklist questions into short noun phrases, dropping abstract targets (camera, framing, lighting, mood,
style, the background as a whole), or reads that result from its ``stage1_cache/{id}/metadata.json``
(``preserved_entities: [{"description": ...}]``). Here, in order:
``entities_dir`` set: that cache layout (the official cache works as is); else a task-level
``preserved_entities`` list in the checklist; else the phrases extracted by rule from the task's Semantic
Preservation questions (``entities_from_task``: the noun phrase that the question asks to be preserved,
``"... of the <phrase> preserved"``, abstract targets dropped). The decode stage hands them to ``compute``
through ``extra_inputs(row)`` (the row's ``annotations``: the task JSON).

**Exclusions** (paper App. F: camera moves, global style, heavy changes): CoVEBench's category mechanism,
``metrics.exclude.SRC`` defaults to Level-1 ``Camera`` and ``Style`` (the official category fast path);
``ids`` / ``ids_file`` give an explicit list (e.g. the tasks the official LLM filter skipped).
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from vbench_ray.metrics.base import FrameMetric, Sampling, register_metric, require_weights, weights_problem
from vbench_ray.metrics.device_images import device_preprocess, encoder_class, image_plan
from vbench_ray.metrics.src_entities import entities_from_cache, entities_from_task
from vbench_ray.metrics.src_passes import PhaseClock, key_runs, pack_runs, sam_preprocessing
from vbench_ray.metrics.src_scoring import detections, frame_pairs, pair_crops, score_pairs

WEIGHT_KEYS = {
    "grounding_dino": "Grounding DINO (a transformers GroundingDinoForObjectDetection directory)",
    "sam2": "SAM2 (a transformers Sam2Model directory)",
    "dinov2": "DINOv2 (a transformers Dinov2Model directory)",
}


@dataclass
class SRCConfig:
    grounding_dino: Optional[str] = None  # local Grounding DINO dir (official: IDEA-Research/grounding-dino-base)
    sam2: Optional[str] = None  # local SAM2 dir, transformers format (official: sam2_hiera_large)
    dinov2: Optional[str] = None  # local DINOv2 dir (official: facebook/dinov2-small)
    fps: float = 2.0  # frames sampled per second of video (official FRAME_FPS = 2)
    max_frames: int = 32  # at most this many sampled frames, resampled uniformly beyond (official: 32)
    probe_frames: int = 3  # Grounding DINO looks for each entity on the first this many frames (official: 3)
    box_threshold: float = 0.30  # Grounding DINO box confidence (official: 0.30)
    text_threshold: float = 0.25  # official 0.25: only names a box's words (labels), which SRC never reads
    min_score: float = 0.25  # an entity is found if its best box scores at least this (official: 0.25)
    max_box_area: float = 0.55  # a box covering more of the frame is rejected (official: 0.55)
    min_mask_pixels: int = 64  # masks smaller than this count as empty (official: 64)
    bbox_expand: float = 0.15  # the crop box grows by this fraction of its size on each side (official: 0.15)
    entities_dir: Optional[str] = None  # official stage1 cache: {dir}/{task id}/metadata.json preserved_entities
    device: str = "cpu"  # cpu | cuda | cuda:N
    gpu_fraction: float = 0.3  # GPU share per actor, device cuda: 2 beside MSM, AES, TQ (0.1), 3 once they are done
    bf16: bool = True  # SAM2 and Grounding DINO under bf16 autocast on CUDA (the official SAM2 runs so)
    bf16_encoders: bool = False  # the image encoders (Grounding DINO's Swin, SAM2's Hiera) hold bf16 weights and run
    # in bf16 without autocast: no per-op casts, but LayerNorms and softmax in bf16 too (not the official numerics)
    gpu_preprocess: bool = True  # Grounding DINO's and DINOv2's resize / crop / normalise on the model's device, as
    # their processors do them (same size rule, interpolation, antialias, rounding); False: the processors, on the CPU
    batch_size: int = 16  # images per forward pass (Grounding DINO probes, SAM2 frames, DINOv2 crops)
    pool_batch: int = 4  # cases one pool call scores together (each holds both videos' frames at native size)


# ----------------------------------------------------------------------------- metric


class SRCUndefined(ValueError):
    """The case has no SRC score (no entity to keep or found, or no source mask): a recorded failure."""


@register_metric
class SRC(FrameMetric):
    """Static Region Consistency, CoVEBench App. F: DINOv2 cosine of preserved entities' masked crops (Grounding
    DINO + SAM2 masks), mapped to [0, 1]. See the module docstring for every rule and its source."""

    name = "SRC"
    paper = "CoVEBench App. F.3 (Static Region Consistency)"
    weights_from = {  # where the official weights are published
        "grounding_dino": "IDEA-Research/grounding-dino-base (Hugging Face)",
        "sam2": "facebook/sam2-hiera-large (Hugging Face, transformers format); the official evaluator "
        "downloads https://dl.fbaipublicfiles.com/segment_anything_2/072824/sam2_hiera_large.pt",
        "dinov2": "facebook/dinov2-small (Hugging Face)",
    }
    config_class = SRCConfig
    needs_source = True
    scale = "[0,1]"
    model_backed = True
    gpu_cost = 930.0  # ms per case in its pool actor, five-metric stream, one H200 (tests/perf/gpu_stream.py)
    # each model pass holds one case's images (module docstring, "How it runs"), so a case's score does not depend on
    # the cases scored with it (tests/pipeline/test_metrics_runtime_keys.py)
    runtime_keys = frozenset({"pool_batch"})

    def sampling(self) -> Sampling:
        return Sampling(n=None, fps=float(self.cfg.fps), max_frames=self.cfg.max_frames)

    def resources(self) -> dict:
        return {"num_gpus": float(self.cfg.gpu_fraction)} if str(self.cfg.device).startswith("cuda") else {}

    @classmethod
    def check_weights(cls, cfg: Any) -> list[str]:
        problems = []
        for key, what in WEIGHT_KEYS.items():
            problems += weights_problem(getattr(cfg, key, None), f"metrics.SRC.{key}", f"SRC needs {what}")
        entities_dir = getattr(cfg, "entities_dir", None)
        if entities_dir and not Path(entities_dir).is_dir():
            problems.append(
                f"SRC: config key `metrics.SRC.entities_dir` points to {entities_dir!r}, which is not a directory"
            )
        return problems

    def extra_inputs(self, row: dict) -> dict:
        """``{"entities": [...]}`` of the case (module docstring, "Entities"), from the row's task JSON."""
        if self.cfg.entities_dir:
            return {"entities": entities_from_cache(self.cfg.entities_dir, row.get("case_id"))}
        raw = row.get("annotations")
        task = json.loads(raw) if isinstance(raw, str) else (raw or {})
        return {"entities": entities_from_task(task) if isinstance(task, dict) else []}

    # -- models
    def setup(self) -> None:
        import torch
        from transformers import (
            AutoImageProcessor,
            AutoProcessor,
            Dinov2Model,
            GroundingDinoForObjectDetection,
            Sam2Model,
        )

        paths = {
            k: require_weights(getattr(self.cfg, k), f"metrics.SRC.{k}", f"SRC needs {w}")
            for k, w in WEIGHT_KEYS.items()
        }
        self.torch = torch
        self.device = torch.device(self.cfg.device)
        encoder = encoder_class()
        bf16 = bool(self.cfg.bf16_encoders)
        self.gd_processor = AutoProcessor.from_pretrained(paths["grounding_dino"])
        self.gd_model = GroundingDinoForObjectDetection.from_pretrained(paths["grounding_dino"]).to(self.device).eval()
        conv = self.gd_model.model.backbone.conv_encoder
        conv.model = self.gd_backbone = encoder(conv.model, bf16=bf16)  # one Swin pass per distinct probe frame
        self.sam = Sam2Model.from_pretrained(paths["sam2"]).to(self.device).eval()
        if bf16:
            self.sam.vision_encoder = encoder(self.sam.vision_encoder, bf16=True)
        self.sam_size, self.sam_mean, self.sam_std = sam_preprocessing(paths["sam2"], self.sam)
        self.dino_processor = AutoImageProcessor.from_pretrained(paths["dinov2"])
        self.dino = Dinov2Model.from_pretrained(paths["dinov2"]).to(self.device).eval()
        on_device = bool(self.cfg.gpu_preprocess)
        self.gd_plan = image_plan(self.gd_processor) if on_device else None
        self.dino_plan = image_plan(self.dino_processor) if on_device else None

    def _autocast(self):
        if self.device.type == "cuda" and self.cfg.bf16:
            return self.torch.autocast("cuda", dtype=self.torch.bfloat16)
        return contextlib.nullcontext()

    def _upload(self, arrays: Sequence[np.ndarray]) -> list:
        """uint8 arrays -> tensors of the same shapes on the model's device, in one host-to-device copy (from pinned
        memory on CUDA)."""
        torch = self.torch
        sizes = [int(a.size) for a in arrays]
        host = torch.empty(sum(sizes), dtype=torch.uint8, pin_memory=self.device.type == "cuda")
        flat, at = host.numpy(), 0
        for a, n in zip(arrays, sizes):
            flat[at : at + n].reshape(a.shape)[...] = a
            at += n
        dev = host.to(self.device, non_blocking=True)
        out, at = [], 0
        for a, n in zip(arrays, sizes):
            out.append(dev[at : at + n].view(a.shape))
            at += n
        return out

    def ground(self, frames: np.ndarray, entities: Sequence[str]) -> list[list[float]]:
        """The accepted box ``[x0, y0, x1, y1]`` (pixels) of each entity found on the probe frames."""
        return self.ground_many([(frames, entities)])[0]

    def ground_many(
        self, jobs: Sequence[tuple[np.ndarray, Sequence[str]]], groups: Sequence | None = None
    ) -> list[list[list[float]]]:
        """``ground`` of several videos (``(frames, entities)`` each, e.g. of several cases) in shared Grounding
        DINO passes: every (video, entity) is one prompt on the video's probe frames; prompts on frames of one
        size and of one group (``groups[j]``, e.g. the job's case; None: one group) go through the model together,
        at most ``batch_size`` images per pass, a video's prompts in one pass where they fit (so that its frames
        are preprocessed and go through the backbone once: ``_ground_pass``); frames of different sizes would be
        padded, which would change the detections, so they never share a pass; prompts of different lengths are
        padded, which the text encoder masks out."""
        units, by_size = [], {}  # a unit: (job, entity, probe frames, (h, w)); units grouped by group, frame size
        for j, (frames, entities) in enumerate(jobs):
            probes = frames[: max(1, int(self.cfg.probe_frames))]
            for entity in entities:
                hw = tuple(frames.shape[1:3])
                by_size.setdefault((None if groups is None else groups[j], hw), []).append(len(units))
                units.append((j, entity.strip().lower().rstrip(".") + ".", probes, hw))
        cap = max(1, int(self.cfg.batch_size))
        order, found = [], []  # units in pass order; per pass, the top detection of each (prompt, probe) image
        for (_, hw), members in by_size.items():
            for chunk in pack_runs(members, [len(units[u][2]) for u in members], [units[u][0] for u in members], cap):
                found.append(self._ground_pass([units[u] for u in chunk], hw))
                order += chunk
        best: list[tuple[float, list[float] | None]] = [(0.0, None)] * len(units)
        if found:  # one read-back for all passes: the device runs them back to back
            scores = self.torch.cat([f[0] for f in found]).float().cpu().numpy()
            pixels = self.torch.cat([f[1] for f in found]).float().cpu().numpy()
            at = 0
            for u in order:
                top, top_box = 0.0, None
                for score, box in zip(scores[at : at + len(units[u][2])], pixels[at : at + len(units[u][2])]):
                    if score > top:  # the first probe wins a tie, as the official loop over probes
                        top, top_box = float(score), [float(v) for v in box]
                best[u] = (top, top_box)
                at += len(units[u][2])
        boxes: list[list[list[float]]] = [[] for _ in jobs]
        for (j, _, _, (h, w)), (score, box) in zip(units, best):
            if box is None or score < float(self.cfg.min_score):
                continue
            area = max(0.0, box[2] - box[0]) * max(0.0, box[3] - box[1]) / float(h * w)
            if area <= float(self.cfg.max_box_area):
                boxes[j].append(box)
        return boxes

    def _ground_pass(self, units: list, hw: tuple[int, int]):
        """One Grounding DINO pass over ``units``' probe images: the top detection (``detections``: score, box in
        pixels) of each (prompt, probe) image, units in order, as tensors on the device.

        With ``gpu_preprocess`` (and a processor ``image_plan`` reproduces), each distinct probe frame of the pass
        goes to the device once as uint8 and is resized and normalised there (``device_preprocess``), and the Swin
        backbone runs once per distinct frame (``ImageEncoder.unique``); the text goes through the processor's own
        tokenisation. Otherwise the processor prepares every (frame, prompt) image on the CPU."""
        texts = [prompt for _, prompt, probes, _ in units for _ in probes]
        if self.gd_plan is None:
            from PIL import Image

            images = [Image.fromarray(f) for _, _, probes, _ in units for f in probes]
            inputs = self.gd_processor(images=images, text=texts, padding="longest", return_tensors="pt").to(
                self.device
            )
            sharing = contextlib.nullcontext()
        else:
            videos = list(dict.fromkeys(j for j, _, _, _ in units))  # the pass's videos, each with its probe frames
            probes = {j: p for j, _, p, _ in units}
            slot = dict(zip(videos, np.cumsum([0] + [len(probes[j]) for j in videos[:-1]]).tolist()))
            index = [slot[j] + i for j, _, p, _ in units for i in range(len(p))]  # image of each (prompt, probe)
            pixels = device_preprocess(self.torch.cat(self._upload([probes[j] for j in videos])), self.gd_plan)
            first = self.torch.tensor([index.index(u) for u in range(len(pixels))], device=self.device)
            inverse = self.torch.tensor(index, device=self.device)
            inputs = self.gd_processor(text=texts, padding="longest", return_tensors="pt").to(self.device)
            inputs["pixel_values"] = pixels.index_select(0, inverse)
            inputs["pixel_mask"] = self.torch.ones(
                (len(index), *pixels.shape[-2:]), dtype=self.torch.long, device=self.device
            )  # the processor's: no padding in a pass
            sharing = self.gd_backbone.unique(first, inverse)  # backbone row u: pixels[u]; prompt row i: index[i]
        with self.torch.inference_mode(), self._autocast(), sharing:
            outputs = self.gd_model(**inputs)
            return detections(outputs.logits, outputs.pred_boxes, hw, float(self.cfg.box_threshold))

    def segment(self, frames: np.ndarray, boxes: list[list[float]]) -> np.ndarray:
        """``(T, H, W)`` bool: per frame, the union of SAM2's masks for ``boxes``."""
        return self.segment_many([(frames, boxes)])[0]

    def segment_many(
        self, jobs: Sequence[tuple[np.ndarray, list[list[float]]]], groups: Sequence | None = None
    ) -> list[np.ndarray]:
        """``segment`` of several videos (``(frames, boxes)`` each): SAM2's image encoder runs on the frames of all
        of them, ``batch_size`` frames per pass, a pass holding the frames of one group of consecutive jobs only
        (``groups[j]``, e.g. the job's case; None: one group) (each frame is resized to SAM2's square input on its
        own; a pass's frames go to the device in one uint8 copy), and the mask decoder then prompts each video's
        frames with that video's boxes; the masks come back to the host once, after every pass."""
        torch = self.torch
        import torch.nn.functional as F

        out = [np.zeros(frames.shape[:3], dtype=bool) for frames, _ in jobs]
        flat = [(j, t) for j, (frames, boxes) in enumerate(jobs) if boxes for t in range(len(frames))]
        if not flat:
            return out
        s = self.sam_size
        mean = torch.tensor(self.sam_mean, device=self.device).view(1, 3, 1, 1)
        std = torch.tensor(self.sam_std, device=self.device).view(1, 3, 1, 1)
        prompts = {}
        for j, (frames, boxes) in enumerate(jobs):
            if boxes:
                h, w = frames.shape[1:3]
                scale = torch.tensor([s / w, s / h, s / w, s / h], dtype=torch.float32)
                prompts[j] = (torch.tensor(boxes, dtype=torch.float32) * scale).to(self.device)
        bs = max(1, int(self.cfg.batch_size))
        masks, where = [], []  # per run of a pass: its masks on the device, and (job, first frame, frames)
        keys = [0 if groups is None else groups[j] for j, _ in flat]
        for chunk in (flat[a:b][i : i + bs] for _, a, b in key_runs(keys) for i in range(0, b - a, bs)):
            runs = key_runs([j for j, _ in chunk])  # (job, first, end) of the chunk's consecutive frames per video
            frames = self._upload([jobs[j][0][chunk[a][1] : chunk[b - 1][1] + 1] for j, a, b in runs])
            x = torch.cat([self._sam_input(f, s) for f in frames])
            x = (x - mean) / std
            with torch.inference_mode(), self._autocast():
                embeddings = self.sam.get_image_embeddings(x)
                for j, a, b in runs:
                    pred = self.sam(
                        image_embeddings=[e[a:b] for e in embeddings],
                        input_boxes=prompts[j].unsqueeze(0).expand(b - a, -1, -1),
                        multimask_output=False,
                    ).pred_masks  # (frames, boxes, 1, h', w')
                    h, w = jobs[j][0].shape[1:3]
                    logits = F.interpolate(pred[:, :, 0].float(), size=(h, w), mode="bilinear", align_corners=False)
                    masks.append((logits > 0).any(dim=1).flatten())
                    where.append((j, chunk[a][1], b - a))
        host = torch.cat(masks).cpu().numpy()  # one read-back: the next pass's upload overlapped this one's work
        at = 0
        for j, first, n in where:
            h, w = jobs[j][0].shape[1:3]
            out[j][first : first + n] = host[at : at + n * h * w].reshape(n, h, w)
            at += n * h * w
        return out

    def _sam_input(self, frames, size: int):
        """uint8 ``(N, H, W, 3)`` (an array, or a tensor on any device) -> float ``(N, 3, size, size)`` in [0, 1] on
        the model's device (bilinear)."""
        import torch.nn.functional as F

        x = frames if isinstance(frames, self.torch.Tensor) else self.torch.from_numpy(np.ascontiguousarray(frames))
        x = x.to(self.device).permute(0, 3, 1, 2).float() / 255.0
        return F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)

    def embed(self, crops: list[np.ndarray], groups: Sequence | None = None) -> np.ndarray:
        """L2-normalised DINOv2 CLS embeddings ``(N, D)`` of the crops (official: ``/ (|f| + 1e-6)``), ``batch_size``
        crops a pass, a pass holding one run of equal ``groups[i]`` only (e.g. the crop's case; None: one run). With
        ``gpu_preprocess`` the crops go to the device in one uint8 copy and are resized, centre-cropped and
        normalised there as DINOv2's processor does (``device_preprocess``); else the processor runs on the CPU."""
        torch = self.torch
        feats = []
        bs = max(2, int(self.cfg.batch_size))
        runs = key_runs([0] * len(crops) if groups is None else list(groups))
        for start, stop in ((a + i, min(b, a + i + bs)) for _, a, b in runs for i in range(0, b - a, bs)):
            part = list(crops[start:stop])
            if self.dino_plan is None:
                inputs = self.dino_processor(images=part, return_tensors="pt").to(self.device)
            else:
                inputs = {
                    "pixel_values": torch.cat([device_preprocess(c[None], self.dino_plan) for c in self._upload(part)])
                }
            with torch.inference_mode():
                f = self.dino(**inputs).last_hidden_state[:, 0].float()
                feats.append(f / (f.norm(dim=1, keepdim=True) + 1e-6))
        return torch.cat(feats).cpu().numpy() if feats else np.zeros((0, 0))  # one read-back

    def compute(self, edited: np.ndarray, source: np.ndarray | None, entities: Sequence[str] | None = None) -> float:
        result = self.compute_many([(edited, source, {"entities": entities})])[0]
        if isinstance(result, Exception):
            raise result
        return result

    def compute_many(self, items) -> list[float | Exception]:
        """SRC of several cases with shared model passes (Grounding DINO on the sources, then on the edits that
        still have an entity, SAM2 on every kept video, DINOv2 on every masked crop), each case scored by the
        module docstring's rules; a case that is undefined (``SRCUndefined``) or malformed is its own failure.
        The wall time of each phase adds up in ``phase_seconds`` (``ground``, ``segment``, ``pairs``, ``embed``;
        each phase ends by reading its results back to the host, so no extra synchronisation), the cases in
        ``phase_cases``."""
        clock = PhaseClock(self)
        results: list[float | Exception] = [float("nan")] * len(items)
        live: dict[int, tuple[np.ndarray, np.ndarray, list[str]]] = {}
        for k, (edited, source, kwargs) in enumerate(items):
            try:
                live[k] = self._case(edited, source, (kwargs or {}).get("entities"))
            except Exception as exc:
                results[k] = exc
        boxes: dict[str, dict[int, list]] = {}
        for which, pos in (("source", 0), ("edited video", 1)):  # the edit is grounded only if the source was
            found = self.ground_many([(case[pos], case[2]) for case in live.values()], list(live))  # per case
            boxes[which] = dict(zip(live, found))
            for k in [k for k in live if not boxes[which][k]]:
                results[k] = SRCUndefined(
                    f"SRC: no entity to keep was found in the {which} at score >= "
                    f"{self.cfg.min_score} ({list(live[k][2])})"
                )
                del live[k]
        clock("ground")
        masks = self.segment_many(
            [
                job
                for k, (src, edit, _) in live.items()
                for job in ((src, boxes["source"][k]), (edit, boxes["edited video"][k]))
            ],
            [k for k in live for _ in range(2)],  # a pass: one case's frames
        )
        clock("segment")
        prepared, crops, owner = {}, [], []
        for n, (k, (src, edit, _)) in enumerate(live.items()):
            per_frame, pairs, missing = frame_pairs(
                src, edit, masks[2 * n], masks[2 * n + 1], int(self.cfg.min_mask_pixels), float(self.cfg.bbox_expand)
            )
            prepared[k] = (per_frame, pairs, missing, len(crops))
            crops += pair_crops(pairs)
            owner += [k] * (len(crops) - len(owner))
        clock("pairs")
        feats = self.embed(crops, owner) if crops else None  # a pass: one case's crops
        clock("embed")
        for k, (per_frame, pairs, missing, at) in prepared.items():
            score, _ = score_pairs(per_frame, pairs, feats[at : at + 2 * len(pairs)] if pairs else None, missing)
            results[k] = (
                score
                if not np.isnan(score)
                else SRCUndefined(f"SRC: no sampled source frame has a mask of >= {self.cfg.min_mask_pixels} pixels")
            )
        self.phase_cases = getattr(self, "phase_cases", 0) + len(items)
        return results

    @staticmethod
    def _case(edited, source, entities) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """A case's ``(source, edited, entities)`` with the first ``min(T_src, T_edit)`` frames of each, or the
        reason it has no SRC."""
        if source is None:
            raise ValueError("SRC compares against the source video, but no source frames were given")
        if not entities:
            raise SRCUndefined(
                "SRC: the task names no concrete entity to keep (no Semantic Preservation question "
                "about a localisable entity, no preserved_entities)"
            )
        k = min(len(source), len(edited))
        if k == 0:
            raise ValueError("SRC needs at least one frame of each video")
        return source[:k], edited[:k], list(entities)
