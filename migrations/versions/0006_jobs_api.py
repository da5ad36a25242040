"""jobs.api: the compat dialect that made a job, whose finished jobs are kept a short time

Revision ID: 0006
Revises: 0005
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the column (null for every job stored before: /v1 jobs) and its purge index."""
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("api", sa.String(length=16), nullable=True))
        batch.create_index("ix_jobs_api_finished", ["api", "finished_at"])


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_index("ix_jobs_api_finished")
        batch.drop_column("api")
