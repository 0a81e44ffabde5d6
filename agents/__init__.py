"""Agents and the evolution loop: offline and LLM proposers, the population, `cake evolve`. See README.md."""
