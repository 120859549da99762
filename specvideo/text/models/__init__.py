"""The text models and how they load: which model a name means (``names``), GGUF conversion
(``gguf``), the default pair's files (``smollm``), transformers loading and checks (``loading``), the
draft head (``head``), the shared draft weights (``shared_draft``), the draft vocabulary (``vocab``) and
the number-format policy (``precision``)."""
