"""A metric's ``runtime_keys`` (``FrameMetric``): the config keys it declares do not change a case's score, so
`vbench-ray compare` does not count runs that differ in them as scored differently. ``pool_batch`` (cases one pool
call scores together) is declared only where this file shows each case's score the same in pool calls of 1 and of
4 cases: real videos written and decoded, the metric's own decode-stage inputs (the next video as the source where
the metric compares against one; SRC's entities from a task's ``preserved_entities``), its pool with the tiny models."""

from __future__ import annotations

import json
from dataclasses import asdict

import numpy as np
import pytest

from helpers.common import moving_square_video
from helpers.tiny_metrics import TINY_TQ, save_tiny_pool_weights
from vbench_ray.metrics.aes import AESConfig
from vbench_ray.metrics.base import METRICS
from vbench_ray.metrics.pool import MetricPool, pack, payload_column, pool_batch
from vbench_ray.metrics.src import SRCConfig
from vbench_ray.metrics.tq import TQConfig
from vbench_ray.video.encode import write_video
from vbench_ray.video.io import VideoReader

# metric -> its config with the tiny model (tolerance: the cases share forward passes, so float sums may reorder)
BATCH_INDEPENDENT = {
    "AES": (lambda w: asdict(AESConfig(**w["aes"], batch_size=4)), 1e-5),
    "TQ": (lambda w: asdict(TQConfig(weights=w["tq"], **TINY_TQ, batch_size=3)), 1e-5),
    # every box and mask of the random models accepted, so each case runs every model; 3 images a pass (a case's 4
    # SAM2 frames and 4 DINOv2 crops would straddle passes shared by cases); each pass holds one case's images, so
    # the score is the same to the last bit
    "SRC": (
        lambda w: asdict(
            SRCConfig(**w["src"], box_threshold=0.0, min_score=0.0, max_box_area=1.0, min_mask_pixels=1, batch_size=3)
        ),
        0.0,
    ),
}


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    return save_tiny_pool_weights(tmp_path_factory.mktemp("runtime_keys_weights"))


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    """Four real videos of different sizes and motions, written as h264 and decoded by the metrics."""
    d = tmp_path_factory.mktemp("runtime_keys_videos")
    shapes = [(16, 48, 64, 2), (20, 32, 48, -1), (18, 64, 48, 1), (16, 48, 64, 3)]
    return [
        str(write_video(d / f"v{k}.mp4", moving_square_video(t=t, h=h, w=w, step=step, seed=k)))
        for k, (t, h, w, step) in enumerate(shapes)
    ]


def scores_in_pool_calls_of(name: str, cfg: dict, videos: list[str], batch: int) -> list[float]:
    """Each video's score when the pool scores ``metrics.<name>.pool_batch = batch`` cases per call, from the rows
    the decode stage hands it (its sampled frames through ``pool_inputs``)."""
    pool = MetricPool(name, {**cfg, "pool_batch": batch})
    metric = pool.metric
    assert pool_batch(metric, ray_cfg=None) == batch

    def frames(path: str):
        reader = VideoReader(path)
        return reader.read(metric.sampling().indices(reader.info))

    rows = []
    for k, path in enumerate(videos):
        source = frames(videos[(k + 1) % len(videos)]) if metric.needs_source else None
        task = {"preserved_entities": ["the moving square", "background"][: 1 + k % 2]}
        extra = metric.extra_inputs({"case_id": str(k), "annotations": json.dumps(task)})
        rows.append({"case_id": str(k), payload_column(name): pack(*metric.pool_inputs(frames(path), source, extra))})
    out = []
    for i in range(0, len(rows), batch):
        out += pool(rows[i : i + batch])
    assert all(set(o) == {name} for o in out), out
    return [o[name] for o in out]


@pytest.mark.parametrize("name", sorted(BATCH_INDEPENDENT))
def test_a_cases_score_is_the_same_in_pool_calls_of_1_and_4(name, weights, videos):
    config, atol = BATCH_INDEPENDENT[name]
    cfg = config(weights)
    alone = scores_in_pool_calls_of(name, cfg, videos, 1)
    together = scores_in_pool_calls_of(name, cfg, videos, 4)
    assert np.allclose(together, alone, rtol=0, atol=atol), (alone, together)
    assert len(set(np.round(alone, 6))) == len(alone)  # the cases score apart: a mix-up between them would show


def test_pool_batch_is_declared_runtime_exactly_where_this_file_shows_it():
    import vbench_ray.metrics  # noqa: F401  (registers every metric)

    declared = {name for name in METRICS if "pool_batch" in METRICS[name].runtime_keys}
    assert declared == set(BATCH_INDEPENDENT)
