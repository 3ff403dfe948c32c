"""The durable task runtime: workflows as DAGs of tasks, executors, evaluator, orchestrator."""
