"""The rules of evidence: what a claim must match and what makes it usable.

Below the facade and beside the engines, so that the facade's services and the person-run tools
(``prove``, ``lineage``, ``rebuild``) apply one set of rules:

- ``grammar/`` — the value grammar: a claim's numbers read as quantities and each given a
  verdict against its evidence (docs/grounding.md); knows nothing of checkpoints;
- ``claims`` — which entries state a result, and whether a claim cites artifacts;
- ``grounding`` — a claim's node report and cited files found, hashed and read for numbers;
- ``repro`` — the reproducibility fold (the latest re-run status per claim);
- ``usable`` — a node's own verdict, each claim's evidence level and exclusions, and the rule
  that builds ``usable_for_claims``;
- ``grounded_block`` — the block of usable claims a paper's writer is shown.
"""
