"""jobs.callback_lease_until (a delivery in flight), indexes for due callbacks and purge

Revision ID: 0003
Revises: 0002
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the lease column (NULL: no delivery in flight) and two indexes."""
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(
            sa.Column("callback_lease_until", sa.DateTime(timezone=True), nullable=True)
        )
        batch.create_index("ix_jobs_callback_due", ["callback_status", "callback_next_at"])
        batch.create_index("ix_jobs_status_finished", ["status", "finished_at"])


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_index("ix_jobs_status_finished")
        batch.drop_index("ix_jobs_callback_due")
        batch.drop_column("callback_lease_until")
