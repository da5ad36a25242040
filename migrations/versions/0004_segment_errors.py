"""Per-segment errors, the count of failed segments, and the split_sentences job option

Revision ID: 0004
Revises: 0003
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the columns; jobs stored before them split sentences and have no failures."""
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(
            sa.Column("segments_failed", sa.Integer(), nullable=False, server_default="0")
        )
        batch.add_column(sa.Column("split_sentences", sa.Boolean(), nullable=True))
    with op.batch_alter_table("segments") as batch:
        batch.add_column(sa.Column("error_code", sa.String(length=32), nullable=True))
        batch.add_column(sa.Column("error", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("segments") as batch:
        batch.drop_column("error")
        batch.drop_column("error_code")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("split_sentences")
        batch.drop_column("segments_failed")
