"""A benchmark's shipped config pointed at synthetic data (what ``vbench_ray.synth`` wrote), for runs in tests:
wandb off, the run directory ``out``, then the test's own overrides (``extra``, last: a later key wins)."""

from __future__ import annotations

from pathlib import Path

from helpers.common import REPO, cove_overrides

CONFIGS = REPO / "configs"


def _load(benchmark: str, overrides: list[str]):
    from vbench_ray.configure import load_config

    return load_config(CONFIGS / f"{benchmark}.yaml", overrides)


def cove_cfg(data: dict, out: Path, *extra: str):
    """CoVEBench on ``synth_cove``'s files, the CPU metrics only, no report (``cove_overrides``)."""
    return _load("cove", cove_overrides(data, out, *extra))


def nrv_cfg(data: dict, out: Path, *extra: str):
    """NRVBench on ``synth_nrv``'s annotations and edited videos."""
    return _load(
        "nrv",
        [
            f"data.annotations={data['annotations']}",
            f"data.edited_dir={data['edited_dir']}",
            f"output.dir={out}",
            "wandb.mode=disabled",
            *extra,
        ],
    )


def vidic_cfg(checklist: Path, out: Path, *extra: str, video_root: Path | None = None):
    """ViDiC-1K on a checklist (``synth_vidic``'s, or one a test wrote), no report, 200 bootstrap resamples."""
    args = [
        f"data.checklist={checklist}",
        f"output.dir={out}",
        "wandb.mode=disabled",
        "report.enabled=false",
        "stats.bootstrap_samples=200",
        *extra,
    ]
    if video_root is not None:
        args.append(f"data.video_root={video_root}")
    return _load("vidic", args)


def agentic_cfg(data: dict, out: Path, *extra: str):
    """AgenticVBench on ``synth_agentic``'s task bundles, no report."""
    return _load(
        "agentic",
        [
            f"data.tasks_dir={data['tasks_dir']}",
            f"output.dir={out}",
            "wandb.mode=disabled",
            "report.enabled=false",
            *extra,
        ],
    )
