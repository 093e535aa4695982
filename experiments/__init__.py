"""swell.experiments: experiment files, the runner and the report."""
