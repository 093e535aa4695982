"""The one base class of swell's typed input models.

Everything a user writes (topology specs, experiment files) is validated by
pydantic models that derive from :class:`StrictModel`, so every such model
behaves alike at the edge where data enters swell:

* ``extra="forbid"``: an unknown (misspelt) key is an error naming the key,
  never a silently ignored option (the pyroute2 ``**kwargs`` lesson in
  ``shared/STYLE.md``);
* ``frozen=True``: a validated value is not mutated afterwards; code derives a
  new one with ``model_copy(update=...)``, which keeps "validated once, at the
  edge" true for the life of the object.

This is a leaf module (it imports only pydantic), so any part of swell can use
it without import cycles. Stage-specific helpers (turning a
``ValidationError`` into a one-line :class:`~swell.errors.SwellError`, line
numbers from YAML) stay with the stage that reads the file.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["StrictModel"]


class StrictModel(BaseModel):
    """Frozen, and unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)
