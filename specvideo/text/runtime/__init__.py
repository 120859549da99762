"""What runs the models' forwards: ``LeanLlama`` (``lean``) and its invariant kernels (``invariant``),
weight-only quantised layers (``quant``), oneDNN pre-packed linears (``packing``), the KV-cache state
of a run (``state``, token trees included) and the prompt cache (``prompt_cache``)."""
