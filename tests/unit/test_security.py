"""Security hardening (issue 14, Security 1-3): ids that become paths, secrets through config interpolation,
redaction of keys a server echoes back. The end-to-end CoVE run against an HTTP judge that echoes the key is
tests/pipeline/test_security_run.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.common import REPO, cove_overrides
from helpers.planted_key import KEY, PLANTED_ENV, echoes, leaks
from vbench_ray.agentic.bundle import BundleError, find_reps, load_task, write_task
from vbench_ray.config import ConfigError
from vbench_ray.configure import load_config
from vbench_ray.safepaths import component, safe_id, within

COVE = REPO / "configs" / "cove.yaml"

BAD_IDS = [
    "",
    ".",
    "..",
    "../..",
    "../victim",
    "/etc",
    "/abs/path",
    "a/b",
    "a\\b",
    "-rf",
    "a b",
    "a\x00b",
    "x" * 129,
    "naïve",
]


# --------------------------------------------------------------------------------------------------------------
# 1. ids that become paths
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", BAD_IDS)
def test_safe_id_refuses_what_could_leave_its_folder(bad):
    with pytest.raises(ValueError, match="task_id"):
        safe_id(bad, "task_id")


@pytest.mark.parametrize("good", ["assembly_001", "t1", "a.b-c_d+e=f", "0", ".hidden", "x" * 128])
def test_safe_id_keeps_ordinary_ids(good):
    assert safe_id(good, "task_id") == good


def test_within_refuses_every_way_out(tmp_path):
    root = tmp_path / "run"
    (root / "sub").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (root / "sub" / "link").symlink_to(tmp_path / "outside")
    assert within(root, "sub", "x.json") == (root / "sub" / "x.json").resolve()
    for parts in (
        ("..",),
        ("../outside",),
        ("/etc/passwd",),
        ("sub", "..", ".."),
        ("sub", "link", "f"),
        ("sub", ".."),
        (".",),
    ):
        with pytest.raises(ValueError, match="escapes"):
            within(root, *parts)
    with pytest.raises(ValueError):
        within(root, "a\x00b")


def test_component_never_names_a_parent_or_a_separator():
    for text in ("..", ".", "a/b", "../../x", "-x", ""):
        name = component(text)
        assert name not in (".", "..") and "/" not in name and not name.startswith("-") and name


def _bundle(root: Path, task_id: str) -> Path:
    write_task(root, {"task_id": task_id, "family": "sequencing"}, "Order the clips.", {"order": ["a", "b"]})
    (root / "inputs").mkdir(exist_ok=True)
    (root / "inputs" / "notes.txt").write_text("public\n")
    return root


@pytest.mark.parametrize("with_truth", [True, False])
def test_a_task_id_that_is_a_path_is_refused_at_load(tmp_path, with_truth):
    for bad in ("/abs/path", "../..", "a/b", ".."):
        task = _bundle(tmp_path / f"t{abs(hash(bad))}", bad)
        with pytest.raises(BundleError, match="task_id"):
            load_task(task, with_truth=with_truth)
    assert load_task(_bundle(tmp_path / "ok", "seq_001"), with_truth=with_truth).task_id == "seq_001"
    assert find_reps(tmp_path, "../..") == []


@pytest.mark.parametrize("kind", ["absolute", "relative"])
def test_a_hostile_task_id_cannot_make_a_rollout_touch_folders_outside_the_run(tmp_path, kind):
    """Before the fix, rollout_one joined the id into sandboxes/, submissions/ and trajectories/ and rmtree'd
    the sandbox folder: a victim folder outside the run lost its files."""
    from vbench_ray.agents.loop import AgentConfig
    from vbench_ray.agents.rollouts import rollout_one

    out = tmp_path / "run"
    victim = tmp_path / "victim"
    for sub in ("0/sandbox", "0"):
        (victim / sub).mkdir(parents=True, exist_ok=True)
        (victim / sub / "precious.txt").write_text("keep me\n")
    before = sorted(str(p.relative_to(tmp_path)) for p in victim.rglob("*"))
    tid = str(victim) if kind == "absolute" else "../../victim"  # out/sandboxes/../../victim == victim
    task = _bundle(tmp_path / "tasks" / "t1", tid)
    cfg = AgentConfig(base_url="http://127.0.0.1:9/v1", model="nobody", max_retries=0, wall_s=5, max_turns=1)
    with pytest.raises(BundleError, match="task_id"):
        rollout_one(str(task), "0", str(out), cfg)
    assert sorted(str(p.relative_to(tmp_path)) for p in victim.rglob("*")) == before
    assert (victim / "0" / "sandbox" / "precious.txt").read_text() == "keep me\n"
    assert not (victim / "0" / "reward.json").exists() and not (victim / "0.json").exists()
    # the rollout boundary checks again, for callers that build TaskBundles themselves
    from vbench_ray.agents.rollouts import rollout_paths

    for task_id, rep in (("../x", "0"), ("/x", "0"), ("t", "../0"), ("t", "")):
        with pytest.raises(ValueError):
            rollout_paths(out, task_id, rep)
    paths = rollout_paths(out, "t1", "0")
    assert all(p.is_relative_to(out.resolve()) for p in paths.values())


def test_the_sandbox_never_deletes_a_folder_it_did_not_make(tmp_path):
    """A sandbox root that already holds a `sandbox/` folder without the marker is refused, not emptied;
    cleanup() of a root without the marker deletes nothing."""
    from vbench_ray.agents.sandbox import Sandbox, SandboxError

    root = tmp_path / "someone"
    (root / "sandbox").mkdir(parents=True)
    (root / "sandbox" / "mine.txt").write_text("user data\n")
    (root / "other.txt").write_text("user data\n")
    box = Sandbox(root, key="k")
    with pytest.raises(SandboxError, match="not made by"):
        box.prepare(None, "x")
    box.cleanup()
    assert (root / "sandbox" / "mine.txt").exists() and (root / "other.txt").exists()
    assert sorted(p.name for p in root.iterdir()) == ["other.txt", "sandbox"]  # nothing added either


def test_synth_never_replaces_a_tasks_folder_it_did_not_write(tmp_path):
    from vbench_ray.agentic.synth import synth_agentic

    none = {"n_assembly": 0, "n_sequencing": 0, "n_repair": 0, "n_repurpose": 0}
    (tmp_path / "data" / "tasks" / "real_task").mkdir(parents=True)
    (tmp_path / "data" / "tasks" / "real_task" / "task.json").write_text("{}")
    with pytest.raises(ValueError, match="refusing"):
        synth_agentic(tmp_path / "data", **none)
    assert (tmp_path / "data" / "tasks" / "real_task" / "task.json").exists()
    synth_agentic(tmp_path / "mine", **none)
    (tmp_path / "mine" / "tasks" / "stale").mkdir()
    synth_agentic(tmp_path / "mine", **none)  # its own folder: replaced
    assert not (tmp_path / "mine" / "tasks" / "stale").exists()


def test_sweep_variant_files_stay_in_the_variant_folder(tmp_path):
    from vbench_ray.sweeps import perturbed_path
    from vbench_ray.video.perturb import Perturbation

    p = perturbed_path(tmp_path / "variants", "/data/videos/clip 1.mp4", Perturbation.parse("noise:15"))
    assert p.is_relative_to((tmp_path / "variants").resolve()) and p.parent.name == "noise_15"


def test_nrv_instance_ids_cannot_reach_outside_the_edited_folder(tmp_path):
    from vbench_ray.benchmarks.nrv_data import edited_video

    folder = tmp_path / "edited" / "method"
    folder.mkdir(parents=True)
    (folder / "ok.mp4").write_bytes(b"x")
    (tmp_path / "outside.mp4").write_bytes(b"x")
    assert edited_video(folder, "ok") == folder / "ok.mp4"
    assert edited_video(folder, "../../outside") is None
    assert edited_video(folder, str(tmp_path / "outside")) is None


# --------------------------------------------------------------------------------------------------------------
# 2. secrets through config interpolation
# --------------------------------------------------------------------------------------------------------------


@pytest.fixture
def planted(monkeypatch):
    monkeypatch.setenv(PLANTED_ENV, KEY)
    return KEY


def _cove_args(tmp_path, *extra):
    data = {"checklist": tmp_path / "c.json", "source_dir": tmp_path, "edited_dir": tmp_path}
    return cove_overrides(data, tmp_path / "run", *extra)


@pytest.mark.parametrize(
    "override,key",
    [
        (f"judge.model=${{oc.env:{PLANTED_ENV}}}", "judge.model"),
        (f"run.name=${{oc.env:{PLANTED_ENV}}}", "run.name"),
        (f"run.name=prefix-${{oc.env:{PLANTED_ENV},default}}", "run.name"),
        (f"judge.model=${{env:{PLANTED_ENV}}}", "judge.model"),
        (f"run.notes=['${{oc.decode:\"${{oc.env:{PLANTED_ENV}}}\"}}']", "run.notes[0]"),
        (f"judge.model='${{ oc.env : {PLANTED_ENV} }}'", "judge.model"),  # the grammar allows the spaces
        ("wandb.group=${my_custom_resolver:x}", "wandb.group"),
    ],
)
def test_resolver_interpolations_are_refused_naming_the_key(tmp_path, planted, override, key):
    with pytest.raises(ConfigError) as err:
        load_config(COVE, _cove_args(tmp_path, override))
    msg = str(err.value)
    assert f"`{key}`" in msg and "_env" in msg and planted not in msg


def test_resolver_interpolations_in_yaml_files_are_refused(tmp_path, planted):
    yaml = tmp_path / "mine.yaml"
    yaml.write_text(f"extends: {COVE}\nrun:\n  name: ${{oc.env:{PLANTED_ENV}}}\n")
    with pytest.raises(ConfigError, match="`run.name`"):
        load_config(yaml, _cove_args(tmp_path))
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(f"base: {COVE}\nname: ${{oc.env:{PLANTED_ENV}}}\naxes:\n  fps: [1]\n")
    from vbench_ray.configure import load_sweep

    with pytest.raises(ConfigError, match="`name`"):
        load_sweep(sweep, _cove_args(tmp_path))


def test_plain_interpolations_and_literal_values_still_work(tmp_path, planted):
    cfg = load_config(COVE, _cove_args(tmp_path, "run.name=${output.dir}", "judge.model=my-judge"))
    assert cfg.run.name == str(tmp_path / "run") and cfg.judge.model == "my-judge"


# --------------------------------------------------------------------------------------------------------------
# 3. redaction
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,kept",
    [
        ("invalid key sk-live-Q7w9ZpL2xR4mN8vB6tY1 given", ["invalid key ", " given"]),
        ("INVALID KEY SK-LIVE-Q7W9ZPL2XR4MN8VB6TY1", ["INVALID KEY "]),
        ("key ending in ...L2xR4mN8vB6tY1 was rejected", ["key ending in ...", " was rejected"]),
        ("masked: sk-live-Q7w9****", ["masked: ", "****"]),  # its first 12 characters
        ("fragment 9zpl2xr4 (lower-cased)", ["fragment ", " (lower-cased)"]),  # 8 characters from the middle
        ("two Q7w9ZpL2 and mN8vB6tY1", ["two ", " and "]),
    ],
)
def test_redaction_removes_the_key_in_any_case_and_any_8_character_piece(text, kept):
    from vbench_ray.judges.backends.media import scrub

    out = scrub(text, [KEY])
    assert "***" in out and all(k in out for k in kept), out
    low = out.lower()
    for i in range(len(KEY) - 7):
        assert KEY[i : i + 8].lower() not in low, (KEY[i : i + 8], out)


@pytest.mark.parametrize("shape", list(echoes(KEY)))
def test_redaction_removes_encoded_forms_and_named_ends_of_the_key(shape):
    from vbench_ray.judges.backends.media import scrub

    text = f"error: we got {echoes(KEY)[shape]} from you"
    assert leaks(text, KEY)  # the check sees the echo ...
    out = scrub(text, [KEY])
    assert not leaks(out, KEY), out  # ... and nothing of it is left
    assert out.startswith("error: we got ") and out.endswith(" from you") and "***" in out


def test_redaction_keeps_text_that_shares_less_than_8_characters_with_the_key():
    from vbench_ray.judges.backends.media import scrub

    text = "sk-live is a prefix, Q7w9ZpL is seven characters, nothing else"
    assert scrub(text, [KEY]) == text
    assert scrub(None, [KEY]) is None and scrub("abc", []) == "abc"


def test_a_short_key_is_redacted_whole_and_in_any_case_only():
    from vbench_ray.judges.backends.media import scrub

    assert scrub("pw Ab3xY then AB3XY then ab3x", ["Ab3xY"]) == "pw *** then *** then ab3x"


def test_agent_client_and_http_judge_responses_use_the_same_redaction():
    """The agent's ChatClient scrubs errors, and the judge's response stream scrubs answers and errors."""
    import pyarrow as pa

    from vbench_ray.agents.loop import AgentConfig, ChatClient, Secret
    from vbench_ray.judges.backends.media import IDX, response_row, stream_responses
    from vbench_ray.judges.base import JudgeRequest

    client = ChatClient(AgentConfig(model="m"), api_key=Secret(KEY))
    assert client.scrub(f"HTTP 401: bad {KEY.upper()}") == "HTTP 401: bad ***"

    class Rows:
        def __init__(self, rows):
            self.rows = rows

        def iter_batches(self, batch_size=None, batch_format="pyarrow"):
            yield pa.Table.from_pylist(self.rows)

    requests = [JudgeRequest(request_id=f"r{i}", messages=[{"role": "user", "content": "q"}]) for i in range(2)]
    rows = [
        response_row(0, text=f"answer A; your key ...{KEY[-12:].upper()}"),
        response_row(1, error=f"http: HTTP 401: {KEY.lower()} rejected"),
    ]
    got = {
        r.request_id: r
        for batch in stream_responses(
            requests, {}, lambda _rows: Rows([{**row, IDX: row[IDX]} for row in rows]), model="m", secrets=[KEY]
        )
        for r in batch
    }
    assert got["r0"].text == "answer A; your key ...***"
    assert got["r1"].error == "http: HTTP 401: *** rejected"
