"""The base of response schemas that show a record a use case returned, field by field."""

from __future__ import annotations

from typing import Self

from pydantic import BaseModel


class RecordView(BaseModel):
    """A response schema whose fields are read by name from a use case's record (a row), so
    routes need not know the storage types behind it."""

    @classmethod
    def of(cls, record: object) -> Self:
        return cls(**{name: getattr(record, name) for name in cls.model_fields})
