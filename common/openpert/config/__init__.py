"""Reading a project: component configs (Viash format), file formats, tasks, lint and scaffolding."""
