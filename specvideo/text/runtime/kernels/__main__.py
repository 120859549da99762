"""``python -m specvideo.text.runtime.kernels``: build the k-quant kernel now (the README's install
line runs it), so that a model's first use does not wait for the compiler. Where the kernel cannot
run here it says why and exits 0: PyTorch's kernels serve instead."""

from __future__ import annotations

import sys

from specvideo.text.runtime import kernels


def main() -> int:
    reason = kernels.why_not()
    if reason is not None:
        print(f"specvideo: the k-quant kernel is not built: {reason} (PyTorch's kernels run instead)")
        return 0
    try:
        kernels.module()
    except RuntimeError as err:
        print(f"specvideo: {err} (PyTorch's kernels run instead)")
        return 0
    print(f"specvideo: the k-quant kernel is ready ({kernels.BUILD_SECONDS.get('qmm', 0.0):.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
