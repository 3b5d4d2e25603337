"""The value grammar (docs/grounding.md): a claim's numbers read as quantities, the metric each
names, the role each plays, and the verdict each gets against its evidence. ``values`` is the
face; plain functions over text and evidence, nothing of a checkpoint or a session."""
