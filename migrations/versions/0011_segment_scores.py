"""Confidence scores: segments.score and review, the MT cache's score, the jobs' min_score

Revision ID: 0011
Revises: 0010
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the columns; rows stored before them have no score and nothing marked for review."""
    with op.batch_alter_table("segments") as batch:
        batch.add_column(sa.Column("score", sa.Float(), nullable=True))
        batch.add_column(
            sa.Column("review", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    with op.batch_alter_table("mt_cache") as batch:
        batch.add_column(sa.Column("score", sa.Float(), nullable=True))
    with op.batch_alter_table("chunks") as batch:
        for name in ("review", "under_30", "under_50", "under_70"):
            batch.add_column(sa.Column(name, sa.Integer(), nullable=False, server_default="0"))
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("min_score", sa.Float(), nullable=True))
        batch.add_column(sa.Column("below_min_score", sa.String(length=8), nullable=True))
        batch.add_column(
            sa.Column("segments_review", sa.Integer(), nullable=False, server_default="0")
        )


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("segments_review")
        batch.drop_column("below_min_score")
        batch.drop_column("min_score")
    with op.batch_alter_table("chunks") as batch:
        for name in ("under_70", "under_50", "under_30", "review"):
            batch.drop_column(name)
    with op.batch_alter_table("mt_cache") as batch:
        batch.drop_column("score")
    with op.batch_alter_table("segments") as batch:
        batch.drop_column("review")
        batch.drop_column("score")
