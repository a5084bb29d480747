"""CoTracker3 offline, our own definition (vbench_ray.metrics.cotracker3): the official checkpoint's keys and
shapes, the predictor's grid and coordinate rescaling on hand-made examples and the checked loader. MF with
``tracker=cotracker`` end to end on real videos (the real-size network): tests/e2e/test_cotracker3_run.py."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from vbench_ray.metrics.base import MissingWeightsError
from vbench_ray.metrics.cotracker3 import (
    CoTracker3Offline,
    fourier_encode,
    grid_queries,
    load_cotracker3,
    patch_offsets,
    query_patches,
    save_random_cotracker3,
    sincos_time_embedding,
    track_points,
)
from vbench_ray.metrics.motion import MF, MFConfig

KEY = "metrics.MF.cotracker_weights"

# Official names and shapes of scaled_offline.pth (CoTrackerThreeOffline(stride=4, corr_radius=3, window_len=60),
# read from facebookresearch/co-tracker): a few representative entries of the 188.
OFFICIAL = {
    "fnet.conv1.weight": (64, 3, 7, 7),
    "fnet.layer1.0.conv1.weight": (64, 64, 3, 3),
    "fnet.layer2.0.downsample.0.weight": (96, 64, 1, 1),
    "fnet.layer3.0.conv1.weight": (128, 96, 3, 3),
    "fnet.layer4.1.conv2.bias": (128,),
    "fnet.conv2.weight": (256, 416, 3, 3),
    "fnet.conv3.weight": (128, 256, 1, 1),
    "corr_mlp.fc1.weight": (384, 2401),
    "corr_mlp.fc2.weight": (256, 384),
    "updateformer.input_transform.weight": (384, 1110),
    "updateformer.flow_head.weight": (2, 384),
    "updateformer.vis_conf_head.bias": (2,),
    "updateformer.virual_tracks": (1, 64, 1, 384),
    "updateformer.time_blocks.2.attn.to_kv.weight": (768, 384),
    "updateformer.time_blocks.0.mlp.fc1.weight": (1536, 384),
    "updateformer.space_virtual_blocks.1.attn.to_q.bias": (384,),
    "updateformer.space_virtual2point_blocks.0.norm_context.weight": (384,),
    "updateformer.space_point2virtual_blocks.2.cross_attn.to_out.weight": (384, 384),
    "time_emb": (1, 60, 1110),
}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A random-weight checkpoint shaped like scaled_offline.pth (a bare state dict), written once."""
    return save_random_cotracker3(tmp_path_factory.mktemp("cotracker3") / "scaled_offline.pth")


def test_state_dict_has_the_official_keys_and_shapes():
    model = CoTracker3Offline()
    state = model.state_dict()
    assert {k: tuple(state[k].shape) for k in OFFICIAL if k in state} == OFFICIAL
    # the official definition has 188 entries and 25,385,700 parameters (compared with it directly)
    assert len(state) == 188
    assert sum(p.numel() for p in model.parameters()) == 25_385_700
    # instance norms and the transformer's LayerNorms carry no parameters; only the context norm does
    assert not any(".norm" in k and "norm_context" not in k for k in state)


def test_grid_queries_are_the_official_grid_on_the_model_frame():
    q = grid_queries(10, (384, 512))
    assert q.shape == (1, 100, 3) and (q[0, :, 0] == 0).all()
    # inset W/64 = 8 px; x first, row-major
    torch.testing.assert_close(q[0, 0, 1:], torch.tensor([8.0, 8.0]))
    torch.testing.assert_close(q[0, 9, 1:], torch.tensor([504.0, 8.0]))
    torch.testing.assert_close(q[0, 99, 1:], torch.tensor([504.0, 376.0]))
    torch.testing.assert_close(q[0, 1, 1:], torch.tensor([8.0 + 496 / 9, 8.0]))


class Scripted(nn.Module):
    """Stands in for the network: records its input, moves every query by (+4, -2) model px per frame."""

    def forward(self, video, queries, iters):
        self.video, self.queries, self.iters = video, queries, iters
        b, t = video.shape[:2]
        step = torch.arange(t, dtype=video.dtype)[None, :, None, None] * torch.tensor([4.0, -2.0])
        tracks = queries[:, None, :, 1:] + step
        return tracks, torch.full(tracks.shape[:3], 0.5), torch.full(tracks.shape[:3], 0.25)


def test_predictor_resizes_lays_the_grid_and_scales_tracks_back():
    # a 48x64 video whose value is 2x the column: bilinear, align_corners=True resizing is exact on it
    b, t, h, w = 1, 3, 48, 64
    video = (2.0 * torch.arange(w, dtype=torch.float32)).expand(b, t, 3, h, w).clone()
    net = Scripted()
    tracks, vis, conf = track_points(net, video, grid_size=2, resolution=(32, 96))
    assert net.video.shape == (1, 3, 3, 32, 96) and net.iters == 6
    # model column 10 is video column 10 * 63 / 95
    assert net.video[0, 0, 0, 5, 10].item() == pytest.approx(2 * 10 * 63 / 95, abs=1e-4)
    # grid on the 32x96 model frame: inset 96 / 64 = 1.5
    torch.testing.assert_close(
        net.queries[0], torch.tensor([[0, 1.5, 1.5], [0, 94.5, 1.5], [0, 1.5, 30.5], [0, 94.5, 30.5]])
    )
    # back to the video: x * (64-1)/(96-1), y * (48-1)/(32-1); frame 0 is the query itself, visible
    assert tracks.shape == (1, 3, 4, 2)
    torch.testing.assert_close(tracks[0, 0, 1], torch.tensor([94.5 * 63 / 95, 1.5 * 47 / 31]))
    # frame 2, point 1: (94.5 + 8, 1.5 - 4) model px = (102.5 * 63/95, -2.5 * 47/31) = (67.97368, -3.79032)
    torch.testing.assert_close(tracks[0, 2, 1], torch.tensor([67.973684, -3.790323]))
    assert vis[0, 0].tolist() == [1.0] * 4 and vis[0, 1:].unique().tolist() == [0.5]
    assert conf.unique().tolist() == [0.25]


