"""Planning: the plan model, its codec and the physical decisions."""
