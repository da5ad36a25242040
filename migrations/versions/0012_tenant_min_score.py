"""A tenant's default min_score (a job that names none takes it)

Revision ID: 0012
Revises: 0011
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the column: no tenant has a default until an operator sets one."""
    with op.batch_alter_table("tenants") as batch:
        batch.add_column(sa.Column("min_score", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tenants") as batch:
        batch.drop_column("min_score")
