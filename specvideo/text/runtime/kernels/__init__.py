"""Our own CPU kernel for k-quant weights (``qmm.cpp``), built once with ``torch.utils.cpp_extension``.

The kernel needs AVX-512 with VNNI (vpdpbusd) and a C++ compiler; it is compiled into
``<cache>/kernels`` (``SPECVIDEO_CACHE`` moves it; about a minute on 2 cores, reported once) by the
README's install line (``python -m specvideo.text.runtime.kernels``), or else on first use, and
loaded from there afterwards. ``available()`` says whether it can run here and why not; callers
fall back to PyTorch's own weight-only kernels where it cannot.
"""

from __future__ import annotations

import functools
import os
import shutil
import time
import warnings
from pathlib import Path

from specvideo.paths import cache_root

SOURCES = [Path(__file__).with_name(name) for name in ("qmm.cpp", "layer.cpp")]
HEADERS = [Path(__file__).with_name("qmm.h")]
FLAGS = ["-O3", "-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mavx512vnni", "-mfma", "-fopenmp"]
# at::parallel_for is OpenMP inline in the headers: without -fopenmp it runs on one thread. The
# library resolves to the libgomp.so.1 torch has already loaded (one OpenMP runtime in the process).
LDFLAGS = ["-fopenmp"]
ENV_OFF = "SPECVIDEO_NO_QMM"  # set to 1 to run PyTorch's kernels instead (the comparison in the bench)


@functools.cache
def _cpu_flags() -> frozenset[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def why_not() -> str | None:
    """None where the kernel can be built and run here, else the reason."""
    if os.environ.get(ENV_OFF, "") not in ("", "0"):
        return f"switched off by {ENV_OFF}"
    missing = {"avx512f", "avx512bw", "avx512vl", "avx512_vnni"} - _cpu_flags()
    if missing:
        return f"this CPU lacks {', '.join(sorted(missing))}"
    if shutil.which(os.environ.get("CXX", "c++")) is None:
        return "no C++ compiler found (apt-get install -y g++, or set CXX)"
    return None


def available() -> bool:
    return why_not() is None


_FAILED: list[str] = []  # a failed build's message: not retried in this process
BUILD_SECONDS: dict[str, float] = {}  # what the first load of this process cost (0 when cached)


@functools.cache
def module():
    """The compiled extension (built on first call, cached on disk); a clear error where it cannot be."""
    reason = why_not()
    if reason is not None:
        raise RuntimeError(f"the k-quant kernel cannot run here: {reason}")
    from torch.utils.cpp_extension import load

    build = cache_root() / "kernels" / f"qmm-{_digest()}"  # a new build directory when a source changes
    build.mkdir(parents=True, exist_ok=True)
    _clear_stale_lock(build / "lock")
    start = time.perf_counter()
    if _FAILED:
        raise RuntimeError(_FAILED[0])
    try:
        ext = load(name="specvideo_qmm", sources=[str(s) for s in SOURCES], extra_cflags=FLAGS, extra_ldflags=LDFLAGS, build_directory=str(build))
    except Exception as err:  # a compiler or ninja failure: say so once, do not show the build's traceback
        _FAILED.append(f"building the k-quant kernel failed ({(str(err).splitlines() or [repr(err)])[0]}); see {build}")
        raise RuntimeError(_FAILED[0]) from err
    BUILD_SECONDS["qmm"] = time.perf_counter() - start
    return ext


STALE_LOCK_S = 600  # a build takes about a minute: a lock older than this outlived its process


def _clear_stale_lock(lock: Path) -> None:
    """torch's build lock stays behind when a building process is killed (SIGTERM, SIGKILL), and every
    later load waits on it forever: one older than ``STALE_LOCK_S`` goes, with a warning."""
    try:
        age = time.time() - lock.stat().st_mtime
    except OSError:
        return
    if age > STALE_LOCK_S:
        warnings.warn(f"removing a stale kernel build lock ({lock}, {age / 60:.0f} min old)", stacklevel=3)
        lock.unlink(missing_ok=True)


def _digest() -> str:
    """A short hash of the sources and headers (torch's own check reads the sources only)."""
    import hashlib

    return hashlib.sha256(b"".join(p.read_bytes() for p in SOURCES + HEADERS)).hexdigest()[:12]


def built() -> bool:
    """Whether the kernel runs here, building it now if it was not yet (False, with a warning, where
    the build fails: the caller then keeps to the formats PyTorch runs)."""
    if not available():
        return False
    try:
        module()
    except RuntimeError as err:
        warnings.warn(str(err), stacklevel=2)
        return False
    return True
