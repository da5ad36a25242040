"""jobs.dispatch_priority: the effective (fair-share) priority every send of a job uses

Revision ID: 0002
Revises: 0001
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the column; jobs stored before it are sent with their requested priority."""
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("dispatch_priority", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("dispatch_priority")
