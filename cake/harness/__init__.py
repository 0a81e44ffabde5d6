"""Experiments: a grid of evolve runs from a TOML spec (`spec`), run resumably (`runner`), aggregated across
seeds (`report`)."""
