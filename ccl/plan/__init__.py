"""Planning: a checked project to the plan the runtime runs (docs/plan.md), and the physical
decisions about it."""
