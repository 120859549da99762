"""The drafters: chains (``drafters``), token trees (``tree_drafters``), the draft head's
(``head_drafters``), and the registry that builds each by name from the parts a run owns (``registry``)."""
