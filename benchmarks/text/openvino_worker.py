"""OpenVINO GenAI's side of the ``openvino`` peer: run by the peer environment's Python
(``scripts/build_openvino_peer.sh``), never imported by specvideo. One LLMPipeline over an int4 export;
one JSON request per stdin line, one JSON reply per stdout line.

    python openvino_worker.py MODEL_DIR MODE K [DRAFT_DIR]   MODE: plain | lookup | draft
    request: {"ids": [...], "n": 48, "temperature": 0.0, "top_p": 0.9, "seed": 0}
    reply:   {"tokens": [...]}
"""

import json
import sys

import numpy as np
import openvino as ov
import openvino_genai as ov_genai


def pipeline(model: str, mode: str, draft: str | None) -> ov_genai.LLMPipeline:
    if mode == "lookup":  # prompt lookup decoding: n-gram matches in the prompt and output
        return ov_genai.LLMPipeline(model, "CPU", prompt_lookup=True)
    if mode == "draft":  # a draft model (the code pair's 0.5B, exported the same way)
        return ov_genai.LLMPipeline(model, "CPU", draft_model=ov_genai.draft_model(draft, "CPU"))
    return ov_genai.LLMPipeline(model, "CPU")


def settings(request: dict, mode: str, k: int) -> ov_genai.GenerationConfig:
    config = ov_genai.GenerationConfig()
    config.max_new_tokens = config.min_new_tokens = int(request["n"])
    config.ignore_eos = True
    if request["temperature"] > 0:
        config.do_sample, config.temperature, config.top_p = True, float(request["temperature"]), float(request["top_p"])
        config.top_k, config.rng_seed = 0, int(request["seed"])
    if mode in ("lookup", "draft"):
        config.num_assistant_tokens = k
    if mode == "lookup":
        config.max_ngram_size = 3
    return config


def main() -> None:
    model, mode, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
    pipe = pipeline(model, mode, sys.argv[4] if len(sys.argv) > 4 else None)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        ids = np.array([request["ids"]], dtype=np.int64)  # (1, T)
        inputs = ov_genai.TokenizedInputs(ov.Tensor(ids), ov.Tensor(np.ones_like(ids)))
        result = pipe.generate(inputs, settings(request, mode, k))
        print(json.dumps({"tokens": [int(t) for t in np.array(result.tokens[0]).reshape(-1)]}), flush=True)


if __name__ == "__main__":
    main()
