"""A corrector that asks what a missing file should hold, then writes the answer (``--correctors`` target)."""

from __future__ import annotations

from librarian.runtime.correctors import (
    ClarificationRequest,
    CorrectionContext,
    CorrectionProposal,
    Corrector,
)

QUESTION = "What should data.txt contain?"


class AskingCorrector:
    """Asks once per failure; with an answer, plans to write it to ``data.txt`` and retry."""

    name = "ask_the_user"

    def __init__(self) -> None:
        self.contexts: list[CorrectionContext] = []

    def propose(self, context: CorrectionContext) -> CorrectionProposal | ClarificationRequest | None:
        """A question first; a plan built from the latest answer once there is one."""
        self.contexts.append(context)
        if not context.answers:
            return ClarificationRequest(self.name, QUESTION, "only the user knows the input")
        content = context.answers[-1].answer
        plan = {
            "steps": [
                {
                    "description": "write the input the user gave",
                    "executor_type": "file_writer",
                    "payload": {"path": "data.txt", "content": content},
                    "rationale": f"the user said data.txt holds {content!r}",
                },
                {
                    "description": "read it again",
                    "executor_type": context.failed.executor_type,
                    "payload": context.failed.payload,
                    "rationale": "the input exists now",
                    "retry_failed_task": True,
                },
            ]
        }
        return CorrectionProposal(self.name, plan, "use the user's answer")


def correctors() -> list[Corrector]:
    """The factory ``--correctors tests.runtime.clarifying:correctors`` names."""
    return [AskingCorrector()]