def test_query_patches_are_x_offset_major_and_clamp_at_the_border():
    # features = (x, y) of each position: a bilinear sample returns the sampled position itself
    h, w = 12, 16
    ys, xs = torch.meshgrid(torch.arange(h, dtype=torch.float32), torch.arange(w, dtype=torch.float32), indexing="ij")
    fmap = torch.stack([xs, ys])[None, None]  # (B=1, T=1, C=2, H, W)
    offsets = patch_offsets(3)
    assert offsets[1].tolist() == [-3.0, -2.0] and offsets[7].tolist() == [-2.0, -3.0]  # index a*7 + b = (a-3, b-3)
    patch = query_patches(fmap, torch.tensor([[[0.0, 5.5, 4.0], [0.0, 1.0, 10.0]]]), offsets)
    assert patch.shape == (1, 2, 49, 2)
    torch.testing.assert_close(patch[0, 0], torch.tensor([5.5, 4.0]) + offsets)
    # the second query's patch leaves the map: x below 0 and y above 11 clamp to the border
    expected = torch.stack([(1.0 + offsets[:, 0]).clamp(0, w - 1), (10.0 + offsets[:, 1]).clamp(0, h - 1)], -1)
    torch.testing.assert_close(patch[0, 1], expected)


def test_motion_and_time_encodings_by_hand():
    enc = fourier_encode(torch.tensor([[0.25, -1.0, 0.0, 3.0]]))
    assert enc.shape == (1, 84)  # 4 + 4 * 10 sines + 4 * 10 cosines
    assert enc[0, 0].item() == 0.25
    assert enc[0, 4].item() == pytest.approx(math.sin(0.25))  # frequency 2^0, first component
    assert enc[0, 4 + 4 + 1].item() == pytest.approx(math.sin(-2.0))  # frequency 2^1, second component
    assert enc[0, 44 + 36 + 3].item() == pytest.approx(math.cos(3.0 * 2**9))  # last cosine
    emb = sincos_time_embedding(60)
    assert emb.shape == (1, 60, 1110)
    assert emb[0, 1, 0].item() == pytest.approx(math.sin(1.0)) and emb[0, 1, 555].item() == pytest.approx(math.cos(1.0))
    assert emb[0, 3, 1].item() == pytest.approx(math.sin(3 * 10000 ** (-1 / 555)))


def test_loader_names_the_config_key_for_a_renamed_or_reshaped_entry(checkpoint, tmp_path):
    state = torch.load(checkpoint, weights_only=True)
    renamed = dict(state)
    renamed["updateformer.virtual_tracks"] = renamed.pop("updateformer.virual_tracks")
    torch.save({"model": renamed}, tmp_path / "renamed.pth")  # the {"model": ...} wrapper is unwrapped first
    with pytest.raises(
        ValueError,
        match=rf"{KEY}=.*renamed.pth: not a CoTracker3 offline checkpoint.*"
        r"\(missing updateformer.virual_tracks\)",
    ):
        load_cotracker3(tmp_path / "renamed.pth")
    online = dict(state, time_emb=state["time_emb"][:, :16])  # scaled_online.pth has a 16-frame window
    torch.save(online, tmp_path / "online.pth")
    with pytest.raises(
        ValueError,
        match=rf"{KEY}=.*needs time_emb of shape \(1, 60, 1110\), the file has "
        r"\(1, 16, 1110\)",
    ):
        MF(MFConfig(tracker="cotracker", cotracker_weights=str(tmp_path / "online.pth"))).setup()
    (tmp_path / "empty.pth").write_bytes(b"")
    with pytest.raises(ValueError, match=rf"{KEY}=.*not a readable checkpoint"):
        MF(MFConfig(tracker="cotracker", cotracker_weights=str(tmp_path / "empty.pth"))).setup()
    with pytest.raises(MissingWeightsError, match=KEY):
        MF(MFConfig(tracker="cotracker", cotracker_weights=str(tmp_path / "absent.pth"))).setup()


def test_bad_model_resolution_names_its_key_before_any_compute():
    for bad in ([30, 48], [32], [16, 16]):
        with pytest.raises(ValueError, match="metrics.MF.cotracker_resolution"):
            MF(MFConfig(tracker="cotracker", cotracker_resolution=bad))
    MF(MFConfig(tracker="lk", cotracker_resolution=[30, 48]))  # only the CoTracker tracker reads it
