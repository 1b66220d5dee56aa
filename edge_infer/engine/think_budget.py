"""A reasoning budget: a reply's tokens inside its <think> block are counted, and once the
budget is spent (or the user asks: RequestStream.end_reasoning) the engine writes the
block's close marker itself, so the model goes on to its answer. On a CPU every wasted
thinking token costs time; a model that would think forever still answers."""

from __future__ import annotations

from edge_infer.chat.reasoning import THINK_CLOSE, THINK_OPEN

OPEN_WITHIN = 16  # characters of a reply in which an opening <think> still counts


class ThinkBudget:
    """budget: reasoning tokens allowed (-1: no limit, 0: close at once); inside: the prompt
    already opened the block (the template wrote <think>)."""

    def __init__(self, budget: int, inside: bool = False, close_tokens: tuple[int, ...] = ()):
        self.budget, self.inside, self.close_tokens = budget, inside, close_tokens
        self.spent = 0
        self.done = False  # closed (by the model or by us), or the reply never opened one
        self._head = ""    # the reply's first characters, before a block opened
        self._tail = ""    # the end of the block so far, watched for the close marker

    def closes_at_once(self) -> bool:
        """Budget 0 on a block the prompt opened: close it before the model writes a token."""
        if self.inside and self.budget == 0 and not self.done:
            self.done = True
            return True
        return False

    def after(self, piece: str, cut: bool = False) -> bool:
        """One generated token's text; True when its reasoning must end now (the caller then
        feeds the close marker). cut: the user asked to end the reasoning now."""
        if self.done:
            return False
        if not self.inside:
            self._head += piece
            at = self._head.find(THINK_OPEN)
            if at >= 0:
                self.inside, self._tail = True, self._head[at + len(THINK_OPEN):]
            elif len(self._head.lstrip()) > OPEN_WITHIN:
                self.done = True  # an answer without reasoning
            return False
        self._tail = (self._tail + piece)[-(len(THINK_CLOSE) + 16):]
        if THINK_CLOSE in self._tail:
            self.done = True
            return False
        self.spent += 1
        if cut or (self.budget >= 0 and self.spent >= self.budget):
            self.done = True
            return True
        return False
