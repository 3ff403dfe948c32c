"""Message transport between the orchestrator, executors and evaluator (in-process or RabbitMQ)."""
