"""The GPU test set (``pytest -m gpu``; run by scripts/device_check.sh): the shipped video pipeline in
fp16 and bf16, text greedy identity in fp32 on CUDA and bf16 text generation, batches of both.
Skipped where CUDA is not available (CI never has a GPU)."""

import numpy as np
import pytest
import torch

from specvideo.paths import shipped
from specvideo.video.data import split_synthetic

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (scripts/device_check.sh)"),
]


@pytest.fixture(scope="module")
def contexts():
    return [clip[:2] for clip in split_synthetic(3, 2, 64)]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_video_pipeline_in_low_precision_on_cuda(dtype, contexts):
    from specvideo.video import SpeculativeVideoPipeline

    pipe = SpeculativeVideoPipeline.from_pretrained(shipped("video"), device="cuda", torch_dtype=dtype)
    assert pipe.dtype == dtype and pipe.device.type == "cuda"
    g = torch.Generator(device="cuda").manual_seed(0)
    out = pipe(contexts[0], num_frames=8, generator=g, progress=False, output_type="pt")
    assert out.frames.shape == (8, 3, 64, 64) and torch.isfinite(out.frames).all()
    assert out.stats.emitted == 8 and out.stats.unet_passes <= out.stats.unet_evals
    target = pipe(contexts[0], num_frames=4, mode="target", num_inference_steps=2, progress=False)
    assert target.stats.unet_evals == 8
    generators = [torch.Generator(device="cuda").manual_seed(b) for b in range(3)]
    batch = pipe(contexts, num_frames=6, generator=generators, schedule="constant", progress=False)
    assert batch.frames.shape == (3, 6, 64, 64, 3) and batch.frames.dtype == np.uint8
    assert all(r.emitted == 6 for r in batch.row_stats)


def test_text_greedy_identity_fp32_on_cuda_and_batches():
    from specvideo.text import SpeculativeGenerator

    gen = SpeculativeGenerator.from_pretrained(device="cuda")
    prompts = ["def quicksort(arr):", "import os\n\n\ndef walk(path):"]
    tok = gen.tokenizer
    for prompt in prompts:
        ids = tok(prompt, return_tensors="pt").input_ids.to("cuda")
        expected = gen.target.generate(ids, max_new_tokens=32, do_sample=False, min_new_tokens=32)[
            0, ids.shape[1] :
        ]
        out = gen.generate(prompt, max_new_tokens=32, stop=None)
        assert out.token_ids[0] == expected.tolist()
    batch = gen.generate(prompts, max_new_tokens=16, stop=None)
    assert [len(t) for t in batch.token_ids] == [16, 16]


def test_text_bf16_generation_runs_on_cuda():
    from specvideo.text import SpeculativeGenerator

    gen = SpeculativeGenerator.from_pretrained(device="cuda")
    gen.target.to(torch.bfloat16)
    gen.draft.to(torch.bfloat16)
    gen = SpeculativeGenerator.from_models(gen.target, gen.tokenizer, gen.draft, drafter="model", num_draft_tokens=4)
    out = gen.generate(
        ["def f(x):", "class A:"],
        max_new_tokens=16,
        stop=None,
        temperature=0.7,
        generator=torch.Generator(device="cuda").manual_seed(0),
    )
    assert [len(t) for t in out.token_ids] == [16, 16] and out.stats.emitted == 32
