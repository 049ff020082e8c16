"""Learning and reflection cycles: the readiness gates that decide whether a cycle runs, what a
cycle learned (memories with a confidence) or changed (a skill or subagent file), and the
history of every change with its evidence, which an operator can revert."""
