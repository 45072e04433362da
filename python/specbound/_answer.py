"""The three-valued answer of ``verify``, ``audit`` and ``diff``."""

import enum


class Answer(str, enum.Enum):
    """The three-valued answer of a check (``answer`` of :class:`VerifyResult`,
    :class:`AuditResult`, :class:`SpectrumAuditResult` and :class:`DiffResult`),
    as the Rust library's ``specbound::evidence::Answer``: ``HOLDS`` and
    ``REFUTED`` are proven for the exact values, ``UNDECIDED`` says that the
    certified enclosures are too wide to tell. The command line's exit codes
    are 0, 1 and 3. A ``str``: it compares equal to its value.

    >>> import specbound
    >>> a = specbound.verify(specbound.certify()).answer
    >>> a is specbound.Answer.HOLDS, a == "holds"
    (True, True)
    """

    HOLDS = "holds"
    REFUTED = "refuted"
    UNDECIDED = "undecided"
