"""Side-by-side comparison of the group protocols: scenario files, traces, pure what-if simulation, Spark report."""
