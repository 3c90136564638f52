"""Transactional email: queue one message to one recipient through the delivery engine."""

from __future__ import annotations

from fastapi import APIRouter, status
from pydantic import BaseModel, Field

from tidings.api.deps import ContainerDep, KeyActor
from tidings.api.schemas import EmailAddress, HeaderText, RequestBody
from tidings.outbound.email_jobs import TransactionalEmail

router = APIRouter(prefix="/emails", tags=["admin: transactional email"])


class EmailCreate(RequestBody):
    to: EmailAddress
    subject: HeaderText = Field(min_length=1, max_length=998)
    text: str = Field(min_length=1, max_length=500_000)
    html: str | None = Field(default=None, max_length=500_000)
    idempotency_key: str | None = Field(
        default=None,
        max_length=200,
        description="Sending twice with the same key queues one email.",
    )


class EmailQueued(BaseModel):
    job_id: int
    created: bool = Field(description="False when the idempotency key was seen before.")


@router.post("", status_code=status.HTTP_202_ACCEPTED, summary="Queue a transactional email")
async def send_email(container: ContainerDep, actor: KeyActor, body: EmailCreate) -> EmailQueued:
    """Refused (409 `placeholder_identity`) through a real provider while the sender address,
    the postal address or the public URL are still the defaults. Audited as `email.send`
    (the job, never the address)."""
    container.identity.check()
    email = container.settings.email
    job, created = await container.mailer.queue(
        TransactionalEmail(
            to=body.to,
            subject=body.subject,
            text=body.text,
            html=body.html,
            sender=email.from_address,
            sender_name=email.from_name,
        ),
        idempotency_key=body.idempotency_key,
    )
    await container.audit.record(actor, "email.send", f"job:{job.id}", {"created": created})
    return EmailQueued(job_id=job.id, created=created)
