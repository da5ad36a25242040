"""Usage per tenant and UTC day (segments, billed characters) in the database

Revision ID: 0010
Revises: 0009
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the usage_days table."""
    op.create_table(
        "usage_days",
        sa.Column(
            "tenant_id",
            sa.String(36),
            sa.ForeignKey("tenants.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("day", sa.Date(), primary_key=True),
        sa.Column("slot", sa.Integer(), primary_key=True),
        sa.Column("segments", sa.BigInteger(), nullable=False),
        sa.Column("characters", sa.BigInteger(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("usage_days")
