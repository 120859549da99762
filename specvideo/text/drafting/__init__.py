"""The drafters: chains (``drafters``), token trees (``tree_drafters``), the draft head's
(``head_drafters``), what each is by name (``catalog``, plain data) and how a run builds each from the
parts it owns (``registry``)."""
