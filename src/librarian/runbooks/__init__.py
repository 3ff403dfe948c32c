"""Runbooks that execute: the YAML format, stored versions, the durable step engine on the task
runtime, tracking and effectiveness, and finding the right runbook for a problem."""
