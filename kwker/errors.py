"""Kwker's warnings and errors (re-exported by kwker)."""


class KwkerWarning(UserWarning):
    """Kwker could not do what was asked; torch runs unchanged."""


class KwkerFallbackError(RuntimeError):
    """Strict mode: a call went to torch instead of Kwker's kernel."""

    def __init__(self, op: str, condition):
        self.op = op
        self.condition = condition
        super().__init__(f"kwker strict mode: torch.{op} fell back to torch: "
                         f"{condition.key}: {condition.reason}")


class KwkerMismatchError(RuntimeError):
    """Verify mode ("raise"): Kwker's result differs from torch's."""


class KwkerMismatchWarning(KwkerWarning):
    """Verify mode ("warn"): Kwker's result differs from torch's."""
