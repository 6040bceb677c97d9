"""`gp validate-tasks`: every task's gold patch must resolve and its empty patch must not, graded in a real sandbox
before any training. A stage above sandbox and grading (it runs the one and applies the other)."""
